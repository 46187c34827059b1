r"""Normalise an extracted answer string and split it into the values it states.

Pure string work (no sympy), so it is cheap enough to run in the calling process for every
completion. What it decides here follows the policy in docs/math.md:

- wrappers never matter: `$`, `\(...\)`, `\displaystyle`, `\left`, `\text{}` / `\mathrm{}` ...;
- units, currency, degrees and percent signs are stripped but values are never rescaled;
- thousands separators (`1,000`, `1{,}000`, `1\,000`) are removed;
- a top-level list (`1, 2`, `1 and 2`, `x=1 or x=2`, `\{1,2\}`) is several values, and `\pm`
  expands into its two values -- that is how a hedge shows up later: more values than the gold;
- notations are rewritten into forms the readers know first (`notation`);
- an answer longer than `MAX_ANSWER_CHARS` or nested deeper than `MAX_ANSWER_DEPTH` is not
  read at all (`too_big`), so every step here stays linear in what it reads.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from .notation import (choose_to_binom, degree_angles, plain_to_latex, presentation,
                       real_odd_roots, repeating_decimals, unicode_math)

__all__ = ["Item", "Answer", "normalize", "split_answer", "parse_number", "base_digits",
           "is_text", "is_label", "key", "too_big", "MAX_ANSWER_CHARS", "MAX_ANSWER_DEPTH"]

# --------------------------------------------------------------------------- wrappers

_TEXT_CMDS = re.compile(r"\\(?:boxed|fbox|text(?:normal|bf|it|rm|sf|tt)?|mathrm|mathbf|mathit|mathsf|"
                        r"textsc|mbox|operatorname|emph|boldsymbol|bm|pmb|underline|smash(?:\[[a-z]\])?|textup|hbox|"
                        r"mathbb(?=\{[^R]))\s*\{")
_DROP = [
    (re.compile(r"\\[hv]?phantom\s*\{[^{}]*\}"), " "),      # invisible: not part of the answer
    (re.compile(r"\\\$"), ""), (re.compile(r"\$"), ""),
    (re.compile(r"\\[()\[\]]"), " "),
    (re.compile(r"\\(?:displaystyle|textstyle|scriptstyle|limits|nolimits|middle|big|Big|"
                r"bigg|Bigg)(?![a-zA-Z])"), ""),
    (re.compile(r"\\m?(?:left|right)(?![a-zA-Z])\.?"), ""),
    (re.compile(r"\\[dt]frac(?![a-zA-Z])"), r"\\frac"),
    (re.compile(r"\\dbinom|\\tbinom"), r"\\binom"),
    (re.compile(r"\\\\(?=(?:le|ge|leq|geq|neq|frac|dfrac|sqrt|pi|infty|cdot|times|text)\b)"),
     r"\\"),                                      # over-escaped commands: \\le -> \le
    (re.compile(r"\\\"|\""), " "),
    (re.compile(r",\s*\\!\s*"), ","), (re.compile(r"\s*\{\s*,\s*\}\s*"), "{,}"),
    (re.compile(r"\\!"), ""), (re.compile(r"(?<!\\)\\[;:>]"), " "),
    (re.compile(r"\\q?quad(?![a-zA-Z])"), " , "),
    (re.compile(r"(?<!\\)\\,"), r"\\,"), (re.compile(r"(?<!\\)\\ "), " "), (re.compile(r"~"), " "),
    (re.compile(r"\\(?:le|leq|leqslant)(?![a-zA-Z])"), r"\\le "),
    (re.compile(r"\\(?:ge|geq|geqslant)(?![a-zA-Z])"), r"\\ge "),
    (re.compile(r"\\(?:neq|ne)(?![a-zA-Z])"), r"\\ne "),
    (re.compile(r"<="), r"\\le "), (re.compile(r">="), r"\\ge "), (re.compile(r"!="), r"\\ne "),
    (re.compile(r"≤"), r"\\le "), (re.compile(r"≥"), r"\\ge "), (re.compile(r"≠"), r"\\ne "),
    (re.compile(r"−|–"), "-"), (re.compile(r"×|\\times(?![a-zA-Z])"), r" \\times "),
    (re.compile(r"·|\\cdot(?![a-zA-Z])"), r" \\cdot "), (re.compile(r"÷"), "/"),
    (re.compile(r"π"), r"\\pi "), (re.compile(r"∞"), r"\\infty "), (re.compile(r"√"), r"\\sqrt"),
    (re.compile(r"\\varnothing|\\emptyset|∅"), r"\\emptyset "),
    (re.compile(r"\\infin(?![a-zA-Z])"), r"\\infty"),
    (re.compile(r"²"), "^2"), (re.compile(r"³"), "^3"),
]
# degrees / percent: stripped, never rescaled (`50\%` = 50, `0.5` != `50\%`)
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°|\\circ(?![a-zA-Z])|\\degree(?![a-zA-Z])")
_PERCENT = re.compile(r"\\?%|\s*(?:percentage|percent|per\s*cent|pct)\b\.?", re.I)
# thousands separators: 1,000 / 1{,}000 / 1\,000 / 1 000 (only in groups of exactly three)
_THOUSANDS = re.compile(r"(?<![\d.,(\[{])(?<![(\[{,]\s)([1-9]\d{0,2})((?:(?:,|\{,\}|\\,|\s)\d{3})+)"
                        r"(?![\d])(?!,\d)(?!\s*[)\]}])")
_UNIT_WORDS = (
    "cm|mm|km|m|meters?|metres?|centimeters?|kilometers?|millimeters?|inch(?:es)?|in|feet|foot|"
    "ft|yards?|yd|miles?|mi|kg|g|grams?|kilograms?|mg|lbs?|pounds?|ounces?|oz|tons?|liters?|"
    "litres?|l|L|ml|mL|gallons?|cups?|s|sec|seconds?|min|minutes?|h|hrs?|hours?|days?|weeks?|"
    "months?|years?|dollars?|cents?|euros?|yuan|rupees?|Rs|USD|EUR|degrees?|deg|units?|"
    "square|sq|cubic|mph|km/h|m/s|apples?|people|students?|times|pages?|boxes|books?|"
    "percent|points?|mpg|each|per|and")
_UNITS_TAIL = re.compile(rf"(?<=[\d}}.)])\s*(?:\\?\s*(?:{_UNIT_WORDS})\b(?:\s*\^\s*\{{?[23]\}}?)?"
                         rf"\.?\s*)+$")
# a number in scientific notation followed by its unit (`1.6e-19 C`, `6.02\times10^{23} mol^{-1}`)
_SCI_UNIT = re.compile(r"^([+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+|\s*\\times\s*10\s*\^\s*\{?[+-]?\d+\}?))"
                       r"\s*[A-Za-zμΩÅ][A-Za-zμΩÅ\s/.\\^{}\-\d]{0,20}$")
# a whole answer in markdown bold: `**C**`, `__42__`
_MARKDOWN_BOLD = re.compile(r"^\*\*\s*([^*]+?)\s*\*\*[.:;]?$|^__\s*([^_]+?)\s*__[.:;]?$")
_ELLIPSIS = re.compile(r"((?:^|,)\s*)(?:\.{3,}|…)(?=\s*(?:,|$))")
_CURRENCY = re.compile(r"€|£|¥|₹|\bUSD\b|\bRs\.?(?=\s*\d)|\bEUR\b")


def _unwrap_text(s: str) -> str:
    """`\\text{abc}` -> `abc` (braces matched; repeated until none is left)."""
    for _ in range(20):
        m = _TEXT_CMDS.search(s)
        if not m:
            return s
        depth, j = 1, m.end()
        while j < len(s) and depth:
            depth += {"{": 1, "}": -1}.get(s[j], 0)
            j += 1
        inner = s[m.end():j - 1] if depth == 0 else s[m.end():]
        s = s[:m.start()] + " " + inner + " " + s[j:]
    return s


# Answers the reader works on: longer or deeper ones are wrong (`too_big`) before any stage
# reads them (an integer of thousands of digits, or 300 redundant parentheses, still fit)
MAX_ANSWER_CHARS = 10_000
MAX_ANSWER_DEPTH = 500
_PLAIN_MAX_CHARS = 4_000       # plain_to_latex works on answers up to this long


def normalize(s: str) -> str:
    r"""Canonical text of one answer: wrappers, units and separators removed, spaces squeezed.

    >>> normalize(r"\$1{,}000.50")
    '1000.50'
    >>> normalize(r"\left( \dfrac{1}{2}, 3 \right)")
    '(\\frac{1}{2},3)'
    >>> normalize(r"90^\circ"), normalize(r"50\%"), normalize(r"125\textnormal{ miles}")
    ('90', '50', '125')
    """
    s = _MARKDOWN_BOLD.sub(lambda m: m.group(1) or m.group(2), s.strip())
    s = repeating_decimals(_unwrap_text(presentation(unicode_math(s))))
    for pattern, repl in _DROP:
        s = pattern.sub(repl, s)
    s = degree_angles(s)
    s = _DEGREES.sub(" ", s)
    if "\\choose" in s:
        s = choose_to_binom(s)
    s = _PERCENT.sub(" ", s)
    s = _CURRENCY.sub(" ", s)
    s = re.sub(r"\\sqrt\s*\(([^()]*)\)", r"\\sqrt{\1}", s)
    if len(s) <= _PLAIN_MAX_CHARS:             # longer answers are refused later anyway
        s = plain_to_latex(s)
    s = real_odd_roots(s)
    s = re.sub(r"\s+", " ", s).strip()
    s = _ELLIPSIS.sub(r"\1\\ldots", s)         # `1, 2, 3, ...`: the dots are a list element
    s = _THOUSANDS.sub(lambda m: m.group(1) + re.sub(r"\D", "", m.group(2)), s)
    s = s.lstrip(" ;:").rstrip(" .;:")
    if s.startswith("**") and s.endswith("**"):
        s = s[2:-2].strip()
    s = s.rstrip(" .;:")
    s = re.sub(r"\\,", " ", s)
    s = _UNITS_TAIL.sub("", s).strip() if re.search(r"\d", s) else s
    s = _SCI_UNIT.sub(r"\1", s)
    s = re.sub(r"\s*(\\?[{}()\[\],=+\-/^_])\s*", r"\1", s)   # spaces around punctuation
    if "," not in s:
        s = _strip_outer_braces(s)               # {{5}} -> 5 (a set needs commas or \{)
    s = re.sub(r"\\(le|ge|ne|times|cdot|pi|infty)(?=[0-9A-Za-z])", r"\\\1 ", s)
    return s.strip()


def _strip_outer_braces(s: str) -> str:
    """Drop the brace pairs that enclose the whole text, in one pass (pairs matched once)."""
    partner, stack = {}, []
    for k, c in enumerate(s):
        if c == "{":
            stack.append(k)
        elif c == "}" and stack:
            partner[stack.pop()] = k
    i, j = 0, len(s) - 1
    while i < j and s[i] == "{" and partner.get(i) == j:
        i, j = i + 1, j - 1
    return s[i:j + 1]


def nesting_depth(s: str) -> int:
    """How deep brackets of any kind nest in `s` (unbalanced closers ignored)."""
    depth = best = 0
    for c in s:
        if c in "([{":
            depth += 1
            best = max(best, depth)
        elif c in ")]}" and depth:
            depth -= 1
    return best


def too_big(s: str) -> str:
    """Why the reader will not work on the answer `s` ("" when it will). Bounds that keep every
    stage of reading linear in what it reads: a policy gets nothing by writing more."""
    if len(s) > MAX_ANSWER_CHARS:
        return f"answer too large: {len(s)} characters (limit {MAX_ANSWER_CHARS})"
    depth = nesting_depth(s)
    if depth > MAX_ANSWER_DEPTH:
        return f"answer too deep: brackets nested {depth} deep (limit {MAX_ANSWER_DEPTH})"
    return ""


def key(s: str) -> str:
    """A comparison key: normalised text without any whitespace."""
    return re.sub(r"\s+", "", s)


# --------------------------------------------------------------------------- plain values

_DEC = r"(?:\d+\.\d*|\.\d+|\d+)"
_NUM = re.compile(rf"^([+-]?)({_DEC})(?:(?:e|E)([+-]?\d+)|\s*(?:\\times|\\cdot|\*)\s*10\s*\^\s*"
                  rf"\{{?\s*([+-]?\d+)\s*\}}?)?$")
_FRAC = re.compile(r"^([+-]?)\\frac\{([+-]?\d+)\}\{([+-]?\d+)\}$|^([+-]?)(\d+)\s*/\s*(\d+)$")
_MIXED = re.compile(r"^([+-]?)(\d+)\s+(\d+)\s*/\s*(\d+)$")
_MAX_DIGITS = 4000   # Python refuses str->int above 4300 digits; longer numbers compare as text


@dataclass(frozen=True)
class Number:
    """A plain number read without sympy. `exact` is False for decimals (they carry stated
    digits only); `places` is then the last decimal place they state (`16386.16`: 2, `1.5e3`:
    -2); `digits` holds the canonical digit string of huge integers instead."""
    value: Fraction | None
    exact: bool
    digits: str = ""
    places: int = 0


def parse_number(s: str) -> Number | None:
    r"""'1.5e3', '3\times10^{5}', '-\frac{3}{4}', '007', '2/6' -> Number; anything else -> None.

    >>> parse_number("0.50").value, parse_number("0.50").exact
    (Fraction(1, 2), False)
    >>> parse_number(r"\frac{2}{4}").value
    Fraction(1, 2)
    """
    s = s.strip()
    if s.startswith("{") and s.endswith("}") and s.count("{") == 1:
        s = s[1:-1]
    special = _repeating(s) or _in_base(s)
    if special is not None:
        return special
    m = _NUM.match(s)
    if m:
        sign, body, e1, e2 = m.groups()
        exp = e1 or e2
        if len(body) > _MAX_DIGITS or (exp and len(exp) > 6):
            if "." in body or exp:
                return None
            return Number(None, True, sign.replace("+", "") + (body.lstrip("0") or "0"))
        value = Fraction(body) * (Fraction(10) ** int(exp) if exp else 1)
        value = -value if sign == "-" else value
        exact = "." not in body and "e" not in s.lower()
        places = len(body.partition(".")[2]) - int(exp or 0)
        return Number(value, exact, places=places)
    m = _MIXED.match(s)
    if m:                                         # `2 1/4` is 9/4, never 2 * 1/4
        sign, whole, num, den = m.groups()
        if max(len(whole), len(num), len(den)) > _MAX_DIGITS or int(den) == 0:
            return None
        value = int(whole) + Fraction(int(num), int(den))
        return Number(-value if sign == "-" else value, True)
    m = _FRAC.match(s)
    if m:
        sign = m.group(1) or m.group(4) or ""
        num, den = (m.group(2), m.group(3)) if m.group(2) else (m.group(5), m.group(6))
        if len(num) > _MAX_DIGITS or len(den) > _MAX_DIGITS or int(den) == 0:
            return None
        value = Fraction(int(num), int(den))
        return Number(-value if sign == "-" else value, True)
    return None


_REPEATING = re.compile(r"^([+-]?)(\d*)\.(\d*)\\overline\{(\d{1,30})\}$")
_BASE = re.compile(r"^\(?([0-9][0-9A-Za-z]*)\)?_\{?(\d{1,2})\}?$")


def _repeating(s: str) -> Number | None:
    """`0.58\\overline{3}` -> 7/12, exactly (normalize writes every repeating notation so)."""
    m = _REPEATING.match(s)
    if not m or len(m.group(2)) + len(m.group(3)) > _MAX_DIGITS:
        return None
    sign, whole, head, block = m.groups()
    tail = Fraction(int(head + block) - int(head or "0"),
                    10 ** len(head) * (10 ** len(block) - 1))
    value = int(whole or "0") + tail
    return Number(-value if sign == "-" else value, True)


def _in_base(s: str) -> Number | None:
    """`101_2` -> 5, `(1A)_{16}` -> 26: digits with their base as a subscript."""
    m = _BASE.match(s)
    if not m or len(m.group(1)) > _MAX_DIGITS or not 2 <= int(m.group(2)) <= 36:
        return None
    try:
        return Number(Fraction(int(m.group(1), int(m.group(2)))), True)
    except ValueError:                            # a digit the base does not have: `129_8`
        return None


def base_digits(s: str) -> str | None:
    """The digits of a number written with its base (`101_2` -> '101'), else None."""
    m = _BASE.match(s.strip())
    return m.group(1) if m and _in_base(s.strip()) else None


_WORD = re.compile(r"[^\W\d_]{2,}", re.U)
_LATEX_MATH = re.compile(r"\\(?!text)[a-zA-Z]+|[\^_=<>+*/]|\d")


def is_text(s: str) -> bool:
    """True for prose answers ('Evelyn', 'odd', 'regular hexagon') compared as words."""
    return bool(_WORD.search(s)) and not _LATEX_MATH.search(s) and len(s) < 200 \
        and not re.fullmatch(r"[A-Za-z]{1,2}", s)


# --------------------------------------------------------------------------- structure

@dataclass(frozen=True)
class Item:
    """One stated value: `text` is normalised; `label` is the left side of `x = 3`."""
    text: str
    label: str = ""


@dataclass(frozen=True)
class Answer:
    """The values an answer states. `ordered` for sequences written with `\\ldots`; a bare list
    is an unordered solution list; `alternatives` holds other readings of the same text
    (`1,22` is the list 1, 22 or the decimal-comma number 1.22)."""
    items: tuple[Item, ...]
    ordered: bool = False
    raw: str = ""
    alternatives: tuple["Answer", ...] = ()

    def readings(self) -> tuple["Answer", ...]:
        return (self,) + self.alternatives


_OPEN, _CLOSE = "([{", ")]}"
_SEP = re.compile(r",\s*(?:and|or)\s+|,|;|\\\\|\s+(?:and|or)\s+|(?<=[)\]}])(?:and|or)\s+|(?<=[)\]}])\s*(?:and|or)\s*(?=[(\[{\\])|(?<=[\d)\]}])(?:and|or)(?=[A-Za-z(\[{\\])|"
                  r"\s+(?:und|oder|et|ou|и|или)\s+|\s*(?:和|或|及)\s*")
# a probability or an expectation named on the left: `P(X=3)`, `\Pr(A)`, `E[X]`, `\mathbb{P}(A)`
_PROBABILITY = re.compile(r"(?:P|Pr|\\Pr|E|\\mathbb\{[PE]\}|\\operatorname\{(?:P|Pr|E)\})\s*"
                          r"(?:\([^()]{1,40}\)|\[[^\[\]]{1,40}\])")


def is_label(lhs: str) -> bool:
    r"""Is `lhs` a name (`x`, `a_{37}`, `(p,q)`, `f(x)`, `|AB|`, `\frac{NO}{BO}`, `A:B`)?"""
    if _PROBABILITY.fullmatch(lhs.strip()):
        return True                               # P(X=3), E[X], \Pr(A \mid B)
    core = re.sub(r"_\{[^{}]*\}|_\w|\^\{?'+\}?", "", lhs.strip())
    if re.fullmatch(r"\\[a-zA-Z]+", core):
        return True                               # \alpha
    core = re.sub(r"\\(?:frac|angle|overline|triangle|vec|hat|bar|widehat|overrightarrow)"
                  r"(?![a-zA-Z])|[{}]", "", core)
    if not re.fullmatch(r"[A-Za-z|(][A-Za-z0-9(),:|'\s]{0,15}", core):
        return False
    return not re.search(r"\d", re.sub(r"\([^()]*\)", "", core))


def _top_level_split(s: str) -> list[str]:
    """Split on separators that sit outside every bracket pair."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(s):
        c = s[i]
        if s.startswith("\\begin{", i) or s.startswith("\\end{", i):
            depth += 1 if s.startswith("\\begin{", i) else -1
            i = s.find("}", i) + 1 or len(s)
            continue
        if c == "\\" and s[i + 1:i + 2] in ("{", "}"):
            depth += 1 if s[i + 1] == "{" else -1
            i += 2
            continue
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth = max(0, depth - 1)
        elif depth == 0:
            m = _SEP.match(s, i)
            if m and m.end() > i:
                parts.append(s[start:i])
                start = i = m.end()
                continue
        i += 1
    parts.append(s[start:])
    return [p.strip() for p in parts if p.strip() and p.strip() not in ("and", "or")]


