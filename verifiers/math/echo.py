r"""The question written back: an answer that is, after normalisation, an expression the
question itself writes ("Compute $\binom{9}{4}$." answered `\binom{9}{4}`) states nothing the
question did not. It is value-equal to the gold, so comparison alone would reward it; the
verifier has the question and refuses it ("the question's expression written back", 0).

Only non-trivial expressions count (an operator, a command, a function: not a bare number or a
name), and never one the gold itself writes (`2^{10}` for "Which is larger, $2^{10}$ or
$10^3$?"). An unsimplified but worked answer (`2\sqrt{2}` for "Simplify $\sqrt{8}$") is not in
the question and stays right."""
from __future__ import annotations

import functools
import re

from .normalize import key, normalize, parse_number

__all__ = ["written_back", "question_expressions"]

_MATH = re.compile(r"\$\$(.+?)\$\$|(?<!\\)\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)
# a computation in plain text: "Compute 17 * 23", "What is 2^10 - 1?"
_PLAIN = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:\s*(?:[-+*/^×÷]|\*\*)\s*\(?\s*\d+(?:\.\d+)?\s*\)?)+"
                    r"(?!\w|\.\d)")
_NON_TRIVIAL = re.compile(r"[-+*/^!×÷]|\\(?!text)[a-zA-Z]+|[a-zA-Z]\s*\(")
_MAX_QUESTION = 20_000


@functools.lru_cache(maxsize=4096)
def question_expressions(question: str) -> frozenset[str]:
    """Keys of the non-trivial expressions the question writes: its math spans, each side of
    an equation in them, and plain-text computations (cached: a group shares its question)."""
    if not question or len(question) > _MAX_QUESTION:
        return frozenset()
    spans = [next(g for g in m.groups() if g is not None) for m in _MATH.finditer(question)]
    spans += [m.group(0) for m in _PLAIN.finditer(_MATH.sub(" ", question))]
    out = set()
    for span in spans:
        for side in [span] + re.split(r"(?<![<>!\\])=|\\[lg]eq?(?![a-zA-Z])|[<>]", span):
            side = side.strip().rstrip(".,;:?")
            if side and len(side) <= 300:
                k = _expression_key(side)
                if k:
                    out.add(k)
    return frozenset(out)


def _canonical(text: str) -> str:
    r"""A key that ignores optional braces: `\frac12` = `\frac{1}{2}`, `x_2` = `x_{2}`."""
    k = re.sub(r"\\cdot|\\times|×|·", "*", key(normalize(text)))
    k = re.sub(r"\\([dt]?frac|binom)(\w)(\w)", r"\\\1{\2}{\3}", k)
    k = re.sub(r"\\([dt]?frac|binom)\{([^{}]*)\}(\w)", r"\\\1{\2}{\3}", k)
    k = re.sub(r"\\sqrt(\w)", r"\\sqrt{\1}", k)
    return re.sub(r"([_^])(\w)", r"\1{\2}", k)


def _expression_key(text: str) -> str:
    """The comparison key of a non-trivial expression, or '' for a number or a name."""
    k = _canonical(text)
    if not k or parse_number(k) is not None and "\\overline" not in k:
        return ""
    return k if _NON_TRIVIAL.search(k) else ""


def written_back(answer_items, gold_items, question: str) -> bool:
    """Is the (single-valued) answer an expression of the question, one the gold does not
    write?"""
    if len(answer_items) != 1:
        return False
    exprs = question_expressions(question)
    if not exprs:
        return False
    k = _canonical(answer_items[0].text)
    if k not in exprs:
        return False
    return all(_canonical(g.text) != k for g in gold_items)
