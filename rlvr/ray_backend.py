"""A Ray-backed pool with the same `map` contract as `rlvr.pool.WorkerPool`.

For scoring that outgrows one machine. Ray moves chunks of rows to actors anywhere in the
cluster; each actor keeps its own one-process `WorkerPool`, so per-row deadlines, the kill and
replace of a stuck worker, and every status are enforced next to the row, exactly as on one
machine -- which is why `rlvr score --backend ray` writes the same output as the process pool.

Ray is optional: `pip install rlvr[ray]`.
"""
from __future__ import annotations

import threading
from typing import Callable, Sequence

from .pool import Factory, Outcome, WorkerPool
from .usage import require_extra

__all__ = ["RayPool", "require_ray"]


def require_ray():
    """Ray, or one line naming the extra that brings it (MissingExtra, an ImportError)."""
    return require_extra("ray", "ray", "the Ray reward backend")


class _Actor:
    """Holds one local WorkerPool; each call maps one chunk under per-item deadlines."""

    def __init__(self):
        self.pool = WorkerPool(1)

    def map(self, fn, items, deadline_s, context):
        return self.pool.map(fn, items, deadline_s=deadline_s, context=context)


class RayPool:
    """`n_workers` Ray actors; `address=None` starts (or joins) a local Ray instance."""

    def __init__(self, n_workers: int = 2, address: str | None = None, chunk_size: int = 512):
        self.ray = require_ray()
        if not self.ray.is_initialized():
            self.ray.init(address=address, num_cpus=None if address else n_workers,
                          include_dashboard=False, log_to_driver=False,
                          ignore_reinit_error=True)
        remote = self.ray.remote(num_cpus=1)(_Actor)
        self.actors = [remote.remote() for _ in range(n_workers)]
        self.n_workers = n_workers
        self.chunk_size = chunk_size
        self._next = 0
        self._lock = threading.Lock()

    def map(self, fn: str | Callable, items: Sequence, *, deadline_s: float,
            context: Factory | None = None) -> list[Outcome]:
        items = list(items)
        if not items:
            return []
        size = max(1, min(self.chunk_size, -(-len(items) // self.n_workers)))
        refs = []
        for start in range(0, len(items), size):
            with self._lock:
                actor = self.actors[self._next % self.n_workers]
                self._next += 1
            refs.append(actor.map.remote(fn, items[start:start + size], deadline_s, context))
        return [o for part in self.ray.get(refs) for o in part]

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor)
        self.actors = []
