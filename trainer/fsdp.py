"""Sharded data parallelism with FSDP2 (`parallel = "fsdp"`): each rank holds 1/W of every
weight, gradient and AdamW state, so a policy too large for one device's memory still trains.

    torchrun --nproc-per-node 8 -m rlvr train --config run.toml parallel=fsdp

Policy, reference and critic are sharded with torch's `fully_shard` (FSDP2: per-parameter
sharding on DTensors, Zhao et al. 2023 "PyTorch FSDP"), one FSDP unit per decoder layer and one
for the rest of the model (embeddings, final norm, head), so only one layer's full weights
exist at a time while the update runs. What the rest of the trainer sees is unchanged:
- the loss on each rank is its share of the global loss (trainer/distributed.py), so FSDP's
  reduce-scatter *sums* the ranks' gradients (divide factor 1) instead of averaging them, and
  the sum is the global gradient, as with replication;
- mixed precision is FSDP's own policy: with dtype = bfloat16 the weights are all-gathered in
  bf16 and gradients reduced in float32, while the sharded master weights and AdamW states
  stay float32;
- activation checkpointing and LoRA are applied before sharding (LoRA's frozen base and its
  trainable adapters share the layer's unit; only the adapters reach the optimizer);
- sampling runs on the gathered policy (`Sharding.gathered`): ranks sample different numbers
  of tokens, and a sharded module all-gathers in every forward, a collective every rank must
  join; gathered once, the forwards need no communication.

Every forward and backward of the update is a collective, so every rank must run the same
passes: the update uses the reference forward (one plain call per micro-batch; the fast
forward's shared-prefix and silent-group passes depend on each rank's data), the global batch
must split evenly, and DAPO's dynamic sampling (ranks keep different numbers of groups) is
refused. Checkpoints are sharded (torch.distributed.checkpoint: each rank writes its shards,
any world size reads them) beside a full-weight transformers folder written by rank 0.
"""
from __future__ import annotations

import contextlib
import functools
from pathlib import Path

import torch
from torch import nn

from .distributed import join_world_of_one
from .hf_adapter import decoder_layers

__all__ = ["Sharding", "shard_models", "check_fsdp", "PARALLEL"]

PARALLEL = ("replicate", "fsdp")


def check_fsdp(cfg, world_size: int) -> None:
    """Refuse what FSDP2 cannot run with the same passes on every rank (one line naming the fix)."""
    if cfg.dynamic_sampling:
        raise ValueError("parallel='fsdp' needs every rank to run the same update passes, which "
                         "dynamic_sampling breaks: set dynamic_sampling=false or "
                         "parallel='replicate'")
    if cfg.rollout_engine != "hf":
        raise ValueError(f"parallel='fsdp' samples with the gathered policy: set "
                         f"rollout_engine='hf' (got {cfg.rollout_engine!r})")
    if cfg.prompts_per_step % world_size:
        raise ValueError(f"parallel='fsdp' needs the same batch on every rank: prompts_per_step="
                         f"{cfg.prompts_per_step} must be a multiple of the {world_size} processes")


