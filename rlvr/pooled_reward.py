"""PooledReward: any Reward, run in the worker pool under a hard per-call deadline.

This is how CPU-heavy or untrusted verification is called from the trainer and from `rlvr score`:
the reward runs in a worker process, and a call that hangs becomes a `timeout` verdict while the
pool replaces the worker and keeps serving. (An environment's reward rebuilt by name in each
worker: `rlvr.envs.registry.pooled_env_reward`.)
"""
from __future__ import annotations

from typing import Sequence

from .core import ERROR, INFRA_ERROR, TIMEOUT, BaseReward, Completion, Task, Verdict, as_completion
from .pool import Factory, WorkerPool, default_pool

__all__ = ["PooledReward", "derive_deadline", "DEADLINE_FLOOR_S"]

DEADLINE_FLOOR_S = 10.0
"""The shortest outer deadline: generous for rewards that declare under a second."""


def derive_deadline(reward, requested: float | None = None) -> float:
    """The outer (pool) deadline for one verification by `reward`.

    Whoever caused a failure owns the verdict: a program that stalls must be stopped by its own
    sandbox limit and scored 0, never reach this deadline and become an unscored `timeout`. So the
    deadline is derived from the reward's declared `max_verify_s` with margin (start-up, clean-up,
    a loaded machine); a requested deadline that does not exceed the declared time is refused
    rather than obeyed (it would turn the program's own limit into the verifier's timeout)."""
    declared = getattr(reward, "max_verify_s", BaseReward.max_verify_s)
    if requested is None:
        return max(DEADLINE_FLOOR_S, 1.5 * declared + 5.0)
    if requested <= declared:
        raise ValueError(f"a deadline of {requested:g} s would undercut the reward's own limits "
                         f"({getattr(reward, 'name', 'reward')} may take up to {declared:g} s); "
                         f"use more than that, or leave it unset to get "
                         f"{max(DEADLINE_FLOOR_S, 1.5 * declared + 5.0):g} s")
    return requested


def _score_pair(reward, pair) -> Verdict:
    task, completion = pair
    return reward.score(task, completion)


class PooledReward(BaseReward):
    """Wrap a reward (a picklable object, or a Factory that builds it in the worker).

    >>> from rlvr.verifiers import NumericMatch
    >>> r = PooledReward(NumericMatch(), deadline_s=5)                     # doctest: +SKIP
    >>> r.score(Task("t", answer="4"), "<answer>4</answer>").score         # doctest: +SKIP
    1.0
    """

    def __init__(self, reward, *, deadline_s: float = 10.0, pool: WorkerPool | None = None,
                 name: str | None = None, version: str | None = None,
                 required: set[str] | None = None):
        self.factory = reward if isinstance(reward, Factory) else Factory.of(reward)
        self.deadline_s = deadline_s
        self._pool = pool
        self.name = name or getattr(reward, "name", "pooled")
        self.version = version or getattr(reward, "version", "1")
        if required is None:
            required = reward.required_fields() if hasattr(reward, "required_fields") else set()
        self._required = set(required)
        self.learned = getattr(reward, "learned", False)   # the registry's contract reads it
        self.max_verify_s = getattr(reward, "max_verify_s", BaseReward.max_verify_s)

    @property
    def pool(self) -> WorkerPool:
        return self._pool or default_pool()

    def required_fields(self) -> set[str]:
        return set(self._required)

    def score(self, task: Task, completion: Completion | str) -> Verdict:
        return self.score_batch([task], [completion])[0]

    def score_batch(self, tasks: Sequence[Task], completions: Sequence) -> list[Verdict]:
        if len(tasks) != len(completions):
            raise ValueError(f"{len(tasks)} tasks but {len(completions)} completions")
        pairs = [(t, as_completion(c)) for t, c in zip(tasks, completions)]
        try:
            outcomes = self.pool.map(_score_pair, pairs, deadline_s=self.deadline_s,
                                     context=self.factory)
        except (RuntimeError, OSError) as exc:   # no pool to run on: the service is down
            reason = f"worker pool unavailable: {type(exc).__name__}: {exc}"
            return [Verdict(0.0, INFRA_ERROR, reason=reason) for _ in pairs]
        return [outcome_to_verdict(o, self.deadline_s) for o in outcomes]


def outcome_to_verdict(o, deadline_s: float) -> Verdict:
    """A pool Outcome -> a Verdict: timeouts and worker failures become counted statuses."""
    if o.status == "ok":
        return o.value
    if o.status == "timeout":
        return Verdict(0.0, TIMEOUT, reason=f"no verdict within {deadline_s:g}s ({o.error})",
                       latency_s=o.latency_s)
    status = INFRA_ERROR if o.status == "infra_error" else ERROR
    return Verdict(0.0, status, reason=o.error, latency_s=o.latency_s)
