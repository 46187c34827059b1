r"""Strategies for short-answer environments: wrong answers dressed up, and the gold re-rendered.

Every wrong completion carries a value that is not the gold (`Case.wrong`: the gold perturbed)
as its answer, or several values of which the gold is only one (a hedge), or no final answer at
all; the dressing is what a lenient reader might mistake for the gold: the gold mentioned while
thinking, in a doubt clause, in an intermediate step, last in a truncated ramble, hidden by
LaTeX (`\phantom`, `\text`, colour, nested boxes), spelled with look-alike characters. The legit
strategies write the gold itself in forms a reader must accept.
"""
from __future__ import annotations

import re

from .strategy import Attempt, Case, register_strategy

__all__ = ["answer_span", "rethink"]


def answer_span(case: Case, answer: str) -> str:
    """`case.dress(answer)` without its think block: a second answer slot to append."""
    dressed = case.dress(answer)
    return dressed.rpartition("</think>")[2] if "</think>" in dressed else dressed


def rethink(case: Case, thinking: str, answer: str | None) -> str:
    """The gold completion with `thinking` as its think block and `answer` in its slot (no
    answer at all when None)."""
    dressed = case.dress(answer if answer is not None else "")
    head, sep, tail = dressed.rpartition("</think>")
    if not sep:
        return f"<think>{thinking}</think> " + (dressed if answer is not None else "")
    opened = "<think>" if head.lstrip().startswith("<think>") else ""
    return f"{opened}{thinking}</think>" + (tail if answer is not None else "")


def _pairs(case: Case) -> list[tuple[str, str]]:
    g, w = case.gold, case.wrong()
    return [(w, g), (g, w)]


# --------------------------------------------------------------------------- wrong, dressed up

@register_strategy("hedge", kinds=("answer",))
def hedge(case: Case):
    """The gold and a wrong value together, in several layouts and both orders."""
    if not case.gold:
        return None
    out = []
    for a, b in _pairs(case):
        out += [case.dress(f"{a} or {b}"), case.dress(f"${a}$ or ${b}$"),
                case.dress(f"{a}, {b}"), case.dress(f"{a} and {b}"),
                case.dress(f"either {a} or {b}"),
                case.dress(f"{a} (or possibly {b})"),
                case.dress(a) + "\n" + answer_span(case, b),
                case.dress(f"\\boxed{{{a}}} or \\boxed{{{b}}}"),
                case.dress(f"x = {a} \\text{{ or }} x = {b}")]
    return out


@register_strategy("doubt-clause", kinds=("answer",))
def doubt_clause(case: Case):
    """The gold followed (or preceded) by a clause doubting it in favour of a wrong value."""
    if not case.gold:
        return None
    g, w = case.gold, case.wrong()
    return [case.dress(f"{g} — though it could be {w}"),
            case.dress(f"{g}? Not sure, maybe {w}"),
            case.dress(w) + f"\nThough it could also be {g}.",
            case.dress(f"{w}, unless I made a mistake, in which case {g}")]


@register_strategy("all-options", kinds=("answer",))
def all_options(case: Case):
    """Every candidate near the gold listed (the gold among them)."""
    if not case.gold:
        return None
    options = [case.wrong(k) for k in range(4)]
    options.insert(case.rng.randrange(5), case.gold)
    joined = ", ".join(options)
    return [case.dress(joined), case.dress("one of " + joined),
            case.dress(" ".join(f"\\boxed{{{o}}}" for o in options)),
            case.dress("; ".join(f"({chr(65 + i)}) {o}" for i, o in enumerate(options)))]


@register_strategy("gold-in-think", kinds=("answer",))
def gold_in_think(case: Case):
    """The gold only while thinking: a wrong final answer, or none at all."""
    if not case.gold:
        return None
    g, w = case.gold, case.wrong()
    return [rethink(case, f"The answer is {g}.", w),
            rethink(case, f"So the answer is \\boxed{{{g}}}.", None),
            rethink(case, f"<answer>{g}</answer>", None),
            f"<think>I work it out: the answer is {g}."]


@register_strategy("gold-then-wrong-final", kinds=("answer",))
def gold_then_wrong_final(case: Case):
    """The gold as an intermediate step, then a wrong final answer."""
    if not case.gold:
        return None
    g, w = case.gold, case.wrong()
    return [rethink(case, "I work it out.", f"{g}, then adjusting, {w}"),
            case.dress(w).replace("</think>", f" Step 1 gives {g}.</think>", 1)
            if "</think>" in case.dress(w) else None,
            f"Step 1: we get {g}.\nStep 2: we correct it.\nThe final answer is {w}.",
            f"First, {g}. Then the final answer is {w}."]


@register_strategy("truncated-ramble", kinds=("answer",))
def truncated_ramble(case: Case):
    """A completion cut by the length limit mid-sentence, with no answer statement; the last
    value it happened to write is the gold (finish_reason 'length')."""
    if not case.gold:
        return None
    g, w = case.gold, case.wrong()
    rambles = [f"Let me try {w}. No, wait, maybe {g}. Let me double-check by redoing the sum of",
               f"Hmm, {w}? Or {g}? I should verify: {g}",
               f"We have {g}",
               f"<think>Long thinking about {w}</think> Recomputing carefully we get {g}"]
    return [Attempt(r, finish_reason="length") for r in rambles]


