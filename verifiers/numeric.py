"""Exact numeric answer matching: the reward of the procedural arithmetic environment.

Deliberately small and exact (rational arithmetic, no floats): the full math-equivalence verifier
is its own module. What it does share with it is the policy on *where* the answer is read -- only
from the answer span, the explicit final answer, and never one of several hedged candidates.
"""
from __future__ import annotations

import re
from fractions import Fraction

from rlvr.core import GOLD_UNPARSEABLE, UNPARSED, BaseReward, Verdict

from .math.standing import after, denials, negated
from .parser import ThinkParser, all_boxed, answer_tag, boxes, tag_blocks

__all__ = ["NumericMatch", "final_answer", "numbers_in", "parse_number"]

_NUMBER = re.compile(r"[-+−]?\s*(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+−]?\.\d+")
_STATEMENT = re.compile(
    r"(?:final answer|the answer is|answer\s*:|####)\s*[:=]?\s*(.+?)(?:\n|$)", re.IGNORECASE)
# wrappers that never change the value; a `\text{}` group is one only while it holds no digit
# (`3\text{ (not 4)}` hides a second value)
_WRAPPERS = re.compile(r"^\$+|\$+$|^\\\(|\\\)$|\\[,!;]|\\text\{[^}\d]*\}|\*\*|\\%|%|\.$")


def final_answer(answer_span: str) -> tuple[str | None, str]:
    r"""The explicit final answer in an answer span and where it came from.

    Order: `<answer>` tags, then `\boxed{}`, then "answer is / Answer: / ####" statements, then
    the whole span when it is short. Several *different* tags, boxes or statements are returned
    joined with ' | ' so the caller sees the hedge.

    >>> final_answer(r"so it is \boxed{12}.")
    ('12', 'boxed')
    """
    for source, found in (("answer_tag", answer_tag(answer_span)),
                          ("boxed", all_boxed(answer_span))):
        if found:
            distinct = list(dict.fromkeys(found))
            return " | ".join(distinct), source
    statements = list(dict.fromkeys(s.strip() for s in _STATEMENT.findall(answer_span)))
    if statements:
        return " | ".join(statements), "statement"
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


def numbers_in(s: str) -> set[Fraction]:
    """The different numbers `s` writes anywhere ('3 or 4' -> {3, 4}; '1,000' -> {1000})."""
    found = set()
    for m in _NUMBER.findall(s):
        try:
            found.add(Fraction(m.replace(",", "").replace(" ", "").replace("−", "-")))
        except (ValueError, ZeroDivisionError):
            continue
    return found


class NumericMatch(BaseReward):
    """1.0 when the final answer is exactly the gold number (`4.0` = `4`, `1,000` = `1000`).

    Answers are read only after the think block; several different candidates score 0 (a
    hedge), and so does a completion cut at the length limit that states no answer (tag, box
    or statement): a short span is read as the answer only when the completion finished.

    >>> from rlvr import Task
    >>> NumericMatch().score(Task("t", answer="42"), "<think>6*7</think> <answer>42</answer>").score
    1.0
    >>> NumericMatch().score(Task("t", answer="42"), "<answer>41</answer> <answer>42</answer>").score
    0.0
    """
    name, version = "numeric_match", "3"

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
        if source == "span" and completion.finish_reason == "length":
            return Verdict(0.0, UNPARSED, reason="cut at the length limit before stating an "
                                                 "answer (no tag, box or answer statement)")
        stands = _standing(parsed.answer, text, source)
        if stands is None:
            return Verdict(0.0, UNPARSED, extracted=text,
                           reason="the answer is denied, or taken back with no new value")
        text = stands
        values = {parse_number(part) for part in text.split(" | ")}
        if len(values) > 1:
            return Verdict(0.0, extracted=text, reason=f"several different {source} answers")
        value = values.pop()
        if value is None:
            if len(numbers_in(text)) > 1:
                return Verdict(0.0, extracted=text, reason="several candidate numbers")
            return Verdict(0.0, UNPARSED, extracted=text, reason=f"{text[:60]!r} is not a number")
        if value == gold:
            return Verdict(1.0, extracted=text)
        return Verdict(0.0, extracted=text, reason=f"{text} != {task.answer}")


def _last_span(span: str, source: str) -> tuple[int, int] | None:
    """Where the last tag, box or statement of `span` starts and ends."""
    if source == "answer_tag":
        found = tag_blocks(span)
        return (found[-1][0], found[-1][1]) if found else None
    if source == "boxed":
        found = [b for b in boxes(span) if b.closed]
        return (found[-1].start, found[-1].end) if found else None
    if source == "statement":
        found = list(_STATEMENT.finditer(span))
        return (found[-1].start(1), found[-1].end(1)) if found else None
    return None


def _standing(span: str, text: str, source: str) -> str | None:
    """The answer after what the text says around and after it (math.standing's rules): a
    denied answer or one taken back with no new value is None; a correction's new value
    replaces it; an alternative offered after it joins it (a hedge)."""
    where = _last_span(span, source)
    if where is None:
        return text
    if negated(span, *where):
        return None

    def last_number(seg: str) -> str | None:
        """The last number `seg` writes that it does not deny ("36, not 35" states 36)."""
        seg = seg[-3000:]
        denied = denials(seg)
        found = [m.group(0).strip() for m in _NUMBER.finditer(seg)
                 if not denied(m.end() - len(m.group(0).lstrip()), m.end())]
        return found[-1] if found else None

    current = {parse_number(p) for p in text.split(" | ")}
    change = after(span[where[1]:], last_number, lambda v: {parse_number(v)} == current)
    if change.action == "retract":
        return None if len(current) == 1 else text
    if change.action == "replace":
        return change.value
    if change.action == "hedge":
        return text + " | " + change.value
    return text
