"""A recipe of stages: each in its own folder under the recipe's, with a done.json when it has
finished (what it produced, the settings it was made with, how long it took). A rerun skips a
finished stage made with the same settings and refuses one whose settings changed, naming the
field and --overwrite, so the folder never records a setting a stage was not trained with."""
from __future__ import annotations

import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rlvr.trainer.run.resume import changed_fields

__all__ = ["Stage", "StagedRun"]


@dataclass(frozen=True)
class Stage:
    """One stage: its folder's name, the recipe fields it reads, and `work(folder) -> product`."""
    name: str
    uses: tuple[str, ...]
    work: Callable[[Path], Path]


class StagedRun:
    """The stages of one recipe run in `root`, with the recipe's `settings` (its config as a
    dict); `record` is the file in `root` that keeps those settings, `command` the recipe's."""

    def __init__(self, root: Path, settings: dict, command: str, record: str = "config.json"):
        self.root, self.settings, self.command = Path(root), settings, command
        self.record = self.root / record

    def done(self, stage: Stage) -> dict | None:
        marker = self.root / stage.name / "done.json"
        return json.loads(marker.read_text()) if marker.exists() else None

    def check(self, stages: list[Stage]) -> None:
        """Refuse a change to a setting a finished stage was made with (a folder written before
        done.json kept settings is compared with the recorded recipe config)."""
        recorded = json.loads(self.record.read_text()) if self.record.exists() else {}
        for stage in stages:
            done = self.done(stage)
            if done is None:
                continue
            made = done.get("settings") or {k: recorded[k] for k in stage.uses if k in recorded}
            now = {k: self.settings[k] for k in stage.uses}
            changed = changed_fields({k: made.get(k, now[k]) for k in now}, now, allowed=())
            if changed:
                k = changed[0]
                raise ValueError(
                    f"{self.root} finished stage {stage.name} with {k}={made[k]!r}; a rerun "
                    f"continues the same recipe, so {', '.join(changed)} cannot change: start "
                    f"again with `{self.command} --overwrite` or set another output_dir")

    def start(self, stages: list[Stage], overwrite: bool = False) -> None:
        """Check (or with `overwrite` remove) the stages made before, then record the settings."""
        if overwrite:
            for stage in stages:
                shutil.rmtree(self.root / stage.name, ignore_errors=True)
            self.record.unlink(missing_ok=True)
        self.check(stages)
        self.root.mkdir(parents=True, exist_ok=True)
        self.record.write_text(json.dumps(self.settings, indent=1) + "\n")

    def run(self, stage: Stage, index: int, total: int) -> Path:
        """The stage's product: made now, or recorded by an earlier run."""
        folder, done = self.root / stage.name, self.done(stage)
        if done is not None:
            print(f"{self.command}: stage {index}/{total} {stage.name}: done before, kept",
                  file=sys.stderr, flush=True)
            return Path(done["result"])
        folder.mkdir(parents=True, exist_ok=True)
        print(f"{self.command}: stage {index}/{total} {stage.name} ...", file=sys.stderr,
              flush=True)
        spent, t0 = folder / "seconds.json", time.monotonic()
        before = json.loads(spent.read_text())["seconds"] if spent.exists() else 0.0
        try:
            result = Path(stage.work(folder))
        finally:       # an interrupted stage's time counts when it is resumed
            seconds = before + time.monotonic() - t0
            spent.write_text(json.dumps({"seconds": seconds}) + "\n")
        settings = {k: self.settings[k] for k in stage.uses}
        (folder / "done.json").write_text(json.dumps(
            {"result": str(result), "settings": settings, "seconds": round(seconds, 1)}) + "\n")
        print(f"{self.command}: stage {stage.name} done in {_clock(seconds)}", file=sys.stderr,
              flush=True)
        return result


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
