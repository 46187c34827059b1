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

__all__ = ["ArithmeticSource", "arithmetic", "arithmetic_trace", "worked_steps"]

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


def _tree(expr: str):
    """Parse our own +,-,* expressions (generated here, never model text) into an int or an
    (op, left, right) tree, respecting precedence and parentheses; no eval()."""
    tokens = expr.replace("(", " ( ").replace(")", " ) ").split()
    pos = 0

    def term():
        nonlocal pos
        node = atom()
        while pos < len(tokens) and tokens[pos] == "*":
            pos += 1
            node = ("*", node, atom())
        return node

    def atom():
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if tok == "(":
            node = expression()
            pos += 1  # ')'
            return node
        return int(tok)

    def expression():
        nonlocal pos
        node = term()
        while pos < len(tokens) and tokens[pos] in "+-":
            op = tokens[pos]
            pos += 1
            node = (op, node, term())
        return node

    return expression()


_APPLY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def _evaluate(expr: str) -> int:
    def value(node) -> int:
        return node if isinstance(node, int) else _APPLY[node[0]](value(node[1]), value(node[2]))
    return value(_tree(expr))


# --------------------------------------------------------------------------- the teacher
# Worked solutions the way a pupil writes them: column addition with carries, column
# subtraction with borrows, long multiplication (one partial product per digit, then their sum).
# Short on purpose: they are training data for small students with ~100-200 token budgets.

_PLACES = ("ones", "tens", "hundreds", "thousands")


def _place(i: int) -> str:
    return _PLACES[i] if i < len(_PLACES) else f"10^{i}"


def _digits(x: int) -> list[int]:
    """Digits of x >= 0, ones first."""
    return [int(d) for d in reversed(str(x))]


def _column_add(a: int, b: int) -> list[str]:
    """a + b for a, b >= 0, column by column with carries."""
    if a < 10 and b < 10:
        return [f"{a} + {b} = {a + b}."]
    da, db = _digits(a), _digits(b)
    steps, carry = [], 0
    for i in range(max(len(da), len(db))):
        x, y = (da[i] if i < len(da) else 0), (db[i] if i < len(db) else 0)
        total = x + y + carry
        terms = f"{x}+{y}" + ("+1" if carry else "")
        carry = total // 10
        steps.append(f"{_place(i)}: {terms} = {total}, write {total % 10}"
                     + (" carry 1." if carry else "."))
    if carry:
        steps.append(f"{_place(len(steps))}: write the carry 1.")
    return steps + [f"{a} + {b} = {a + b}."]


def _column_subtract(a: int, b: int) -> list[str]:
    """a - b for a >= b >= 0, column by column with borrows."""
    if a < 10:
        return [f"{a} - {b} = {a - b}."]
    da, db = _digits(a), _digits(b)
    steps, borrow = [], 0
    for i, x in enumerate(da):
        y = db[i] if i < len(db) else 0
        top = f"{x}-1" if borrow else f"{x}"
        if x - borrow < y:
            steps.append(f"{_place(i)}: {top}-{y} needs a borrow, {x + 10}"
                         f"{'-1' if borrow else ''}-{y} = {x - borrow + 10 - y}.")
            borrow = 1
        else:
            steps.append(f"{_place(i)}: {top}-{y} = {x - borrow - y}.")
            borrow = 0
    return steps + [f"{a} - {b} = {a - b}."]


def _long_multiply(a: int, b: int) -> list[str]:
    """a * b for a, b >= 0: the factor with fewer non-zero digits is split by place value
    (the second on a tie), one partial product per non-zero digit, then their running sum."""
    if a < 10 or b < 10 or a % 10 == 0 and a < 100 or b % 10 == 0 and b < 100:
        return [f"{a}*{b} = {a * b}."]
    nonzero = lambda x: sum(d != 0 for d in _digits(x))
    top, split = (b, a) if nonzero(a) < nonzero(b) else (a, b)
    partials = [d * 10 ** i for i, d in enumerate(_digits(split)) if d]
    steps = [f"{top}*{p} = {top * p}." for p in partials]
    total = top * partials[0]
    for p in partials[1:]:
        steps.append(f"{total} + {top * p} = {total + top * p}.")
        total += top * p
    return steps


def _operand(x: int) -> str:
    return f"({x})" if x < 0 else str(x)


def _step(op: str, a: int, b: int) -> list[str]:
    """The worked lines of `a op b` for any signs: the digits are worked on magnitudes, and a
    last line states the signed result when it differs from the magnitudes' line."""
    result = _APPLY[op](a, b)
    if op == "*":
        steps = _long_multiply(abs(a), abs(b))
    else:
        y = b if op == "+" else -b                  # a - b = a + (-b)
        if (a >= 0) == (y >= 0):
            steps = _column_add(abs(a), abs(y))
        else:
            big, small = max(abs(a), abs(y)), min(abs(a), abs(y))
            steps = _column_subtract(big, small)
    plain = f"{a}{op}{b} = {result}." if op == "*" else f"{a} {op} {b} = {result}."
    if a < 0 or b < 0 or steps[-1] != plain:
        sep = "*" if op == "*" else f" {op} "
        signed = f"{_operand(a) if a < 0 else a}{sep}{_operand(b)} = {result}."
        if signed != steps[-1]:
            steps.append(f"So {signed}")
    return steps


def worked_steps(expr: str) -> tuple[list[str], int]:
    """The lines that evaluate `expr` one operation at a time (innermost, then left to right
    by precedence) and its value.

    >>> worked_steps("47 * 36")
    (['47*6 = 282.', '47*30 = 1410.', '282 + 1410 = 1692.', 'So 47*36 = 1692.'], 1692)
    """
    steps: list[str] = []

    def walk(node) -> int:
        if isinstance(node, int):
            return node
        a, b = walk(node[1]), walk(node[2])
        steps.extend(_step(node[0], a, b))
        return _APPLY[node[0]](a, b)

    return steps, walk(_tree(expr))


def arithmetic_trace(task: Task) -> str:
    """A worked solution of an arithmetic task that earns full reward: the steps in the think
    block, the value in <answer> tags (after the prefilled `<think>` for base prompts)."""
    steps, value = worked_steps(task.metadata["expression"])
    if str(value) != str(task.answer):
        raise ValueError(f"{task.id}: worked value {value} != gold {task.answer}")
    body = f"{' '.join(steps)}</think> <answer>{value}</answer>"
    return f" {body}" if isinstance(task.prompt, str) else f"<think>{body}"


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
        description="Integer +,-,* expressions; exact numeric match on the answer span.",
        teacher=arithmetic_trace)
    if gold:
        env.gold = gold
    return env
