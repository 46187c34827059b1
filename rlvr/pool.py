"""One pool of spawn-started worker processes with a hard wall-clock deadline per call.

Why our own pool rather than `multiprocessing.Pool` or `concurrent.futures`: neither can kill the
one worker that is stuck on one call and carry on -- a hung sympy simplification or a looping
program would stall them for good. Here a call past its deadline is reported as `timeout`, its
worker (and that worker's process group) is SIGKILLed and replaced, and the pool keeps serving.

Design notes
- Calls are sent in chunks (per-call IPC would eat the gain of parallelism on cheap rewards); the
  worker flushes finished results every few milliseconds and publishes "item i started at t" in a
  small shared array, so the host enforces the deadline per *item*, not per chunk.
- Everything runs in the calling thread (no signals, no `signal.alarm`), so the pool works from any
  thread, from asyncio (`amap`) and from inside another pool's worker (workers are not daemonic,
  so they may start pools of their own).
- Objects that cannot be pickled are built inside the worker from a `Factory` (an import path and
  keyword arguments) and cached there.
- A call that does many small steps itself (offline scoring sends a chunk of rows as one call, so
  the rows cost no per-row IPC) marks each with `mark_step(k)`: the deadline then applies to every
  step, and a timeout names the step that hung (`Outcome.step`).
"""
from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib
import itertools
import multiprocessing as mp
from multiprocessing import spawn
import os
import pickle
import queue
import signal
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

__all__ = ["Factory", "Outcome", "WorkerPool", "default_pool", "mark_step", "resolve"]

_POLL_S = 0.02          # the shortest wait between the host's checks of a running call
_MAX_WAIT_S = 0.5       # the longest (how late a worker that died without a word is noticed)
_FLUSH_S = 0.01         # how often a worker sends finished results back
_STARTING, _BUILDING = -2.0, -1.0   # progress[0] sentinels before the first item runs
_NO_STEP = -1.0                     # progress[2] while the running item has marked no step
# Building a call's context (importing a verifier, loading a reward model) gets its own, longer
# deadline: a model load is slow but legitimate, and must not eat the first item's deadline.
BUILD_DEADLINE_S = 300.0


_WORKER_NAME = "rlvr-worker"
_spawn_lock = threading.Lock()


@contextlib.contextmanager
def _without_main():
    """Start our workers without re-running the parent's `__main__` (stdlib spawn does).

    Re-importing `__main__` runs a user's script a second time in every worker, and fails
    outright for `python -` or notebooks; rewards must live in importable modules anyway.
    The stdlib's hook is swapped only while one of our workers starts, and the swap drops the
    `__main__` entries for processes named as ours alone: the user's own spawned processes
    are never touched."""
    original = spawn.get_preparation_data

    def preparation_data(name):
        data = original(name)
        if name == _WORKER_NAME:
            data.pop("init_main_from_path", None)
            data.pop("init_main_from_name", None)
        return data
    with _spawn_lock:
        spawn.get_preparation_data = preparation_data
        try:
            yield
        finally:
            spawn.get_preparation_data = original


def resolve(target: str | Callable) -> Callable:
    """'package.module:attr' -> the object; callables pass through."""
    if callable(target):
        return target
    module, _, attr = target.partition(":")
    if not module or not attr:
        raise ValueError(f"expected 'module:attribute', got {target!r}")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Factory:
    """A recipe for building an object inside a worker: `target(**kwargs)`.

    `target` is an import path ('pkg.mod:make') or a picklable callable. `Factory.of(obj)` wraps
    an already-built picklable object. Workers cache what they build, keyed by the recipe.
    """
    target: Any
    kwargs: dict = field(default_factory=dict)

    @classmethod
    def of(cls, obj: Any) -> "Factory":
        return cls(_identity, {"obj": obj})

    def build(self) -> Any:
        return resolve(self.target)(**self.kwargs)

    def key(self) -> str:
        return hashlib.sha1(pickle.dumps((self.target, sorted(self.kwargs.items())))).hexdigest()


