r"""One-sided identities: a symbolic answer that equals the gold only on part of the real line.

`\sqrt{x^2}` is `x` only for x >= 0, `a - x` is `|x - a|` only for x <= a, `\max(x, 0)` is
`x` only for x >= 0. A verifier that tests symbolic equality at sample points in a small
positive interval accepts all of them; one that samples the whole line (negative values,
around zero, large magnitudes) does not. Each form is kept only when it really differs from
the gold somewhere on the reals and agrees with it somewhere, checked here on both sides of
zero with sympy (through math-verify's LaTeX parser, `latex2sympy2_extended`); tasks whose
question states a domain (x > 0, "positive") are left alone, since there such a form is right.
"""
from __future__ import annotations

import itertools
import re

from .strategy import Case, register_strategy

__all__ = ["one_sided_forms", "symbols_of"]

_COMMAND = re.compile(r"\\[A-Za-z]+")
_TEXT = re.compile(r"\\(?:text|mathrm|operatorname)\{[^{}]*\}")
_DOMAIN = re.compile(r"(?i)(>|<|\\[gl]eq?\b|\\[gl]t\b|\\geqslant|\\leqslant|positive|negative|"
                     r"nonnegative|non-negative|greater than|less than|\\mathbb\{R\}[_^])")
_ABS = re.compile(r"\\left\|(.+?)\\right\||\|([^|]+)\|")
_EXTREMUM = re.compile(r"\\(max|min)\s*(?:\\left)?\(([^(),]+),([^(),]+?)(?:\\right)?\)")
_POINTS = (-57.3, -3.7, -1.3, -0.4, 0.6, 1.7, 2.9, 41.1)


def symbols_of(gold: str) -> list[str]:
    """The single-letter variables of a LaTeX gold (not `e`, `i` or letters of commands)."""
    bare = _COMMAND.sub(" ", _TEXT.sub(" ", gold))
    return sorted({c for c in re.findall(r"(?<![A-Za-z])[A-Za-z](?![A-Za-z])", bare)}
                  - {"e", "i"})


def _candidates(gold: str, names: list[str]) -> list[str]:
    """Forms of `gold` that agree with it on one side of zero (or of another point)."""
    g = f"\\left({gold}\\right)"
    v = names[0]
    out = [f"\\sqrt{{{g}^{{2}}}}", f"\\left|{gold}\\right|", f"-\\left|{gold}\\right|",
           f"\\sqrt[4]{{{g}^{{4}}}}", f"\\max\\left({gold}, 0\\right)",
           f"{g} \\cdot \\frac{{\\left|{v}\\right|}}{{{v}}}"]
    for m in _ABS.finditer(gold):
        inner = m.group(1) or m.group(2)
        out += [gold[:m.start()] + f"\\left({inner}\\right)" + gold[m.end():],
                gold[:m.start()] + f"\\left(-\\left({inner}\\right)\\right)" + gold[m.end():]]
    for m in _EXTREMUM.finditer(gold):
        for arg in m.group(2, 3):
            out.append(gold[:m.start()] + f"\\left({arg.strip()}\\right)" + gold[m.end():])
    return list(dict.fromkeys(out))


def _values(expr, names: list[str], symbols: dict, rng) -> list[complex | None]:
    """`expr` at sample assignments of its variables over the whole real line."""
    grid = list(itertools.product(_POINTS, repeat=len(names)))
    if len(grid) > 64:
        grid = rng.sample(grid, 64)
    out = []
    for point in grid:
        try:
            out.append(complex(expr.evalf(subs={symbols[n]: p for n, p in zip(names, point)})))
        except (TypeError, ValueError, ZeroDivisionError, OverflowError):
            out.append(None)
    return out


def one_sided_forms(gold: str, rng) -> list[str]:
    """The candidate forms of a symbolic `gold` that equal it at some real points and differ
    from it at others (both real there): wrong answers a one-sided sampler accepts."""
    names = symbols_of(gold)
    if not names:
        return []
    from latex2sympy2_extended import latex2sympy
    import sympy
    try:
        want = latex2sympy(gold)
    except Exception:        # the parser's errors are of many types: an unreadable gold
        return []
    symbols = {s.name: s for s in want.free_symbols}
    if sorted(symbols) != names:
        return []
    gold_at = _values(want, names, symbols, rng)
    forms = []
    for text in _candidates(gold, names):
        try:
            expr = latex2sympy(text)
        except Exception:
            continue
        if {s.name for s in expr.free_symbols} - set(names):
            continue
        pairs = [(a, b) for a, b in zip(gold_at, _values(expr, names, symbols, rng))
                 if a is not None and b is not None and abs(a.imag) < 1e-9
                 and abs(b.imag) < 1e-9]
        close = [abs(a - b) <= 1e-6 * max(1.0, abs(a)) for a, b in pairs]
        if any(close) and not all(close):
            forms.append(text)
    return forms


@register_strategy("one-sided-identity", kinds=("answer",))
def one_sided_identity(case: Case):
    r"""A symbolic gold rewritten to agree with it on one side only: `\sqrt{(g)^2}`, `|g|`,
    `\max(g, 0)`, a sign-like quotient, an absolute value or `\max`/`\min` opened on one
    side; each checked to differ from the gold somewhere on the real line."""
    if not case.gold or _DOMAIN.search(case.question):
        return None
    return [case.dress(f) for f in one_sided_forms(case.gold, case.rng)]
