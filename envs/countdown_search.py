"""A programmatic teacher for Countdown: a depth-first search written out as its trace.

The search combines two of the remaining numbers with + - * / (positive whole results only),
depth first, until a value equals the target (using every number when the rules ask for it).
The trace shows the first few dead ends it met, then the line of steps that works, then the
expression in <answer> tags, as in Stream of Search (Gandhi et al. 2024, "Stream of Search
(SoS): Learning to Search in Language"): a student sees that a search backtracks, briefly.
"""
from __future__ import annotations

from typing import Callable

from rlvr.core import Task

__all__ = ["search", "countdown_trace", "countdown_teacher", "SearchFailed"]

MAX_NODES = 200_000
"""Search states visited before giving up (6 numbers need a few thousand at most)."""


class SearchFailed(ValueError):
    """No expression over the numbers reaches the target within the search budget."""


def _combine(a: int, b: int) -> list[tuple[str, int, int, int]]:
    """(op, left, right, value) for every way to combine a and b into a positive whole
    number, the larger operand first for - and /."""
    hi, lo = max(a, b), min(a, b)
    out = [("+", hi, lo, hi + lo), ("*", hi, lo, hi * lo)]
    if hi > lo:
        out.append(("-", hi, lo, hi - lo))
    if lo > 1 and hi % lo == 0:
        out.append(("/", hi, lo, hi // lo))
    return out


def search(numbers: list[int], target: int, use_all: bool = False,
           dead_ends: int = 2) -> tuple[list[list[str]], list[str], str]:
    """(the first `dead_ends` failed lines of steps, the line that works, its expression)."""
    failed: list[list[str]] = []
    seen: set[tuple[int, ...]] = set()
    nodes = 0

    def walk(items: list[tuple[int, str]], steps: list[str]):
        nonlocal nodes
        key = tuple(sorted(v for v, _ in items))
        if key in seen:
            return None
        seen.add(key)
        nodes += 1
        if nodes > MAX_NODES:
            raise SearchFailed(f"no expression within {MAX_NODES} search states")
        for i in range(len(items)):
            for j in range(i + 1, len(items)):
                rest = items[:i] + items[i + 1:j] + items[j + 1:]
                (a, ea), (b, eb) = items[i], items[j]
                for op, x, y, value in _combine(a, b):
                    ex, ey = (ea, eb) if x == a else (eb, ea)
                    line = steps + [f"{x} {op} {y} = {value}"]
                    expr = f"({ex} {op} {ey})"
                    if value == target and (not use_all or not rest):
                        return line, expr[1:-1]
                    if rest:
                        found = walk(rest + [(value, expr)], line)
                        if found:
                            return found
                    elif len(failed) < dead_ends:
                        failed.append(line)
        return None

    if not use_all and target in numbers:
        return [], [f"{target} is one of the numbers"], str(target)
    found = walk([(n, str(n)) for n in numbers], [])
    if found is None:
        raise SearchFailed(f"no expression over {numbers} reaches {target}")
    return failed, *found


def countdown_trace(numbers: list[int], target: int, use_all: bool = False,
                    prefilled: bool = False) -> str:
    """The search written out: dead ends, the working line, the expression in <answer> tags
    (after the prefilled `<think>` for base prompts)."""
    failed, line, expr = search(list(numbers), int(target), use_all)
    tries = [f"Try {', '.join(steps)}. No." for steps in failed]
    body = " ".join(tries + [f"Try {', '.join(line)}. Yes."])
    return f" {body}</think> <answer>{expr}</answer>" if prefilled else \
        f"<think>{body}</think> <answer>{expr}</answer>"


def countdown_teacher(use_all: bool, numbers_of: Callable[[Task], tuple[list[int], int]]
                      ) -> Callable[[Task], str]:
    """`Environment.teacher` for a Countdown environment; `numbers_of(task)` gives (numbers,
    target)."""
    def teach(task: Task) -> str:
        numbers, target = numbers_of(task)
        return countdown_trace(numbers, target, use_all, prefilled=isinstance(task.prompt, str))
    return teach
