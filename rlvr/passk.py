"""pass@k: the unbiased estimator and bootstrap confidence intervals over tasks.

Draw n completions for a task, count the c correct ones; the probability that at least one of k
completions drawn from those n *without replacement* is correct is

    pass@k = 1 - C(n - c, k) / C(n, k)        (Chen et al. 2021, "Evaluating Large Language
                                               Models Trained on Code", section 2.1)

an unbiased estimate of the task's true pass@k (1 - (1 - c/n)^k is biased upwards). A model's
pass@k is the mean over tasks. Its uncertainty comes mostly from *which tasks* were drawn, so
the interval resamples tasks with replacement (percentile bootstrap, Efron & Tibshirani 1993,
ch. 13) and recomputes the mean.

A leaf module (numpy and the standard library only): the trainer, `rlvr eval`, the plots and
`rlvr score` all import it without torch.

>>> pass_at_k(n=4, c=1, k=2)        # 1 - C(3,2)/C(4,2) = 1 - 3/6
0.5
>>> mean_pass_at_k(4, [0, 1, 4], 2)
0.5
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["pass_at_k", "mean_pass_at_k", "pass_at_k_matrix", "PassAtK", "pass_at_k_curve"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct (Chen et al. 2021): 1 - C(n-c,k)/C(n,k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mean_pass_at_k(n: int | Sequence[int], correct_counts: Sequence[int], k: int) -> float:
    """pass@k averaged over tasks; `n` is one sample count for all tasks or one per task."""
    if not len(correct_counts):
        raise ValueError("no tasks to average over")
    ns = [n] * len(correct_counts) if isinstance(n, int) else list(n)
    return sum(pass_at_k(ni, c, k) for ni, c in zip(ns, correct_counts, strict=True)) \
        / len(correct_counts)


def pass_at_k_matrix(ns: Sequence[int], counts: Sequence[int], ks: Sequence[int]) -> np.ndarray:
    """[tasks, len(ks)] per-task pass@k: the bootstrap resamples its rows."""
    return np.array([[pass_at_k(n, c, k) for k in ks] for n, c in zip(ns, counts, strict=True)],
                    dtype=np.float64).reshape(len(counts), len(ks))


@dataclass
class PassAtK:
    """pass@k for each k, with a (level) bootstrap interval over tasks."""
    ks: list[int]
    value: list[float]
    low: list[float]
    high: list[float]
    tasks: int
    level: float
    resamples: int

    def to_dict(self) -> dict:
        return {f"pass@{k}": {"value": v, "low": lo, "high": hi}
                for k, v, lo, hi in zip(self.ks, self.value, self.low, self.high)}


def pass_at_k_curve(counts: Sequence[int], n: int | Sequence[int], ks: Sequence[int],
                    resamples: int = 1000, level: float = 0.95, seed: int = 0) -> PassAtK:
    """Mean pass@k over tasks for each k, with a percentile-bootstrap interval over tasks.

    Every k uses the same resampled task sets, so the band of the curve is coherent (a resample
    that drew hard tasks is low at every k). `resamples=0` gives the point estimates only.
    """
    ks = sorted({int(k) for k in ks})
    ns = [n] * len(counts) if isinstance(n, int) else list(n)
    if not counts:
        raise ValueError("no tasks to average over")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    per_task = pass_at_k_matrix(ns, counts, ks)
    value = per_task.mean(0)
    if resamples <= 0:
        return PassAtK(ks, value.tolist(), value.tolist(), value.tolist(), len(counts), level, 0)
    rng = np.random.default_rng(seed)
    means = np.empty((resamples, len(ks)))
    for start in range(0, resamples, 256):        # 256 resamples at a time bound the memory
        stop = min(resamples, start + 256)
        idx = rng.integers(0, len(counts), size=(stop - start, len(counts)))
        means[start:stop] = per_task[idx].mean(1)
    alpha = (1 - level) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha], axis=0)
    return PassAtK(ks, value.tolist(), low.tolist(), high.tolist(), len(counts), level, resamples)
