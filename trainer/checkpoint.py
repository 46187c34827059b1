"""Checkpoints and random-number state: everything a run needs to continue exactly.

A checkpoint folder (RUN/checkpoints/step-000050/) holds the policy (a transformers folder, or
only the LoRA adapters when training with LoRA), the critic (PPO), the optimizer, scheduler and
RNG states (trainer_state.pt) and the small state that is not a tensor (state.json: step, data
cursor, KL controller, baseline, config). It is written to a temporary folder and renamed, so a
run killed mid-write leaves the previous checkpoint intact; `latest` names the newest.

With sharded models (`parallel = "fsdp"`, trainer/fsdp.py) the trainable weights and the
optimizer state go to sharded/ instead (torch.distributed.checkpoint: every rank writes its
shards, and any world size, sharded or not, reads them back), and rank 0 still writes policy/
with the full weights, so `rlvr eval` and `rlvr export` read it as any other.
"""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import torch

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
                     state: dict, sharding=None) -> Path:
    """Write checkpoint `root/name` atomically and point `root/latest` at it. Replicas: rank 0
    calls it. `sharding` (sharded models): every rank calls it, rank 0 writes all but the shards."""
    sharding = sharding if sharding is not None and sharding.enabled else None
    tmp, final = root / (name + ".tmp"), root / name
    main = sharding is None or sharding.is_main
    if main:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    if sharding is not None:
        _barrier()
        sharding.save(tmp / "sharded", optimizer)
        weights = sharding.full_policy_weights()
    if main:
        if sharding is None:
            _write_weights(tmp, policy, critic)
        else:
            _save_policy(policy, tmp / "policy", weights)
        tokenizer.save_pretrained(tmp / "policy")
        trainer_state = {"scheduler": scheduler.state_dict(), "rng": rng_state()}
        if sharding is None:
            trainer_state["optimizer"] = optimizer.state_dict()
        torch.save(trainer_state, tmp / "trainer_state.pt")
        (tmp / "state.json").write_text(json.dumps(state, indent=1))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        (root / "latest").write_text(name)
    if sharding is not None:
        _barrier()
    return final


def _write_weights(folder: Path, policy, critic) -> None:
    from safetensors.torch import save_model
    policy.save_pretrained(folder / "policy", safe_serialization=True)   # peft: adapters only
    if critic is not None:
        save_model(critic, str(folder / "critic.safetensors"))


def _save_policy(policy, folder: Path, weights: dict) -> None:
    """A sharded policy's transformers folder from its gathered `weights` (LoRA: the adapters).
    Sharding gives the module a subclass of its own (FSDP<Name>), which `save_pretrained`
    would record as the architecture: the folder names the model's own class."""
    policy.save_pretrained(folder, state_dict=weights, safe_serialization=True)
    config = folder / "config.json"
    if config.exists():
        cfg = json.loads(config.read_text())
        from torch.distributed.fsdp import FSDPModule
        own = next(c for c in type(policy).__mro__[1:] if not issubclass(c, FSDPModule))
        cfg["architectures"] = [own.__name__]
        config.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def _barrier() -> None:
    import torch.distributed as dist
    if dist.is_initialized():
        dist.barrier()


def read_state(ckpt: Path) -> dict:
    """state.json of a checkpoint: step, cursor, kl_controller, baseline, config."""
    return json.loads((ckpt / "state.json").read_text())


def restore_trainer_state(ckpt: Path, critic, optimizer, scheduler, sharding=None) -> None:
    """Critic weights, optimizer, scheduler and, last, the RNG states (nothing after this may
    draw random numbers, or the resumed run stops matching the uninterrupted one). A sharded
    checkpoint is read by `sharding` (every rank) and only into sharded models."""
    from safetensors.torch import load_model
    sharding = sharding if sharding is not None and sharding.enabled else None
    sharded = (ckpt / "sharded").exists()
    if sharded != (sharding is not None):
        written, now = ("fsdp", "replicate") if sharded else ("replicate", "fsdp")
        raise ValueError(f"{ckpt} was written with parallel={written!r}: resume it with "
                         f"parallel={written!r} (not {now!r})")
    if sharding is not None:
        sharding.load(ckpt / "sharded", optimizer)
    elif critic is not None:
        load_model(critic, str(ckpt / "critic.safetensors"))
    blob = torch.load(ckpt / "trainer_state.pt", weights_only=False)
    if sharding is None:
        optimizer.load_state_dict(blob["optimizer"])
    scheduler.load_state_dict(blob["scheduler"])
    set_rng_state(blob["rng"])


def latest_checkpoint(run_dir: Path) -> Path:
    """The folder `run_dir/checkpoints/latest` names (FileNotFoundError naming what is missing)."""
    latest = Path(run_dir) / "checkpoints" / "latest"
    if not latest.exists():
        raise FileNotFoundError(f"no checkpoint in {run_dir} (expected {latest})")
    return latest.parent / latest.read_text().strip()
