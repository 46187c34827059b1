"""Sharded data parallelism with FSDP2 (`parallel = "fsdp"`): each rank holds 1/W of every
weight, gradient and AdamW state, so a policy too large for one device's memory still trains.

    torchrun --nproc-per-node 8 -m rlvr train --config run.toml parallel=fsdp

Policy, reference and critic are sharded with torch's `fully_shard` (FSDP2: per-parameter
sharding on DTensors, Zhao et al. 2023 "PyTorch FSDP"), one FSDP unit per decoder layer and one
for the rest of the model (embeddings, final norm, head), so only one layer's full weights
exist at a time while the update runs. What the rest of the trainer sees is unchanged:
- the loss on each rank is its share of the global loss (trainer/parallel/distributed.py), so FSDP's
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
import json
from pathlib import Path

import torch
from torch import nn

from rlvr.trainer.parallel.distributed import join_world_of_one
from rlvr.trainer.forwards.hf_adapter import decoder_layers
from rlvr.trainer.parallel.placement import Replication
from rlvr.trainer.forwards.reference import ReferenceForward

__all__ = ["Sharding", "ShardedForward", "placement", "shard_models", "check_fsdp", "PARALLEL"]

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
    if cfg.teacher:
        raise ValueError("parallel='fsdp' does not shard a distillation teacher: every rank would "
                         "hold the whole teacher, and its forwards would not be the collectives "
                         "the sharded student's are; set parallel='replicate' or drop teacher")
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
    """The placement (trainer/parallel/placement.py) of sharded models: built on the CPU and moved to the
    device unit by unit as they are sharded, the update on the reference forward, the policy
    gathered for sampling, sharded checkpoints."""

    name = "fsdp"

    def __init__(self, cfg, dist_ctx, device: torch.device):
        self.cfg, self.dist, self.device = cfg, dist_ctx, device
        self.is_main = dist_ctx.is_main
        self.policy = self.critic = None

    def build_device(self, device: torch.device) -> torch.device:
        """The CPU: sharding moves each rank's shards to `device`, so no device ever holds a
        whole model that does not fit it."""
        return torch.device("cpu")

    def place(self, policy, ref, critic) -> None:
        """Shard policy, reference and critic over the ranks' devices; call it before the
        optimizer is built (sharding replaces the parameters)."""
        join_world_of_one(self.device)
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh(self.device.type, (self.dist.world_size,))
        shard = functools.partial(_shard, mesh=mesh, mp=_mixed_precision(self.cfg.dtype))
        shard(list(decoder_layers(policy)), policy)
        if isinstance(ref, nn.Module):      # (LoRA's reference is the policy, adapters off)
            shard(list(decoder_layers(ref)), ref)
        if critic is not None:
            # the forwards call `critic.backbone` and `critic.value_head` directly: a unit each
            shard(list(decoder_layers(critic.backbone)) + [critic.value_head], critic.backbone)
        self.policy, self.critic = policy, critic

    def forward(self, chosen):
        """Every forward and backward is a collective, so every rank runs the same passes: the
        reference forward, whichever was chosen (the fast one's passes depend on the data)."""
        return ShardedForward(chosen.pad_id, chosen.device)

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
    @property
    def writes_checkpoints(self) -> bool:
        """Every rank writes its shards."""
        return True

    def save_weights(self, folder: Path, policy, critic, optimizer) -> dict:
        """Every rank writes its shards of the trainable weights and of the optimizer state to
        folder/sharded (DCP's format, by parameter name); rank 0 also writes the policy folder
        with the full weights. Nothing goes into trainer_state.pt."""
        import torch.distributed.checkpoint as dcp
        self.barrier()                  # rank 0 made the folder
        dcp.save(self._state(optimizer), checkpoint_id=str(folder / "sharded"))
        weights = self.full_policy_weights()
        if self.is_main:
            _save_policy(policy, folder / "policy", weights)
        return {}

    def load_weights(self, ckpt: Path, critic, optimizer, trainer_state: dict) -> None:
        """Read a `save_weights` checkpoint, written at any world size: DCP reads each rank's
        part of every tensor from whichever shards hold it."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import set_state_dict
        state = self._state(optimizer)
        dcp.load(state, checkpoint_id=str(ckpt / "sharded"))
        set_state_dict(self._models(), optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optimizer"], options=_trainable())

    def wrote(self, ckpt: Path) -> bool:
        """Whether `ckpt` was written sharded."""
        return (ckpt / "sharded").exists()

    def barrier(self) -> None:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.barrier()

    def full_policy_weights(self) -> dict | None:
        """The policy's trainable weights (all of them; LoRA: the adapters) as full CPU tensors
        on rank 0, None elsewhere: the transformers folder rank 0 writes. Every rank calls it."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
        sd = get_model_state_dict(self.policy, options=StateDictOptions(
            full_state_dict=True, cpu_offload=True, ignore_frozen_params=True))
        return sd if self.is_main else None

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


class ShardedForward(ReferenceForward):
    """The reference forward over sharded models (the same calls; FSDP2 all-gathers each
    unit's weights inside them)."""

    name = "fsdp"


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


def _trainable():
    """State-dict options of the checkpoints: the frozen weights (LoRA's base) are the model's
    own and are not written."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions
    return StateDictOptions(ignore_frozen_params=True)


def placement(cfg, dist_ctx, device: torch.device):
    """The placement `cfg.parallel` names: `Sharding` (FSDP2), after refusing what it cannot
    run, or `Replication`. Called before any model loads."""
    if cfg.parallel not in PARALLEL:
        raise ValueError(f"parallel={cfg.parallel!r}; expected one of {list(PARALLEL)}")
    if cfg.parallel != "fsdp":
        return Replication(dist_ctx.is_main)
    check_fsdp(cfg, dist_ctx.world_size)
    return Sharding(cfg, dist_ctx, device)


def shard_models(cfg, dist_ctx, device: torch.device, policy, ref, critic):
    """`placement`, with the models placed."""
    placed = placement(cfg, dist_ctx, device)
    placed.place(policy, ref, critic)
    return placed
