r"""The symbolic layer: LaTeX -> sympy (latex2sympy2, as math-verify uses) and our own comparison.

Runs in worker-pool processes under a hard deadline (never `signal.alarm`: math-verify's own
timeouts are signal-based, so we call its parser with them off and let the pool kill a stuck
worker). Inputs are bounded *before* sympy evaluates anything:

- text over `MAX_CHARS`, or brackets nested deeper than `MAX_DEPTH` (after collapsing redundant
  pairs) is refused -- the LaTeX parser's time grows steeply with nesting;
- the parsed tree is unevaluated; `magnitude_ok` bounds every integer power, factorial and
  binomial by its digit count before `doit()` may build it (`10^{10^{10}}`, `1000000!`).

Where math-verify's comparison falls short, and we decide ourselves (docs/math.md lists them):
exact values compare exactly (rationals as rationals; other constants to 60 digits, so
`1/2^{99}` != `1/2^{98}` and `22/7` != `\pi`); decimals to a relative 1e-6; expressions with
variables at several seeded random points; inequalities as the sets they describe; equations up
to a constant factor; tuples never turned into intervals that sympy would empty.
"""
from __future__ import annotations

import contextvars
import functools
import logging
import math
import random
import re
from contextlib import contextmanager

import sympy
from sympy import (Eq, Expr, FiniteSet, Float, I, Interval, MatrixBase, Rational, Set, Symbol,
                   Tuple, Union)
from sympy.core.function import AppliedUndef
from sympy.logic.boolalg import BooleanFunction
from sympy.core.relational import Relational

from .compare import (GoldUnreadable, TooLarge, Tri, Unreadable, _ratio, fast_item_equal,
                      split_tuple)
from .latex_lite import parse_lite
from .normalize import parse_number

__all__ = ["Unreadable", "TooLarge", "GoldUnreadable", "to_sympy", "gold_sympy", "item_equal",
           "positive_symbols", "MAX_CHARS", "MAX_DEPTH"]

MAX_CHARS = 1_000
MAX_DEPTH = 12
MAX_DIGITS = 20_000          # largest integer (in digits) we let sympy build exactly
_PRECISION = 60              # digits for numeric checks of exact values
_EXACT_TOL = sympy.Float("1e-40")
_APPROX_TOL = sympy.Rational(1, 10**6)

logging.getLogger("latex2sympy2_extended").setLevel(logging.CRITICAL)
logging.getLogger("math_verify").setLevel(logging.CRITICAL)


# --------------------------------------------------------------------------- parsing

def _collapse(text: str) -> str:
    """Drop redundant bracket pairs: ((x)) -> (x), {{x}} -> {x}."""
    prev = None
    while prev != text:
        prev = text
        text = re.sub(r"\(\s*\(([^()]*)\)\s*\)", r"(\1)", text)
        text = re.sub(r"\{\s*\{([^{}]*)\}\s*\}", r"{\1}", text)
    return text


def _depth(text: str) -> int:
    depth = best = 0
    for c in text:
        if c in "([{":
            depth += 1
            best = max(best, depth)
        elif c in ")]}":
            depth -= 1
    return best


def _plain_to_latex(text: str) -> str:
    """`sqrt(2)*pi`, `2**3`, `exp(16)` (plain-text maths) -> LaTeX the parser reads."""
    text = text.replace("**", "^")
    text = re.sub(r"(?<![\\a-zA-Z])(pi|infty|alpha|beta|theta)(?![a-zA-Z])", r"\\\1 ", text)
    return re.sub(r"(\d)\s*\*\s*(?=[\\a-zA-Z(])", r"\1 \\cdot ", text)


@functools.lru_cache(maxsize=8192)
def gold_sympy(text: str):
    """`to_sympy` for gold answers, cached: a gold repeats across a group of completions
    (predictions are parsed afresh -- caching them would only flatter benchmarks)."""
    return to_sympy(text)


