r"""Values written in prose: numbers (`42`, `1,000.5`, `3/4`, `2 1/4`, `5%`) and plain-text
expressions (`2*sqrt(2)`, `pi/2`), found in time linear in the text (the answer readers in
`extract` use these spans)."""
from __future__ import annotations

import bisect
import re

__all__ = ["value_spans", "FUNC_WORD", "NUMBER"]

# 42, 1,000.5, 3/4, 2 1/4, 5%; a mixed number's parts share a line ("11" then "5/6" below it
# are two values)
_NUMBER_RE = (r"(?<![A-Za-z0-9.])[-+−]?(?:\d+[ \t]+(?=\d+[ \t]*/[ \t]*\d))?"
              r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:[.,]\d+)?"
              r"(?:[eE][-+−]?\d+|\s*(?:×|\\times|·|\\cdot)\s*10\s*\^\s*\{?\s*[-+−]?\d+\s*\}?)?"
              r"(?:[ \t]*/[ \t]*\d+)?(?:\s*%)?(?!\d)")
_NUMBER = re.compile(_NUMBER_RE)
# Plain-text maths in prose ("the length is 2*sqrt(2) cm"): a call or `pi`, widened to the
# numbers, operators and calls written next to it (normalize.plain_to_latex reads the result).
# Found core first, then widened within a bounded window, so scanning stays linear in the text
# (one regex with an optional prefix backtracked quadratically on "1 1 1 ..."; pathological
# fixture rows keep long runs of numbers and calls in the table).
_FUNC = (r"(?:sqrt|cbrt|log10|log2|log|ln|exp|arcsin|arccos|arctan|asin|acos|atan|sinh|cosh|"
         r"tanh|sin|cos|tan|cot|sec|csc)")
_PAREN = r"\((?:[^()]|\([^()]{0,200}\)){0,200}\)"
_PLAIN_CORE_RE = rf"(?:{_FUNC}\s*{_PAREN}|pi(?![A-Za-z]))"
_PLAIN_ATOM = rf"(?:\d+(?:\.\d+)?(?![\d.])|{_PLAIN_CORE_RE}|{_PAREN})"
_PLAIN_OP = (rf"(?:\s*(?:\*\*|[-+*/^])\s*|\s*(?=(?:{_FUNC}\s*\(|pi(?![A-Za-z])|\()))")
_PLAIN_CORE = re.compile(rf"(?<![A-Za-z0-9\\]){_PLAIN_CORE_RE}")
_PLAIN_LEFT = re.compile(rf"(?<![A-Za-z0-9.\\])[-+−]?(?:{_PLAIN_ATOM}{_PLAIN_OP})*"
                         rf"(?={_PLAIN_CORE_RE}$)")
_PLAIN_RIGHT = re.compile(rf"(?:{_PLAIN_OP}{_PLAIN_ATOM})*")
_WIDEN = 120                                       # characters a plain expression may extend


def value_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every value in prose, in order: plain-text expressions (`2*sqrt(2)`,
    `pi/2`) and numbers outside them."""
    spans: list[tuple[int, int]] = []
    unread: list[tuple[int, int]] = []           # too long to read whole: no value in there
    for m in _PLAIN_CORE.finditer(text):
        if spans and m.start() < spans[-1][1] or unread and m.start() < unread[-1][1]:
            continue
        lo = max(0, m.start() - _WIDEN)
        left = _PLAIN_LEFT.search(text, lo, m.end())     # ends where the core starts
        right = _PLAIN_RIGHT.match(text, m.end(), min(len(text), m.end() + _WIDEN))
        start = min(left.start(), m.start()) if left else m.start()
        if (start == lo > 0 and left and left.start() < m.start()) \
                or right.end() == m.end() + _WIDEN:
            unread.append((m.start(), m.end()))   # longer than the window: not read in part
            continue
        if spans and start < spans[-1][1]:
            start = spans[-1][1]
        spans.append((start, right.end()))
    plain = sorted(spans + unread)
    starts = [a for a, _ in plain]
    for m in _NUMBER.finditer(text):
        k = bisect.bisect_right(starts, m.start()) - 1
        if k < 0 or m.start() >= plain[k][1]:
            spans.append((m.start(), m.end()))
    return sorted(spans)


FUNC_WORD = re.compile(rf"(?<![A-Za-z\\]){_FUNC}(?=\s*\()|(?<![A-Za-z\\])pi(?![A-Za-z])")
NUMBER = _NUMBER