def _set_braces(s: str) -> str | None:
    r"""Content of a whole-answer set `\{...\}` or `{...}`, else None."""
    for o, c in (("\\{", "\\}"), ("{", "}")):
        if s.startswith(o) and s.endswith(c):
            inner = s[len(o):len(s) - len(c)]
            depth = 0
            for ch in inner:
                depth += {"{": 1, "}": -1}.get(ch, 0)
                if depth < 0:
                    return None
            return inner if depth == 0 else None
    return None


def _expand_pm(text: str) -> list[str]:
    r"""`a \pm b` -> [a + b, a - b] (each `\pm` doubles the readings; at most 3 of them)."""
    n = len(re.findall(r"\\pm|\\mp|±|∓", text))
    if not n or n > 3:
        return [text]
    out = [text]
    for _ in range(n):
        nxt = []
        for t in out:
            m = re.search(r"\\pm|\\mp|±|∓", t)
            first, second = ("-", "+") if m.group(0) in ("\\mp", "∓") else ("+", "-")
            nxt += [t[:m.start()] + first + t[m.end():], t[:m.start()] + second + t[m.end():]]
        out = nxt
    return [re.sub(r"^\+", "", re.sub(r"(^|[(,=])\s*\+", r"\1", t)).strip() for t in out]


def _top_level(s: str, pattern: re.Pattern) -> list[re.Match]:
    """Matches of `pattern` that sit outside every bracket pair."""
    out, depth = [], 0
    for i, c in enumerate(s):
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth = max(0, depth - 1)
        elif depth == 0:
            m = pattern.match(s, i)
            if m:
                out.append(m)
    return out


