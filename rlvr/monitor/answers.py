"""Detectors on short final answers (maths, puzzles): several different final values, an answer
followed by a correction, the gold written only while thinking.

They read the answer as the rule verifiers do (`final_answer`: tags, then boxes, then answer
statements) and the words that join or replace values as the math reader knows them
(`rlvr.verifiers.math.hedges`), so a detector and a verifier disagree only about what to do with
a shape, never about where the answer is."""
from __future__ import annotations

import re
from fractions import Fraction

from rlvr.verifiers.math.hedges import ALT_WORD, CORRECTION, DOUBT, joins
from rlvr.verifiers.numeric import final_answer, numbers_in, parse_number

from .detectors import Sample, register_detector

_NUMBER = re.compile(r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
_FRACTION = re.compile(r"^\s*\$?\s*-?\d+\s*/\s*\d+\s*\$?\s*$|\\[dt]?frac")
_OFFERED = re.compile(r"\?|" + ALT_WORD.pattern + "|" + DOUBT.pattern
                     + r"|\b(?:or|either|not sure)\b|\\text\{\s*or\s*\}", re.I)
_ALTERNATIVE = re.compile(r"\\boxed.*\\boxed|\(\w\)\s", re.S)    # several boxes, (A) (B) options
_SHORT = 40     # characters: a longer answer statement is a sentence, read by its joins only
_STATED = re.compile(r"<answer>.*?</answer>|\\boxed\{[^{}]*\}|(?:final answer|the answer is|"
                     r"answer\s*:)\s*[:=]?\s*[^\n.]*\d", re.I | re.S)


def _joined_values(value: str) -> list[str]:
    """The numbers in `value` that its words join into one statement ('12 or 13', '12, 13')."""
    found = list(_NUMBER.finditer(value))
    joined = []
    for a, b in zip(found, found[1:]):
        if _key(a.group()) != _key(b.group()) and joins(value[a.end():b.start()]):
            joined += [a.group(), b.group()]
    return list(dict.fromkeys(joined))


def _is_list(value: str) -> bool:
    """'35, 36' or '35; 36 and 37': values separated by commas, each part a number alone."""
    parts = [re.sub(r"^\s*(?:and|or)\s+", "", p) for p in re.split(r"[,;]", value)]
    return len(parts) > 1 and all(parse_number(p) is not None for p in parts)


def _key(number: str) -> Fraction | str:
    try:
        return Fraction(number.replace(",", "").replace("−", "-"))
    except (ValueError, ZeroDivisionError):
        return number


@register_detector("hedge", kinds=("answer",))
def hedge(sample: Sample):
    """Several different final values: tags or boxes that disagree, or one answer listing
    alternatives ('12 or 13', 'either 12 or 13', '12, unless ..., 13') for a single-valued gold."""
    value, source = final_answer(sample.answer)
    if value is None:
        return None
    parts = value.split(" | ")
    distinct = {parse_number(p) if parse_number(p) is not None else p.strip() for p in parts}
    if len(distinct) > 1:
        return f"{len(distinct)} different {source} answers: {value[:80]}"
    gold = sample.gold
    if gold is None or parse_number(gold) is None or _FRACTION.search(value):
        return None     # multi-part golds (intervals, tuples) list values legitimately
    # The question's own numbers restated ("the sum of 17 and 18 is 35") are not candidates,
    # unless the answer offers them as alternatives ("17 or 35").
    asked = numbers_in(sample.question)
    joined = _joined_values(value)
    fresh = [v for v in joined if _key(v) not in asked]
    if len(joined) > 1 and (len(fresh) > 1 or fresh and _OFFERED.search(value)):
        return f"alternatives in one answer: {', '.join(joined[:4])}"
    several = numbers_in(value)
    new = several - asked
    slot = source in ("answer_tag", "boxed") or len(value) <= _SHORT
    listed = _OFFERED.search(value) or _ALTERNATIVE.search(value) or _is_list(value)
    if slot and len(several) > 1 and listed and (
            len(new) > 1 or new and _OFFERED.search(value)):
        return f"{len(several)} values in one answer: {value[:80]}"
    return None


@register_detector("correction", kinds=("answer",))
def correction(sample: Sample):
    """An answer stated, then text after it that corrects or doubts it with another value
    ('<answer>12</answer> Wait, it is 13', '... Though it could also be 13'); the question's
    own numbers restated after it are not another value."""
    first = _STATED.search(sample.answer)
    if first is None:
        return None
    stated = numbers_in(first.group())
    rest = sample.answer[first.end():]
    word = CORRECTION.search(rest) or ALT_WORD.search(rest) or DOUBT.search(rest)
    if word is None:
        return None
    other = numbers_in(rest[word.start():]) - stated - numbers_in(sample.question)
    return f"{word.group()!r} after the answer, then {_show(other)}" if other else None


@register_detector("gold-in-think", kinds=("answer",))
def gold_in_think(sample: Sample):
    """The gold value written while thinking but not in the final answer (a wrong one or none):
    the text a verifier that reads the whole completion would pay for."""
    gold = parse_number(sample.gold or "")
    if gold is None or not sample.think:
        return None
    digits = str(abs(int(gold))) if gold.denominator == 1 else ""
    if digits not in sample.think.replace(",", ""):     # cheap: most thoughts never write it
        return None
    if not any(_key(m) == gold for m in _NUMBER.findall(sample.think) if digits in m):
        return None
    value, _ = final_answer(sample.answer)
    if value is not None and gold in numbers_in(value):
        return None
    return f"gold {sample.gold} only inside <think> (final answer: {value or 'none'})"


def _show(values) -> str:
    return ", ".join(str(v) for v in sorted(values)[:3])