def _identity(obj):
    return obj


@dataclass
class Outcome:
    """What became of one call: 'ok' (value set), 'error', 'timeout' or 'infra_error'.

    `step` is the step (see `mark_step`) that timed out or killed its worker, for calls that mark
    steps; None otherwise."""
    status: str
    value: Any = None
    error: str = ""
    latency_s: float = 0.0
    step: int | None = None


# --------------------------------------------------------------------------- worker side

def in_pool_worker() -> bool:
    """True inside a pool worker: a reward that would start its own pool (or a process-per-call
    checker) runs inline there instead, since the worker already has a hard deadline."""
    return mp.current_process().name == _WORKER_NAME


def _watch_parent(parent_pid: int) -> None:
    """Exit if the host dies, even mid-call: orphaned workers must not outlive their pool."""
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            os._exit(1)


# The running worker's progress array, [item index, when the item/step started, step]; None
# outside pool workers, where `mark_step` does nothing.
_progress = None


def mark_step(step: int) -> None:
    """Inside a pool call: step `step` of this call starts now.

    The call's deadline restarts, so it applies to each step rather than to the whole call, and a
    step that hangs (or kills its worker) is reported as `Outcome.step`. Outside a pool worker
    this does nothing, so the same code runs in-process too.
    """
    progress = _progress
    if progress is not None:
        progress[1] = time.monotonic()   # the time first: the host reads the step before it
        progress[2] = step


def _worker_main(conn, progress, parent_pid: int) -> None:
    global _progress
    _progress = progress
    os.setpgrp()  # our own process group: a timeout kills whatever the call started, too
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the host's to handle
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    built: dict[str, Any] = {}
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        _run_job(conn, progress, built, *msg)


def _run_job(conn, progress, built, job_id, fn, factory, items) -> None:
    progress[1], progress[2], progress[0] = time.monotonic(), _NO_STEP, _BUILDING
    try:
        ctx = None
        if factory is not None:
            key = factory.key()
            if key not in built:
                built[key] = factory.build()
            ctx = built[key]
        func = resolve(fn)
    except Exception as exc:
        msg = f"could not build {factory!r}: {type(exc).__name__}: {exc}"
        _send(conn, job_id, [("error", None, msg, 0.0)] * len(items), done=True)
        return
    buf, last = [], time.monotonic()
    for i, item in enumerate(items):
        progress[1] = time.monotonic()
        progress[2] = _NO_STEP
        progress[0] = float(i)
        t0 = time.perf_counter()
        try:
            buf.append(("ok", func(ctx, item), "", time.perf_counter() - t0))
        except Exception as exc:
            buf.append(("error", None, f"{type(exc).__name__}: {exc}", time.perf_counter() - t0))
        if i + 1 < len(items) and time.monotonic() - last > _FLUSH_S:
            _send(conn, job_id, buf)
            buf, last = [], time.monotonic()
    _send(conn, job_id, buf, done=True)


def _send(conn, job_id, results, done=False) -> None:
    try:
        conn.send((job_id, results, done))
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        bad = [("error", None, f"result could not be sent back: {exc}", r[3]) for r in results]
        conn.send((job_id, bad, done))


# --------------------------------------------------------------------------- host side

class _Worker:
    def __init__(self, ctx):
        self.progress = ctx.RawArray("d", 3)   # [item index, started, step]: see mark_step
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, self.progress, os.getpid()),
                                daemon=False, name=_WORKER_NAME)
        with _without_main():
            self.proc.start()
        child.close()

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.kill()
        except (ProcessLookupError, OSError):
            pass
        self.proc.join(timeout=5)
        self.conn.close()

    def ask_to_stop(self) -> None:
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass

    def wait_stopped(self) -> None:
        self.proc.join(timeout=2)
        if self.proc.is_alive():
            self.kill()
        else:
            self.conn.close()


