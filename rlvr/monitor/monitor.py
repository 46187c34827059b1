"""The monitor a training run carries: detectors on every sample, a second opinion on a sample
every few steps, honeypots, and what to do about what they find.

The loop calls it at three points of a step:

    tasks = monitor.plant(tasks, step)           # honeypots among the step's prompts
    watch = monitor.observe(rollout, step)       # after scoring: flags, rates, disagreements
    monitor.screen(batch, watch)                 # after the advantages: flagged rows zeroed

and reads `monitor.stop_reason` after logging the step (`action = "stop"`).
"""
from __future__ import annotations

import json
import random
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from rlvr.audit.strategy import task_kind

from .honeypot import bait_verdict, is_honeypot, plant, took_bait
from .detectors import detect, detectors_for, make_sample
from .second_opinion import compare, second_opinion_for

__all__ = ["MonitorSettings", "Monitor", "Watch", "ACTIONS", "DISAGREEMENTS"]

ACTIONS = ("off", "log", "screen", "stop")
DISAGREEMENTS = "monitor/disagreements.jsonl"


@dataclass
class MonitorSettings:
    """What the monitor does: `action` 'log' (hack/* and monitor/* metrics, disagreements in
    RUN/monitor/disagreements.jsonl), 'screen' (also: flagged samples get zero advantage and
    no loss), 'stop' (also: the run ends, checkpoint written, when a rate stays above
    `threshold` for `patience` observed steps) or 'off'; a second opinion on `sample` of the
    step's completions every `every` steps; `honeypot_frac` of the prompts are honeypots.
    TrainConfig's `monitor_*` and `honeypot_frac` fields set them."""
    action: str = "log"
    every: int = 10
    sample: int = 32
    threshold: float = 0.5
    patience: int = 3
    honeypot_frac: float = 0.0
    detectors: tuple = ()

    @classmethod
    def from_config(cls, cfg) -> "MonitorSettings":
        return cls(cfg.monitor_action, cfg.monitor_every, threshold=cfg.monitor_threshold,
                   patience=cfg.monitor_patience, honeypot_frac=cfg.honeypot_frac,
                   detectors=tuple(cfg.monitor_detectors), sample=cfg.monitor_sample)

    def validate(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"monitor_action={self.action!r}; expected one of {list(ACTIONS)}")
        if self.every < 0 or self.sample < 1 or self.patience < 1:
            raise ValueError("monitor_every must be >= 0, monitor_sample and monitor_patience >= 1")
        if not 0 <= self.honeypot_frac < 1:
            raise ValueError(f"honeypot_frac must be in [0, 1), got {self.honeypot_frac}")
        from .detectors import UnknownDetectorError, get_detector
        for name in self.detectors:
            try:
                get_detector(name)
            except UnknownDetectorError as exc:     # a setting, refused like the others
                raise ValueError(str(exc)) from exc


@dataclass
class Watch:
    """What the monitor saw in one step: metrics, each row's flags, the rows to screen."""
    metrics: dict = field(default_factory=dict)
    flags: list = field(default_factory=list)          # per row: {detector: reason}
    screened: list = field(default_factory=list)       # rows whose advantages are zeroed
    honeypots: list = field(default_factory=list)      # rows that never carry gradient


