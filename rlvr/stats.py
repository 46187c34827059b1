"""Small statistics shared by the scoring summary and the training metrics."""
from __future__ import annotations

from typing import Sequence

__all__ = ["quantile"]


def quantile(xs: Sequence[float], q: float, *, presorted: bool = False) -> float:
    """The nearest-rank `q`-quantile (the value at index floor(q * n), clamped); nan when empty.
    Pass `presorted=True` to take several quantiles of one sorted list without re-sorting.

    >>> quantile([3.0, 1.0, 2.0, 4.0], 0.5)
    3.0
    """
    if not xs:
        return float("nan")
    ordered = xs if presorted else sorted(xs)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])
