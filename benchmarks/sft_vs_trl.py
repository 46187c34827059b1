"""`rlvr sft` vs TRL's SFTTrainer: step time and peak memory on the same data, model, batch,
max length and number of steps, side by side in one run.

    .venv/bin/python benchmarks/sft_vs_trl.py                          # 64 rows, batch 8, 6 steps
    .venv/bin/python benchmarks/sft_vs_trl.py --rows 8 --batch 2 --steps 2 --max-length 128   # tiny
    .venv/bin/python benchmarks/sft_vs_trl.py --cpus 0-1 --threads 2   # each side pinned (taskset)
    .venv/bin/python benchmarks/sft_vs_trl.py --dtype bfloat16         # mixed precision, both

Model: SmolLM2-135M-Instruct through the `smollm2` alias (trainer/models/smollm.py, no download).
Data: verified arithmetic rows as `rlvr distill-data` writes them (the arithmetic
environment's chat prompt, a worked completion ending in the right answer), written once to a
JSONL file that both sides read: ours as it is, TRL's as a `datasets.Dataset` of the same
prompt/completion pairs (conversational prompt-completion, so TRL also masks the prompt).
Settings shared: per-device batch, gradient accumulation, max_length, lr, steps, float32 or
bf16 autocast with float32 master weights, no packing (`--packing` turns it on for both: ours
packs each micro-batch into block-diagonal rows, TRL packs the dataset "bfd"), no checkpoints.

Each side runs in its own process (optionally pinned with taskset), so its peak memory is its
own: peak RSS on CPU (ru_maxrss), peak allocated on CUDA. Step time is the mean of the steps
after the first (warm-up). The targets: ours >= 1.0x TRL's speed, <= 1.0x its memory.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

WORK = Path(os.environ.get("RLVR_BENCH_CACHE", "/tmp/rlvr-bench")) / "sft"


def write_rows(n: int, path: Path) -> str:
    """`n` verified arithmetic rows: the env's prompt and a step-by-step completion."""
    import rlvr
    env = rlvr.load_env("arithmetic", n_terms=3, max_value=99, ops="+", parentheses=False)
    rng, rows = random.Random(0), []
    for task in env.sample(n, "train", 0):
        terms = [int(t) for t in task.metadata["expression"].split("+")]
        steps, total = [], terms[0]
        for t in terms[1:]:
            steps.append(f"{total} + {t} = {total + t}.")
            total += t
        words = " ".join(steps) + " " + " ".join("Check: " + s for s in steps[:rng.randint(1, 2)])
        rows.append({"prompt": task.prompt, "completion": [
            {"role": "assistant", "content": f"<think>{words}</think> <answer>{total}</answer>"}],
            "task_id": task.id, "reward": 1.0, "status": "ok"})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def peak_gib() -> float:
    from rlvr.trainer.run.metrics import peak_memory_gib
    return peak_memory_gib()


def run_ours(a) -> dict:
    from rlvr.trainer.sft import SFTConfig, SFTTrainer
    cfg = SFTConfig(model="smollm2", data=a.data, output_dir=str(WORK / "ours"), steps=a.steps,
                    batch_size=a.batch, grad_accumulation=a.accum, max_length=a.max_length,
                    lr=1e-5, dtype=a.dtype, packing=a.packing, checkpoint_every=0,
                    tensorboard=False, progress=False, seed=0)
    tr = SFTTrainer(cfg)
    times, losses = [], []
    for _ in range(cfg.steps):
        t0 = time.perf_counter()
        m = tr.train_step()
        tr.step += 1
        times.append(time.perf_counter() - t0)
        losses.append(m["loss"])
    return {"step_s": times, "loss": losses, "peak_gib": peak_gib()}