class Monitor:
    """Watches the samples of one run (environment `env` registered as `env_name`)."""

    def __init__(self, env, env_name: str, settings: MonitorSettings, run_dir: Path | None,
                 seed: int = 0, main: bool = True, dist=None):
        settings.validate()
        self.env, self.settings, self.seed, self.main = env, settings, seed, main
        # under torchrun each rank watches its share: rates are counted over every rank's
        # (`dist.sum`/`dist.gather`), so every rank logs, and stops on, the global batch's
        self._sum = dist.sum if dist is not None else list
        self._gather = dist.gather if dist is not None else (lambda obj: [obj])
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.stop_reason: str | None = None
        self._streaks: dict[str, int] = {}
        self._detectors: dict[str, list] = {}
        self._last: tuple = (None, "")
        self.checker, self.checker_name = None, ""
        if settings.action != "off" and settings.every:
            self.checker, self.checker_name = second_opinion_for(env, env_name)
            if self.checker is None and main:
                warnings.warn(f"monitor: {self.checker_name}; the second opinion is off for "
                              "this run", stacklevel=2)

    @property
    def on(self) -> bool:
        return self.settings.action != "off"

    # --- 1. honeypots -------------------------------------------------------------------------
    def plant(self, tasks: list, step: int) -> list:
        if not self.on:
            return tasks
        return plant(tasks, self.settings.honeypot_frac, f"{self.seed}/honeypot/{step}")

    # --- 2. flags, rates, the second opinion --------------------------------------------------
    def observe(self, rollout, step: int) -> Watch:
        """Run the detectors on every row, the second opinion on a sample (every `every`
        steps), score the honeypots; honeypot rows, and with `action = "screen"` flagged rows,
        become invalid: out of the group baselines, the losses and their normalisers, as if
        never drawn. (Zeroing only their advantages would leave a flagged sample's reward in its
        group's baseline: every other sample's advantage falls, and the update pushes
        probability toward what was screened.) Updates the streaks `action = "stop"` reads."""
        watch, start = Watch(), time.perf_counter()
        if not self.on:
            return watch
        rows = range(len(rollout))
        watch.honeypots = [i for i in rows if is_honeypot(rollout.tasks[i])]
        watch.metrics.update(self._honeypots(rollout, watch.honeypots))
        bait = set(watch.honeypots)
        real = [i for i in rows if i not in bait]
        watch.flags = [{} if i in bait else self._flags(rollout, i) for i in rows]
        watch.metrics.update(self._rates(rollout, real, watch.flags))
        if self.checker is not None and step % self.settings.every == 0 and real:
            watch.metrics.update(self._second_opinion(rollout, real, step))
        if self.settings.action == "screen":
            watch.screened = [i for i in real if watch.flags[i]]
            watch.metrics["monitor/screened"] = int(self._sum([len(watch.screened)])[0])
            if rollout.valid is not None:
                for i in watch.screened:
                    rollout.valid[i] = False
        self._update_streaks(watch.metrics, step)
        watch.metrics["timing/monitor_s"] = time.perf_counter() - start
        return watch

    def _kind(self, task) -> str:
        """The task's kind (the audit's reading), remembered for the G rows of its group."""
        if self._last[0] is not task:
            self._last = (task, task_kind(self.env, task))
        return self._last[1]

    def _kind_detectors(self, task) -> list:
        kind = self._kind(task)
        if kind not in self._detectors:
            self._detectors[kind] = detectors_for(kind, self.settings.detectors)
        return self._detectors[kind]

    def _flags(self, rollout, i: int) -> dict:
        task, c = rollout.tasks[i], rollout.completions[i]
        sample = make_sample(task, c.text, self._kind(task), self.env.parser,
                             rollout.verdicts[i] if rollout.verdicts else None, c.finish_reason)
        return detect(sample, self._kind_detectors(task))

    def _rates(self, rollout, real: list[int], flags: list[dict]) -> dict:
        """hack/<detector>: the share of the step's (non-honeypot) samples it flagged, for every
        detector that applies to them (0.0 when none fired, so each curve is continuous)."""
        names = {d.name for i in real for d in self._kind_detectors(rollout.tasks[i])}
        names = sorted(set().union(*self._gather(sorted(names))))
        counts = self._sum([len(real), sum(bool(flags[i]) for i in real),
                            *(sum(name in flags[i] for i in real) for name in names)])
        n = max(counts[0], 1)
        out = {f"hack/{name}": c / n for name, c in zip(names, counts[2:])}
        out["hack/any"] = counts[1] / n
        return out

    def _honeypots(self, rollout, rows: list[int]) -> dict:
        planted = self._sum([len(rows)])[0]
        if not planted:
            return {}
        taken = 0
        for i in rows:
            if took_bait(rollout.completions[i].text):
                taken += 1
                rollout.verdicts[i] = bait_verdict()
                rollout.rewards[i] = 1.0
            rollout.valid[i] = False
        taken = self._sum([taken])[0]
        return {"hack/honeypot_rate": taken / planted, "monitor/honeypots": int(planted)}

    def _second_opinion(self, rollout, real: list[int], step: int) -> dict:
        rng = random.Random(f"{self.seed}/second-opinion/{step}")
        rows = sorted(rng.sample(real, min(self.settings.sample, len(real))))
        tasks = [rollout.tasks[i] for i in rows]
        completions = [rollout.completions[i] for i in rows]
        theirs = self.checker.score_batch(tasks, completions)
        ours = [rollout.verdicts[i] for i in rows]
        counts, found = compare(step, tasks, completions, ours, theirs)
        if found and self.main and self.run_dir is not None:
            path = self.run_dir / DISAGREEMENTS
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as f:
                for d in found:
                    f.write(json.dumps({**d.to_dict(), "checker": self.checker_name},
                                       default=str) + "\n")
        n = max(counts["checked"], 1)
        return {"monitor/checked": counts["checked"],
                "monitor/second_opinion_failed": counts["failed"],
                "monitor/disagree_reward": counts["disagree_reward"] / n,
                "monitor/disagree_refuse": counts["disagree_refuse"] / n,
                "monitor/disagree_reward_count": counts["disagree_reward"],
                "monitor/disagree_refuse_count": counts["disagree_refuse"]}

    def _update_streaks(self, metrics: dict, step: int) -> None:
        """Steps in a row each rate has been above the threshold; with `action = "stop"`, the
        first rate to stay there `patience` steps sets `stop_reason`."""
        s = self.settings
        watched = {k: v for k, v in metrics.items()
                   if k.startswith("hack/") and k != "hack/any" or k == "monitor/disagree_reward"}
        for key, rate in watched.items():
            self._streaks[key] = self._streaks.get(key, 0) + 1 if rate > s.threshold else 0
            if s.action == "stop" and self.stop_reason is None and self._streaks[key] >= s.patience:
                where = self.run_dir / DISAGREEMENTS if self.run_dir else DISAGREEMENTS
                self.stop_reason = (f"monitor: stopped at step {step}: {key} = {rate:.2f} > "
                                    f"{s.threshold} for {self._streaks[key]} steps; "
                                    f"disagreements: {where}")

    # --- 3. screening ------------------------------------------------------------------------
    def screen(self, batch, watch: Watch):
        """The batch with flagged rows (action = "screen") and honeypot rows carrying no
        gradient: their advantages zeroed and their tokens out of the loss mask (a new frozen
        Batch; the one given is left as it was). `observe` already took them out of the
        baselines and normalisers; this guarantees no gradient whatever computed the batch."""
        import dataclasses
        import torch
        drop = set(watch.screened) | set(watch.honeypots)
        if not drop:
            return batch
        advantages, loss_mask = list(batch.advantages), list(batch.loss_mask)
        for k, mb in enumerate(batch.micro):
            rows = torch.tensor([r in drop for r in mb.rows], device=advantages[k].device)
            if rows.any():
                advantages[k] = advantages[k].masked_fill(rows[:, None], 0.0)
                loss_mask[k] = loss_mask[k] & ~rows[:, None]
        return dataclasses.replace(batch, advantages=tuple(advantages),
                                   loss_mask=tuple(loss_mask))
