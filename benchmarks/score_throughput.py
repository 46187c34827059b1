"""`rlvr score` throughput vs a plain single-process loop, measured side by side in one run.

    .venv/bin/python benchmarks/score_throughput.py [--rows 100000] [--small 10000]

The loop does the same job without the pool: read each JSONL line, build the task, call the
arithmetic environment's reward, write the output row. `rlvr score` runs with 1 and 2 workers.
Peak memory of the scoring process (and of its largest worker) is measured on `--small` and
`--rows` inputs to show it stays flat in input size. Target: 2 workers >= 1.8x the loop.

Besides wall-clock rows/s, each run's CPU time per row is printed (this process, plus its
workers once they have exited): on a busy machine the wall-clock ratios understate the pool,
which needs both cores, while CPU per row barely moves with the load.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlvr import Completion, ScoreConfig, load_env, score_file


def make_rows(path: Path, n: int) -> None:
    env = load_env("arithmetic")
    with open(path, "w") as f:
        for i, task in enumerate(env.sample(n)):
            answer = int(task.answer) + (i % 3 == 0)
            row = {"id": task.id, "completion": f"<think>{task.metadata['expression']}</think> "
                                                 f"<answer>{answer}</answer>"}
            if i % 2:
                row["answer"] = task.answer
            f.write(json.dumps(row) + "\n")


def plain_loop(src: Path, dst: Path) -> float:
    """The same job in one process: same input, same reward, same output row."""
    env = load_env("arithmetic")
    versions = {"rlvr": "0.1.0", "env": "arithmetic@1"}
    t0 = time.perf_counter()
    with open(src) as fin, open(dst, "w") as fout:
        for n, line in enumerate(fin, start=1):
            row = json.loads(line)
            v = env.reward.score(env.task_from_row(row), Completion(row["completion"]))
            fout.write(json.dumps({**row, "line": n, "score": v.score, "status": v.status,
                                   "extracted": v.extracted, "reason": v.reason,
                                   "latency_s": round(v.latency_s, 6),
                                   "components": v.components,
                                   "versions": {**versions, "verifier": v.version}},
                                  ensure_ascii=False, default=str) + "\n")
    return time.perf_counter() - t0


def rlvr_score(src: Path, dst: Path, workers: int) -> float:
    dst.unlink(missing_ok=True)
    Path(str(dst) + ".meta.json").unlink(missing_ok=True)
    t0 = time.perf_counter()
    score_file(ScoreConfig(env="arithmetic", input=str(src), output=str(dst), workers=workers,
                           progress=False))
    return time.perf_counter() - t0


_MEMORY_PROBE = """
import os, shutil, sys, tempfile
from rlvr import ScoreConfig, score_file
from rlvr.pool import WorkerPool

def peak_kib(pid="self"):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))

workers = []
close = WorkerPool.close
def close_after_reading_peaks(pool):
    workers.extend(peak_kib(w.proc.pid) for w in list(pool._all))
    close(pool)
WorkerPool.close = close_after_reading_peaks
out = tempfile.mkdtemp()
score_file(ScoreConfig(env="arithmetic", input=sys.argv[1], output=os.path.join(out, "o.jsonl"),
                       workers=int(sys.argv[2]), progress=False))
shutil.rmtree(out)
print(peak_kib(), max(workers))
"""


def peak_memory_mb(src: Path, workers: int) -> tuple[float, float]:
    """(scoring process peak RSS, largest worker peak RSS) in MiB, from a fresh process.

    Read as VmHWM from /proc, each process's own high-water mark: `ru_maxrss` is no good here,
    since after fork+exec Linux keeps the parent's size in it (so this benchmark process, big
    from making the input, would show up as the scorer's peak)."""
    out = subprocess.run([sys.executable, "-c", _MEMORY_PROBE, str(src), str(workers)],
                         capture_output=True, text=True, check=True)
    own, child = out.stdout.split()
    return int(own) / 1024, int(child) / 1024


def cpu_seconds() -> tuple[float, float]:
    """(this process, its exited children) user+system CPU seconds so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def timed(run, *args) -> tuple[float, float, float]:
    """(wall s, host CPU s, workers' CPU s) of one run."""
    own0, kids0 = cpu_seconds()
    wall = run(*args)
    own1, kids1 = cpu_seconds()
    return wall, own1 - own0, kids1 - kids0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--small", type=int, default=10_000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rlvr-bench-"))
    try:
        run_all(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)     # ~120 MB of inputs and outputs


def run_all(args, tmp: Path) -> None:
    """The loop, `rlvr score` with 1 and 2 workers, then peak memory, on files made in `tmp`."""
    big, small = tmp / "big.jsonl", tmp / "small.jsonl"
    make_rows(big, args.rows)
    make_rows(small, args.small)
    load = os.getloadavg()[0]
    print(f"rows={args.rows}  cpus={os.cpu_count()}  load average before: {load:.2f}")

    loop_s, loop_cpu, _ = timed(plain_loop, big, tmp / "loop.jsonl")
    w1_s, w1_host, w1_kids = timed(rlvr_score, big, tmp / "w1.jsonl", 1)
    w2_s, w2_host, w2_kids = timed(rlvr_score, big, tmp / "w2.jsonl", 2)
    rate = lambda s: args.rows / s  # noqa: E731
    us = lambda s: s / args.rows * 1e6  # noqa: E731
    print(f"plain loop          {rate(loop_s):10.0f} rows/s")
    print(f"rlvr score -w 1     {rate(w1_s):10.0f} rows/s   {loop_s / w1_s:.2f}x the loop")
    print(f"rlvr score -w 2     {rate(w2_s):10.0f} rows/s   {loop_s / w2_s:.2f}x the loop "
          f"(target >= 1.8x)")
    print(f"CPU per row: plain loop {us(loop_cpu):.1f} us")
    for name, host, kids in (("-w 1", w1_host, w1_kids), ("-w 2", w2_host, w2_kids)):
        print(f"CPU per row: rlvr score {name}: {us(host):.1f} us here + {us(kids):.1f} us in "
              f"workers (start-up included) = {(host + kids) / loop_cpu:.2f}x the loop's")
    for n, path in ((args.small, small), (args.rows, big)):
        own, child = peak_memory_mb(path, 2)
        print(f"peak RSS at {n:>7} rows: scoring process {own:6.1f} MiB, largest worker "
              f"{child:6.1f} MiB")
    print(f"load average after: {os.getloadavg()[0]:.2f} (above ~0.5 before means the machine "
          "was busy: ratios are then pessimistic)")


if __name__ == "__main__":
    main()