def to_sympy(text: str):
    """Parse one value (bounded: see the module docstring); raises Unreadable / TooLarge."""
    if len(text) > MAX_CHARS:
        raise TooLarge(f"{len(text)} characters (limit {MAX_CHARS})")
    text = _collapse(text)
    if _depth(text) > MAX_DEPTH:
        raise TooLarge(f"brackets nested deeper than {MAX_DEPTH}")
    num = parse_number(text)
    if num is not None and num.value is not None:
        if num.exact:
            return sympy.Rational(num.value.numerator, num.value.denominator)
        digits = len(re.sub(r"\D", "", text))
        return sympy.Float(num.value.numerator, max(15, digits + 2)) / num.value.denominator
    tup = split_tuple(text)
    if tup and tup[0] == "(" and tup[1] == ")" and len(tup[2]) > 1:
        return _Pair(tuple(to_sympy(p) for p in tup[2]))
    for op, join in ((r"\\lor", sympy.Or), (r"\\land", sympy.And)):
        pieces = re.split(rf"\s*{op}(?![a-zA-Z])\s*", text)
        if len(pieces) > 1:
            return join(*(to_sympy(p) for p in pieces))
    lite = parse_lite(_plain_to_latex(text))
    if lite is not None:
        if not magnitude_ok(lite):
            raise TooLarge(f"{text[:60]!r} is too large to evaluate exactly")
        return lite
    from latex2sympy2_extended import latex2sympy
    from latex2sympy2_extended.math_normalization import NormalizationConfig
    config = NormalizationConfig(basic_latex=True, units=True, malformed_operators=True,
                                 nits=True, boxed="all", equations=False)
    try:
        expr = latex2sympy(_plain_to_latex(text), normalization_config=config)
    except _NOT_MATH as exc:
        raise Unreadable(f"cannot read {text[:80]!r} as math ({type(exc).__name__})") from None
    except Exception as exc:
        if type(exc) is not Exception:
            raise                 # an internal failure: a counted error that names it
        # latex2sympy2 says "this is not LaTeX it can read" with a plain Exception
        raise Unreadable(f"cannot read {text[:80]!r} as math ({exc})") from None
    if not magnitude_ok(expr):
        raise TooLarge(f"{text[:60]!r} is too large to evaluate exactly")
    return expr


# What sympy raises while building a value the text describes but that does not exist (a
# matrix plus a number, a malformed set): the text is not math, as a parse error says
_NOT_MATH = (TypeError, ValueError)


class _Pair(tuple):
    """A parenthesised list `(a, b, ...)`: a tuple, or (two elements) an open interval."""


def _log10_bound(e) -> float:
    """An upper bound on log10|value| of a numeric subtree, computed without evaluating it."""
    if isinstance(e, (int, sympy.Integer)):
        n = abs(int(e))
        return math.log10(n + 1) if n < 10**50 else n.bit_length() * 0.30103 + 1
    if isinstance(e, Rational):
        return max(_log10_bound(e.p), _log10_bound(e.q))
    if isinstance(e, sympy.Float):
        return abs(float(sympy.log(abs(e), 10))) + 1 if e else 0.0
    if isinstance(e, (sympy.NumberSymbol, sympy.core.numbers.ImaginaryUnit)):
        return 1.0
    if isinstance(e, sympy.Pow):
        b, x = _log10_bound(e.base), _log10_bound(e.exp)
        if x > 15:
            return math.inf
        if not e.exp.is_number:
            return b
        exponent = abs(complex(sympy.N(e.exp, 15)))   # safe: |exponent| < 1e15 here
        return max(b, 1.0) * exponent + 1
    if isinstance(e, (sympy.factorial, sympy.binomial, sympy.gamma)):
        n = _log10_bound(e.args[0])
        if n > 15:
            return math.inf
        v = 10 ** n
        return v * math.log10(v + 1) + 1
    if not e.args:
        return 1.0
    parts = [_log10_bound(a) for a in e.args]
    return sum(parts) + 1 if isinstance(e, sympy.Mul) else max(parts) + 1


def magnitude_ok(expr) -> bool:
    """False when evaluating `expr` exactly would build a number over MAX_DIGITS digits."""
    try:
        nodes = [expr] if isinstance(expr, Expr) else list(_walk(expr))
        return all(_log10_bound(n) <= MAX_DIGITS for n in nodes if isinstance(n, Expr))
    except (TypeError, ValueError, OverflowError, AttributeError):
        return False


def _walk(obj):
    if isinstance(obj, MatrixBase):
        yield from obj
    elif isinstance(obj, sympy.Basic):
        yield obj
        for a in obj.args:
            yield from _walk(a)


