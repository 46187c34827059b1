"""What an audit found: one row per strategy, a table for people and a dict for CI."""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

from rlvr.core import ERROR, INFRA_ERROR, TIMEOUT, Verdict
from rlvr.stats import quantile

__all__ = ["StrategyResult", "AuditReport", "ESCAPES"]

ESCAPES = frozenset({TIMEOUT, ERROR, INFRA_ERROR})
"""Statuses a completion must never reach (they are the verifier's failures, left out of
training): an attack that ends in one has escaped the verdict."""

CONTROL = "wrong-perfect-format"
"""The control strategy: the plainest wrong answer (the gold perturbed, in the gold's exact
format). When it solves a task, the environment accepts more than the gold -- a tolerance, or
several right answers -- and the other wrong strategies' findings may be right answers."""

OTHER_KINDS = "applies to "
"""The note of a strategy skipped because it is for other kinds of environment."""

# A strategy's outcome: what the table's `result` column says.
PASS, REWARDED, REFUSED, ESCAPED, SKIPPED, BROKEN = (
    "pass", "REWARDED", "REFUSED", "ESCAPED", "skipped", "BROKEN")


@dataclass
class StrategyResult:
    """How one strategy fared on the audited tasks."""
    name: str
    legit: bool
    result: str
    attempts: int = 0
    mean_reward: float = 0.0
    rewarded: int = 0
    """Attempts that earned a score above 0 (above their control's, for attempts that carry
    one: what the attack alone earned)."""
    solved: int = 0
    """Attempts that solved their task (`Verdict.solved`)."""
    statuses: dict = field(default_factory=dict)
    p99_s: float = 0.0
    """The 99th percentile of verification time (seconds)."""
    example: dict = field(default_factory=dict)
    """One attempt: the first rewarded (wrong) or refused (legit) one, else the first."""
    note: str = ""
    """Why it was skipped, or what broke."""

    @property
    def finding(self) -> bool:
        return self.result in (REWARDED, REFUSED, ESCAPED, BROKEN)

    @classmethod
    def scored(cls, name: str, legit: bool, rows: list[tuple]) -> "StrategyResult":
        """From (task id, attempt, verdict[, control's verdict]) rows."""
        verdicts = [row[2] for row in rows]
        rewarded = [v.score > _baseline(row) for v, row in zip(verdicts, rows)]
        solved = [v.solved for v in verdicts]
        escaped = [v.status in ESCAPES for v in verdicts]
        bad = [e or (not s if legit else r) for e, s, r in zip(escaped, solved, rewarded)]
        result = ESCAPED if any(escaped) else (REFUSED if legit else REWARDED) if any(bad) else PASS
        task_id, attempt, v = rows[bad.index(True) if any(bad) else 0][:3]
        return cls(name, legit, result, len(rows), sum(v.score for v in verdicts) / len(rows),
                   sum(rewarded), sum(solved), dict(Counter(v.status for v in verdicts)),
                   quantile([v.latency_s for v in verdicts], 0.99),
                   _example(task_id, attempt, v))


def _baseline(row: tuple) -> float:
    """What an attempt must not exceed: its control's score (0 when the control failed, as it
    has no score to compare with), or 0 without a control."""
    control = row[3] if len(row) > 3 else None
    return 0.0 if control is None or control.failed else control.score


def _example(task_id: str, attempt, verdict: Verdict, width: int = 400) -> dict:
    text = attempt.text
    if len(text) > width:
        text = f"{text[:width // 2]} ...[{len(attempt.text) - width} chars]... {text[-width // 2:]}"
    return {"task": task_id, "completion": text, "finish_reason": attempt.finish_reason,
            "score": verdict.score, "status": verdict.status, "reason": verdict.reason[:300]}


