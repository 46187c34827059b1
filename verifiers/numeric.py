"""Exact numeric answer matching: the reward of the procedural arithmetic environment.

Deliberately small and exact (rational arithmetic, no floats): the full math-equivalence verifier
is its own module. What it does share with it is the policy on *where* the answer is read -- only
from the answer span, the explicit final answer, and never one of several hedged candidates.
"""
from __future__ import annotations

import re
from fractions import Fraction

from rlvr.core import GOLD_UNPARSEABLE, UNPARSED, BaseReward, Verdict

from .parser import ThinkParser, all_boxed, answer_tag

__all__ = ["NumericMatch", "final_answer", "parse_number"]

_NUMBER = re.compile(r"[-+−]?\s*(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+−]?\.\d+")
_STATEMENT = re.compile(
    r"(?:final answer|the answer is|answer\s*:|####)\s*[:=]?\s*(.+?)(?:\n|$)", re.IGNORECASE)
_WRAPPERS = re.compile(r"^\$+|\$+$|^\\\(|\\\)$|\\[,!;]|\\text\{[^}]*\}|\*\*|\\%|%|\.$")


def final_answer(answer_span: str) -> tuple[str | None, str]:
    r"""The explicit final answer in an answer span and where it came from.

    Order: `<answer>` tag, then the last `\boxed{}`, then the last "answer is / Answer: / ####"
    statement, then the whole span when it is short. Several *different* tags or boxes are
    returned joined with ' | ' so the caller sees the hedge.

    >>> final_answer(r"so it is \boxed{12}.")
    ('12', 'boxed')
    """
    for source, found in (("answer_tag", answer_tag(answer_span)),
                          ("boxed", all_boxed(answer_span))):
        if found:
            distinct = list(dict.fromkeys(found))
            return " | ".join(distinct), source
    statements = _STATEMENT.findall(answer_span)
    if statements:
        return statements[-1].strip(), "statement"
    if answer_span and len(answer_span) <= 40:
        return answer_span.strip(), "span"
    return None, "none"


def parse_number(s: str) -> Fraction | None:
    """'1,234.50' -> Fraction(2469, 2); None unless `s` is exactly one number (after wrappers)."""
    s = _WRAPPERS.sub("", s.strip()).strip().replace("−", "-")
    if not _NUMBER.fullmatch(s):
        return None
    try:
        return Fraction(s.replace(",", "").replace(" ", ""))
    except (ValueError, ZeroDivisionError):
        return None


class NumericMatch(BaseReward):
    """1.0 when the final answer is exactly the gold number (`4.0` = `4`, `1,000` = `1000`).

    Answers are read only after the think block; several different candidates score 0.

    >>> from rlvr import Task
    >>> NumericMatch().score(Task("t", answer="42"), "<think>6*7</think> <answer>42</answer>").score
    1.0
    >>> NumericMatch().score(Task("t", answer="42"), "<answer>41</answer> <answer>42</answer>").score
    0.0
    """
    name, version = "numeric_match", "1"

    def __init__(self, parser: ThinkParser | None = None):
        self.parser = parser or ThinkParser()

    def _score(self, task, completion):
        gold = parse_number(str(task.answer)) if task.answer is not None else None
        if gold is None:
            return Verdict(0.0, GOLD_UNPARSEABLE, reason=f"gold {task.answer!r} is not a number")
        parsed = self.parser.parse(completion.text)
        if not parsed.answer:
            why = "think block never closed" if parsed.think_present else "empty completion"
            return Verdict(0.0, UNPARSED, reason=why)
        text, source = final_answer(parsed.answer)
        if text is None:
            return Verdict(0.0, UNPARSED, reason="no final answer statement, tag or box")
        if " | " in text:
            return Verdict(0.0, extracted=text, reason=f"several different {source} answers")
        value = parse_number(text)
        if value is None:
            candidates = _NUMBER.findall(text)
            if len(candidates) > 1:
                return Verdict(0.0, extracted=text, reason="several candidate numbers")
            return Verdict(0.0, UNPARSED, extracted=text, reason=f"{text[:60]!r} is not a number")
        if value == gold:
            return Verdict(1.0, extracted=text)
        return Verdict(0.0, extracted=text, reason=f"{text} != {task.answer}")
