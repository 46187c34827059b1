r"""Notations rewritten into the forms the answer readers know (normalize calls these).

- plain-text maths as sympy, Python and many models print it: `2*sqrt(2)`, `log(3)`, `x**2`;
- repeating decimals in every notation: `0.\overline{6}`, `0.\dot{6}`, `0.\bar{6}`, `0.666\ldots`;
- trigonometric functions of angles in degrees: `\cos 60^\circ`;
- `{n \choose k}`, TeX's older binomial.

Each works in time linear in its input, or over a bounded number of passes.
"""
from __future__ import annotations

import re

__all__ = ["plain_to_latex", "repeating_decimals", "degree_angles", "choose_to_binom",
           "unicode_math", "presentation", "real_odd_roots"]

# repeating decimals: `0.\overline{6}`, `0.\dot{6}`, `0.1\dot{4}2\dot{8}`, `0.\bar{3}`, and
# `0.666\ldots` / `0.58333...` where the written digits show the repeating block
_DOTTED = re.compile(r"(?<![\d.])(\d*\.\d*)\\dot\{?(\d)\}?(?:(\d*)\\dot\{?(\d)\}?)?")
_BARRED = re.compile(r"(?<![\d.])(\d*\.\d*)\\bar\{(\d+)\}")
_TRAILING_DOTS = re.compile(r"(?<![\d.])(\d*\.\d+)\s*(?:\\[lc]?dots(?![a-zA-Z])|\.{3}|…)")


def repeating_decimals(s: str) -> str:
    """Repeating decimals in every notation -> `I.N\\overline{R}` (parse_number reads that)."""
    if "\\dot" in s:
        s = _DOTTED.sub(lambda m: m.group(1) + "\\overline{" + m.group(2) + (m.group(3) or "")
                        + (m.group(4) or "") + "}", s)
    if "\\bar" in s:
        s = _BARRED.sub(r"\1\\overline{\2}", s)
    return _TRAILING_DOTS.sub(_shown_repetend, s)


def _shown_repetend(m: re.Match) -> str:
    """`0.58333...` -> `0.58\\overline{3}`: the shortest block the digits end with at least
    twice (a one-digit block: three times); digits that show no block keep their dots."""
    whole, _, frac = m.group(1).partition(".")
    for size in range(1, 7):
        block, copies = frac[-size:], 3 if size == 1 else 2
        if len(frac) >= size * copies and frac.endswith(block * copies):
            head = frac[:-size * copies]
            while head.endswith(block):
                head = head[:-size]
            return f"{whole}.{head}\\overline{{{block}}}"
    return m.group(0)


# a trigonometric function of an angle in degrees: `\cos 60^\circ` -> `\cos(\frac{60\pi}{180})`
_ANGLE = r"(-?\d+(?:\.\d+)?)\s*(?:\^\s*\{?\s*\\circ\s*\}?|°|\\degree(?![a-zA-Z]))"
_TRIG_DEGREES = re.compile(rf"\\(sin|cos|tan|cot|sec|csc)(\^\s*(?:\{{[^{{}}]*\}}|\d))?\s*"
                           rf"(?:\(\s*{_ANGLE}\s*\)|\{{\s*{_ANGLE}\s*\}}|{_ANGLE})")


def degree_angles(s: str) -> str:
    r"""`\cos 60^\circ` -> `\cos(\frac{60\pi}{180})`: the angle a trigonometric function is
    given in degrees, in radians (what every reader assumes); before degree signs are dropped."""
    return _TRIG_DEGREES.sub(_trig_radians, s)


def _trig_radians(m: re.Match) -> str:
    angle = m.group(3) or m.group(4) or m.group(5)
    return f"\\{m.group(1)}{m.group(2) or ''}(\\frac{{{angle}\\pi}}{{180}})"


def choose_to_binom(s: str) -> str:
    """`{n \\choose k}` (and a bare `n \\choose k`) -> `\\binom{n}{k}`: the group around each
    `\\choose` is found by matching braces outwards from it (a few occurrences at most)."""
    for _ in range(4):
        k = s.find("\\choose")
        if k < 0 or s[k + 7:k + 8].isalpha():
            return s
        lo, hi = _group_edge(s, k - 1, -1), _group_edge(s, k + 7, 1)
        n, r = s[lo + 1:k].strip(), s[k + 7:hi].strip()
        s = f"{s[:max(lo, 0)]}\\binom{{{n}}}{{{r}}}{s[hi + 1:]}"
    return s


