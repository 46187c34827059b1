"""Steps per hour, synchronous vs `async_steps` = 1 and 2, side by side in one run.

Each arm trains the same GRPO run from the same start (same prompts, same seeds) for `--steps`
steps; the async arms sample in their own process (trainer/sampling/process_engine.py). On a
CPU, one torch thread per core: `sync` runs on the first core; an async arm pins the trainer to
the first core and the sampler process to the second (the overlap is what a second core buys);
`sync_2threads` gives the synchronous trainer both cores, two threads (the other way to spend
the second core). Steps per hour are counted after the first step (which builds the
sampler process), and each arm's reward curve is printed beside it.

    python benchmarks/async_steps.py --model tiny --out /tmp/async            # seconds
    python benchmarks/async_steps.py --model smollm2 --steps 12 --out runs/async_steps
    python benchmarks/async_steps.py --model smollm2 --device cuda --out $OUT/async_steps  # a GPU

It writes OUT/<arm>/ (run folders), OUT/async_steps.json and OUT/summary.md, with the load
average before and after each arm (timings on a shared machine are only as good as that).
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

ARMS = {"sync": 0, "sync_2threads": 0, "async1": 1, "async2": 2}
"""arm -> async_steps; sync_2threads gives the synchronous trainer both cores (two threads)."""


def arm_config(args, out: Path, k: int, model: str) -> dict:
    return dict(model=model, output_dir=str(out), steps=args.steps, device=args.device,
                prompts_per_step=args.prompts, group_size=args.group,
                max_completion_length=args.max_new, lr=args.lr, beta=0.0, seed=args.seed,
                temperature=1.0, reward_deadline_s=0, progress=False, tensorboard=False,
                checkpoint_every=0, log_completions=0, async_steps=k,
                sampler_threads=1 if k and args.device == "cpu" else 0,
                env="arithmetic",
                env_args={"n_terms": 2, "max_value": 9, "format_weight": args.format_weight,
                          "prompt_style": args.prompt_style},
                forward=args.forward)


def pin(cores: list[int], threads: int) -> None:
    import torch
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(cores))
    torch.set_num_threads(threads)


def run_arm(args, name: str, k: int, model: str) -> dict:
    """Train one arm; its timings (after step 1), load and reward curve."""
    from rlvr.trainer import TrainConfig
    from rlvr.trainer.run.loop import Trainer
    cpu = args.device == "cpu"
    if cpu:
        cores = args.cores if name == "sync_2threads" else args.cores[:1]
        pin(cores, len(cores))
    out = Path(args.out) / name
    trainer = Trainer(TrainConfig(**arm_config(args, out, k, model)))
    if k:
        trainer.start_pipeline(k)
        child = trainer.pipeline.engine.engine.pid
        if cpu and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(child, {args.cores[-1]})
    stamps, step = [], trainer.train_step

    def timed():
        result = step()
        stamps.append(time.perf_counter())
        return result
    trainer.train_step = timed
    load_before = os.getloadavg()
    trainer.train()
    load_after = os.getloadavg()
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    span = stamps[-1] - stamps[0]
    per_hour = (len(stamps) - 1) / span * 3600 if span > 0 else float("nan")
    def mean(key: str) -> float:           # over the steps after the first that logged it
        xs = [r[key] for r in rows[1:] if key in r]
        return sum(xs) / len(xs) if xs else float("nan")
    return {"arm": name, "async_steps": k, "steps": len(rows), "steps_per_hour": per_hour,
            "seconds_after_step_1": span, "generate_s_mean": mean("timing/generate_s"),
            "update_s_mean": mean("timing/update_s"), "wait_s_mean": mean("async/wait_s"),
            "staleness_mean": mean("async/staleness_mean"),
            "kl_k3_mean": mean("mismatch/kl_k3"), "reward": [r["reward"] for r in rows],
            "load_before": load_before, "load_after": load_after}


def summary(results: list[dict], args) -> str:
    base = results[0]["steps_per_hour"]
    lines = [f"model {args.model}, device {args.device}, cores {args.cores}, {args.steps} steps "
             f"of {args.prompts} prompts x {args.group} completions x <= {args.max_new} tokens, "
             f"{args.prompt_style} prompts, forward {args.forward}",
             "", "| arm | steps/h | vs sync | generate s | update s | wait s | staleness | "
             "mismatch k3 | load before/after | reward per step |", "|" + "---|" * 10]
    for r in results:
        curve = " ".join(f"{x:.3f}" for x in r["reward"])
        lines.append(f"| {r['arm']} | {r['steps_per_hour']:.1f} | "
                     f"{r['steps_per_hour'] / base:.3f} | {r['generate_s_mean']:.3f} | "
                     f"{r['update_s_mean']:.3f} | {r['wait_s_mean']:.3f} | "
                     f"{r['staleness_mean']:.2f} | {r['kl_k3_mean']:.2e} | "
                     f"{r['load_before'][0]:.2f}/{r['load_after'][0]:.2f} | {curve} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="tiny", help="'tiny' (a random model built here), "
                   "'smollm2' or a model folder")
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cpu")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--max-new", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cores", default="0,1", help="CPU cores the arms share (cpu only)")
    p.add_argument("--arms", default="sync,async1,async2", help=f"of {', '.join(ARMS)}")
    p.add_argument("--prompt-style", default="chat", help="the arithmetic prompts: chat or base")
    p.add_argument("--forward", default="fast", help="'reference' runs the update's whole "
                   "forward and backward even for groups without signal (a batch whose "
                   "rewards are all equal then costs what a real update costs)")
    p.add_argument("--format-weight", type=float, default=0.5,
                   help="the think-format reward's weight: rewards that differ within a group, "
                        "so the update has work to do")
    args = p.parse_args(argv)
    args.cores = [int(c) for c in args.cores.split(",")]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = args.model
    if model == "tiny":
        from rlvr.trainer.models.tiny import build_tiny_model
        model = build_tiny_model(out / "tiny-model")
    results = [run_arm(args, name, ARMS[name], str(model)) for name in args.arms.split(",")]
    (out / "async_steps.json").write_text(json.dumps(results, indent=1) + "\n")
    text = summary(results, args)
    (out / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
