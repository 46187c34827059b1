"""How the trainer's compute degrades when other processes want the same cores.

One workload -- a forward and backward of SmolLM2-135M-Instruct on 8 x 96 tokens, the shape of
the main job's update, repeated -- timed alone and beside `--busy` processes that each spin one
core, for each setting of torch's intra-op threads (and OpenMP's wait policy). Each setting
runs in a fresh process, side by side in one invocation, so the ratios compare like with like.

    python benchmarks/contention.py --busy 2 --reps 3
    python benchmarks/contention.py --busy 2 --threads 2 --policies default,passive,spin=10000

Fair share: with B busy processes on C cores and a workload of T threads, the workload should
get about C / (B + T) * T cores' worth, so slow down by at most (B + T) / C for T <= C.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time

_WORKLOAD = r"""
import json, sys, time
import torch
torch.set_num_threads(int(sys.argv[1]))
from rlvr.trainer.models.loading import load_policy
model = load_policy(sys.argv[2], "float32", torch.device("cpu")).train()
ids = torch.randint(0, min(1000, model.config.vocab_size), (8, 96))
def once():
    model.zero_grad(set_to_none=True)
    model(input_ids=ids).logits.float().logsumexp(-1).mean().backward()
once()                                  # warm-up: allocator, kernels
times = []
for _ in range(int(sys.argv[3])):
    t0, c0 = time.perf_counter(), time.process_time()
    once()
    times.append((time.perf_counter() - t0, time.process_time() - c0))
print(json.dumps({"wall": [t for t, _ in times], "cpu": [c for _, c in times]}))
"""


def _spin(stop):
    """Keep one core busy until told to stop (a pure-Python loop: no threads of its own)."""
    x = 0
    while not stop.is_set():
        x = (x * 31 + 7) % 1_000_003


def _omp_env(policy: str) -> dict:
    """'default' (OpenMP's own: spin a while, then sleep), 'active', 'passive', or 'spin=N'
    (GOMP_SPINCOUNT=N: spin N iterations, then sleep)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    if policy.startswith("spin="):
        env["GOMP_SPINCOUNT"] = policy.split("=", 1)[1]
    elif policy != "default":
        env["OMP_WAIT_POLICY"] = policy.upper()
    return env


def run_setting(model: str, threads: int, policy: str, reps: int) -> dict:
    env = _omp_env(policy)
    out = subprocess.run([sys.executable, "-c", _WORKLOAD, str(threads), model, str(reps)],
                         env=env, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"the workload failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--busy", type=int, default=2, help="processes spinning a core each")
    p.add_argument("--threads", default="1,2", help="torch intra-op thread counts to try")
    p.add_argument("--policies", default="default,passive",
                   help="OpenMP waiting: default, active, passive, spin=N (GOMP_SPINCOUNT)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--model", default="smollm2")
    args = p.parse_args()
    from rlvr.trainer.models.loading import resolve_model
    model = resolve_model(args.model)
    print(f"cores {os.cpu_count()}, load before {os.getloadavg()[0]:.2f}, busy {args.busy}",
          flush=True)
    rows = []
    for threads in map(int, args.threads.split(",")):
        for policy in args.policies.split(","):
            for busy in (0, args.busy):
                stop = mp.Event()
                spinners = [mp.Process(target=_spin, args=(stop,), daemon=True)
                            for _ in range(busy)]
                for s in spinners:
                    s.start()
                try:
                    r = run_setting(model, threads, policy, args.reps)
                finally:
                    stop.set()
                    for s in spinners:
                        s.join()
                wall, cpu = min(r["wall"]), min(r["cpu"])
                rows.append((threads, policy, busy, wall, cpu))
                print(f"threads {threads}  OpenMP wait {policy:10s}  busy {busy}:  "
                      f"best of {args.reps}: {wall:6.2f} s wall, {cpu:6.2f} s CPU", flush=True)
    print("\nslow-down beside the busy processes (wall, best of reps):")
    for threads in map(int, args.threads.split(",")):
        for policy in args.policies.split(","):
            alone = next(r[3] for r in rows if r[:3] == (threads, policy, 0))
            loaded = next(r[3] for r in rows if r[:3] == (threads, policy, args.busy))
            fair = (args.busy + threads) / (os.cpu_count() or 1)
            print(f"  threads {threads} {policy:10s}: {loaded / alone:5.2f}x "
                  f"(fair share {max(fair, 1.0):.2f}x)")


if __name__ == "__main__":
    main()
