"""`rlvr score` rows/s with the process pool vs the local Ray backend, side by side in one run.

    .venv/bin/python benchmarks/scale_scoring.py [--env math] [--rows 100000]

Both backends score the same file with 1 and 2 workers; Ray's overhead on one machine should
stay under 20% of the process pool's rate (ratio >= 0.8). The default environment is `math`
when it is registered, else `arithmetic`. Each run includes starting its workers or actors
(Ray's costs ~0.6 s more), so small inputs understate Ray's steady-state rate.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from rlvr import ScoreConfig, list_envs, load_env, score_file


def make_rows(path: Path, env_name: str, n: int) -> None:
    """Gold and near-miss completions for arithmetic tasks, scored against `env_name`."""
    arith = load_env("arithmetic")
    with open(path, "w") as f:
        for i, task in enumerate(arith.sample(n)):
            value = int(task.answer) + (i % 3 == 0)
            text = f"<think>{task.metadata['expression']}</think> The answer is $\\boxed{{{value}}}$."
            f.write(json.dumps({"id": task.id, "completion": text, "answer": task.answer}) + "\n")


def run(src: Path, env: str, backend: str, workers: int) -> float:
    out = Path(tempfile.mkdtemp()) / "out.jsonl"
    t0 = time.perf_counter()
    score_file(ScoreConfig(env=env, input=str(src), output=str(out), workers=workers,
                           backend=backend, progress=False))
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", default="math" if "math" in list_envs() else "arithmetic")
    ap.add_argument("--rows", type=int, default=100_000)
    args = ap.parse_args()
    import ray
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    src = Path(tempfile.mkdtemp()) / "rows.jsonl"
    make_rows(src, args.env, args.rows)
    print(f"env={args.env} rows={args.rows} cpus={os.cpu_count()} "
          f"load average before: {os.getloadavg()[0]:.2f}")
    for workers in (1, 2):
        proc = run(src, args.env, "process", workers)
        ray_s = run(src, args.env, "ray", workers)
        print(f"workers={workers}: process pool {args.rows / proc:9.0f} rows/s, "
              f"ray {args.rows / ray_s:9.0f} rows/s, ray/process = {proc / ray_s:.2f} "
              "(target >= 0.80)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    ray.shutdown()


if __name__ == "__main__":
    main()
