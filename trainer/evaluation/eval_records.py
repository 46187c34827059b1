"""`rlvr eval`'s per-sample rows: per-task seeds, one record per task, and the resumable file.

Each sampled (or greedy) completion is one JSONL row carrying the task `id` and its
`completion`, so the file is a valid `rlvr score --env ENV` input (the environment regenerates
the task from its id), plus the verdict it got here. A task's rows are written together, each
saying how many rows the task has (`of`), so a run killed mid-write is recognised on resume
and the partial task is sampled again.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["task_seeds", "task_fingerprint", "TaskRecord", "SampleStore", "ResumeMismatch"]


def task_seeds(seed: int, task_ids: list[str]) -> list[int]:
    """One sampling seed per task from (seed, task id) with numpy's SeedSequence, the trainer's
    way of deriving independent streams (trainer/parallel/distributed.py `group_seeds`), keyed by the id
    instead of a position: the same task gets the same samples in any order, batch or subset."""
    out = []
    for tid in task_ids:
        words = np.frombuffer(hashlib.blake2b(tid.encode(), digest_size=16).digest(), np.uint32)
        state = np.random.SeedSequence([seed, *words.tolist()]).generate_state(1, np.uint64)[0]
        out.append(int(state % (2**63 - 1)))
    return out


def task_fingerprint(task) -> str:
    """A short hash of what a task asks and expects (prompt and gold answer): two results that
    share a task id but not its fingerprint evaluated different problems under that id (an
    environment built with other arguments), and must not be compared."""
    body = json.dumps([task.prompt, task.answer], sort_keys=True, default=str)
    return hashlib.blake2b(body.encode(), digest_size=8).hexdigest()


def _json_safe(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    try:
        json.dumps(v)
        return v
    except (TypeError, ValueError):
        return str(v)


@dataclass
class TaskRecord:
    """One task's rows: its greedy completion (0 or 1) and its n samples."""
    id: str
    seed: int
    greedy: list[dict] = field(default_factory=list)
    samples: list[dict] = field(default_factory=list)

    @property
    def correct(self) -> int:
        return sum(bool(s["correct"]) for s in self.samples)

    @property
    def greedy_correct(self) -> bool:
        return bool(self.greedy and self.greedy[0]["correct"])

    def rows(self) -> list[dict]:
        return self.greedy + self.samples

    @classmethod
    def from_scored(cls, task, seed: int, greedy, samples, parser, correct) -> "TaskRecord":
        """From (Completion, Verdict) pairs; `correct(verdict)` decides what counts as solved."""
        gold = task.answer if isinstance(task.answer, (str, int, float)) else None
        total = len(greedy) + len(samples)

        def row(kind: str, j: int, c, v) -> dict:
            return {"id": task.id, "kind": kind, "sample": j, "of": total, "seed": seed,
                    "completion": c.text, "finish_reason": c.finish_reason,
                    "tokens": len(c.token_ids) if c.token_ids is not None else None,
                    "correct": bool(correct(v)), "score": v.score, "status": v.status,
                    "extracted": _json_safe(v.extracted), "reason": v.reason,
                    "well_formed": bool(parser.parse(c.text).well_formed), "gold": gold}
        return cls(task.id, seed, [row("greedy", 0, c, v) for c, v in greedy],
                   [row("sample", j, c, v) for j, (c, v) in enumerate(samples)])


class ResumeMismatch(ValueError):
    """The output already holds a run with other settings."""


class SampleStore:
    """OUT.samples.jsonl plus OUT.samples.meta.json (the settings it was made with)."""

    def __init__(self, path: str | Path, identity: dict):
        self.path = Path(path)
        self.meta = self.path.with_name(self.path.name.removesuffix(".jsonl") + ".meta.json")
        self.identity = json.loads(json.dumps(identity, default=str))
        if self.path.exists() and self.path.stat().st_size:
            self._check_identity()
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.meta.write_text(json.dumps(self.identity, indent=1))
            self.path.write_text("")

    def _check_identity(self) -> None:
        if not self.meta.exists():
            raise ResumeMismatch(f"{self.path} exists but {self.meta} (its settings) does not; "
                                 "move it away or write elsewhere")
        saved = json.loads(self.meta.read_text())
        diff = sorted(k for k in set(saved) | set(self.identity)
                      if saved.get(k) != self.identity.get(k))
        if diff:
            what = ", ".join(f"{k}: {saved.get(k)!r} -> {self.identity.get(k)!r}" for k in diff)
            raise ResumeMismatch(f"{self.path} holds a run with other settings ({what}); "
                                 "rerun with the same settings to resume, or write elsewhere")

    def finished(self) -> dict[str, TaskRecord]:
        """Tasks whose rows are all on disk; rewrites the file without partial ones."""
        by_id: dict[str, list[dict]] = {}
        dirty = False
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                try:
                    row = json.loads(line)
                    by_id.setdefault(row["id"], []).append(row)
                except (json.JSONDecodeError, KeyError, TypeError):
                    dirty = True          # a line cut short by a kill
        done = {}
        for tid, rows in by_id.items():
            if rows and len(rows) == rows[0].get("of"):
                done[tid] = TaskRecord(tid, rows[0]["seed"],
                                       [r for r in rows if r["kind"] == "greedy"],
                                       [r for r in rows if r["kind"] == "sample"])
            else:
                dirty = True
        if dirty:
            tmp = self.path.with_name(self.path.name + ".tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                for rec in done.values():
                    f.writelines(json.dumps(r) + "\n" for r in rec.rows())
            tmp.replace(self.path)
        return done

    def write(self, rec: TaskRecord) -> None:
        """Append one task's rows in one write, flushed to disk before the next task starts."""
        with open(self.path, "a", encoding="utf-8") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rec.rows()))
            f.flush()
            os.fsync(f.fileno())
