"""Sampling ahead of the update: a pipeline with bounded staleness (`async_steps = k`).

The synchronous loop samples a batch with the current policy, then updates, in turn: the
sampler waits for every update and the update for every rollout. The pipeline lets the
sampler work on the batches of the next k steps while the trainer updates on this one:

    version v  = updates applied to the weights a sampler holds (the trainer's step count)
    step j     trains the policy at version j - 1 on the rollout planned for step j
    request j  is handed to the sampler only once it holds version >= j - 1 - k
    staleness  = (j - 1) - v, so at most k by construction; a rollout found older (a sampler
                 that lost its weights) is dropped, counted, and sampled again

Weights reach the sampler every `sync_every` steps exactly as in the synchronous loop (the
engine's `sync_weights`: a disk reload for a server, shared memory for the local engine in its
own process), so `sync_every <= k + 1` keeps the sampler from waiting on weights it will never
get. Samples carry the sampler's log-prob of each token, and the update corrects for the gap
between the sampler's version and its own (trainer/objective/importance.py): off-policy
correction as in IMPALA (Espeholt et al. 2018) and the one-step off-policy RLHF of Noukhovitch
et al. 2024 ("Asynchronous RLHF"); bounded staleness as in AReaL (Fu et al. 2025).

One worker thread runs the engine's requests in order, the trainer's thread plans them (prompts,
seeds: the same as the synchronous loop gives the same step) and takes them back, scored there.
With k = 0 the pipeline is the synchronous loop run through this machinery (a test proves the
two equal to the bit).
"""
from __future__ import annotations

import contextlib
import queue
import threading
import time
import itertools
from dataclasses import dataclass

__all__ = ["Pipeline", "Planned", "check_settings"]


def check_settings(cfg) -> None:
    """Refuse pipeline settings that cannot work, naming the fix (ValueError: exit 2)."""
    k = cfg.async_steps
    if cfg.partial_rollouts:
        refusal = ("async_steps >= 1 (nothing interrupts a generation in the synchronous loop)"
                   if k < 1 else
                   "rollout_engine='hf': its sampler process swaps weights between tokens; a "
                   "server finishes each request on the weights it started with"
                   if cfg.rollout_engine != "hf" else
                   "the shared-prefix sampler, which records each token's version: set "
                   "share_prefix=true" if cfg.share_prefix == "false" else "")
        if refusal:
            raise ValueError(f"partial_rollouts needs {refusal}")
    if k < 0:
        raise ValueError(f"async_steps must be >= 0, got {k}")
    if k == 0:
        return
    why = {"vllm": cfg.rollout_engine == "vllm" and "colocated vLLM shares the trainer's process "
                   "and GPU: use rollout_engine='server' (a vLLM server) or 'hf'",
           "dynamic": cfg.dynamic_sampling and "dynamic_sampling refills a step from the "
                      "policy of that step: set dynamic_sampling=false",
           "lora": cfg.lora_rank and cfg.rollout_engine == "hf" and "the sampler process "
                   "loads whole models: use full fine-tuning",
           "fsdp": cfg.parallel == "fsdp" and "FSDP shards the policy the sampler would copy: "
                   "use parallel='replicate'",
           "sync": cfg.sync_every > k + 1 and f"sync_every={cfg.sync_every} would leave the "
                   f"sampler waiting for weights more than k={k} versions old: set sync_every "
                   f"<= {k + 1}"}
    for reason in why.values():
        if reason:
            raise ValueError(f"async_steps={k}: {reason}")


@dataclass
class Planned:
    """One step's request: its prompts and seeds, and the data cursor before them."""
    step: int
    tasks: list
    seeds: list[int]
    cursor: int
    attempts: int = 0


@dataclass
class _Done:
    step: int
    rollout: object = None
    seconds: float = 0.0
    error: BaseException | None = None


def _partial_metrics(rollout, done: int) -> dict:
    """Partial rollouts: the share of rows whose tokens came from more than one version, and the
    mean staleness per token."""
    per_token = rollout.token_versions
    if per_token is None:
        return {}
    tokens = [done - v for row in per_token for v in row]
    return {"async/partial_frac": sum(len(set(row)) > 1 for row in per_token) / len(per_token),
            "async/token_staleness_mean": sum(tokens) / max(len(tokens), 1)}


