"""Where a training process's peak RSS comes from, phase by phase.

A background thread samples /proc/self/status (VmRSS, RssAnon, RssFile) every few ms; the
trainer's phases (model load, sampling, reference log-probs, each micro-batch's forward and
backward, the optimizer step, evaluation, checkpoint) are wrapped so every sample is charged
to the phase running at the time. Reported per phase: RSS at entry and the highest RSS seen
inside it. Linux only (reads /proc).

    from memory_phases import PhaseProfiler
    prof = PhaseProfiler().start(); prof.instrument()
    ... build a Trainer and train ...
    print(prof.table())
"""
from __future__ import annotations

import contextlib
import functools
import threading
import time

__all__ = ["PhaseProfiler", "rss_gib"]

_FIELDS = ("VmRSS", "RssAnon", "RssFile")
OUTSIDE = "(imports, set-up, between phases)"


def rss_gib() -> dict:
    """Current VmRSS / RssAnon / RssFile of this process in GiB."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key = line.split(":", 1)[0]
            if key in _FIELDS:
                out[key] = int(line.split()[1]) / 2**20
    return out


class PhaseProfiler:
    """Per-phase peak RSS from a sampling thread; phases are set by `phase(name)` blocks."""

    def __init__(self, interval_s: float = 0.005):
        self.interval_s, self.current, self.order = interval_s, OUTSIDE, [OUTSIDE]
        self.peak: dict[str, dict] = {OUTSIDE: rss_gib()}
        self.entry: dict[str, float] = {OUTSIDE: self.peak[OUTSIDE]["VmRSS"]}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "PhaseProfiler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _record(self) -> None:
        now, name = rss_gib(), self.current
        best = self.peak.setdefault(name, now)
        if now["VmRSS"] > best["VmRSS"]:
            self.peak[name] = now

    def _run(self) -> None:
        while not self._stop.is_set():
            self._record()
            time.sleep(self.interval_s)

    @contextlib.contextmanager
    def phase(self, name: str):
        """Charge samples to `name` (nested inside another phase: 'outer > name')."""
        outer = self.current
        self._record()                       # what the outer phase reached up to here
        name = name if outer == OUTSIDE else f"{outer} > {name}"
        self.current = name
        if name not in self.entry:
            self.order.append(name)
            self.entry[name] = rss_gib()["VmRSS"]
        try:
            yield
        finally:
            self._record()
            self.current = outer

    def wrap(self, owner, attr: str, name: str) -> None:
        """Run `owner.attr` (a function or method) inside phase `name` from now on."""
        fn = getattr(owner, attr)

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with self.phase(name):
                return fn(*args, **kwargs)
        setattr(owner, attr, wrapped)

    def instrument(self) -> None:
        """Wrap the trainer's phases (call before building the Trainer)."""
        import torch

        from rlvr.trainer import evaluate, fast, loop, r1zero
        self.wrap(loop, "load_tokenizer", "load tokenizer")
        self.wrap(loop, "load_policy", "load policy weights")
        self.wrap(loop, "frozen_copy", "reference copy")
        self.wrap(loop, "add_lora", "add LoRA adapters")
        self.wrap(loop.Trainer, "collect", "sample + score")
        self.wrap(loop.Trainer, "prepare", "reference log-probs")
        self.wrap(loop.Trainer, "update", "update")
        self.wrap(loop.Trainer, "save_checkpoint", "checkpoint")
        self.wrap(evaluate, "evaluate_in_training", "evaluation")
        self.wrap(r1zero, "held_out_eval", "held-out evaluation")
        self.wrap(fast, "completion_logprobs", "forward")
        self.wrap(torch.Tensor, "backward", "backward")
        self.wrap(torch.optim.AdamW, "step", "optimizer step")

    def table(self) -> str:
        self._record()
        lines = ["| phase | RSS at first entry (GiB) | peak in phase (GiB) | anon / file at peak |",
                 "|---|---|---|---|"]
        for name in self.order:
            p = self.peak.get(name, {})
            lines.append(f"| {name} | {self.entry[name]:.2f} | {p.get('VmRSS', 0):.2f} | "
                         f"{p.get('RssAnon', 0):.2f} / {p.get('RssFile', 0):.2f} |")
        return "\n".join(lines)
