"""The reasoning boundary of two models on the same tasks: coverage, support, and crossings.

pass@k at large k asks which problems a model can solve *at all*. Three views complete it:

- **Cover@tau**: the fraction of tasks whose success rate c/n is at least tau (Dragoi et al.
  2025, "Beyond Pass@k: Breadth-Depth Metrics for Reasoning Boundaries"). Small tau measures
  breadth, large tau reliability; pass@k is a Beta-weighted average of it, weighted towards
  tau near 0, which is why a guesser's pass@k still climbs at large k.
- **Support counts**: per task, solved (at least one right sample) by both models, by only the
  first, by only the second, by neither. A second model that solves nothing the first did not
  has *preserved or shrunk* the support; one that solves new tasks *expanded* it (Wu et al.
  2025, "The Invisible Leash: Why RLVR May Not Escape Its Origin").
- **The crossing**: the smallest k at which the first model's pass@k curve falls below the
  second's (Yue et al. 2025, "Does Reinforcement Learning Really Incentivize Reasoning
  Capacity in LLMs Beyond the Base Model?"), with a bootstrap band over tasks: the same
  resampled task sets for both models, so the band is of the *paired* difference.

A leaf module (numpy and rlvr.passk): the reports, plots and tests import it without torch.

>>> cover_at_tau([4, 4, 4], [0, 1, 4], [0.25, 1.0])
[0.6666666666666666, 0.3333333333333333]
>>> support_counts([0, 1, 4, 0], [2, 0, 4, 0])
SupportCounts(both=1, only_first=1, only_second=1, neither=1)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from rlvr.passk import pass_at_k_matrix

__all__ = ["cover_at_tau", "SupportCounts", "support_counts", "Crossing", "crossing_k"]


def _rates(ns: int | Sequence[int], counts: Sequence[int]) -> np.ndarray:
    ns = [ns] * len(counts) if isinstance(ns, int) else list(ns)
    if len(ns) != len(counts):
        raise ValueError(f"{len(ns)} sample counts for {len(counts)} tasks")
    if not counts:
        raise ValueError("no tasks")
    for n, c in zip(ns, counts):
        if not 0 <= c <= n or n < 1:
            raise ValueError(f"need 0 <= c <= n and n >= 1, got n={n} c={c}")
    return np.asarray(counts, dtype=np.float64) / np.asarray(ns, dtype=np.float64)


def cover_at_tau(ns: int | Sequence[int], counts: Sequence[int],
                 taus: Sequence[float]) -> list[float]:
    """Cover@tau for each tau: the fraction of tasks with c/n >= tau (Dragoi et al. 2025).

    tau = 0 would count every task, solved or not, so taus must lie in (0, 1].
    """
    rates = _rates(ns, counts)
    out = []
    for tau in taus:
        if not 0 < tau <= 1:
            raise ValueError(f"tau must be in (0, 1], got {tau}")
        # a small tolerance so that c/n == tau counts despite float division (1/3 >= 1/3)
        out.append(float(np.mean(rates >= tau - 1e-12)))
    return out


@dataclass(frozen=True)
class SupportCounts:
    """How many tasks each model solves at least once, split by who solves them."""
    both: int
    only_first: int
    only_second: int
    neither: int

    @property
    def verdict(self) -> str:
        """What the second model did to the first's support (Wu et al. 2025's terms)."""
        if self.only_second and self.only_first:
            return "shifted"            # gained some tasks and lost others
        if self.only_second:
            return "expanded"
        if self.only_first:
            return "shrunk"
        return "preserved"

    def to_dict(self) -> dict:
        return {"both": self.both, "only_first": self.only_first,
                "only_second": self.only_second, "neither": self.neither,
                "verdict": self.verdict}


def support_counts(first: Sequence[int], second: Sequence[int]) -> SupportCounts:
    """Support counts from two models' per-task correct counts, task i the same in both."""
    if len(first) != len(second):
        raise ValueError(f"{len(first)} tasks against {len(second)}: the same tasks are needed")
    a = np.asarray(first) > 0
    b = np.asarray(second) > 0
    return SupportCounts(both=int(np.sum(a & b)), only_first=int(np.sum(a & ~b)),
                         only_second=int(np.sum(~a & b)), neither=int(np.sum(~a & ~b)))


@dataclass(frozen=True)
class Crossing:
    """The first k at which the first curve drops below the second, and its bootstrap band.

    `k` is None when the point curves never cross inside the ks evaluated. `low`/`high` are
    percentiles of the crossing k over resampled task sets; `never` is the fraction of
    resamples without a crossing (their crossing is past the largest k, so a band reaching
    it is open-ended).
    """
    k: int | None
    low: float | None
    high: float | None
    never: float
    resamples: int

    def to_dict(self) -> dict:
        return {"k": self.k, "low": self.low, "high": self.high, "never_crossed": self.never,
                "resamples": self.resamples}


def _first_below(diff: np.ndarray, ks: np.ndarray) -> float:
    """The first k where diff (first - second) < 0 after having been >= 0; nan if none."""
    below = diff < -1e-12
    if not below.any() or below[0]:
        # a curve that starts below is not a crossing of the kind the claim is about
        return float("nan")
    return float(ks[int(np.argmax(below))])


def crossing_k(ns_first: int | Sequence[int], first: Sequence[int],
               ns_second: int | Sequence[int], second: Sequence[int], ks: Sequence[int],
               resamples: int = 1000, level: float = 0.95, seed: int = 0) -> Crossing:
    """Where the first model's pass@k falls below the second's, with a paired task bootstrap."""
    if len(first) != len(second):
        raise ValueError(f"{len(first)} tasks against {len(second)}: the same tasks are needed")
    ks_arr = np.asarray(sorted({int(k) for k in ks}))
    na = [ns_first] * len(first) if isinstance(ns_first, int) else list(ns_first)
    nb = [ns_second] * len(second) if isinstance(ns_second, int) else list(ns_second)
    pa = pass_at_k_matrix(na, first, ks_arr)
    pb = pass_at_k_matrix(nb, second, ks_arr)
    per_task = pa - pb
    point = _first_below(per_task.mean(0), ks_arr)
    k = None if np.isnan(point) else int(point)
    if resamples <= 0:
        return Crossing(k, None, None, float(k is None), 0)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(first), size=(resamples, len(first)))
    found = np.array([_first_below(per_task[i].mean(0), ks_arr) for i in idx])
    crossed = found[~np.isnan(found)]
    never = 1.0 - len(crossed) / resamples
    if not len(crossed):
        return Crossing(k, None, None, never, resamples)
    alpha = (1 - level) / 2
    low, high = np.quantile(crossed, [alpha, 1 - alpha])
    return Crossing(k, float(low), float(high), never, resamples)