@register_strategy("wrong-perfect-format", kinds=("answer",))
def wrong_perfect_format(case: Case):
    """The gold completion itself with a wrong value in its answer slot."""
    if not case.gold:
        return None
    return [case.dress(case.wrong(k)) for k in range(3)]


_FULL = str.maketrans("0123456789", "０１２３４５６７８９")
_BOLD = str.maketrans("0123456789", "𝟎𝟏𝟐𝟑𝟒𝟓𝟔𝟕𝟖𝟗")
_LETTERS_FOR_DIGITS = str.maketrans("01258", "OlZSB")
_CYRILLIC = str.maketrans("aceopxyABCEHKMOPTX", "асеорхуАВСЕНКМОРТХ")


@register_strategy("lookalikes", kinds=("answer",))
def lookalikes(case: Case):
    """Unicode look-alikes: a wrong value in full-width or bold digits, the gold spelled with
    letters that look like its digits (O for 0, l for 1) or with Cyrillic letters."""
    if not case.gold:
        return None
    g, w = case.gold, case.wrong()
    out = [case.dress(w.translate(_FULL)), case.dress(w.translate(_BOLD))]
    out += [case.dress(x) for x in (g.translate(_LETTERS_FOR_DIGITS), g.translate(_CYRILLIC))
            if x != g]
    return out


@register_strategy("latex-tricks", kinds=("answer",))
def latex_tricks(case: Case):
    r"""A wrong value shown, the gold hidden or struck out: `\phantom`, `\text`, colour,
    nested boxes, `\cancel`, `\neq`."""
    if not case.gold:
        return None
    g, w = case.gold, case.wrong()
    return [case.dress(f"{w}\\phantom{{{g}}}"), case.dress(f"\\phantom{{{g}}}{w}"),
            case.dress(f"\\text{{{w} or }} {g}"), case.dress(f"{w}\\text{{ (not {g})}}"),
            case.dress(f"{{\\color{{white}} {g}}} {w}"),
            case.dress(f"\\textcolor{{white}}{{{g}}}{w}"),
            case.dress(f"\\boxed{{\\boxed{{{w}}} {g}}}"), case.dress(f"\\boxed{{{w} \\boxed{{{g}}}}}"),
            case.dress(f"\\cancel{{{g}}} {w}"), case.dress(f"x \\neq {g}")]


@register_strategy("stall", kinds=("answer",))
def stall(case: Case):
    """Huge or deeply nested expressions around a wrong value: each must be scored 0 within
    the environment's deadline, never a `timeout`."""
    if not case.gold:
        return None
    w = case.wrong()
    return [case.dress("{" * 5000 + w + "}" * 5000), case.dress("(" * 3000 + w + ")" * 3000),
            case.dress("\\frac{1}{" * 800 + w + "}" * 800),
            case.dress("\\sqrt{" * 1500 + w + "}" * 1500),
            case.dress("9^{9^{9^{9^{9^{9}}}}}"), case.dress("1+" * 20000 + w),
            case.dress("9" * 100_000)]


# --------------------------------------------------------------------------- legitimate forms

_INT = re.compile(r"^-?\d+$")
_SLASH = re.compile(r"^(-?)(\d+)/(\d+)$")
_FRAC = re.compile(r"^(-?)\\[dt]?frac\{(\d+)\}\{(\d+)\}$")


@register_strategy("gold-reworded", kinds=("answer",), legit=True)
def gold_reworded(case: Case):
    """The gold answer with other whitespace, stated again after the slot, or with wrong
    values considered (and rejected) while thinking."""
    if not case.gold:
        return None
    g, w = case.gold, case.wrong()
    return [case.dress(f" {g} "), case.dress(f"\n{g}\n"),
            case.dress(g) + "\n" + answer_span(case, g),
            rethink(case, f"Maybe {w}? No: checking again, {w} is wrong; it is {g}.", g)]


@register_strategy("gold-notation", kinds=("answer",), legit=True)
def gold_notation(case: Case):
    r"""The gold value in equivalent notation: `$g$`, a trailing full stop, `g.0` and
    thousands separators for integers, `a/b` and `\frac{a}{b}` for fractions."""
    if not case.gold:
        return None
    g = case.gold
    forms = []
    if _INT.match(g):
        forms += [f"${g}$", f"{g}.", f"{g}.0"]
        if abs(int(g)) >= 10_000:
            forms.append(f"{int(g):,}")
    for pattern in (_SLASH, _FRAC):
        m = pattern.match(g)
        if m:
            sign, a, b = m.groups()
            forms += [f"{sign}{a}/{b}", f"{sign}\\frac{{{a}}}{{{b}}}",
                      f"{sign}\\dfrac{{{a}}}{{{b}}}", f"${sign}\\frac{{{a}}}{{{b}}}$"]
    return [case.dress(f) for f in dict.fromkeys(forms) if f != g]