# --------------------------------------------------------------------------- comparison

def item_equal(g: str, p: str) -> Tri:
    """One gold value vs one predicted value: the fast path, then sympy."""
    fast = fast_item_equal(g, p)
    if fast is not None:
        return fast
    rg, rp = _ratio(g), _ratio(p)
    if rg and rp and len(rg) == len(rp):
        return all(item_equal(a, b) for a, b in zip(rg, rp))
    try:
        a = gold_sympy(g)
    except Unreadable as exc:
        raise GoldUnreadable(str(exc)) from None
    except TooLarge as exc:
        raise GoldUnreadable(f"gold: {exc}") from None
    b = to_sympy(p)
    return _equal(a, b)


def _equal(a, b) -> bool:
    if isinstance(a, _Pair) or isinstance(b, _Pair):
        return _pair_equal(a, b)
    a, b = _doit(a), _doit(b)
    if a == b:
        return True
    if isinstance(a, MatrixBase) or isinstance(b, MatrixBase):
        return (isinstance(a, MatrixBase) and isinstance(b, MatrixBase) and a.shape == b.shape
                and all(_equal(x, y) for x, y in zip(a, b)))
    if isinstance(a, Tuple) or isinstance(b, Tuple):
        return (isinstance(a, Tuple) and isinstance(b, Tuple) and len(a) == len(b)
                and all(_equal(x, y) for x, y in zip(a, b)))
    sa, sb = _as_set(a), _as_set(b)
    if sa is not None or sb is not None:
        return sa is not None and sb is not None and _set_equal(sa, sb)
    if isinstance(a, Eq) or isinstance(b, Eq):
        return isinstance(a, Eq) and isinstance(b, Eq) and _equations_equal(a, b)
    if isinstance(a, Expr) and isinstance(b, Expr):
        return _expr_equal(a, b)
    return _math_verify_equal(a, b)


def _math_verify_equal(a, b) -> bool:
    """Objects our own rules do not model (e.g. inequalities in several variables): math-verify's
    comparison, with its signal-based timeout off -- the pool's deadline bounds the call."""
    from math_verify import verify
    return bool(verify(a, b, timeout_seconds=None, strict=True, raise_on_error=True))


def _pair_equal(a, b) -> bool:
    if isinstance(a, _Pair) and isinstance(b, _Pair):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    pair, other = (a, b) if isinstance(a, _Pair) else (b, a)
    other = _doit(other)
    if isinstance(other, Tuple):
        return len(pair) == len(other) and all(_equal(x, y) for x, y in zip(pair, other))
    s = _as_set(other)
    if s is None or len(pair) != 2:
        return False
    try:
        interval = Interval.open(_doit(pair[0]), _doit(pair[1]))
    except (TypeError, ValueError):
        return False              # sympy's answer for endpoints that bound no real interval
    return isinstance(interval, Interval) and _set_equal(interval, s)


def _doit(e):
    if isinstance(e, _Pair) or not hasattr(e, "doit"):
        return e
    return e.doit()


def _as_set(e) -> Set | None:
    """A set, an inequality (as the set it describes), `x \\in S`, or None."""
    if isinstance(e, Set):
        return e
    if isinstance(e, Eq) and isinstance(e.rhs, Set):
        return e.rhs
    if isinstance(e, (Relational, BooleanFunction)) and not isinstance(e, Eq):
        funcs = e.atoms(AppliedUndef)            # 0 < f(x) < 1: f(x) is the variable
        if len(funcs) == 1:
            e = e.subs(next(iter(funcs)), Symbol("_f"))
        free = e.free_symbols
        if len(free) != 1:
            return None
        x = next(iter(free))
        simple = _simple_set(e, x)
        if simple is not None:
            return simple
        try:
            return e.subs(x, Symbol(x.name, real=True)).as_set()
        except NotImplementedError:
            return None           # sympy cannot solve it for x: not a set we can compare
    return None


_BOUNDS = {"<": (True, False), "<=": (False, False), ">": (True, True), ">=": (False, True)}