_RELATION = re.compile(r"(?<![<>!\\])=(?!=)|\\in(?![a-zA-Z])|\\approx(?![a-zA-Z])|≈")
_BOUND = re.compile(r"\\(?:lim|sum|prod|int|max|min)(?:_\{[^{}]*\}|_\w)?(?:\^\{[^{}]*\}|\^\w)?")


def _free_letters(s: str) -> bool:
    """Does `s` mention a variable? (commands, subscripts and bound variables don't count)"""
    if _BOUND.search(s):
        return False
    s = re.sub(r"_\{[^{}]*\}|_\w", "", s)
    return bool(re.search(r"[a-zA-Z]", re.sub(r"\\[a-zA-Z]+", "", s)))


def _item(text: str) -> Item:
    r"""`x = 3` -> Item('3', 'x'); `x \in [1,2]` -> Item('[1,2]', 'x'); `35+70=105` -> '105';
    `x = \frac13 \approx 0.33` -> Item('\frac13', 'x'); `7 = 11a+c` stays an equation."""
    text = text.strip()
    if text.startswith("(") and text.endswith(")") and _top_level(text[1:-1], _RELATION) \
            and not _top_level(text[1:-1], re.compile(",")):
        text = text[1:-1].strip()
    rel = _top_level(text, _RELATION)
    if not rel:
        return Item(text)
    approx = next((r for r in rel if r.group(0) in ("\\approx", "≈")), None)
    if approx is not None and approx is not rel[0] and text[approx.end():].strip():
        return _item(text[:approx.start()])       # the exact value; its approximation is a remark
    lhs, rhs = text[:rel[0].start()].strip(), text[rel[-1].end():].strip()
    if not rhs:
        return Item(text)
    if approx is rel[0] and not is_label(lhs):
        return Item(lhs)                          # exact value, then its approximation
    if is_label(lhs):
        single = _set_braces(rhs) if rel[0].group(0) == "\\in" and rhs.startswith("\\{") else None
        if single and len(_top_level_split(single)) == 1:
            rhs = single                          # x \in \{3\} says x = 3
        return Item(rhs, lhs.replace(" ", ""))
    if not _free_letters(lhs) and rel[-1].group(0) == "=":
        if len(rel) == 1 and is_label(rhs):
            return Item(lhs, rhs.replace(" ", ""))    # 5 = x
        if not _free_letters(rhs):
            return Item(rhs)                      # a worked computation: 35+70=105
    return Item(text)                             # an equation: 7 = 11a+c