class Pipeline:
    """The sampler `k` versions ahead. `next_rollout(done)` blocks for step done + 1's rollout
    (unscored, `versions` set); `synced(done)` after each step's update and weight sync."""

    def __init__(self, engine, depth: int, sync_every: int, start: int, steps: int, plan,
                 sample, context=contextlib.nullcontext):
        self.engine, self.depth, self.sync_every = engine, depth, sync_every
        self.start, self.steps = start, steps
        self.plan, self.sample, self.context = plan, sample, context
        self.version = start                  # what the sampler may hold at least
        self.next_step = start + 1            # the next request to plan
        self.planned: dict[int, Planned] = {}
        self.requests: queue.PriorityQueue = queue.PriorityQueue()
        self.results: queue.Queue = queue.Queue()
        self.arrived: dict[int, _Done] = {}
        self.dropped_stale, self.order = 0, itertools.count()
        self.lock = threading.Lock()
        self.worker = threading.Thread(target=self._work, name="rlvr-sampler-pipeline",
                                       daemon=True)
        self.worker.start()

    # --- the worker thread ---------------------------------------------------------------
    def _work(self) -> None:
        while True:
            _, step, _, req = self.requests.get()
            if req is None:
                return
            with self.lock:
                floor = self.version
            t0 = time.perf_counter()
            try:
                with self.context():
                    rollout = self.sample(self.engine, req)
                if rollout.versions is None:     # an engine that cannot say: the floor
                    rollout.versions = [floor] * len(rollout)
                self.results.put(_Done(step, rollout, time.perf_counter() - t0))
            except BaseException as exc:         # raised in the trainer's thread
                self.results.put(_Done(step, error=exc))

    # --- the trainer's thread ------------------------------------------------------------
    def _submit(self) -> None:
        """Hand the sampler every step it may start: j - 1 - k <= the version it holds."""
        while self.next_step <= self.steps and self.next_step - 1 - self.depth <= self.version:
            req = self.plan(self.next_step)
            self.planned[req.step] = req
            self.requests.put((1, req.step, next(self.order), req))
            self.next_step += 1

    def next_rollout(self, done: int) -> tuple[object, dict]:
        """Step done + 1's rollout, trained at version `done`, and the pipeline's metrics."""
        step, t0 = done + 1, time.perf_counter()
        self._submit()
        while True:
            while step not in self.arrived:
                item = self.results.get()
                self.arrived[item.step] = item
            item = self.arrived.pop(step)
            if item.error is not None:
                raise item.error
            staleness = [done - v for v in item.rollout.versions]
            if max(staleness) <= self.depth:
                break
            self.dropped_stale += len(staleness)     # never trained on: resample
            req = self.planned[step]
            req.attempts += 1
            self.requests.put((0, step, next(self.order), req))
        self.planned.pop(step, None)
        waited = time.perf_counter() - t0
        return item.rollout, {**_partial_metrics(item.rollout, done),"async/staleness_max": max(staleness),
                              "async/staleness_mean": sum(staleness) / len(staleness),
                              "async/dropped_stale": self.dropped_stale,
                              "async/wait_s": waited,
                              "timing/generate_s": item.seconds}

    def synced(self, done: int) -> None:
        """After step `done`'s update: the engine got the weights if a sync was due."""
        if (done - self.start) % self.sync_every == 0:
            with self.lock:
                self.version = done
        self._submit()

    def cursor(self, stream_cursor: int, done: int) -> int:
        """The data cursor a checkpoint after step `done` keeps: before the first step not
        trained yet (planned rollouts are sampled again on resume, nothing is lost)."""
        req = self.planned.get(done + 1)
        return req.cursor if req is not None else stream_cursor

    def stop(self) -> None:
        """Forget the requests not started; the worker ends after the one in hand."""
        while True:
            try:
                self.requests.get_nowait()
            except queue.Empty:
                break
        self.requests.put((2, 0, next(self.order), None))

    def join(self, timeout: float = 60) -> None:
        self.worker.join(timeout)
