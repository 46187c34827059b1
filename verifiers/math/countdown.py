r"""Countdown: reach a target with the given numbers and + - * / -- checked without `eval`.

The expression is read with a small recursive-descent parser over exact fractions. Why our own
and not `ast.literal_eval`/sympy: the grammar is four operators, parentheses and integers, every
other token (names, `**`, `^`, unary signs, decimals) must be *refused* rather than understood,
and the numbers used must be checked against the given multiset before anything is evaluated,
which bounds the work by the task itself.
"""
from __future__ import annotations

import re
from collections import Counter
from fractions import Fraction

from rlvr.core import UNPARSED, BaseReward, Verdict

from ..parser import ThinkParser
from .extract import find_final

__all__ = ["CountdownReward", "parse_expression", "ExpressionError"]

MAX_TOKENS = 200
MAX_DEPTH = 32
_TOKEN = re.compile(r"\s*(\d+|[-+*/()])")
_SYMBOLS = [("\\times", "*"), ("\\cdot", "*"), ("×", "*"), ("·", "*"), ("\\div", "/"),
            ("÷", "/"), ("−", "-"), ("–", "-"), ("\\left", ""), ("\\right", ""),
            ("\\(", ""), ("\\)", ""), ("$", ""), ("\\[", ""), ("\\]", ""), ("{", "("),
            ("}", ")")]


class ExpressionError(ValueError):
    """The text is not an expression of integers with + - * / and parentheses."""


def _tokens(text: str) -> list[str]:
    if "**" in text or "^" in text:
        raise ExpressionError("exponentiation is not allowed")
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ExpressionError(f"unexpected {text[pos:pos + 10].strip()!r}")
        out.append(m.group(1))
        pos = m.end()
        if len(out) > MAX_TOKENS:
            raise ExpressionError(f"more than {MAX_TOKENS} tokens")
    if not out:
        raise ExpressionError("empty expression")
    return out


def parse_expression(text: str) -> tuple[list[int], "callable"]:
    """Parse `text`; return the integers it uses and a thunk that evaluates it exactly.

    >>> nums, value = parse_expression("(25 - 5) * 3 / 4")
    >>> nums, value()
    ([25, 5, 3, 4], Fraction(15, 1))
    """
    tokens = _tokens(text)
    pos = 0
    numbers: list[int] = []

    def peek():
        return tokens[pos] if pos < len(tokens) else None

    def expr(depth):
        node = term(depth)
        while peek() in ("+", "-"):
            op = take()
            node = (op, node, term(depth))
        return node

    def term(depth):
        node = atom(depth)
        while peek() in ("*", "/"):
            op = take()
            node = (op, node, atom(depth))
        return node

    def atom(depth):
        tok = take()
        if tok == "(":
            if depth >= MAX_DEPTH:
                raise ExpressionError(f"parentheses nested deeper than {MAX_DEPTH}")
            node = expr(depth + 1)
            if take() != ")":
                raise ExpressionError("unbalanced parentheses")
            return node
        if tok is not None and tok.isdigit():
            numbers.append(int(tok))
            return int(tok)
        raise ExpressionError("a sign without a number before it (unary +/- is not allowed)"
                              if tok in ("+", "-") else f"unexpected {tok!r}")

    def take():
        nonlocal pos
        tok = peek()
        pos += 1
        return tok

    tree = expr(0)
    if pos != len(tokens):
        raise ExpressionError(f"unexpected {tokens[pos]!r}")
    return numbers, lambda: _evaluate(tree)


def _evaluate(node) -> Fraction:
    if isinstance(node, int):
        return Fraction(node)
    op, a, b = node
    x, y = _evaluate(a), _evaluate(b)
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if y == 0:
        raise ZeroDivisionError("division by zero")
    return x / y


_ALTERNATIVES = re.compile(r"\s(?:or|oder|ou|или)\s", re.I)   # the reader joins a hedge so


def _expression_text(answer: str) -> str:
    """The expression part of an answer: `(1+2)*3 = 9` -> `(1+2)*3`."""
    for a, b in _SYMBOLS:
        answer = answer.replace(a, b)
    answer = answer.strip().rstrip(".")
    return answer.split("=")[0] if "=" in answer else answer


class CountdownReward(BaseReward):
    """1.0 when the answer is an expression over the task's numbers (each at most once, or
    exactly once with `use_all=True`) with + - * / that equals the target (`task.answer`).

    >>> from rlvr import Task
    >>> t = Task("c", answer=24, metadata={"numbers": [4, 6, 1]})
    >>> CountdownReward().score(t, "<think>4*6</think> <answer>4 * 6 * 1</answer>").score
    1.0
    >>> CountdownReward().score(t, "<answer>4 * 6 * 1 * 1</answer>").reason
    'uses 1 more often than given'
    """
    name, version = "countdown", "3"

    def __init__(self, parser: ThinkParser | None = None, use_all: bool = False):
        self.parser = parser or ThinkParser()
        self.use_all = use_all

    def required_fields(self) -> set[str]:
        return {"numbers"}

    def _score(self, task, completion):
        numbers = [int(n) for n in task.metadata["numbers"]]
        target = Fraction(str(task.answer))
        parsed = self.parser.parse(completion.text)
        if not parsed.answer:
            why = "think block never closed" if parsed.think_present else "empty completion"
            return Verdict(0.0, UNPARSED, reason=why)
        found = find_final(parsed.answer)
        if found is None or not found.parts:
            why = found.refused if found else ""
            return Verdict(0.0, UNPARSED, reason=why or "no answer expression found")
        if found.source == "last_value" and completion.finish_reason == "length":
            return Verdict(0.0, UNPARSED, reason="cut at the length limit before stating an "
                                                 "answer (no tag, box or answer statement)")
        if len(found.parts) > 1 or _ALTERNATIVES.search(found.parts[0]):
            return Verdict(0.0, extracted=found.text, reason="several different answers")
        text = _expression_text(found.parts[0])
        try:
            used, value = parse_expression(text)
        except ExpressionError as exc:
            return Verdict(0.0, UNPARSED, extracted=text, reason=str(exc))
        extra = Counter(used) - Counter(numbers)
        if extra:
            n = next(iter(extra))
            return Verdict(0.0, extracted=text,
                           reason=f"uses {n} more often than given" if n in numbers
                           else f"uses {n}, which is not one of {numbers}")
        if self.use_all and Counter(used) != Counter(numbers):
            return Verdict(0.0, extracted=text, reason="does not use every number")
        try:
            result = value()
        except ZeroDivisionError:
            return Verdict(0.0, extracted=text, reason="divides by zero")
        if result == target:
            return Verdict(1.0, extracted=text)
        return Verdict(0.0, extracted=text, reason=f"{text} = {result}, not {target}")
