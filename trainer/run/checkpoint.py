"""Checkpoints and random-number state: everything a run needs to continue exactly.

A checkpoint folder (RUN/checkpoints/step-000050/) holds the policy (a transformers folder, or
only the LoRA adapters when training with LoRA), the critic (PPO), the optimizer, scheduler and
RNG states (trainer_state.pt) and the small state that is not a tensor (state.json: step, data
cursor, KL controller, baseline, config). It is written to a temporary folder and renamed, so a
run killed mid-write leaves the previous checkpoint intact; `latest` names the newest.

Where the weights and the optimizer state go is the placement's business (trainer/parallel/placement.py):
replicas write them here from rank 0; sharded models (`parallel = "fsdp"`, trainer/parallel/fsdp.py)
write sharded/ from every rank (torch.distributed.checkpoint, read back at any world size),
and rank 0 still writes policy/ with the full weights, so `rlvr eval` and `rlvr export` read it
as any other.
"""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import torch

from rlvr.trainer.parallel.placement import Replication

__all__ = ["seed_everything", "rng_state", "set_rng_state", "write_checkpoint", "read_state",
           "restore_trainer_state", "latest_checkpoint", "RunFolderError", "holds_run",
           "clear_run", "fresh_run_folder"]

RUN_FILES = ("config.json", "metrics.jsonl", "eval.jsonl", "samples.jsonl", "plots",
             "checkpoints", "tensorboard")
"""What a run writes into its folder (`clear_run` removes exactly these)."""


class RunFolderError(ValueError):
    """The run folder holds a run this command may not continue (the message says what to do)."""


def holds_run(out: Path) -> bool:
    """Whether `out` holds (part of) a run: its config, metrics or checkpoints."""
    return any((Path(out) / n).exists() for n in ("config.json", "metrics.jsonl", "checkpoints"))


def clear_run(out: Path) -> None:
    """Remove a run's files from `out` (anything else there stays)."""
    for name in RUN_FILES:
        p = Path(out) / name
        shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)


def fresh_run_folder(out: Path, overwrite: bool = False, command: str = "rlvr train") -> None:
    """Make `out` ready for a new run: refuse one that holds a run (a second run would mix its
    metrics and checkpoints with the first's), or with `overwrite` remove that run first.
    `command` is the one the refusal tells to resume with."""
    if not holds_run(out):
        return
    if not overwrite:
        raise RunFolderError(f"{out} already holds a run; continue it with `{command} --resume "
                             f"{out}`, replace it with --overwrite, or set another output_dir")
    clear_run(out)


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (new heads' initialisation draws from these)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(),
             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def write_checkpoint(root: Path, name: str, *, policy, tokenizer, critic, optimizer, scheduler,
                     state: dict, placement=None) -> Path:
    """Write checkpoint `root/name` atomically and point `root/latest` at it. Every rank whose
    `placement` (trainer/parallel/placement.py; default: replicas) `writes_checkpoints` calls it; rank 0
    writes everything but the weights the placement writes itself."""
    placement = placement if placement is not None else Replication()
    tmp, final = root / (name + ".tmp"), root / name
    if placement.is_main:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    trainer_state = placement.save_weights(tmp, policy, critic, optimizer)
    if placement.is_main:
        tokenizer.save_pretrained(tmp / "policy")
        trainer_state.update(scheduler=scheduler.state_dict(), rng=rng_state())
        torch.save(trainer_state, tmp / "trainer_state.pt")
        (tmp / "state.json").write_text(json.dumps(state, indent=1))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        (root / "latest").write_text(name)
    placement.barrier()
    return final


def read_state(ckpt: Path) -> dict:
    """state.json of a checkpoint: step, cursor, kl_controller, baseline, config."""
    return json.loads((ckpt / "state.json").read_text())


def restore_trainer_state(ckpt: Path, critic, optimizer, scheduler, placement=None) -> None:
    """Critic weights, optimizer, scheduler and, last, the RNG states (nothing after this may
    draw random numbers, or the resumed run stops matching the uninterrupted one), read by the
    `placement` that wrote them (default: replicas; a sharded checkpoint is read by every rank)."""
    placement = placement if placement is not None else Replication()
    if not placement.wrote(ckpt):
        raise ValueError(f"{ckpt} was not written with parallel={placement.name!r}: resume it "
                         "with the parallel that wrote it ('fsdp' when it holds sharded/, else "
                         "'replicate')")
    blob = torch.load(ckpt / "trainer_state.pt", weights_only=False)
    placement.load_weights(ckpt, critic, optimizer, blob)
    scheduler.load_state_dict(blob["scheduler"])
    set_rng_state(blob["rng"])


def latest_checkpoint(run_dir: Path) -> Path:
    """The folder `run_dir/checkpoints/latest` names (FileNotFoundError naming what is missing)."""
    latest = Path(run_dir) / "checkpoints" / "latest"
    if not latest.exists():
        raise FileNotFoundError(f"no checkpoint in {run_dir} (expected {latest})")
    return latest.parent / latest.read_text().strip()
