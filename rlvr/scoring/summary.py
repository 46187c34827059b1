"""The summary of a scoring run: counts by status, the mean score, latencies, the slowest rows."""
from __future__ import annotations

import heapq
from array import array
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import reduce
from operator import add

from rlvr.core import FAILED_STATUSES, STATUSES
from rlvr.stats import quantile

__all__ = ["ScoreSummary", "UNSCORED", "failure_key"]

UNSCORED = FAILED_STATUSES
"""Statuses whose score does not count towards the scored mean (they count as 0 in the
all-rows mean, and any of them makes `rlvr score` exit 3)."""

_LINE_PREFIX = re.compile(r"^line \d+: ")


def failure_key(status: str, reason: str | None) -> str:
    """How failed rows are grouped in the summary: status and reason, without the line number."""
    return f"{status}: {_LINE_PREFIX.sub('', reason or 'no reason')[:200]}"


def _keep_slowest(heap: list, item: tuple, n: int = 5) -> None:
    """Keep the `n` largest (latency, line, id) items in the min-heap `heap`."""
    if len(heap) < n:
        heapq.heappush(heap, item)
    elif item > heap[0]:
        heapq.heapreplace(heap, item)


@dataclass
class ScoreSummary:
    rows: int = 0
    resumed_rows: int = 0
    by_status: Counter = field(default_factory=Counter)
    score_sum: float = 0.0
    scored: int = 0
    latencies: array = field(default_factory=lambda: array("d"))
    slowest: list = field(default_factory=list)   # min-heap of (latency, line, id)
    failures: Counter = field(default_factory=Counter)   # failure_key -> rows

    def add(self, status: str, score: float | None, latency: float, line: int, row_id,
            reason: str | None = None) -> None:
        self.rows += 1
        self.by_status[status] += 1
        if status not in UNSCORED and score is not None:
            self.score_sum += score
            self.scored += 1
        elif status in UNSCORED:
            self.failures[failure_key(status, reason)] += 1
        self.latencies.append(latency)
        _keep_slowest(self.slowest, (latency, line, str(row_id)))

    def merge(self, part: "_Scored") -> None:
        """Fold in a run of rows summarised by a worker: the same totals as `add` per row."""
        self.rows += part.rows
        self.by_status.update(part.by_status)
        self.score_sum = reduce(add, part.scores, self.score_sum)   # same order as row by row
        self.scored += len(part.scores)
        self.latencies.extend(part.latencies)
        for item in part.slowest:
            _keep_slowest(self.slowest, item)
        self.failures.update(part.failures)

    @property
    def mean_score(self) -> float | None:
        return self.score_sum / self.scored if self.scored else None

    @property
    def mean_all_rows(self) -> float | None:
        """The mean with every failed row counted as 0: what a reader of the file would get."""
        return self.score_sum / self.rows if self.rows else None

    @property
    def error_rows(self) -> int:
        """Rows that ended without a score (timeout, error, infra_error, gold_unparseable)."""
        return sum(self.by_status[s] for s in UNSCORED)

    def to_dict(self) -> dict:
        ordered = sorted(self.latencies)        # sorted once for both percentiles
        pick = lambda q: quantile(ordered, q, presorted=True) if ordered else 0.0  # noqa: E731
        return {"rows": self.rows, "resumed_rows": self.resumed_rows,
                "mean_score": self.mean_score, "scored_rows": self.scored,
                "mean_score_all_rows": self.mean_all_rows, "failed_rows": self.error_rows,
                "top_failures": dict(self.failures.most_common(5)),
                "by_status": {s: self.by_status[s] for s in STATUSES if self.by_status[s]},
                "latency_p50_s": pick(0.5), "latency_p99_s": pick(0.99),
                "slowest": [{"line": ln, "id": i, "latency_s": lat}
                            for lat, ln, i in sorted(self.slowest, reverse=True)]}

    def render(self) -> str:
        d = self.to_dict()
        mean = "n/a" if d["mean_score"] is None else f"{d['mean_score']:.4f}"
        mean_all = "n/a" if d["mean_score_all_rows"] is None else f"{d['mean_score_all_rows']:.4f}"
        lines = [f"rows: {d['rows']} ({d['resumed_rows']} from an earlier run)",
                 f"mean score: {mean} over {d['scored_rows']} scored rows; {mean_all} over all "
                 f"{d['rows']} rows with the {d['failed_rows']} failed rows counted as 0",
                 "status: " + ", ".join(f"{k}={v}" for k, v in d["by_status"].items()),
                 f"latency p50: {d['latency_p50_s'] * 1e3:.2f} ms, "
                 f"p99: {d['latency_p99_s'] * 1e3:.2f} ms",
                 "slowest: " + ", ".join(f"line {s['line']} ({s['latency_s'] * 1e3:.1f} ms)"
                                         for s in d["slowest"])]
        if d["top_failures"]:
            lines.append("failed rows (not scored), top reasons:")
            lines.extend(f"  {n:>6} x {key}" for key, n in d["top_failures"].items())
        return "\n".join(lines)
