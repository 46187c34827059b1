"""Procedural arithmetic: integer expressions with +, - and *, scored by exact numeric match.

Seeded, with difficulty knobs, and train/test splits that cannot overlap: each expression is
assigned to a split by a hash of its text, and a generator only keeps the expressions that hash
into its own split. A task id (`arithmetic/<split>/<seed>/<index>`) regenerates the task, so
scoring rows need only the id.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from rlvr.core import Task
from rlvr.splits import hash_split
from rlvr.envs.registry import register_env
from rlvr.verifiers.format import ThinkFormat
from rlvr.verifiers.numeric import NumericMatch
from rlvr.verifiers.parser import ThinkParser

from .base import Environment, ProceduralSource, r1_base_prompt, r1_chat_prompt

__all__ = ["ArithmeticSource", "arithmetic"]

SPLITS = ("train", "test")


@dataclass(frozen=True)
class ArithmeticSource(ProceduralSource):
    """Expressions of `n_terms` integers in [0, max_value], joined by `ops`, optionally with one
    pair of parentheses. `test_fraction` of the expression space belongs to the test split."""
    n_terms: int = 3
    max_value: int = 20
    ops: str = "+-*"
    parentheses: bool = True
    test_fraction: float = 0.2
    prompt_style: str = "chat"
    splits: tuple = SPLITS
    prefix = "arithmetic"

    def __post_init__(self):
        if self.n_terms < 2:
            raise ValueError("n_terms must be at least 2")
        if self.max_value < 1:
            raise ValueError("max_value must be at least 1")
        if not self.ops or set(self.ops) - set("+-*"):
            raise ValueError(f"ops must be a non-empty subset of '+-*', got {self.ops!r}")
        if not 0.0 < self.test_fraction < 1.0:
            raise ValueError("test_fraction must be strictly between 0 and 1")
        if self.prompt_style not in ("chat", "base"):
            raise ValueError("prompt_style must be 'chat' or 'base'")

    def split_of(self, expr: str) -> str:
        return hash_split(expr, self.test_fraction)

    def _expression(self, rng: random.Random) -> str:
        nums = [str(rng.randint(0, self.max_value)) for _ in range(self.n_terms)]
        ops = [rng.choice(self.ops) for _ in range(self.n_terms - 1)]
        if self.parentheses and self.n_terms > 2 and rng.random() < 0.5:
            i = rng.randrange(self.n_terms - 1)
            nums[i], nums[i + 1] = "(" + nums[i], nums[i + 1] + ")"
        return "".join(n + (f" {o} " if k < len(ops) else "")
                       for k, (n, o) in enumerate(zip(nums, ops + [""])))

    def _make(self, split: str, seed: int, index: int) -> Task:
        # Each index draws from its own seeded stream until it lands in its split, so task
        # `index` is reproducible on its own, without generating the ones before it.
        rng = random.Random(f"{seed}/{split}/{index}")
        while True:
            expr = self._expression(rng)
            if self.split_of(expr) == split:
                break
        question = f"What is {expr}?"
        prompt = r1_chat_prompt(question) if self.prompt_style == "chat" else r1_base_prompt(question)
        return Task(id=f"arithmetic/{split}/{seed}/{index}", prompt=prompt,
                    answer=str(_evaluate(expr)), metadata={"question": question,
                                                         "expression": expr})


def _evaluate(expr: str) -> int:
    """Evaluate our own +,-,* expressions (generated here, never model text) without eval()."""
    tokens = expr.replace("(", " ( ").replace(")", " ) ").split()
    pos = 0

    def term() -> int:
        nonlocal pos
        value = atom()
        while pos < len(tokens) and tokens[pos] == "*":
            pos += 1
            value *= atom()
        return value

    def atom() -> int:
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if tok == "(":
            value = expression()
            pos += 1  # ')'
            return value
        return int(tok)

    def expression() -> int:
        nonlocal pos
        value = term()
        while pos < len(tokens) and tokens[pos] in "+-":
            op = tokens[pos]
            pos += 1
            value = value + term() if op == "+" else value - term()
        return value

    return expression()


@register_env("arithmetic")
def arithmetic(n_terms: int = 3, max_value: int = 20, ops: str = "+-*", parentheses: bool = True,
               test_fraction: float = 0.2, prompt_style: str = "chat",
               format_weight: float = 0.0) -> Environment:
    """Integer arithmetic in the R1 think/answer format.

    The answer reward is exact numeric match read from the answer span; `format_weight` adds the
    think-format reward (0 = logged only).

    >>> env = arithmetic(n_terms=2, max_value=9)
    >>> task = env.sample(1)[0]
    >>> env.reward.score(task, env.gold(task)).score
    1.0
    """
    source = ArithmeticSource(n_terms, max_value, ops, parentheses, test_fraction, prompt_style)
    parser = ThinkParser(prefilled=True if prompt_style == "base" else None)
    gold = ((lambda t: f" I compute it.</think> <answer>{t.answer}</answer>")
            if prompt_style == "base" else None)
    env = Environment(
        name="arithmetic", source=source, version="1", parser=parser,
        rewards=[(NumericMatch(parser), 1.0), (ThinkFormat(parser), format_weight)],
        description="Integer +,-,* expressions; exact numeric match on the answer span.")
    if gold:
        env.gold = gold
    return env
