"""What a dataset build reports: tasks, sampled, solved and kept rows, pass rate per task."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from statistics import mean

__all__ = ["DistillSummary", "TaskCount"]


@dataclass(frozen=True)
class TaskCount:
    sampled: int
    solved: int
    kept: int


@dataclass
class DistillSummary:
    """Counts over every task of the run (resumed ones included)."""
    teacher: str = ""
    k: int = 0
    tasks_asked: int = 0
    per_task: dict[str, TaskCount] = field(default_factory=dict)
    statuses: Counter = field(default_factory=Counter)
    kept_lengths: list[int] = field(default_factory=list)
    """Length of each kept row: tokens when counted, else characters (see `length_unit`)."""
    length_unit: str = "tokens"
    failed_tasks: dict[str, str] = field(default_factory=dict)
    """Tasks the teacher could not serve: left out, sampled again by a rerun."""
    integrity: object = None
    """The monitor's `IntegrityReport` on the verified traces (None when it was off)."""

    def add(self, task_id: str, count: TaskCount, rows: list[dict], kept: list[dict],
            length) -> None:
        self.per_task[task_id] = count
        self.statuses.update(r["status"] for r in rows)
        self.kept_lengths.extend(length(r) for r in kept)
        if any(r.get("completion_tokens") is None for r in kept):
            self.length_unit = "characters"

    @property
    def sampled(self) -> int:
        return sum(c.sampled for c in self.per_task.values())

    @property
    def solved(self) -> int:
        return sum(c.solved for c in self.per_task.values())

    @property
    def kept(self) -> int:
        return sum(c.kept for c in self.per_task.values())

    @property
    def error_rows(self) -> int:
        """Rows whose verdict is a failure of ours (error, timeout, infra_error)."""
        return sum(n for s, n in self.statuses.items() if s in ("error", "timeout",
                                                               "infra_error"))

    def pass_rates(self) -> dict[str, float]:
        return {t: c.solved / c.sampled for t, c in self.per_task.items() if c.sampled}

    def to_dict(self) -> dict:
        return {"teacher": self.teacher, "k": self.k, "tasks": self.tasks_asked,
                "sampled": self.sampled, "solved": self.solved, "kept": self.kept,
                "tasks_with_kept_rows": sum(c.kept > 0 for c in self.per_task.values()),
                "statuses": dict(self.statuses), "length_unit": self.length_unit,
                "kept_length": _stats(self.kept_lengths),
                "pass_rate": {t: round(p, 6) for t, p in self.pass_rates().items()},
                "per_task": {t: vars(c) for t, c in self.per_task.items()},
                "failed_tasks": self.failed_tasks,
                "integrity": self.integrity.to_dict() if self.integrity is not None else None}

    def render(self) -> str:
        rates = list(self.pass_rates().values())
        lines = [f"teacher {self.teacher}: {self.tasks_asked} tasks, {self.sampled} completions "
                 f"sampled ({self.k} per task), {self.solved} verified, {self.kept} kept",
                 f"tasks with a kept row: {sum(c.kept > 0 for c in self.per_task.values())} of "
                 f"{self.tasks_asked}"]
        if rates:
            lines.append(f"pass rate per task: mean {mean(rates):.3f}; none solved "
                         f"{sum(r == 0 for r in rates)}, all solved {sum(r == 1 for r in rates)}, "
                         f"some {sum(0 < r < 1 for r in rates)}")
        if self.kept_lengths:
            s = _stats(self.kept_lengths)
            lines.append(f"kept length ({self.length_unit}): mean {s['mean']:.1f}, "
                         f"min {s['min']}, p50 {s['p50']}, max {s['max']}")
        lines.append("status: " + (", ".join(f"{s}={n}" for s, n in sorted(self.statuses.items()))
                                   or "(none)"))
        if self.integrity is not None:
            lines.append(self.integrity.render())
        if self.failed_tasks:
            lines.append(f"FAILED: {len(self.failed_tasks)} tasks could not be sampled (left "
                         f"out; rerun to retry), e.g. {next(iter(self.failed_tasks.values()))}")
        return "\n".join(lines)


def _stats(xs: list[int]) -> dict:
    if not xs:
        return {}
    s = sorted(xs)
    return {"mean": sum(s) / len(s), "min": s[0], "p50": s[len(s) // 2], "max": s[-1]}
