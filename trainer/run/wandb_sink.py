"""Weights & Biases as an optional place for a run's metrics, beside TensorBoard.

`report_to = ["tensorboard", "wandb"]` in a training config makes the metrics logger
(trainer/run/metrics.py) mirror every row to a W&B run: the same metric names as metrics.jsonl and
TensorBoard (evaluation rows under `eval/`, as in TensorBoard), the training step as W&B's step,
the resolved config as the run config, and at the end `config.json` and the run's plots
(trainer/run/plots.py) as artifacts. Nothing here is imported unless asked for, and W&B is an
optional dependency: `pip install 'rlvr[wandb]'`.

W&B's own environment variables win over rlvr's defaults: `WANDB_DIR` (default here: the run
folder, so W&B's files land in RUN/wandb), `WANDB_PROJECT` (default "rlvr"), `WANDB_NAME`
(default: the run folder's name), `WANDB_RUN_ID`, `WANDB_RESUME` (default "allow"), and those
rlvr never sets: `WANDB_ENTITY`, `WANDB_MODE=offline` (no account, no network; upload later
with `wandb sync`), `WANDB_DISABLED`, `WANDB_TAGS`... A resumed rlvr run continues the same W&B
run: its id is kept in RUN/wandb_run_id.

>>> sink = WandbSink("runs/r1zero", {"lr": 1e-5})      # doctest: +SKIP
>>> sink.log(1, {"reward": 0.25})                     # doctest: +SKIP
>>> sink.close()                                      # doctest: +SKIP
"""
from __future__ import annotations

import math
import os
from pathlib import Path

from rlvr.usage import require_extra

__all__ = ["WandbSink", "REPORT_TO"]

REPORT_TO = ("tensorboard", "wandb")
"""The sinks `report_to` may name (metrics.jsonl is always written)."""

_ID_FILE = "wandb_run_id"


class WandbSink:
    """One W&B run per rlvr run folder (resumed runs continue it)."""

    def __init__(self, run_dir: str | Path, config: dict, project: str | None = None):
        wandb = require_extra("wandb", "wandb", "report_to = ['wandb']",
                              "or drop 'wandb' from report_to")
        self.dir = Path(run_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        id_file = self.dir / _ID_FILE
        run_id = os.environ.get("WANDB_RUN_ID") or (
            id_file.read_text().strip() if id_file.exists() else _new_id())
        id_file.write_text(run_id)
        self.run = wandb.init(id=run_id, config=config, reinit="create_new",
                              **init_defaults(self.dir, project))

    def log(self, step: int, metrics: dict, file: str = "metrics.jsonl") -> None:
        """Numbers only (W&B would chart strings as nothing), names as in metrics.jsonl;
        evaluation rows get TensorBoard's `eval/` prefix so the two read alike."""
        prefix = "" if file == "metrics.jsonl" else "eval/"
        row = {prefix + k: v for k, v in metrics.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
        if row:
            self.run.log(row, step=step)

    def close(self, plots: bool = True) -> None:
        """Attach config.json and the plots as artifacts, then finish the run."""
        import wandb
        files = [p for p in (self.dir / "config.json",) if p.exists()]
        if files:
            art = wandb.Artifact(f"{self.run.id}-config", type="run-config")
            for p in files:
                art.add_file(str(p))
            self.run.log_artifact(art)
        pngs = _plots(self.dir) if plots else []
        if pngs:
            art = wandb.Artifact(f"{self.run.id}-plots", type="plots")
            for p in pngs:
                art.add_file(str(p), name=f"plots/{p.name}")
            self.run.log_artifact(art)
            self.run.log({f"plots/{p.stem}": wandb.Image(str(p)) for p in pngs})
        self.run.finish()


def init_defaults(run_dir: Path, project: str | None = None) -> dict:
    """rlvr's defaults for `wandb.init`, each left out when its W&B environment variable is
    set: an argument to `wandb.init` overrides the variable, and the user's setting must win.
    `project`, when given, wins over both."""
    defaults = {"WANDB_DIR": ("dir", str(run_dir)), "WANDB_PROJECT": ("project", "rlvr"),
                "WANDB_NAME": ("name", run_dir.name), "WANDB_RESUME": ("resume", "allow")}
    out = {arg: value for var, (arg, value) in defaults.items() if not os.environ.get(var)}
    return {**out, "project": project} if project else out


def _plots(run_dir: Path) -> list[Path]:
    """The run's PNGs, drawn now (the run has just ended); none when it has nothing to draw."""
    from rlvr.trainer.run.plots import plot_run
    try:
        return list(plot_run(run_dir).files)
    except (FileNotFoundError, ValueError):
        return []


def _new_id() -> str:
    """A W&B run id: 8 lowercase letters and digits, as W&B makes them."""
    import secrets
    import string
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))
