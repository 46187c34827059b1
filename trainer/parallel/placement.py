"""How the ranks hold the models: what the loop and the checkpoints ask of a placement.

A placement builds the models on a device, places them over the ranks, names the forward the
update runs on them, gathers the policy for sampling, and writes and reads the weights and
optimizer state of a checkpoint. Two exist: `Replication` here (every rank a whole copy, the
default and the single-process case) and `Sharding` (trainer/parallel/fsdp.py, FSDP2). The loop and
trainer/run/checkpoint.py call the methods below and never ask which one they hold.
"""
from __future__ import annotations

import contextlib
from pathlib import Path

import torch

__all__ = ["Replication"]


class Replication:
    """Replicas (parallel = "replicate"): whole models on each rank's device, nothing to
    gather, checkpoints written by rank 0 alone (every replica holds the same weights)."""

    name = "replicate"

    def __init__(self, is_main: bool = True):
        self.is_main = is_main

    def build_device(self, device: torch.device) -> torch.device:
        """Where the models are loaded: the rank's own device."""
        return device

    def place(self, policy, ref, critic) -> None:
        """Nothing to do: each rank keeps its whole copies (their parameters are broadcast)."""

    def forward(self, chosen):
        """The update runs the forward the configuration chose."""
        return chosen

    @contextlib.contextmanager
    def gathered(self):
        """The policy's full weights for sampling and evaluation: already whole."""
        yield

    @property
    def writes_checkpoints(self) -> bool:
        """Whether this rank calls `write_checkpoint`: rank 0 only."""
        return self.is_main

    def save_weights(self, folder: Path, policy, critic, optimizer) -> dict:
        """Write the policy folder (LoRA: the adapters) and the critic; return what goes into
        trainer_state.pt beside the scheduler and RNG: the optimizer state."""
        from safetensors.torch import save_model
        policy.save_pretrained(folder / "policy", safe_serialization=True)   # peft: adapters only
        if critic is not None:
            save_model(critic, str(folder / "critic.safetensors"))
        return {"optimizer": optimizer.state_dict()}

    def load_weights(self, ckpt: Path, critic, optimizer, trainer_state: dict) -> None:
        """Read what `save_weights` wrote (the policy's weights were loaded with the model)."""
        from safetensors.torch import load_model
        if critic is not None:
            load_model(critic, str(ckpt / "critic.safetensors"))
        optimizer.load_state_dict(trainer_state["optimizer"])

    def wrote(self, ckpt: Path) -> bool:
        """Whether `ckpt` was written by this kind of placement (no sharded/ folder)."""
        return not (ckpt / "sharded").exists()

    def barrier(self) -> None:
        """Replicas wait for rank 0's checkpoint in the loop, not here."""
