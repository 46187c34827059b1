"""Data-parallel training under `torchrun`: one policy replica per process.

    torchrun --nproc-per-node 2 -m rlvr train --config configs/grpo_arithmetic.toml

What each rank does, and why the result does not depend on the number of ranks:
- every rank reads the same global prompt list from the stream and keeps its contiguous share
  (`shard`), so the data cursor is global and a checkpoint resumes under any world size;
- groups are never split: GRPO/RLOO advantages are per group, computed where the group lives;
- sampling is seeded per group (`group_seeds`), not per process, so a group's completions are
  the same whichever rank draws them;
- loss normalisers (sequences, tokens) and batch baselines are global sums, so each rank's loss is
  its share of the global loss and the *sum* of the ranks' gradients is the global gradient;
- metrics are computed once, by rank 0, from the gathered rollout and the summed statistics;
  rank 0 alone writes logs, plots and checkpoints.

Gradients are summed with one flat all-reduce per optimizer step rather than by wrapping the
policy in `DistributedDataParallel`: DDP requires every rank to run the same number of backward
passes per step, which DAPO's dynamic sampling (ranks keep different numbers of groups) and
dropped samples break; the critic shares the optimizer; and sampling wants the bare module.
DDP's overlap of communication with the backward pass is what this gives up.
`parallel = "fsdp"` shards the models instead of replicating them (trainer/parallel/fsdp.py); everything
above holds for it too.
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
from dataclasses import dataclass
from typing import NoReturn

import numpy as np
import torch
import torch.distributed as dist

__all__ = ["DistContext", "init_distributed", "join_world_of_one", "shutdown_distributed",
           "end_process", "is_main_process", "is_torchrun_rank", "shard", "group_seeds"]


@dataclass(frozen=True)
class DistContext:
    """Where this process stands in the run: rank, world size, and its device."""
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    # --- collectives (no-ops in a single process) ------------------------------------------
    def sum(self, values: list[float]) -> list[float]:
        """Element-wise sum of a list of floats over ranks (float64, so sums stay exact)."""
        if not self.enabled:
            return list(values)
        t = torch.tensor(values, dtype=torch.float64, device=self._comm_device())
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t.tolist()

    def max(self, value: float) -> float:
        if not self.enabled:
            return value
        t = torch.tensor([value], dtype=torch.float64, device=self._comm_device())
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t)

    def gather(self, obj) -> list:
        """Every rank's `obj`, in rank order, on every rank (pickled; keep it small)."""
        if not self.enabled:
            return [obj]
        out = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def sum_gradients(self, params: list[torch.Tensor]) -> None:
        """grad <- sum over ranks, as one flat buffer per dtype (a missing grad counts as 0).
        Sharded parameters (FSDP2's DTensors, trainer/parallel/fsdp.py) are skipped: their gradients
        were summed by FSDP's reduce-scatter during the backward."""
        from torch.distributed.tensor import DTensor
        params = [p for p in params if not isinstance(p, DTensor)]
        if not self.enabled or not params:
            return
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
        for p in params:
            by_dtype.setdefault(p.grad.dtype, []).append(p.grad)
        for grads in by_dtype.values():
            flat = torch.cat([g.reshape(-1) for g in grads])
            dist.all_reduce(flat, op=dist.ReduceOp.SUM)
            offset = 0
            for g in grads:
                g.copy_(flat[offset:offset + g.numel()].view_as(g))
                offset += g.numel()

    def broadcast_parameters(self, modules) -> None:
        """Start every replica from rank 0's weights (as DDP does at construction). Tensors
        off the backend's device (CPU-built models to be sharded, under nccl) travel through it."""
        if not self.enabled:
            return
        device = self._comm_device()
        for module in modules:
            for t in list(module.parameters()) + list(module.buffers()):
                if device.type == "cuda" and t.device.type == "cpu":
                    staged = t.data.to(device)
                    dist.broadcast(staged, src=0)
                    t.data.copy_(staged)
                else:
                    dist.broadcast(t.data, src=0)

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def _comm_device(self) -> torch.device:
        return torch.device("cuda", torch.cuda.current_device()) \
            if dist.get_backend() == "nccl" else torch.device("cpu")


def init_distributed(device: str, backend: str = "auto") -> tuple[DistContext, str]:
    """Join the process group torchrun describes in the environment (RANK, WORLD_SIZE,
    LOCAL_RANK, MASTER_ADDR/PORT); a plain `python -m rlvr train` is a world of one.
    Returns the context and the device this rank uses (cuda:LOCAL_RANK on GPUs)."""
    if not is_torchrun_rank():
        return DistContext(), device
    world = int(os.environ["WORLD_SIZE"])
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    if use_cuda:
        if local >= torch.cuda.device_count():
            raise ValueError(f"rank {rank} (local rank {local}) has no GPU: "
                             f"{torch.cuda.device_count()} visible; run one process per GPU "
                             "(--nproc-per-node) or set device=cpu")
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    elif device == "auto":
        device = "cpu"
    if backend == "auto":
        backend = "nccl" if use_cuda else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
    return DistContext(rank, world, local), device


def join_world_of_one(device: torch.device) -> None:
    """A process group of one for a plain (not torchrun) process that shards its models:
    FSDP2 and sharded checkpoints need a group even when nothing is split, e.g. to resume at
    world size 1 a run checkpointed at world size 2."""
    if dist.is_initialized():
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)


def shutdown_distributed() -> None:
    """Leave the process group (at the end of `rlvr train`; a no-op outside torchrun)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def end_process(code: int) -> NoReturn:
    """Exit a torchrun rank with `code`, doing what interpreter teardown is for (non-daemon
    threads joined, atexit handlers run, streams flushed) but not the teardown itself.

    A Gloo process group outlives `destroy_process_group` (torch's own modules keep references
    to it), so its worker threads run on into teardown. One that finishes a collective then
    drops the last reference to the collective's tensor, which needs the GIL; a finalizing
    interpreter ends the thread instead, inside a C++ destructor, and the process aborts
    ("terminate called without an active exception", SIGABRT) after the run is written, which
    torchrun reports as a failed run. Without teardown there is nothing for the thread to
    race (cf. pytorch/pytorch#179291)."""
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()       # what teardown runs first; CPython's one way to run them
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def is_torchrun_rank() -> bool:
    """Whether torchrun started this process as one of several (what `init_distributed` joins)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def shard(n: int, ctx: DistContext, what: str = "prompts_per_step") -> tuple[int, int]:
    """[start, stop) of this rank's contiguous share of n items (the first n % W ranks get one
    more). Contiguous, so concatenating the ranks' shares in rank order restores the order."""
    if n < ctx.world_size:
        raise ValueError(f"{n} items cannot be shared by {ctx.world_size} ranks: "
                         f"{what} must be at least the number of processes")
    base, extra = divmod(n, ctx.world_size)
    start = ctx.rank * base + min(ctx.rank, extra)
    return start, start + base + (ctx.rank < extra)


def group_seeds(seed: int, *keys: int, count: int, offset: int = 0) -> list[int]:
    """One sampling seed per group, derived from (seed, *keys, global group index) with numpy's
    SeedSequence: independent streams, the same for a group on any rank and any world size."""
    return [int(np.random.SeedSequence([seed, *keys, offset + i]).generate_state(1, np.uint64)[0]
                % (2**63 - 1)) for i in range(count)]
