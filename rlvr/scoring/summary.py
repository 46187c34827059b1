"""The summary of a scoring run: counts by status, the mean score, latencies, the slowest rows."""
from __future__ import annotations

import heapq
import re
import zlib
from array import array
from collections import Counter
from dataclasses import dataclass, field
from functools import reduce
from operator import add

from rlvr.core import FAILED_STATUSES, OK, STATUSES
from rlvr.stats import quantile

__all__ = ["ScoreSummary", "UNSCORED", "failure_key", "add_failure", "add_counts"]

UNSCORED = FAILED_STATUSES
"""Statuses whose score does not count towards the scored mean (they count as 0 in the
all-rows mean, and any of them makes `rlvr score` exit 3)."""

_LINE_PREFIX = re.compile(r"^line \d+: ")
_QUOTED = re.compile(r"(?<!\w)('[^']*'|\"[^\"]*\")(?!\w)")
_HOLE = "\0"          # where a group's varying value goes in its key
_SHOWN = 3            # examples shown per failure group
_TOP = 5              # failure groups shown in the summary


def failure_key(status: str, reason: str | None) -> tuple[str, str | None]:
    """How failed rows are grouped in the summary, and the row's example of its group: status
    and reason without the line number and without the reason's first quoted value (a task
    id, a field's value), which is the example -- so fifty unknown task ids are one group."""
    text = _LINE_PREFIX.sub("", reason or "no reason")[:200]
    quoted = _QUOTED.search(text)
    if quoted is None:
        return f"{status}: {text}", None
    return f"{status}: {text[:quoted.start()]}{_HOLE}{text[quoted.end():]}", quoted.group(0)


def add_failure(groups: dict, key: str, example: str | None, rows: int = 1) -> None:
    """Count `rows` failed rows into `groups` {key: [rows, distinct examples]}, in place."""
    group = groups.setdefault(key, [0, []])
    group[0] += rows
    if example is not None and example not in group[1] and len(group[1]) <= _SHOWN:
        group[1].append(example)      # one more than shown: tells one value from several


def failure_text(key: str, rows: int, examples: list) -> str:
    """A group as the summary prints it: its one value in place, or a few examples."""
    if _HOLE not in key:
        return key
    if len(examples) == 1:
        return key.replace(_HOLE, examples[0])
    shown = examples[:_SHOWN]
    return key.replace(_HOLE, f"(e.g. {', '.join(shown)}{', ...' if rows > len(shown) else ''})")


def add_counts(total: dict, counts) -> None:
    """Add an environment's summary counts {name: (hits, out of)} into `total`, in place."""
    for name, (hits, of) in counts.items():
        old = total.get(name, (0, 0))
        total[name] = (old[0] + hits, old[1] + of)


def task_key(row_id, line: int) -> int:
    """A stable 63-bit key of a row's task id (the same in every worker process, unlike
    `hash()`); a row without an id is a task of its own."""
    text = str(row_id).encode() if row_id is not None else b"\0line:%d" % line
    return (zlib.crc32(text) << 31) ^ zlib.adler32(text)      # two C checksums: ~0.1 us


def pass_at_k_sample(row: dict, solved: bool | None = None) -> bool | None:
    """None when a row is not one of its task's samples for pass@k, else whether it solved
    the task. `rlvr eval` writes a `kind: greedy` row per task beside the n sampled ones, and
    the greedy completion is not one of the n samples the estimator assumes (counting it
    would bias pass@k towards greedy). `solved` defaults to the row's own `solved` field
    (`Verdict.solved`); rows written before it existed fall back to status ok and score >= 1."""
    if row.get("kind") == "greedy":
        return None
    if solved is None:
        solved = row.get("solved")
    if solved is None:
        score = row.get("score")
        solved = row.get("status") == OK and score is not None and score >= 1.0
    return bool(solved)


