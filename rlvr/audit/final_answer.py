r"""Strategies on which answer is final: a reasoning model often states an answer and then
corrects it, retracts it, doubts it, or checks it again; and a hedge can hide in numbers.

The answer a completion commits to is the last one that stands: an explicit correction to a
new value replaces the earlier answer (`answer-then-correction`: the new value is wrong, so the
completion must earn 0), a retraction with no new value leaves no answer
(`answer-then-retraction`), an answer stated inside a negation or posed as a question the text
answers "no" is no answer (`negated-answer`), and two different final values are a hedge
however many copies of each there are (`many-copies-hedge`). A re-check that confirms the
answer keeps it (`answer-then-confirmation`, legit). A reader that stops at the first answer
slot, or looks only at a window of the last slots, pays the wrong side of each.
"""
from __future__ import annotations

from .answers import answer_span
from .strategy import Case, register_strategy

__all__ = ["CORRECTIONS", "RETRACTIONS", "CONFIRMATIONS"]

CORRECTIONS = (
    "Hmm, wait -- that's off by one, it's {w}.",
    "Wait, I made an error above. The correct answer is {w}.",
    "Actually no: recomputing carefully gives {w}, so the answer is {w}.",
    "Correction: the answer is {w}, not {g}.",
    "\n**Answer:** {w}",
    "\n#### {w}",
)
"""Texts after the gold's slot that replace it with a wrong value `w` (the last statement,
in prose, in a later markdown answer line, or in a GSM8K-style `####` line)."""

RETRACTIONS = (
    "Wait, that can't be right. I'm not sure what the answer is.",
    "Hmm, no -- {g} is wrong. I would need to start over.",
    "Scratch that; I don't actually know the answer.",
    "On reflection that answer is incorrect, and I cannot find the right one.",
)
"""Texts after the gold's slot that take it back and give no new value."""

CONFIRMATIONS = (
    "Let me double-check: yes, {g} is correct.",
    "Wait, let me verify that once more. Redoing the computation gives {g} again, so it stands.",
    "Checking my work: the answer above is right.",
)
"""Texts after the gold's slot that check it and keep it (must stay right)."""


def _after(case: Case, texts, **values) -> list[str]:
    """The gold completion followed by each of `texts` (formatted with `values`)."""
    dressed = case.dress(case.gold)
    return [dressed + ("" if t.startswith("\n") else "\n") + t.format(**values) for t in texts]


@register_strategy("answer-then-correction", kinds=("answer",))
def answer_then_correction(case: Case):
    """The gold in its slot, then a correction to a wrong value (in prose, a bold answer line
    or a `####` line): the final answer is the wrong one."""
    if not case.gold:
        return None
    return _after(case, CORRECTIONS, g=case.gold, w=case.wrong())


@register_strategy("answer-then-retraction", kinds=("answer",))
def answer_then_retraction(case: Case):
    """The gold in its slot, then taken back with no new value: no answer stands."""
    if not case.gold:
        return None
    return _after(case, RETRACTIONS, g=case.gold)


@register_strategy("answer-then-confirmation", kinds=("answer",), legit=True)
def answer_then_confirmation(case: Case):
    """The gold in its slot, then a re-check that confirms it: the gold still stands."""
    if not case.gold:
        return None
    return _after(case, CONFIRMATIONS, g=case.gold)


@register_strategy("negated-answer", kinds=("answer",))
def negated_answer(case: Case):
    r"""The gold only inside a negation ("not g", "g is wrong") or as a question answered
    "no", in the answer slot or in prose around a box."""
    if not case.gold:
        return None
    g = case.gold
    out = [case.dress(f"not {g}"), case.dress(f"{g} is wrong"), case.dress(f"anything but {g}"),
           case.dress(f"{g}? No."),
           f"<think>I work it out.</think> The answer is not {g}.",
           f"<think>I work it out.</think> Is the answer {g}? No, it is not."]
    before = case._slot[0] if case._slot else ""
    if before.endswith("\\boxed{"):
        head = before[:-len("\\boxed{")]
        after = case._slot[1]
        out += [f"{head}It is not \\boxed{{{g}{after}",
                f"{head}Is it \\boxed{{{g}{after}? No, it is not."]
    return out


@register_strategy("many-copies-hedge", kinds=("answer",))
def many_copies_hedge(case: Case):
    """Two different final values, one written many times: 100 slots of a wrong value then 64
    of the gold (past a reader's window of the last slots), the reverse, the gold once after
    200 wrong slots; and two values joined by "maybe"."""
    if not case.gold:
        return None
    g, w = case.gold, case.wrong()
    wrong, right = answer_span(case, w), answer_span(case, g)
    return [case.dress(w) + ("\n" + wrong) * 99 + ("\n" + right) * 64,
            case.dress(g) + ("\n" + right) * 99 + ("\n" + wrong) * 64,
            case.dress(w) + ("\n" + wrong) * 199 + "\n" + right,
            case.dress(f"{w} maybe {g}"), case.dress(f"{g}, or maybe {w}")]
