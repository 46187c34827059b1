r"""The domain a task states for its variables: `x > 0`, "positive real numbers $x, y$",
"$a$ is positive", `0 < x < 1`. Identities are checked over the whole real line (and complex
points) unless a domain is stated; a variable stated positive is sampled on the positive side
only (symbolic.positive_symbols). Only positivity is read: any other statement leaves the whole
line, so an answer right only on part of it is refused (fail closed)."""
from __future__ import annotations

import functools
import re

__all__ = ["positive_names"]

_NAME = r"[a-zA-Z](?![A-Za-z])(?:_\{?\w{1,3}\}?)?"
_NAMES = rf"{_NAME}(?:\s*,\s*{_NAME})*(?:\s*,?\s*(?:and|\\text\{{\s*and\s*\}})\s*{_NAME})?"
_GT = r"(?:>|\\gt(?![a-zA-Z])|\\ge(?:q|qslant)?(?![a-zA-Z])|≥)"
_LT = r"(?:<|\\lt(?![a-zA-Z])|\\le(?:q|qslant)?(?![a-zA-Z])|≤)"
_STATEMENTS = [
    # x > 0, x, y > 0, a > b > 0, x \ge 0
    re.compile(rf"(?<![\w\\])((?:{_NAMES}\s*{_GT}\s*)+)0(?![\d.])"),
    # 0 < x, 0 < x < 1, 0 < a < b
    re.compile(rf"(?<![\d.])0\s*{_LT}\s*((?:{_NAMES})(?:\s*{_LT}\s*(?:{_NAMES}))*)"),
    # positive (real) numbers $x$ and $y$; positive integers a, b
    re.compile(rf"\bpositive\s+(?:real\s+|rational\s+)?(?:numbers?|integers?|reals?|"
               rf"constants?|values?|variables?)?\s*\$?\s*({_NAMES})", re.I),
    # $x$ is positive; x and y are positive
    re.compile(rf"(?<![\w\\])\$?\s*({_NAMES})\s*\$?\s+(?:is|are)\s+(?:a\s+|both\s+|all\s+)?"
               rf"(?:positive|strictly\s+positive)", re.I),
    # x \in \mathbb{R}^+, x \in (0, \infty)
    re.compile(rf"(?<![\w\\])({_NAMES})\s*\\in\s*(?:\\mathbb\{{R\}}\s*(?:\^\s*\{{?\+\}}?|_\s*"
               rf"\{{?\s*>\s*0\s*\}}?)|\(\s*0\s*,\s*\\infty\s*\))"),
]
_NAME_RE = re.compile(rf"(?<![A-Za-z\\]){_NAME}(?![A-Za-z])")


@functools.lru_cache(maxsize=4096)
def positive_names(text: str) -> frozenset[str]:
    """Names of the variables `text` states to be positive (or non-negative).

    >>> sorted(positive_names("Let $x, y > 0$ and $0 < t < 1$."))
    ['t', 'x', 'y']
    """
    if not text or len(text) > 20_000:
        return frozenset()
    out = set()
    for pattern in _STATEMENTS:
        for m in pattern.finditer(text):
            for name in _NAME_RE.findall(m.group(1)):
                if name not in ("and",):
                    out.add(re.sub(r"[{}]", "", name))
    return frozenset(out)
