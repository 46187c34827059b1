"""PooledReward: any Reward, run in the worker pool under a hard per-call deadline.

This is how CPU-heavy or untrusted verification is called from the trainer and from `rlvr score`:
the reward runs in a worker process, and a call that hangs becomes a `timeout` verdict while the
pool replaces the worker and keeps serving.
"""
from __future__ import annotations

from typing import Sequence

from .core import ERROR, INFRA_ERROR, TIMEOUT, BaseReward, Completion, Task, Verdict, as_completion
from .pool import Factory, WorkerPool, default_pool

__all__ = ["PooledReward"]


def _env_reward(name: str, env_args: dict, module: str | None):
    from .registry import env_reward
    return env_reward(name, env_args, module).reward


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
                 name: str | None = None, version: str | None = None):
        self.factory = reward if isinstance(reward, Factory) else Factory.of(reward)
        self.deadline_s = deadline_s
        self._pool = pool
        self.name = name or getattr(reward, "name", "pooled")
        self.version = version or getattr(reward, "version", "1")
        self._required = (reward.required_fields() if hasattr(reward, "required_fields")
                          else set())
        self.learned = getattr(reward, "learned", False)   # the registry's contract reads it

    @classmethod
    def for_env(cls, env, *, deadline_s: float = 10.0, env_args: dict | None = None,
                pool: WorkerPool | None = None, registered_as: str | None = None
                ) -> "PooledReward":
        """The reward of registered environment `env` (an Environment or its name), rebuilt
        inside each worker by name -- so it works even when the environment can't be pickled.
        `registered_as` is the registry name when it differs from `env.name`."""
        from .registry import _entry
        name = registered_as or (env if isinstance(env, str) else env.name)
        factory = Factory(_env_reward, {"name": name, "env_args": env_args or {},
                                        "module": _entry(name).module})
        reward = None if isinstance(env, str) else env.reward
        out = cls(factory, deadline_s=deadline_s, pool=pool, name=name,
                  version=reward.version if reward else "1")
        out._required = reward.required_fields() if reward else set()
        return out

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
