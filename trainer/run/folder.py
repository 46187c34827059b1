"""The run folder and the step loop every driver shares: config.json, a new run refused where a
run exists, checkpoints every N steps and at the last, and a stop at a signal that keeps the
step in progress (trainer/run/interrupts.py)."""
from __future__ import annotations

import json
import signal
from pathlib import Path

from rlvr.trainer.run.checkpoint import fresh_run_folder
from rlvr.trainer.run.interrupts import RunInterrupted, StopSignal, resume_command

__all__ = ["write_run_config", "start_run", "run_steps"]


def write_run_config(run_dir: Path, cfg, kind: str | None = None, **sections) -> None:
    """RUN/config.json: the config (what `--resume` rebuilds), the library versions and any
    other `sections` (the environment, the data)."""
    import torch
    import transformers

    import rlvr
    info = {"kind": kind} if kind else {}
    info.update(config=cfg.to_dict(),
                versions={"rlvr": rlvr.__version__, "torch": torch.__version__,
                          "transformers": transformers.__version__}, **sections)
    (Path(run_dir) / "config.json").write_text(json.dumps(info, indent=1, default=str))


def start_run(cfg, make, overwrite: bool = False, command: str = "rlvr train") -> Path:
    """Train a new run of `cfg` with the trainer `make(cfg)` builds. A folder holding a run is
    refused before anything loads; with `overwrite` that run is removed only once the trainer
    is built (a bad model or bad data fails with the old run intact)."""
    out = Path(cfg.output_dir)
    if not overwrite:
        fresh_run_folder(out, command=command)
    trainer = make(cfg)
    if overwrite:
        fresh_run_folder(out, overwrite=True)
    return trainer.train()


def run_steps(trainer, total: int, one_step, checkpoint_every: int, command: str,
              dist=None, early_stop=None) -> str | None:
    """Train until `trainer.step == total`: `one_step()` trains, logs and evaluates one step and
    advances `trainer.step`; `trainer.save_checkpoint()` runs every `checkpoint_every` steps
    and at the last. A SIGINT/SIGTERM stops after the step in progress, checkpointed (under
    torchrun the ranks agree on the step: `dist.sum`), and raises RunInterrupted naming the
    resume command; a second signal stops at once, keeping the latest checkpoint.
    `early_stop()`, asked after every step (on every rank), returns why the run should end
    there (a monitor's verdict) or None: the run then ends cleanly, checkpointed, and the
    reason is returned with the checkpoint and the resume command."""
    saved = None
    stop = StopSignal(lambda: f"{command}: stopping after step {trainer.step + 1} to checkpoint "
                              "it; interrupt again to stop at once")
    with stop:
        try:
            while trainer.step < total:
                one_step()
                last = trainer.step == total
                if last or (checkpoint_every and trainer.step % checkpoint_every == 0):
                    trainer.save_checkpoint()
                    saved = trainer.step
                reason = early_stop() if early_stop is not None else None
                if reason and not last:
                    if saved != trainer.step:
                        trainer.save_checkpoint()
                    return (f"{reason}; checkpoint step {trainer.step}; continue with "
                            f"`{resume_command(command, trainer.run_dir)}`")
                if _stop_agreed(stop, dist) and not last:
                    if saved != trainer.step:
                        trainer.save_checkpoint()
                    raise RunInterrupted(
                        f"{command}: interrupted after step {trainer.step} of {total}, "
                        f"checkpointed; resume with: {resume_command(command, trainer.run_dir)}",
                        stop.signum)
        except RunInterrupted:
            raise
        except KeyboardInterrupt:
            raise RunInterrupted(_kept(trainer, command), stop.signum or signal.SIGINT) from None


def _stop_agreed(stop: StopSignal, dist) -> bool:
    """Whether any rank was asked to stop (every rank calls it once a step)."""
    if dist is None or not dist.enabled:
        return stop.requested
    return dist.sum([1.0 if stop.requested else 0.0])[0] > 0


def _kept(trainer, command: str) -> str:
    """What an immediate stop keeps: the latest checkpoint, or nothing."""
    latest = Path(trainer.run_dir) / "checkpoints" / "latest"
    during = f"{command}: interrupted during step {trainer.step + 1}"
    if not latest.exists():
        return (f"{during}, before any checkpoint: nothing to resume; start again with "
                f"--overwrite")
    return (f"{during}; kept the checkpoint {latest.read_text().strip()} (the steps after it "
            f"are lost); resume with: {resume_command(command, trainer.run_dir)}")