def _labelled_groups(s: str) -> list[str] | None:
    """`p=5,q=2;p=7,q=2` -> ['(5,2)', '(7,2)']: each `;` group of named values is one tuple."""
    groups = s.split(";")
    if len(groups) < 2:
        return None
    out = []
    for g in groups:
        items = [_item(p) for p in _top_level_split(g)]
        labels = [i.label for i in items]
        if len(items) < 2 or not all(labels) or len(set(labels)) != len(labels):
            return None
        out.append("(" + ",".join(i.text for i in items) + ")")
    return out


def split_answer(raw: str, set_is_list: bool = False) -> Answer:
    r"""Normalise `raw` and split it into its values. A set literal of one element is a set
    (`\{3\}` is not 3, `\{\emptyset\}` is not `\emptyset`) unless `set_is_list` (the task
    asks for all solutions, so the set lists them); of several elements, it is their list.

    >>> [i.text for i in split_answer(r"x = 1 \text{ or } x = -2").items]
    ['1', '-2']
    >>> [i.text for i in split_answer(r"5 \pm 1").items]
    ['5 + 1', '5 - 1']
    """
    s = normalize(raw)
    s = re.sub(r"\(([^()]*;[^()]*)\)", lambda m: "(" + m.group(1).replace(";", ",") + ")", s)
    if re.search(r"[<>]|\\le|\\ge", s):          # x < 1 or x > 3 is one set, not two values
        s = re.sub(r"\s+or\s+|\s*\\vee\s*", r" \\lor ", s)
        s = re.sub(r"\s+and\s+|\s*\\wedge\s*", r" \\land ", s)
    grouped = _labelled_groups(s)
    if grouped:
        return Answer(tuple(Item(g) for g in grouped), False, raw)
    inner = _set_braces(s)
    if inner is not None and inner.strip():
        if s.startswith("\\{") and len(_top_level_split(inner)) == 1 \
                and (not set_is_list or "\\emptyset" in inner or "\\{" in inner):
            return Answer((Item(s),), False, raw)     # a singleton set, not its element
        s = inner
    pieces = _top_level_split(s) or ([s] if s else [])
    items: list[Item] = []
    for piece in pieces:
        it = _item(piece)
        for t in _expand_pm(it.text):
            items.append(Item(t, it.label))
    ordered = bool(re.search(r"\\[lc]?dots|\.\.\.|…", s))
    alternatives = ()
    if re.fullmatch(r"[+-]?\d+,\d+", s):                     # 1,22 -> also 1.22
        alternatives = (Answer((Item(s.replace(",", ".")),), raw=raw),)
    return Answer(tuple(items), ordered, raw, alternatives)