@dataclass
class AuditReport:
    """The audit of one environment."""
    env: str
    env_args: dict
    kind: str
    task_ids: list
    results: list[StrategyResult]
    versions: dict = field(default_factory=dict)

    @property
    def caveats(self) -> list[str]:
        """What limits the report's reading (the control solving its tasks)."""
        control = next((r for r in self.results if r.name == CONTROL), None)
        if control is None or not control.solved:
            return []
        return [f"{CONTROL} solved {control.solved} of {control.attempts}: this environment "
                "accepts values other than the gold (a tolerance, or several right answers), "
                "so wrong-answer findings may be right answers"]

    @property
    def findings(self) -> list[str]:
        """Names of the strategies that found a hole (or a right answer refused)."""
        return [r.name for r in self.results if r.finding]

    def to_dict(self) -> dict:
        return {"env": self.env, "env_args": self.env_args, "kind": self.kind,
                "tasks": self.task_ids, "versions": self.versions,
                "findings": self.findings, "passed": not self.findings,
                "caveats": self.caveats,
                "strategies": [asdict(r) for r in self.results]}

    def render(self, examples: bool = True) -> str:
        """The table (one row per strategy), then one example per strategy that ran."""
        head = (f"rlvr audit: {self.env} (kind {self.kind}, {len(self.task_ids)} tasks)",
                f"{'strategy':24} {'side':5} {'result':8} {'n':>4} {'mean':>6} {'>0':>4} "
                f"{'solved':>6} {'p99 s':>7}  statuses")
        lines = list(head)
        for r in self.results:
            if r.result == SKIPPED and r.note.startswith(OTHER_KINDS):
                continue                        # folded into one line below
            if r.result == SKIPPED or r.result == BROKEN:
                lines.append(f"{r.name:24} {'legit' if r.legit else 'wrong':5} {r.result:8} "
                             f"  {r.note}")
                continue
            statuses = ", ".join(f"{k} {v}" for k, v in sorted(r.statuses.items()))
            lines.append(f"{r.name:24} {'legit' if r.legit else 'wrong':5} {r.result:8} "
                         f"{r.attempts:4d} {r.mean_reward:6.3f} {r.rewarded:4d} {r.solved:6d} "
                         f"{r.p99_s:7.3f}  {statuses}")
        other = [r.name for r in self.results
                 if r.result == SKIPPED and r.note.startswith(OTHER_KINDS)]
        if other:
            lines.append(f"skipped (not for {self.kind} environments, {len(other)}): "
                         + ", ".join(other))
        found = self.findings
        lines.append(f"findings: {', '.join(found)}" if found else "findings: none")
        lines += [f"caveat: {c}" for c in self.caveats]
        if examples:
            lines.append("\nexamples:")
            for r in self.results:
                if r.example:
                    e = r.example
                    lines.append(f"  {r.name} [{e['task']}] score {e['score']:g} {e['status']}"
                                 f"{' (length)' if e['finish_reason'] == 'length' else ''}: "
                                 f"{e['completion'][:160]!r}"
                                 + (f" -- {e['reason'][:120]}" if e["reason"] else ""))
        return "\n".join(lines)

    def markdown(self) -> str:
        """The table as Markdown (docs/audit.md), with an example for each finding."""
        rows = ["| strategy | side | result | n | mean reward | >0 | solved | statuses | p99 s |",
                "|---|---|---|---:|---:|---:|---:|---|---:|"]
        notes = []
        for r in self.results:
            if r.result == SKIPPED:
                continue
            statuses = ", ".join(f"{k} {v}" for k, v in sorted(r.statuses.items()))
            rows.append(f"| {r.name} | {'legit' if r.legit else 'wrong'} | **{r.result}** | "
                        f"{r.attempts} | {r.mean_reward:.3f} | {r.rewarded} | {r.solved} | "
                        f"{statuses} | {r.p99_s:.3f} |" if r.finding else
                        f"| {r.name} | {'legit' if r.legit else 'wrong'} | {r.result} | "
                        f"{r.attempts} | {r.mean_reward:.3f} | {r.rewarded} | {r.solved} | "
                        f"{statuses} | {r.p99_s:.3f} |")
            if r.finding and r.example:
                e = r.example
                notes.append(f"- `{r.name}` ({e['task']}, score {e['score']:.3g}, {e['status']}"
                             f"{', finish_reason length' if e['finish_reason'] == 'length' else ''}"
                             f"): `{_inline(e['completion'], 140)}`"
                             + (f" -- {_inline(e['reason'], 140)}" if e["reason"] else ""))
        notes += [f"- caveat: {c}" for c in self.caveats]
        return "\n".join(rows + ([""] + notes if notes else []))


def _inline(text: str, width: int) -> str:
    """One line of Markdown code: no newlines or backticks, at most `width` characters."""
    flat = " ".join(text.replace("`", "'").split())
    return flat if len(flat) <= width else flat[:width - 3] + "..."
