"""`think-format`: the R1-Zero format itself as a reward, alone (short questions, only the
format scored) or added at a low weight to another environment (`base=arithmetic`).

The reward is `rlvr.verifiers.format.R1Format`; `with_format_reward` adds it to any Environment.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Mapping

from rlvr.core import Task
from rlvr.envs.registry import load_env, register_env
from rlvr.verifiers.format import R1Format
from rlvr.verifiers.parser import ThinkParser

from .base import (Environment, ProceduralSource, r1_base_prompt, r1_chat_prompt,
                   think_answer_gold)
from .common import SPLITS, split_of

__all__ = ["QuestionSource", "FormatOnlyEnvironment", "with_format_reward", "think_format",
           "R1Format"]

NAMES = ["river", "planet", "garden", "silver", "window", "orange", "thunder", "pencil"]


@dataclass(frozen=True)
class QuestionSource(ProceduralSource):
    """Short questions with known answers; only the format is scored."""
    prefix = "think-format"
    prompt_style: str = "chat"
    test_fraction: float = 0.2
    splits: tuple = SPLITS

    def _make(self, split: str, seed: int, index: int) -> Task:
        rng = random.Random(f"think-format/{seed}/{split}/{index}")
        while True:
            a, b, word = rng.randint(2, 99), rng.randint(2, 99), rng.choice(NAMES)
            question, answer = rng.choice([
                (f"What is {a} + {b}?", a + b),
                (f"Spell the word '{word}' backwards.", word[::-1]),
                (f"How many letters are in the word '{word}'?", len(word)),
                (f"Which is larger: {a} or {b}?", max(a, b))])
            if split_of(question, self.test_fraction) == split:
                break
        prompt = r1_chat_prompt(question) if self.prompt_style == "chat" \
            else r1_base_prompt(question)
        return Task(id=f"think-format/{split}/{seed}/{index}", prompt=prompt,
                    answer=str(answer), metadata={"question": question})


class FormatOnlyEnvironment(Environment):
    """Format needs no gold: a row whose id is not a generated task is scored as it stands."""

    def task_from_row(self, row: Mapping, id_field: str = "id",
                      answer_field: str = "answer") -> Task:
        try:
            return super().task_from_row(row, id_field, answer_field)
        except KeyError:
            return Task(id=str(row.get(id_field, "")), prompt=row.get("prompt", ""))


def with_format_reward(env: Environment, weight: float = 0.2, rescale: bool = True,
                       reward=None) -> Environment:
    """`env` plus the R1 format reward at `weight` (0 = logged only). With `rescale` the
    existing weights are multiplied by 1 - weight, so a perfect answer still scores 1.0."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight must be in [0, 1], got {weight}")
    scale = 1.0 - weight if rescale else 1.0
    fmt = reward or R1Format(env.parser)
    if fmt.name in {r.name for r, _ in env.rewards}:
        raise ValueError(f"environment {env.name!r} already has a {fmt.name!r} reward")
    rewards = [(r, w * scale) for r, w in env.rewards] + [(fmt, weight)]
    return type(env)(name=env.name, source=env.source, rewards=rewards,
                     version=f"{env.version}+{fmt.name}@{weight:g}", parser=env.parser,
                     gold=env.gold, description=f"{env.description} (+ {fmt.name} x{weight:g})")


@register_env("think-format")
def think_format(base: str | None = None, weight: float = 0.2, base_args: dict | None = None,
                 prompt_style: str = "chat", test_fraction: float = 0.2) -> Environment:
    """The R1-Zero format as a reward: alone (short questions, only the format scored), or with
    `base=<env name>` added to that environment at `weight` (its own weights scaled by
    1 - weight).

    >>> env = think_format()
    >>> task = env.sample(1)[0]
    >>> env.reward.score(task, env.gold(task)).score
    1.0
    >>> think_format(base="arithmetic", weight=0.2).describe()["rewards"]
    {'numeric_match': 0.8, 'think_format': 0.0, 'r1_format': 0.2}
    """
    if base is not None:
        return with_format_reward(load_env(base, check=False, **(base_args or {})), weight)
    if prompt_style not in ("chat", "base"):
        raise ValueError("prompt_style must be 'chat' or 'base'")
    parser = ThinkParser(prefilled=True if prompt_style == "base" else None)
    env = FormatOnlyEnvironment(
        name="think-format", source=QuestionSource(prompt_style, test_fraction), version="1",
        parser=parser, rewards=[(R1Format(parser), 1.0)],
        description="<think>...</think><answer>...</answer>, answer non-empty, nothing after.")
    if prompt_style == "base":
        env.gold = lambda t: f" I think it over.</think> <answer>{t.answer}</answer>"
    else:
        env.gold = lambda t: think_answer_gold(t.answer)
    return env
