"""One resume policy for every driver: a resumed run continues the same training, so only the
fields in RESUMABLE may change; any other change is refused, naming the field and --overwrite."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

from rlvr.trainer.run.checkpoint import latest_checkpoint

__all__ = ["RESUMABLE", "resume_config", "changed_fields"]

RESUMABLE = frozenset({
    # how long
    "steps", "epochs",
    # what is recorded and measured along the way
    "checkpoint_every", "eval_every", "eval_tasks", "eval_k", "log_completions", "tensorboard",
    "report_to", "progress",
    # how it is watched for reward hacking (a run a monitor stopped resumes with another action)
    "monitor_action", "monitor_every", "monitor_sample", "monitor_threshold", "monitor_patience",
    "monitor_detectors",
    # where it runs (the trajectory does not depend on it beyond float rounding)
    "device", "dist_backend", "reward_workers", "ray_address", "server_url", "server_model",
    "server_timeout_s", "server_retries", "server_concurrency", "output_dir"})
"""Fields a resumed run may change (a driver without one of them simply has no such field)."""


def _differs(a, b) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) != list(b)
    return a != b


def changed_fields(before: dict, after: dict, allowed=RESUMABLE) -> list[str]:
    """Fields whose value differs between two configs' dicts, outside `allowed`."""
    return sorted(k for k in after if k not in allowed and _differs(after[k], before.get(k)))


def refusal(run_dir, changed: list[str], before: dict, command: str) -> str:
    """The one-line refusal of a resume (or a rerun) that would change `changed`."""
    was = ", ".join(f"{k}={before.get(k)!r}" for k in changed[:3])
    return (f"{run_dir} was trained with {was}; a resumed run continues the same training, so "
            f"{', '.join(changed)} cannot change (a resume may change only steps, epochs, "
            f"logging, evaluation, monitoring and where it runs): start it again with "
            f"`{command} --overwrite`"
            f" or set another output_dir")


def resume_config(run_dir: str | Path, overrides: dict, build, command: str):
    """(config, checkpoint) to continue the run in `run_dir`: its saved config with `overrides`
    (typed field values), built by `build(dict)`; a change outside RESUMABLE is refused."""
    run_dir = Path(run_dir)
    ckpt = latest_checkpoint(run_dir)
    saved = json.loads((run_dir / "config.json").read_text())["config"]
    with warnings.catch_warnings():          # the saved config's own warnings were given once
        warnings.simplefilter("ignore")
        base = build({**saved, "output_dir": str(run_dir)})   # an old name: build's alias
    before = base.to_dict()
    cfg = build({**before, **overrides, "output_dir": str(run_dir)})
    changed = changed_fields(before, cfg.to_dict())
    if changed:
        raise ValueError(refusal(run_dir, changed, before, command))
    return cfg, ckpt
