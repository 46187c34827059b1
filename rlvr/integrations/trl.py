"""rlvr rewards as TRL reward functions, and rlvr environments as TRL datasets.

    from trl import GRPOConfig, GRPOTrainer
    from rlvr import load_env
    from rlvr.integrations.trl import reward_funcs, reward_weights, to_trl_dataset

    env = load_env("arithmetic", format_weight=0.1)
    trainer = GRPOTrainer(model=..., reward_funcs=reward_funcs(env),
                          args=GRPOConfig(..., reward_weights=reward_weights(env)),
                          train_dataset=to_trl_dataset(env, n=1000))

One TRL reward function per rlvr reward component, named after it, so TRL logs each component
and applies the environment's weights (a zero weight stays "logged, not trained on"). The whole
environment reward is computed once per batch -- in the worker pool under a hard deadline when
`deadline_s` is set -- and shared by the component functions. A sample whose verdict failed
(timeout, error, infra_error, gold_unparseable) gets `None`, which TRL leaves out.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from rlvr.core import Completion, Task, Verdict

__all__ = ["reward_funcs", "reward_weights", "to_trl_dataset"]

TASK_COLUMN = "rlvr_task"


def to_trl_dataset(env, split: str = "train", n: int | None = None, seed: int = 0):
    """A `datasets.Dataset` with TRL's `prompt` column and the task serialised beside it."""
    import datasets
    tasks = env.sample(n, split, seed) if n is not None else list(env.tasks(split, seed))
    return datasets.Dataset.from_list([
        {"prompt": t.prompt,
         TASK_COLUMN: json.dumps({"id": t.id, "answer": t.answer, "metadata": t.metadata},
                                 default=str)}
        for t in tasks])


def reward_weights(env) -> list[float]:
    """The environment's weights, in the order of `reward_funcs(env)` (for GRPOConfig)."""
    return [float(w) for _, w in env.rewards]


def reward_funcs(env, deadline_s: float | None = None) -> list[Callable]:
    """One TRL-signature callable per reward component of `env`."""
    scorer = _BatchScorer(env, deadline_s)
    return [_component_func(scorer, reward.name) for reward, _ in env.rewards]


def _component_func(scorer: "_BatchScorer", name: str) -> Callable:
    def func(prompts, completions, **kwargs) -> list[float | None]:
        verdicts = scorer.verdicts(prompts, completions, kwargs)
        return [None if v.failed else float(v.components.get(name, 0.0)) for v in verdicts]
    func.__name__ = name
    return func


class _BatchScorer:
    """Scores a batch once and serves it to every component function of that batch."""

    def __init__(self, env, deadline_s: float | None):
        self.env = env
        self.reward = env.reward
        if deadline_s is not None:
            from rlvr.pooled_reward import PooledReward
            self.reward = PooledReward(env.reward, deadline_s=deadline_s)
        self._key: tuple | None = None
        self._verdicts: list[Verdict] = []

    def verdicts(self, prompts, completions, columns: dict) -> list[Verdict]:
        texts = [_completion_text(c) for c in completions]
        tasks = [self._task(i, prompts, columns) for i in range(len(texts))]
        key = (tuple(texts), tuple(t.id for t in tasks))
        if key != self._key:
            self._verdicts = self.reward.score_batch(tasks, [Completion(t) for t in texts])
            self._key = key
        return self._verdicts

    def _task(self, i: int, prompts, columns: dict) -> Task:
        if TASK_COLUMN in columns:
            d = json.loads(columns[TASK_COLUMN][i])
            return Task(d["id"], prompts[i], d["answer"], d["metadata"])
        row = {k: v[i] for k, v in columns.items() if isinstance(v, list) and len(v) > i}
        return self.env.task_from_row(row)


def _completion_text(completion: Any) -> str:
    """TRL passes plain strings, or (conversational) a list of messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    raise TypeError(f"unexpected completion type {type(completion).__name__}")