def _group_edge(s: str, i: int, step: int) -> int:
    """Walking from `i` by `step` (+1 or -1), the brace that closes the enclosing group; -1 or
    len(s) when the text ends first."""
    inner, edge = ("{", "}") if step > 0 else ("}", "{")
    depth = 0
    while 0 <= i < len(s):
        if s[i] == inner:
            depth += 1
        elif s[i] == edge:
            if depth == 0:
                return i
            depth -= 1
        i += step
    return i


# plain-text maths as sympy, Python and many models print it: `2*sqrt(2)`, `log(3)`, `x**2`, `pi`
_FUNC_NAMES = ("sqrt|cbrt|log10|log2|log|ln|exp|arcsin|arccos|arctan|asin|acos|atan|sinh|cosh|"
               "tanh|sin|cos|tan|cot|sec|csc")
_PLAIN_CALL = re.compile(rf"(?<![\\A-Za-z])({_FUNC_NAMES})\s*\(")
_PLAIN_RENAME = {"asin": "\\arcsin", "acos": "\\arccos", "atan": "\\arctan", "log": "\\ln"}
_PLAIN_CONST = re.compile(r"(?<![\\A-Za-z])(pi|oo|infinity)(?![A-Za-z])")
_POWER = re.compile(r"\*\*\s*([+-]?\s*(?:\d+(?:\.\d+)?|[A-Za-z](?![A-Za-z(])|\\[a-zA-Z]+))")



def _close_paren(s: str, i: int) -> int:
    """Index of the `)` matching the `(` at `i`, or -1."""
    depth = 0
    for j in range(i, len(s)):
        depth += {"(": 1, ")": -1}.get(s[j], 0)
        if depth == 0:
            return j
    return -1


def plain_to_latex(s: str) -> str:
    r"""Plain-text function notation -> LaTeX: `sqrt(x)` -> `\sqrt{x}`, `cbrt(x)` -> `\sqrt[3]{x}`,
    `log(x)`/`ln(x)` -> `\ln(x)` (in plain text, as in sympy, Python and numpy, `log` is the
    natural log), `log(x, b)` -> `\log_{b}(x)`, `exp(x)` -> `e^{x}`, `asin` -> `\arcsin`, `pi` ->
    `\pi`, `oo` -> `\infty`, `x**(n+1)` -> `x^{(n+1)}`. Only names written as calls change.

    >>> plain_to_latex("2*sqrt(2) + log(8, 2) - exp(x**2)")
    '2*\\sqrt{2} + \\log_{2}(8) - e^{(x^{2})}'
    """
    if "**" in s:
        s = _POWER.sub(lambda m: "^{" + re.sub(r"\s+", "", m.group(1)) + "}", s)
        for _ in range(50):
            i = s.find("**(")
            j = _close_paren(s, i + 2) if i >= 0 else -1
            if j < 0:
                break
            s = s[:i] + "^{" + s[i + 2:j + 1] + "}" + s[j + 1:]      # x**(a+b) -> x^{(a+b)}
        s = s.replace("**", "^")
    s = _PLAIN_CONST.sub(lambda m: {"pi": "\\pi ", "oo": "\\infty ",
                                    "infinity": "\\infty "}[m.group(1)], s)
    for _ in range(50):
        m = _PLAIN_CALL.search(s)
        if not m:
            break
        open_ = m.end() - 1
        close = _close_paren(s, open_)
        if close < 0:
            break
        name, arg, rest = m.group(1), s[open_ + 1:close], s[close + 1:]
        head = s[:m.start()]
        if name in ("sqrt", "cbrt"):
            s = head + ("\\sqrt{" if name == "sqrt" else "\\sqrt[3]{") + arg + "}" + rest
        elif name == "exp":
            s = head + "e^{(" + arg + ")}" + rest
        elif name in ("log10", "log2"):
            s = head + f"\\log_{{{name[3:]}}}(" + arg + ")" + rest
        elif name == "log" and "," in arg and "(" not in arg:
            x, base = arg.split(",", 1)
            s = head + f"\\log_{{{base.strip()}}}(" + x.strip() + ")" + rest
        else:
            s = head + _PLAIN_RENAME.get(name, "\\" + name) + "(" + arg + ")" + rest
    return s


