"""The monitor on a dataset of verified traces: the detectors and the second opinion on every
trace a distillation would keep, and the integrity table of what they found.

One hack-contaminated trace in a hundred is enough for a student to learn the hack and for later
RL to amplify it, so a trace that carries a detector's signature, or that the independent
checker does not accept, is dropped by default (and counted either way)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from rlvr.audit.strategy import task_kind
from rlvr.core import Completion

from .detectors import detect, detectors_for, make_sample
from .second_opinion import PASS, second_opinion_for

__all__ = ["TraceScreen", "IntegrityReport", "SECOND_OPINION"]

SECOND_OPINION = "second-opinion"
"""The flag of a verified trace the independent checker does not reward."""


@dataclass
class IntegrityReport:
    """Counts over the traces checked: flags by detector, second-opinion refusals, drops."""
    checked: int = 0
    flagged: int = 0
    by_flag: Counter = field(default_factory=Counter)
    dropped: int = 0
    second_opinion: str = ""
    second_opinion_failed: int = 0

    def to_dict(self) -> dict:
        return {"checked": self.checked, "flagged": self.flagged, "dropped": self.dropped,
                "by_flag": dict(self.by_flag), "second_opinion": self.second_opinion,
                "second_opinion_failed": self.second_opinion_failed}

    def render(self) -> str:
        lines = [f"integrity: {self.checked} verified traces checked, {self.flagged} flagged, "
                 f"{self.dropped} dropped (second opinion: {self.second_opinion})"]
        for name, n in self.by_flag.most_common():
            lines.append(f"  {name:22s} {n:6d}  {n / max(self.checked, 1):7.1%}")
        if self.second_opinion_failed:
            lines.append(f"  the second opinion failed on {self.second_opinion_failed} traces "
                         "(counted, not flagged)")
        return "\n".join(lines)


class TraceScreen:
    """`flags(task, text)` for one verified trace of environment `env` (registered as
    `env_name`); `drop` says whether flagged traces leave the dataset."""

    def __init__(self, env, env_name: str, drop: bool = True):
        self.env, self.drop = env, drop
        self.checker, why = second_opinion_for(env, env_name)
        self.report = IntegrityReport(second_opinion=why)

    def flags(self, task, text: str, finish_reason: str = "stop") -> list[str]:
        kind = task_kind(self.env, task)
        sample = make_sample(task, text, kind, self.env.parser, finish_reason=finish_reason)
        found = list(detect(sample, detectors_for(kind)))
        if self.checker is not None:
            theirs = self.checker.score(task, Completion(text, finish_reason=finish_reason))
            if theirs.failed:
                self.report.second_opinion_failed += 1
            elif theirs.score <= PASS:
                found.append(SECOND_OPINION)
        self.report.checked += 1
        self.report.flagged += bool(found)
        self.report.by_flag.update(found)
        return found

    def keep(self, task, row: dict) -> bool:
        """Check a verified row; False when it is flagged and flagged rows are dropped."""
        flagged = self.flags(task, row["completion"], row.get("finish_reason", "stop"))
        row["integrity_flags"] = flagged
        if flagged and self.drop:
            self.report.dropped += 1
            return False
        return True