def _simple_set(e, x) -> Set | None:
    """`x < a`, `a <= x < b`, `x != a`, and/or of those (a, b constants) as intervals directly:
    sympy's general `as_set` solves inequalities and costs ~0.1 s each."""
    if isinstance(e, (sympy.And, sympy.Or)):
        parts = [_simple_set(a, x) for a in e.args]
        if any(p is None for p in parts):
            return None
        return (sympy.Intersection if isinstance(e, sympy.And) else sympy.Union)(*parts)
    if not isinstance(e, Relational):
        return None
    lhs, rhs, op = _doit(e.lhs), _doit(e.rhs), e.rel_op
    if rhs == x and lhs != x:
        lhs, rhs, op = rhs, lhs, {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
    if lhs != x or rhs.free_symbols or not rhs.is_real:
        return None
    if op == "!=":
        return Union(Interval.open(-sympy.oo, rhs), Interval.open(rhs, sympy.oo))
    if op not in _BOUNDS:
        return None
    open_, lower = _BOUNDS[op]
    return (Interval(rhs, sympy.oo, left_open=open_) if lower
            else Interval(-sympy.oo, rhs, right_open=open_))
    return None


def _set_equal(a: Set, b: Set) -> bool:
    if a == b:
        return True
    if isinstance(a, Interval) and isinstance(b, Interval):
        return (a.left_open == b.left_open and a.right_open == b.right_open
                and _expr_equal(a.start, b.start) and _expr_equal(a.end, b.end))
    if isinstance(a, FiniteSet) and isinstance(b, FiniteSet):
        return len(a) == len(b) and _perfect(a.args, b.args)
    if isinstance(a, Union) and isinstance(b, Union):
        return len(a.args) == len(b.args) and _perfect(a.args, b.args, eq=_set_equal)
    return False


def _perfect(xs, ys, eq=None) -> bool:
    """Greedy one-to-one matching; enough here because equality is transitive."""
    eq = eq or _equal
    used = set()
    for x in xs:
        j = next((j for j, y in enumerate(ys) if j not in used and eq(x, y)), None)
        if j is None:
            return False
        used.add(j)
    return len(used) == len(ys)


def _equations_equal(a: Eq, b: Eq) -> bool:
    """Equivalent equations: lhs - rhs agree up to a non-zero constant factor."""
    da, db = a.lhs - a.rhs, b.lhs - b.rhs
    if da.free_symbols != db.free_symbols or not da.free_symbols:
        return False
    ratios = [r for r in _samples(da / db, da.free_symbols, n=4) if r is not None]
    if len(ratios) < 2 or any(abs(r) < 1e-30 for r in ratios):
        return False
    return all(abs(r - ratios[0]) <= 1e-20 * abs(ratios[0]) for r in ratios)


def _imaginary(a: Expr, b: Expr) -> tuple[Expr, Expr]:
    """`14 - i`: a free `i` is the imaginary unit when it is the only symbol on both sides."""
    syms = {s.name for s in a.free_symbols | b.free_symbols}
    if syms == {"i"}:
        rep = {s: I for s in a.free_symbols | b.free_symbols}
        return a.subs(rep), b.subs(rep)
    return a, b


def _expr_equal(a: Expr, b: Expr) -> bool:
    a, b = _imaginary(a, b)
    approx = a.has(Float) or b.has(Float)
    symbols = a.free_symbols | b.free_symbols
    if not symbols:
        return _values_equal(a, b, approx)
    tol = 1e-6 if approx else 1e-25
    pairs = 0
    for point in _points(sorted(symbols, key=lambda s: s.name), _shape(a, b)):
        x = _value_at(a, point)                   # over both sides' symbols: sin^2 + cos^2 = 1
        y = _value_at(b, point) if x is not None else None
        if x is None or y is None:
            continue
        if not _close(x, y, tol):
            return False                          # one point where they differ is enough
        pairs += 1
    if pairs >= 3:
        return True
    return sympy.simplify(a - b) == 0


# Where identities are tested: every real regime (around one, around zero, large; each on both
# sides of zero) and, where both sides are analytic, complex points -- an expression that agrees
# with the gold only for positive (or only large) values is a different answer. A symbol the
# task or the gold declares positive (`x > 0`) is sampled on the positive side only. Large
# values are left out where a variable sits in an exponent (`x^{x^x}` at 10^5 never ends).
_REGIMES = ((11, 23, 11, 17), (-23, -11, 11, 17), (1, 3, 7, 11), (-3, -1, 7, 11),
            (10**4, 10**7, 1, 3), (-10**7, -10**4, 1, 3))
_NOT_ANALYTIC = (sympy.Abs, sympy.sign, sympy.Max, sympy.Min, sympy.floor, sympy.ceiling,
                 sympy.re, sympy.im, sympy.arg, sympy.conjugate, sympy.Piecewise,
                 sympy.Heaviside, sympy.frac)
_POSITIVE: contextvars.ContextVar[frozenset] = contextvars.ContextVar("positive",
                                                                      default=frozenset())


@contextmanager
def positive_symbols(names):
    """Sample the named symbols on the positive side only (a domain the task states)."""
    token = _POSITIVE.set(frozenset(names))
    try:
        yield
    finally:
        _POSITIVE.reset(token)


def _shape(*exprs) -> tuple[bool, bool]:
    """(analytic, tower): no |x|, max, floor ... on either side; a variable in an exponent."""
    analytic = not any(e.has(*_NOT_ANALYTIC) for e in exprs)
    tower = any(p.exp.free_symbols for e in exprs for p in e.atoms(sympy.Pow)) or \
        any(f.args[0].free_symbols for e in exprs for f in e.atoms(sympy.exp))
    return analytic, tower


def _points(syms, shape: tuple[bool, bool], n: int = 6) -> list[dict]:
    """n seeded points over the real line (each size regime on both sides of zero, the signs
    of the symbols in every combination for the first two), then a complex point when both
    sides are analytic; reproducible."""
    analytic, tower = shape
    rng = random.Random(1234)
    positive = _POSITIVE.get()
    sizes = 2 if tower else 3                     # _REGIMES pairs: around 1, around 0, large
    out = []
    for k in range(n):
        point = {}
        for j, s in enumerate(syms):              # sign from bit j of k: every sign pattern
            negative = (k >> j) & 1 and s.name not in positive
            lo, hi, dlo, dhi = _REGIMES[2 * ((k + j) % sizes) + negative]
            point[s] = Rational(rng.randint(lo, hi), rng.randint(dlo, dhi))
        out.append(point)
    if analytic and not positive & {s.name for s in syms}:
        out.append({s: Rational(rng.randint(-23, 23), rng.randint(11, 17))
                    + I * Rational(rng.randint(1, 23), rng.randint(11, 17)) for s in syms})
    return out


def _value_at(e: Expr, point: dict) -> complex | None:
    """`e` at `point`, numerically (never builds `(1+1/n)^n` exactly); None where undefined."""
    try:
        v = e.evalf(_PRECISION, subs=point)
        ok = v.is_number and v.is_finite is not False and not v.has(sympy.nan, sympy.zoo)
        return complex(v) if ok else None
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        return None


def _samples(e: Expr, symbols, n: int = 4) -> list:
    """Values of `e` at n real sample points (None where undefined)."""
    syms = sorted(symbols, key=lambda s: s.name)
    return [_value_at(e, p) for p in _points(syms, (False, True), n)]


def _close(x: complex, y: complex, tol: float) -> bool:
    scale = max(abs(x), abs(y))
    return abs(x - y) <= tol * scale if scale else True


def _values_equal(a: Expr, b: Expr, approx: bool) -> bool:
    """Constants: rationals exactly; decimals to 1e-6 relative; other exact forms to 60 digits
    (then sympy may still prove a difference non-zero)."""
    if a.is_Rational and b.is_Rational and not approx:
        return a == b
    if a.has(sympy.oo, -sympy.oo, sympy.zoo) or b.has(sympy.oo, -sympy.oo, sympy.zoo):
        return a == b
    try:
        va, vb = sympy.N(a, _PRECISION), sympy.N(b, _PRECISION)
        diff = abs(sympy.N(va - vb, _PRECISION))
        scale = max(abs(va), abs(vb))
    except (TypeError, ValueError):
        return False
    if not (diff.is_number and scale.is_number):
        return False
    if scale == 0:
        return diff == 0
    tol = _APPROX_TOL if approx else _EXACT_TOL
    return bool(diff <= tol * scale)