# Unicode maths as models type it: vulgar fractions (`½`, `3¾`), superscript exponents
# (`10²³`, `x⁻¹`) and thin or no-break spaces between thousands (`1 000 000`)
_VULGAR = {"½": "1/2", "⅓": "1/3", "⅔": "2/3", "¼": "1/4", "¾": "3/4", "⅕": "1/5",
           "⅖": "2/5", "⅗": "3/5", "⅘": "4/5", "⅙": "1/6", "⅚": "5/6", "⅐": "1/7",
           "⅛": "1/8", "⅜": "3/8", "⅝": "5/8", "⅞": "7/8", "⅑": "1/9", "⅒": "1/10"}
_VULGAR_RE = re.compile(r"(\d?)\s*([" + "".join(_VULGAR) + "])")
_SUPERSCRIPT = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+"))
_SUPERSCRIPT_RE = re.compile("[" + "".join(_SUPERSCRIPT) + "]+")
_NARROW_SPACE = re.compile(r"(?<=\d)[\u2009\u202f\u00a0\u2006](?=\d{3}(?!\d))")


def unicode_math(s: str) -> str:
    r"""`½` -> `\frac{1}{2}`, `3½` -> `3 1/2` (a mixed number), `10²³` -> `10^{23}`,
    `1 000` (thin space) -> `1000`."""
    if not s.isascii():
        s = _NARROW_SPACE.sub("", s)
        s = _VULGAR_RE.sub(_vulgar, s)
        s = _SUPERSCRIPT_RE.sub(
            lambda m: "^{" + "".join(_SUPERSCRIPT[c] for c in m.group(0)) + "}", s)
        s = s.replace("⁄", "/")
    return s


def _vulgar(m: re.Match) -> str:
    num, den = _VULGAR[m.group(2)].split("/")
    return f"{m.group(1)} {num}/{den}" if m.group(1) else f"\\frac{{{num}}}{{{den}}}"


# presentation commands: how an answer looks, never what it says
_SIZE = re.compile(r"\\(?:tiny|scriptsize|footnotesize|small|normalsize|large|Large|LARGE|huge|"
                   r"Huge|bf|it|rm|sf|tt|bfseries|mdseries|itshape|upshape)(?![a-zA-Z])\s*")
_COLOR = re.compile(r"\\color\s*(?:\[[^\]]*\])?\s*\{[^{}]*\}|\\textcolor\s*(?:\[[^\]]*\])?"
                    r"\s*\{[^{}]*\}|\\colorbox\s*\{[^{}]*\}")
_WRAPPERS = re.compile(r"\\(?:underline|smash|hbox|textup|mathnormal|mathstrut|strut)"
                       r"(?:\[[a-z]\])?(?![a-zA-Z])\s*")


def presentation(s: str) -> str:
    r"""`\color{red}{5}`, `\textcolor{red}{5}`, `\underline{5}`, `\smash[b]{5}`, `\large 5` -> `5`
    (the braces left behind are stripped like any redundant group)."""
    if "\\" not in s:
        return s
    return _WRAPPERS.sub("", _COLOR.sub("", _SIZE.sub("", s)))


_ODD_ROOT = re.compile(r"\\sqrt\s*\[\s*(\d+)\s*\]\s*\{\s*-([^{}]*)\}")


def real_odd_roots(s: str) -> str:
    r"""`\sqrt[3]{-8}` -> `(-\sqrt[3]{8})`: an odd root of a negative number is the real root
    (sympy's principal root of -8 is the complex 1 + i sqrt 3)."""
    if "\\sqrt" not in s:
        return s
    return _ODD_ROOT.sub(lambda m: f"(-\\sqrt[{m.group(1)}]{{{m.group(2)}}})"
                         if int(m.group(1)) % 2 else m.group(0), s)
