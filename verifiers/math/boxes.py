r"""Boxes in a text (`parser.boxes`, the one scanner every reader shares) and the boxes a gold
answer's final answer is made of."""
from __future__ import annotations

import re

from ..parser import boxes
from .normalize import key

__all__ = ["gold_boxes"]

MAX_SCAN_CHARS = 200_000      # only the end of a larger text is searched

def _boxes(text: str) -> list[tuple[int, int, str]] | None:
    """(start, end, content) of every box (`parser.boxes`); None when the text ends inside one:
    a truncated answer, which has no final answer."""
    found = boxes(text)
    if found and not found[-1].closed:
        return None
    return [(b.start, b.end, b.content) for b in found]



_JOINER = re.compile(r"\b(?:and|or)\b|,|;")


def gold_boxes(text: str) -> list[str]:
    r"""The boxes a gold answer's final answer is made of: the last box, and the boxes before it
    that join it -- fewer than 10 characters apart, or fewer than 70 with "and", "or", "," or
    ";" between them (math-verify's rule for several boxes). `\boxed{1}\boxed{2}` and
    "\boxed{1} papers and \boxed{2} bins" are both parts; in "\boxed{1} no no no no no
    \boxed{2}" the first box is an intermediate result. Completions are read differently: their
    boxes are all candidates (a hedge when they differ).

    >>> gold_boxes(r"\boxed{1} papers and \boxed{2} bins")
    ['1', '2']
    >>> gold_boxes(r"\boxed{1}; doubled this is \boxed{2}. Halved again: \boxed{1}")
    ['1']
    """
    text = text[-MAX_SCAN_CHARS:]
    found = _boxes(text)
    if not found:
        return []
    out = [found[-1]]
    for prev in reversed(found[:-1]):
        gap = text[prev[1]:out[-1][0]]
        if not (len(gap) < 10 or (len(gap) < 70 and _JOINER.search(gap)
                                  and key(prev[2]) != key(out[-1][2]))):
            break
        out.append(prev)
    return [b[2] for b in reversed(out)]