def run_trl(a) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import SFTConfig, SFTTrainer

    from rlvr.trainer.models.loading import resolve_model
    path = resolve_model("smollm2")
    rows = [json.loads(line) for line in Path(a.data).read_text().splitlines()]
    ds = Dataset.from_list([{"prompt": r["prompt"], "completion": r["completion"]} for r in rows])

    class Clock(TrainerCallback):
        def __init__(self):
            self.start, self.times, self.losses = 0.0, [], []

        def on_step_begin(self, *args, **kw):
            self.start = time.perf_counter()

        def on_step_end(self, *args, **kw):
            self.times.append(time.perf_counter() - self.start)

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                self.losses.append(logs["loss"])

    cuda = torch.cuda.is_available()
    cfg = SFTConfig(output_dir=str(WORK / "trl"), per_device_train_batch_size=a.batch,
                    gradient_accumulation_steps=a.accum, max_length=a.max_length,
                    learning_rate=1e-5, max_steps=a.steps, lr_scheduler_type="constant",
                    packing=a.packing, bf16=a.dtype == "bfloat16", use_cpu=not cuda,
                    logging_steps=1, report_to="none", save_strategy="no", seed=0,
                    completion_only_loss=True, dataloader_num_workers=0)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    clock = Clock()
    SFTTrainer(model=model, args=cfg, train_dataset=ds, processing_class=tok,
               callbacks=[clock]).train()
    return {"step_s": clock.times, "loss": clock.losses, "peak_gib": peak_gib()}


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def side(a, who: str) -> dict:
    cmd = [sys.executable, __file__, "--run", who, "--data", a.data, "--rows", str(a.rows),
           "--batch", str(a.batch), "--accum", str(a.accum), "--max-length", str(a.max_length),
           "--steps", str(a.steps), "--threads", str(a.threads), "--dtype", a.dtype,
           *(["--packing"] if a.packing else [])]
    if a.cpus:
        cmd = ["taskset", "-c", a.cpus, *cmd]
    env = {**os.environ, "OMP_NUM_THREADS": str(a.threads), "TOKENIZERS_PARALLELISM": "false",
           "GOMP_SPINCOUNT": os.environ.get("GOMP_SPINCOUNT", "10000")}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode or not line:
        print(proc.stdout[-2000:], proc.stderr[-4000:])
        raise SystemExit(f"{who} failed")
    r = json.loads(line[-1][len("RESULT "):])
    measured = r["step_s"][1:] or r["step_s"]
    r["mean_step_s"] = sum(measured) / len(measured)
    return r


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=64)
    p.add_argument("--batch", type=int, default=8, help="examples per micro-batch")
    p.add_argument("--accum", type=int, default=1, help="micro-batches per optimizer step")
    p.add_argument("--max-length", type=int, default=512)
    p.add_argument("--steps", type=int, default=6, help="optimizer steps (the first is warm-up)")
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    p.add_argument("--packing", action="store_true")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--cpus", default="", help="taskset CPU list for each side, e.g. 0-1")
    p.add_argument("--only", default="ours,trl")
    p.add_argument("--run", help=argparse.SUPPRESS)
    p.add_argument("--data", default="", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.run:
        import torch
        torch.set_num_threads(a.threads)
        print("RESULT " + json.dumps({"ours": run_ours, "trl": run_trl}[a.run](a)))
        return
    a.data = write_rows(a.rows, WORK / f"rows-{a.rows}.jsonl")
    print(f"{a.rows} rows, batch {a.batch} x {a.accum}, max_length {a.max_length}, {a.steps} "
          f"steps, {a.dtype}, packing {a.packing}, {a.threads} threads "
          f"{'on cpus ' + a.cpus if a.cpus else ''}; load before: {loadavg()}", flush=True)
    results = {}
    for who in a.only.split(","):
        t0 = time.time()
        r = results[who] = side(a, who)
        print(f"{who:<5} step {r['mean_step_s']:7.3f} s  (steps "
              f"{[round(x, 3) for x in r['step_s']]})  peak {r['peak_gib']:.2f} GiB  loss "
              f"{[round(x, 3) for x in r['loss']]}  [{time.time() - t0:.0f} s wall, load "
              f"{loadavg()}]", flush=True)
    if "ours" in results and "trl" in results:
        o, t = results["ours"], results["trl"]
        print(f"speed ours/trl {t['mean_step_s'] / o['mean_step_s']:.2f}x (target >= 1.0), "
              f"peak memory ours/trl {o['peak_gib'] / t['peak_gib']:.2f}x (target <= 1.0)")
    print(f"load after: {loadavg()}")


if __name__ == "__main__":
    main()