def _mixed_precision(dtype: str):
    """bf16 all-gathers and compute, float32 gradient reduction (FSDP's own policy)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy
    if dtype == "bfloat16":
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return MixedPrecisionPolicy()


def _fsdp_modules(model) -> list:
    from torch.distributed.fsdp import FSDPModule
    return [m for m in model.modules() if isinstance(m, FSDPModule)]


def _shard(units: list[nn.Module], root: nn.Module, *, mesh, mp) -> None:
    """fully_shard each unit, then the root (what is left: embeddings, norm, head). Gradients
    are summed over ranks, not averaged (the losses are already shares of the global loss),
    with a plain SUM reduction, which gloo has too (it lacks the pre-scaled one)."""
    from torch.distributed.fsdp import fully_shard
    for unit in units:
        fully_shard(unit, mesh=mesh, mp_policy=mp)
    # the root's weights are the first the backward needs: kept gathered after the forward
    fully_shard(root, mesh=mesh, mp_policy=mp, reshard_after_forward=False)
    for m in units + [root]:
        m.set_gradient_divide_factor(1.0)
        m.set_force_sum_reduction_for_comms(True)


class Sharding:
    """What the loop and the checkpoints ask of the sharded models: the policy gathered for
    sampling, sharded checkpoints, the full weights for the policy folder."""

    enabled = True

    def __init__(self, policy, critic, is_main: bool):
        self.policy, self.critic, self.is_main = policy, critic, is_main

    @contextlib.contextmanager
    def gathered(self):
        """The policy's full weights on every rank for the block (sampling, evaluation): one
        all-gather per unit on entry, none in the forwards inside, resharded on exit."""
        units = _fsdp_modules(self.policy)
        for m in units:
            m.set_reshard_after_forward(False, recurse=False)
            m.unshard()
        try:
            yield
        finally:
            for m in units:     # as `_shard` set them: layers reshard after forward, the root not
                m.reshard()
                m.set_reshard_after_forward(m is not self.policy, recurse=False)

    # --- checkpoints (torch.distributed.checkpoint) -----------------------------------------
    def full_policy_weights(self) -> dict | None:
        """The policy's trainable weights (all of them; LoRA: the adapters) as full CPU tensors
        on rank 0, None elsewhere: the transformers folder rank 0 writes. Every rank calls it."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
        sd = get_model_state_dict(self.policy, options=StateDictOptions(
            full_state_dict=True, cpu_offload=True, ignore_frozen_params=True))
        return sd if self.is_main else None

    def save(self, folder: Path, optimizer) -> None:
        """Every rank writes its shards of the trainable weights and of the optimizer state,
        by parameter name (DCP's format)."""
        import torch.distributed.checkpoint as dcp
        dcp.save(self._state(optimizer), checkpoint_id=str(folder))

    def load(self, folder: Path, optimizer) -> None:
        """Read a `save`d checkpoint, written at any world size: DCP reads each rank's part of
        every tensor from whichever shards hold it."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import set_state_dict
        state = self._state(optimizer)
        dcp.load(state, checkpoint_id=str(folder))
        set_state_dict(self._models(), optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optimizer"], options=_trainable())

    def _state(self, optimizer) -> dict:
        from torch.distributed.checkpoint.state_dict import get_state_dict
        model, optim = get_state_dict(self._models(), optimizer, options=_trainable())
        return {"model": model, "optimizer": optim}

    def _models(self) -> nn.Module:
        """Policy and critic under one name space: the one optimizer's state maps to names."""
        models = nn.ModuleDict({"policy": self.policy})
        if self.critic is not None:
            models["critic"] = self.critic
        return models


def _trainable():
    """State-dict options of the checkpoints: the frozen weights (LoRA's base) are the model's
    own and are not written."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions
    return StateDictOptions(ignore_frozen_params=True)


class Replication:
    """Replicas (parallel = "replicate"): nothing to gather, checkpoints written by rank 0."""

    enabled = False

    @contextlib.contextmanager
    def gathered(self):
        yield


def shard_models(cfg, dist_ctx, device: torch.device, policy, ref, critic):
    """Shard policy, reference and critic (`parallel = "fsdp"`) over the ranks' `device`s and
    return the `Sharding` the loop asks to gather the policy and to write checkpoints;
    `Replication` otherwise. Call it before the optimizer is built: sharding replaces the
    parameters. Models built on the CPU move to `device` one unit at a time as they are sharded,
    so no device ever holds a whole model that does not fit it."""
    if cfg.parallel not in PARALLEL:
        raise ValueError(f"parallel={cfg.parallel!r}; expected one of {list(PARALLEL)}")
    if cfg.parallel != "fsdp":
        return Replication()
    check_fsdp(cfg, dist_ctx.world_size)
    join_world_of_one(device)
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh(device.type, (dist_ctx.world_size,))
    shard = functools.partial(_shard, mesh=mesh, mp=_mixed_precision(cfg.dtype))
    shard(list(decoder_layers(policy)), policy)
    if isinstance(ref, nn.Module):      # (LoRA's reference is the policy, adapters off)
        shard(list(decoder_layers(ref)), ref)
    if critic is not None:
        # the forwards call `critic.backbone` and `critic.value_head` directly: a unit each
        shard(list(decoder_layers(critic.backbone)) + [critic.value_head], critic.backbone)
    return Sharding(policy, critic, dist_ctx.is_main)