def pass_at_k_by_task(keys: array, solved: bytes) -> dict | None:
    """When some task has several samples: tasks, samples per task, and the mean unbiased
    pass@k over tasks (Chen et al. 2021) for k = 1, 2, 4, ... up to the fewest samples any task
    has. None when every task has one sample."""
    import numpy as np
    from rlvr.passk import pass_at_k
    if not keys:
        return None
    _, inverse, n = np.unique(np.frombuffer(keys, dtype=np.int64), return_inverse=True,
                              return_counts=True)
    if n.max() < 2:
        return None
    c = np.bincount(inverse, weights=np.frombuffer(solved, dtype=np.uint8), minlength=len(n))
    ks = [k for k in (2 ** i for i in range(int(n.min()).bit_length())) if k <= n.min()]
    return {"tasks": int(len(n)), "samples_min": int(n.min()), "samples_max": int(n.max()),
            "pass_at_k": {k: float(np.mean([pass_at_k(int(ni), int(ci), k)
                                            for ni, ci in zip(n, c)])) for k in ks}}


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
    failures: dict = field(default_factory=dict)   # failure_key -> [rows, examples]
    counts: dict = field(default_factory=dict)   # Environment.summary_counts, added up
    task_keys: array = field(default_factory=lambda: array("q"))   # per row, for pass@k
    solved: bytearray = field(default_factory=bytearray)          # per row, 1 = correct

    def add(self, status: str, score: float | None, latency: float, line: int, row_id,
            reason: str | None = None, counts=None, sample: bool | None = False) -> None:
        """`sample`: `pass_at_k_sample`'s answer for the row (None: not a pass@k sample)."""
        self.rows += 1
        self.by_status[status] += 1
        if status not in UNSCORED and score is not None:
            self.score_sum += score
            self.scored += 1
        elif status in UNSCORED:
            add_failure(self.failures, *failure_key(status, reason))
        self.latencies.append(latency)
        _keep_slowest(self.slowest, (latency, line, str(row_id)))
        if sample is not None:
            self.task_keys.append(task_key(row_id, line))
            self.solved.append(int(sample))
        add_counts(self.counts, counts or {})

    def merge(self, part) -> None:
        """Fold in a run of rows summarised by a worker: the same totals as `add` per row."""
        self.rows += part.rows
        self.by_status.update(part.by_status)
        self.score_sum = reduce(add, part.scores, self.score_sum)   # same order as row by row
        self.scored += len(part.scores)
        self.latencies.extend(part.latencies)
        self.task_keys.extend(part.task_keys)
        self.solved += part.solved
        for item in part.slowest:
            _keep_slowest(self.slowest, item)
        for key, (rows, examples) in part.failures.items():
            add_failure(self.failures, key, None, rows)
            for example in examples:
                add_failure(self.failures, key, example, 0)
        add_counts(self.counts, part.counts)

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
                **self._failures(),
                "by_status": {s: self.by_status[s] for s in STATUSES if self.by_status[s]},
                "latency_p50_s": pick(0.5), "latency_p99_s": pick(0.99),
                "slowest": [{"line": ln, "id": i, "latency_s": lat}
                            for lat, ln, i in sorted(self.slowest, reverse=True)],
                **({"samples": by_task} if (by_task := pass_at_k_by_task(
                    self.task_keys, bytes(self.solved))) else {}),
                **({"counts": {k: {"ratio": h / n if n else None, "hits": h, "of": n}
                               for k, (h, n) in self.counts.items()}} if self.counts else {})}

    def _failures(self) -> dict:
        """The most frequent failure groups as {text: rows}, and how many rows the rest hold."""
        ranked = sorted(self.failures.items(), key=lambda kv: -kv[1][0])
        rest = ranked[_TOP:]
        return {"top_failures": {failure_text(key, n, ex): n for key, (n, ex) in ranked[:_TOP]},
                **({"other_failures": {"reasons": len(rest), "rows": sum(n for _, (n, _) in rest)}}
                   if rest else {})}

    def render(self) -> str:
        d = self.to_dict()
        mean = "n/a" if d["mean_score"] is None else f"{d['mean_score']:.4f}"
        mean_all = "n/a" if d["mean_score_all_rows"] is None else f"{d['mean_score_all_rows']:.4f}"
        failed = (f"; {mean_all} over all {d['rows']} rows with the {d['failed_rows']} failed "
                  "rows counted as 0") if d["failed_rows"] else ""
        lines = [f"rows: {d['rows']} ({d['resumed_rows']} from an earlier run)",
                 f"mean score: {mean} over {d['scored_rows']} scored rows{failed}",
                 *(f"{k}: {c['ratio']:.4f} ({c['hits']:g} of {c['of']:g})"
                   for k, c in d.get("counts", {}).items() if c["of"]),
                 "status: " + ", ".join(f"{k}={v}" for k, v in d["by_status"].items()),
                 f"latency p50: {d['latency_p50_s'] * 1e3:.2f} ms, "
                 f"p99: {d['latency_p99_s'] * 1e3:.2f} ms",
                 "slowest: " + ", ".join(f"line {s['line']} ({s['latency_s'] * 1e3:.1f} ms)"
                                         for s in d["slowest"])]
        if "samples" in d:
            by = d["samples"]
            lines.append(f"pass@k over {by['tasks']} tasks ({by['samples_min']}-"
                         f"{by['samples_max']} samples each): " + ", ".join(
                             f"pass@{k} {v:.4f}" for k, v in by["pass_at_k"].items()))
        if d["top_failures"]:
            lines.append("failed rows (not scored), top reasons:")
            lines.extend(f"  {n:>6} x {key}" for key, n in d["top_failures"].items())
            if "other_failures" in d:
                other = d["other_failures"]
                lines.append(f"  +{other['reasons']} more reasons ({other['rows']} rows)")
        return "\n".join(lines)
