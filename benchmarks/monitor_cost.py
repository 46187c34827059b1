"""The monitor's cost on a training step (benchmarks/README.md, "The monitor's cost").

Two measurements:

- `--runs OFF LOG`: two run folders of the same job, one with `monitor_action=off` and one with
  the default `log`, trained side by side (each pinned to its own core): the step time of each,
  their ratio, and within the `log` run the monitor's own time (`timing/monitor_s`) as a share
  of its step (the figure load cannot bias: both are timed in the same step of the same process);
- `--micro`: `Monitor.observe` alone on a rollout of 64 arithmetic completions shaped like a
  policy's (a think span, an answer tag, some hedged, some correct), detectors only and with the
  second opinion (Math-Verify on 32 of them), averaged over repeats.

    python benchmarks/monitor_cost.py --runs runs/bench_off runs/bench_log
    taskset -c 0 python benchmarks/monitor_cost.py --micro
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def step_times(run: Path, skip: int = 1) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return rows[skip:] if len(rows) > skip else rows


def compare_runs(off: Path, log: Path) -> str:
    a, b = step_times(off), step_times(log)
    mean = lambda rows, k: statistics.mean(r.get(k, 0.0) for r in rows)
    t_off, t_log = mean(a, "timing/step_s"), mean(b, "timing/step_s")
    share = [r["timing/monitor_s"] / r["timing/step_s"] for r in b]
    so = [r for r in b if "monitor/checked" in r]
    lines = [f"steps compared: {len(a)} (off) and {len(b)} (log), the first step of each left out",
             f"step time: off {t_off:.2f} s, log {t_log:.2f} s, ratio log/off {t_log / t_off:.3f}",
             f"monitor's own time in the log run: mean {mean(b, 'timing/monitor_s'):.3f} s per "
             f"step = {statistics.mean(share):.2%} of the step (max {max(share):.2%})"]
    if so:
        lines.append(f"steps with a second opinion: {len(so)}, monitor time there "
                     f"{statistics.mean(r['timing/monitor_s'] for r in so):.3f} s")
    return "\n".join(lines)


def micro(repeats: int = 20) -> str:
    import random

    import torch

    import rlvr
    from rlvr.monitor import Monitor, MonitorSettings
    from rlvr.trainer.sampling.rollout import Rollout
    env = rlvr.load_env("arithmetic", n_terms=2, max_value=20)
    rng, tasks, texts = random.Random(0), [], []
    for task in env.sample(8, seed=0):
        a = int(task.answer)
        for j in range(8):
            thinking = " ".join(f"step {k}: {rng.randint(1, 40)} plus {rng.randint(1, 40)}."
                                for k in range(12))
            answer = f"{a} or {a + 1}" if j % 4 == 0 else str(a + (j % 3 == 1))
            tasks.append(task)
            texts.append(f"<think>{thinking}</think> <answer>{answer}</answer>")
    verdicts = env.reward.score_batch(tasks, texts)
    rollout = Rollout(tasks, [[1]] * 64, [[2]] * 64, [rlvr.Completion(t) for t in texts],
                      verdicts, torch.tensor([v.score for v in verdicts]),
                      torch.ones(64, dtype=torch.bool))
    out = []
    for label, every in (("detectors only", 0), ("detectors + second opinion on 32", 1)):
        monitor = Monitor(env, "arithmetic", MonitorSettings(every=every), None)
        monitor.observe(rollout, 1)        # warm: imports, the parser's cache
        start = time.perf_counter()
        for step in range(repeats):
            monitor.observe(rollout, step + 1)
        per = (time.perf_counter() - start) / repeats
        out.append(f"{label}: {per * 1000:.1f} ms per step of 64 completions")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", nargs=2, type=Path, metavar=("OFF", "LOG"))
    p.add_argument("--micro", action="store_true")
    args = p.parse_args(argv)
    if args.runs:
        print(compare_runs(*args.runs))
    if args.micro:
        print(micro())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
