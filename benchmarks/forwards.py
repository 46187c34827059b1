"""The reference forward against the fast one on the main job's batch: one rollout, then the
update (reference log-probs, then an optimizer step) through each, side by side in one process.

    python benchmarks/forwards.py                 # SmolLM2-135M-Instruct, the main job's settings
    python benchmarks/forwards.py --reps 3 --model smollm2

Both updates start from the same weights and the same rollout, so the gradient norms printed
must agree (the forwards are tested equal in tests/test_forwards.py); the times say what the
fast path saves on this shape.
"""
from __future__ import annotations

import argparse
import copy
import os
import resource
import tempfile
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="smollm2")
    p.add_argument("--reps", type=int, default=2)
    args = p.parse_args()
    import torch

    from rlvr.trainer.run.loop import Trainer
    from rlvr.trainer.recipes.r1zero import R1ZERO_SETTINGS, think_tokenizer
    from rlvr.trainer.config import TrainConfig
    from rlvr.trainer.models.loading import resolve_model
    from rlvr.trainer.models.smollm import default_cache_dir
    model = resolve_model(args.model)
    settings = {**R1ZERO_SETTINGS, "model": model, "progress": False, "tensorboard": False,
                "tokenizer": think_tokenizer(model, default_cache_dir())}
    out = tempfile.mkdtemp()
    trainers = {name: Trainer(TrainConfig(**settings, forward=name, output_dir=f"{out}/{name}"))
                for name in ("fast", "reference")}
    rollout, _ = trainers["fast"].collect()
    print(f"cores {os.cpu_count()}, torch threads {torch.get_num_threads()}, load "
          f"{os.getloadavg()[0]:.2f}; batch {len(rollout)} completions, micro-batch "
          f"{settings['micro_batch_size']}, completion tokens "
          f"{sum(map(len, rollout.completion_ids))}", flush=True)
    start = {k: v.clone() for k, v in trainers["fast"].policy.state_dict().items()}
    for rep in range(args.reps):
        for name, tr in trainers.items():
            tr.policy.load_state_dict(start)
            t0, c0 = time.perf_counter(), time.process_time()
            batch = tr.prepare(copy.deepcopy(rollout))
            metrics = tr.update(batch, first=True)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            print(f"rep {rep + 1} {name:9s}: {wall:6.1f} s wall, {cpu:6.1f} s CPU, grad norm "
                  f"{metrics['grad_norm']:.6f}, peak RSS so far "
                  f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB",
                  flush=True)


if __name__ == "__main__":
    main()
