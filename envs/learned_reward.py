"""The `reward-model` environment: a learned reward, alone or weighted with a verifier.

    rlvr score --env reward-model --env-arg path=rm/ --workers 0 rows.jsonl -o scored.jsonl
    rlvr score --workers 0 --env reward-model --env-arg path=rm/ --env-arg base_env=arithmetic \\
        --env-arg verifier_weight=1.0 --env-arg weight=0.5 rows.jsonl -o scored.jsonl

With `base_env`, tasks (and so prompts, gold answers and task ids) come from that environment
and its rewards stay in the mix with their weights scaled by `verifier_weight` (0 = logged
only): every component's score is in `Verdict.components`. Without one, the environment scores
rows that carry their own `prompt` and `completion` (`rlvr score --reward-model RM rows.jsonl`);
an `id` is kept as the row's name and an `answer` is optional (the reward model ignores it).
"""
from __future__ import annotations

from typing import Mapping

from rlvr.core import Task
from rlvr.envs.registry import load_env, register_env
from rlvr.verifiers.reward_model import RewardModel

from .base import Environment, RowSource, rescored

__all__ = ["reward_model_env"]

# Prompts for the registry's smoke check when no base environment supplies tasks.
_SMOKE_PROMPTS = ("What is 2 + 3?", "Name a prime number larger than 10.")


class _OwnPromptRows(RowSource):
    """Without a base environment there are no stored tasks: rows bring their own prompt."""

    def get(self, task_id: str) -> Task:
        raise KeyError(f"the reward-model environment has no task {task_id!r} to look up: give "
                       "each row its own 'prompt', or pass base_env=NAME to take tasks from NAME")


class _OwnPromptEnvironment(Environment):
    """A scoring row is its own task: its `prompt`, its id as a name (there is no stored task
    to look it up in), its `answer` if any. Rows without a prompt fall back to the id lookup,
    whose error says what to add."""

    def task_from_row(self, row: Mapping, id_field: str = "id",
                      answer_field: str = "answer") -> Task:
        if row.get("prompt") is None:
            return super().task_from_row(row, id_field, answer_field)
        extra = {k: v for k, v in row.items() if k not in (id_field, answer_field, "prompt")}
        name = row.get(id_field)
        return Task(id="" if name is None else str(name), prompt=row["prompt"],
                    answer=row.get(answer_field), metadata=extra)


@register_env("reward-model")
def reward_model_env(path: str, base_env: str | None = None, base_env_args: dict | None = None,
                     weight: float = 1.0, verifier_weight: float = 0.0, name: str = "reward_model",
                     **reward_model_args) -> Environment:
    """A learned reward model (`RewardModel(path, **reward_model_args)`) as an environment.

    `weight` is the reward model's weight; `base_env`'s own rewards join with their weights
    times `verifier_weight`. Keyword arguments not named here go to `RewardModelConfig`
    (`normalize`, `batch_size`, `max_length`, `device`, `kind`...).

    >>> env = reward_model_env("rm/", base_env="arithmetic", verifier_weight=1.0,
    ...                        weight=0.5)                                  # doctest: +SKIP
    >>> env.reward.score(task, completion).components                       # doctest: +SKIP
    {'reward_model': 0.83, 'numeric_match': 1.0, 'think_format': 1.0}
    """
    rm = RewardModel(path, name=name, **reward_model_args)
    if base_env is None:
        source = _OwnPromptRows({"train": [Task(f"smoke/{i}", prompt=p, answer="")
                                           for i, p in enumerate(_SMOKE_PROMPTS)]})
        return _OwnPromptEnvironment(
            name="reward-model", source=source, rewards=[(rm, weight)], version=rm.version,
            description=f"learned reward model {path} ({rm.model.kind})")
    base = load_env(base_env, check=False, **(base_env_args or {}))
    return rescored(base, rm, weight, verifier_weight, f"Plus learned reward model {path}.")