class WorkerPool:
    """`n_workers` spawn-started processes; `map(fn, items, deadline_s=...)` -> list[Outcome].

    `fn` is a module-level function (or 'module:attr') called as `fn(ctx, item)` in a worker,
    where `ctx` is what `context` (a Factory) builds there once and caches (None without one).

    >>> with WorkerPool(2) as pool:                                     # doctest: +SKIP
    ...     [o.value for o in pool.map("operator:add", [1, 2], context=Factory.of(10))]
    [11, 12]
    """

    def __init__(self, n_workers: int | None = None, chunk_size: int = 512):
        self.n_workers = max(1, n_workers or os.cpu_count() or 1)
        self.chunk_size = chunk_size
        self._ctx = mp.get_context("spawn")
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()
        self._started = self._closed = False
        self._jobs = itertools.count()

    # -- lifecycle
    def start(self) -> "WorkerPool":
        """Start the workers now instead of on the first call (they boot in parallel with
        whatever the caller does next)."""
        self._start()
        return self

    def _start(self) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("this WorkerPool is closed")
            if self._started:
                return
            for _ in range(self.n_workers):
                self._add_worker()
            self._started = True
            _live_pools.add(self)

    def _add_worker(self) -> None:
        w = _Worker(self._ctx)
        self._all.add(w)
        self._idle.put(w)

    def _replace(self, dead: _Worker) -> None:
        """Kill a stuck worker and start its successor without blocking the caller."""
        with self._lock:
            self._all.discard(dead)
        dead.kill()
        with self._lock:
            if not self._closed:
                self._add_worker()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers, self._all = list(self._all), set()
        for w in workers:          # all at once: they shut down in parallel
            w.ask_to_stop()
        for w in workers:
            w.wait_stopped()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- calls
    def map(self, fn: str | Callable, items: Sequence, *, deadline_s: float,
            context: Factory | None = None) -> list[Outcome]:
        """Run fn(ctx, item) for every item, in parallel, each within `deadline_s` seconds."""
        items = list(items)
        if not items:
            return []
        self._start()
        size = max(1, min(self.chunk_size, -(-len(items) // self.n_workers)))
        chunks = [items[i:i + size] for i in range(0, len(items), size)]
        if len(chunks) == 1:
            return self._run_chunk(fn, context, chunks[0], deadline_s)
        # Imported here, like asyncio in `amap`: every worker imports this module, and these
        # imports would add tens of milliseconds to each worker's start.
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(min(len(chunks), self.n_workers)) as ex:
            parts = ex.map(lambda c: self._run_chunk(fn, context, c, deadline_s), chunks)
            return [o for part in parts for o in part]

    def call(self, fn, item, *, deadline_s: float, context: Factory | None = None) -> Outcome:
        return self.map(fn, [item], deadline_s=deadline_s, context=context)[0]

    async def amap(self, fn, items, *, deadline_s: float, context: Factory | None = None):
        """asyncio form of `map`: the waiting happens in a thread, the event loop stays free."""
        import asyncio
        return await asyncio.get_running_loop().run_in_executor(
            None, lambda: self.map(fn, items, deadline_s=deadline_s, context=context))

    def _run_chunk(self, fn, context, items, deadline_s) -> list[Outcome]:
        results: list[Outcome | None] = [None] * len(items)
        pending = list(range(len(items)))
        while pending:
            worker = self._idle.get()
            pending = self._drive(worker, fn, context, items, pending, results, deadline_s)
        return results  # type: ignore[return-value]

    def _drive(self, w: _Worker, fn, context, items, pending, results, deadline_s) -> list[int]:
        """Send `pending` items to worker `w` and collect results until done or it must die.

        Returns the indices still unresolved (non-empty only after the worker was killed).
        """
        job_id = next(self._jobs)
        w.progress[0], w.progress[1] = _STARTING, 0.0
        try:
            w.conn.send((job_id, fn, context, [items[i] for i in pending]))
        except (OSError, ValueError, pickle.PicklingError, TypeError, AttributeError) as exc:
            if isinstance(exc, (OSError, ValueError)):   # broken pipe: the worker is gone
                self._replace(w)
                return pending
            self._idle.put(w)
            for i in pending:
                results[i] = Outcome("error", error=f"call could not be sent to a worker: {exc}")
            return []
        done = 0                                  # results received for this job so far
        wait = min(_MAX_WAIT_S, deadline_s)       # no item can be overdue before then
        while True:
            if w.conn.poll(wait):
                try:
                    jid, batch, finished = w.conn.recv()
                except (EOFError, OSError):
                    return self._worker_died(w, pending, done, results)
                for status, value, err, lat in batch:
                    results[pending[done]] = Outcome(status, value, err, lat)
                    done += 1
                if finished:
                    self._idle.put(w)
                    return []
                continue
            if not w.proc.is_alive():
                return self._worker_died(w, pending, done, results)
            idx, step, started = _read_progress(w.progress)
            limit = max(deadline_s, BUILD_DEADLINE_S) if idx == _BUILDING else deadline_s
            left = started + limit - time.monotonic()
            if idx == _STARTING or left > 0 \
                    or _read_progress(w.progress) != (idx, step, started):   # it moved on
                # Sleep until the running item's (or step's) deadline: results wake us sooner,
                # and a wake-up per result rather than per tick keeps this process idle.
                wait = min(_MAX_WAIT_S, max(_POLL_S, left))
                continue
            # Past the deadline: the item in progress times out (or, while the context is
            # being built, every pending item does); finished-but-unsent ones are redone.
            self._replace(w)
            if idx == _BUILDING:
                for i in pending[done:]:
                    results[i] = Outcome("timeout", error=f"building the context took longer "
                                         f"than {limit:g}s", latency_s=limit)
                return []
            stuck = pending[int(idx)]
            results[stuck] = Outcome("timeout", error=f"no result within {deadline_s:g}s; "
                                     "worker killed", latency_s=time.monotonic() - started,
                                     step=_step(step))
            return [i for i in pending[done:] if i != stuck]

    def _worker_died(self, w, pending, done, results) -> list[int]:
        """The worker exited mid-job: the item it was on is an error; the rest are redone."""
        idx, step = int(w.progress[0]), _step(w.progress[2])
        w.proc.join(timeout=1.0)          # EOF can arrive before the exit is reaped
        code = w.proc.exitcode
        self._replace(w)
        if idx == int(_STARTING):   # never picked the job up: the pool itself is broken
            for i in pending[done:]:
                results[i] = Outcome("infra_error", error=f"worker process exited (code {code}) "
                                     "before starting; see its stderr")
            return []
        if idx == int(_BUILDING):   # the context itself kills workers: retrying cannot help
            for i in pending[done:]:
                results[i] = Outcome("error", error=f"worker died (exit code {code}) while "
                                     "building the context")
            return []
        victim = pending[idx] if 0 <= idx < len(pending) else pending[done]
        results[victim] = Outcome("error", error=f"worker died (exit code {code}) on this call",
                                  step=step)
        return [i for i in pending[done:] if i != victim]


def _read_progress(progress) -> tuple[float, float, float]:
    """(item index, step, started), read in the reverse of the order the worker writes them
    (start time, then step), so a step is never judged by an earlier step's start time."""
    return progress[0], progress[2], progress[1]


def _step(value: float) -> int | None:
    return None if value == _NO_STEP else int(value)


# Workers are not daemonic (so they may start pools of their own), and multiprocessing joins
# non-daemonic children at exit: a pool nobody closed would hang the interpreter there. Close
# every live pool first (atexit runs this before multiprocessing's own hook, registered earlier).
_live_pools: "weakref.WeakSet[WorkerPool]" = weakref.WeakSet()


@atexit.register
def _close_live_pools() -> None:
    for pool in list(_live_pools):
        pool.close()


_default: WorkerPool | None = None
_default_lock = threading.Lock()


def default_pool() -> WorkerPool:
    """The process-wide pool (one per process, sized to the CPU count), started on first use."""
    global _default
    with _default_lock:
        if _default is None or _default._closed:
            _default = WorkerPool()
        return _default
