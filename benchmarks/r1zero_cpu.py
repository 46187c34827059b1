"""R1-Zero on a CPU, measured: held-out accuracy of SmolLM2-135M-Instruct before and after GRPO,
and Dr. GRPO with the same budget, compared on accuracy and response length.

    python benchmarks/r1zero_cpu.py --steps 8 --eval-tasks 200 --k 8

The training runs use the main job's settings (trainer/recipes/r1zero.py: 4 prompts x 8 completions x 64
tokens, lr 1e-5) unless overridden, so the GRPO run here *is* the README's first command.

Phases (each writes its numbers to OUT/results.json as soon as it ends, and a rerun skips the
phases already there, so a long run that was stopped continues where it was):

  base        greedy pass@1 and sampled pass@k of the base model on --eval-tasks held-out tasks
  grpo        --steps GRPO steps, the main job's settings (trainer/recipes/r1zero.py) otherwise
  grpo_eval   the same evaluation of the trained policy
  dr_grpo     the same budget with the Dr. GRPO preset (no std scaling, constant normaliser)
  plots       per-run plots, GRPO vs Dr. GRPO overlaid, and pass@k before/after
  dr_eval     (only when listed in --phases) the same evaluation of the Dr. GRPO policy

The run folders (with 540 MB checkpoints) go under --runs (default runs/bench_r1zero, not
committed); PNGs and results.json are copied to --out (default benchmarks/results/r1zero_cpu).
Every phase records the machine's load average: on a shared 2-core machine the minutes swing
several-fold, the accuracies do not depend on it.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("base", "grpo", "grpo_eval", "dr_grpo", "plots", "dr_eval")
DEFAULT_PHASES = "base,grpo,grpo_eval,dr_grpo,plots"   # dr_eval: by request, it costs an eval


def _load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {"phases": {}}


def _save(path: Path, results: dict, phase: str) -> None:
    """Merge this phase into the file as it is now: phases may run in parallel processes."""
    merged = _load(path)
    merged.setdefault("commands", [])
    if results["command"] not in merged["commands"]:
        merged["commands"].append(results["command"])
    merged["settings"] = results["settings"]
    merged["phases"][phase] = results["phases"][phase]
    results["phases"].update(merged["phases"])
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(merged, indent=1))
    tmp.rename(path)


def _latest_policy(run_dir: Path) -> str:
    name = (run_dir / "checkpoints" / "latest").read_text().strip()
    return str(run_dir / "checkpoints" / name / "policy")


def _evaluate(model_path: str, args) -> dict:
    from rlvr.trainer.evaluation.evaluate import EvalConfig, run_eval
    from rlvr.trainer.recipes.r1zero import R1ZERO_SETTINGS
    cfg = EvalConfig(env=R1ZERO_SETTINGS["env"], env_kwargs=R1ZERO_SETTINGS["env_args"],
                     model=model_path, tasks=args.eval_tasks, ks=(1, args.k),
                     sample_tasks=args.sample_tasks, temperature=args.temperature,
                     greedy=True,
                     max_completion_length=args.max_tokens, batch_size=args.eval_batch,
                     seed=args.seed)
    result = run_eval(cfg, progress=True)
    print(result.table(), flush=True)
    d = result.to_dict()
    d.pop("correct_counts")
    return d


def _train(run_dir: Path, preset: str, args) -> dict:
    from rlvr.trainer.recipes.r1zero import run
    overrides = [f"preset={preset}", f"steps={args.steps}", f"prompts_per_step={args.prompts}",
                 f"group_size={args.group}", f"max_completion_length={args.max_tokens}",
                 f"lr={args.lr}", f"seed={args.seed}", f"temperature={args.temperature}"]
    run(str(run_dir), overrides=overrides)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    keep = ("reward", "rewards/numeric_match/mean", "completions/mean_length",
            "completions/clipped_ratio", "think/well_formed_rate", "think/unclosed_rate",
            "think/mean_tokens", "answer/mean_tokens", "entropy", "kl", "timing/step_s")
    return {"overrides": overrides,
            "steps": [{"step": r["step"], **{k: r.get(k) for k in keep}} for r in rows]}


def _passk_plot(results: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    models = [(name, results["phases"][p]) for name, p in
              (("base", "base"), ("GRPO", "grpo_eval"), ("Dr. GRPO", "dr_eval"))
              if p in results["phases"]]
    if len(models) < 2:          # nothing to compare the base model with yet
        return
    metrics = ["greedy pass@1"] + list(models[0][1]["pass_at"])
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / len(models)
    for i, (name, r) in enumerate(models):
        vals = [r["greedy_pass1"]] + list(r["pass_at"].values())
        xs = [j + i * width for j in range(len(metrics))]
        bars = ax.bar(xs, vals, width, label=name)
        ax.bar_label(bars, fmt="%.2f", fontsize=8)
    ax.set_xticks([j + width * (len(models) - 1) / 2 for j in range(len(metrics))], metrics)
    ax.set_ylabel("fraction of held-out tasks")
    ax.set_ylim(0, 1.05)
    r0 = models[0][1]
    ax.set_title(f"Held-out addition: greedy on {r0['tasks']} tasks, {r0['samples']} samples "
                 f"on {r0['sampled_tasks']}", fontsize=10)
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plots(runs: Path, out: Path, results: dict) -> dict:
    from rlvr.trainer.run.plots import compare_runs, plot_run
    files = {}
    for name in ("grpo", "dr_grpo"):
        if (runs / name / "metrics.jsonl").exists():
            src = plot_run(runs / name).files[0]
            files[name] = out / f"{name}_overview.png"
            shutil.copy(src, files[name])
            for panel in ("reward", "length"):
                shutil.copy(src.parent / f"{panel}.png", out / f"{name}_{panel}.png")
    if len(files) == 2:
        report = compare_runs([runs / "grpo", runs / "dr_grpo"], runs / "compare",
                              names=["GRPO", "Dr. GRPO"])
        for f in report.files:
            if f.stem in ("overview", "length", "reward"):
                shutil.copy(f, out / f"compare_{f.stem}.png")
    _passk_plot(results, out / "passk.png")
    shown = lambda p: str(p.relative_to(ROOT)) if p.resolve().is_relative_to(ROOT) else str(p)
    return {"pngs": sorted(shown(p) for p in out.glob("*.png"))}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=8, help="GRPO steps per run")
    p.add_argument("--prompts", type=int, default=4, help="prompts per step")
    p.add_argument("--group", type=int, default=8, help="completions per prompt")
    p.add_argument("--max-tokens", type=int, default=64, help="completion limit (train and eval)")
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--temperature", type=float, default=0.7, help="sampling temperature (train and eval)")
    p.add_argument("--eval-tasks", type=int, default=200)
    p.add_argument("--k", type=int, default=8, help="samples per eval task (pass@k)")
    p.add_argument("--sample-tasks", type=int, default=0,
                   help="draw the k samples on only the first N eval tasks (0 = all; greedy covers all)")
    p.add_argument("--eval-batch", type=int, default=128, help="completions per generate call in eval")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--phases", default=DEFAULT_PHASES, help=f"comma-separated, from {PHASES}")
    p.add_argument("--runs", type=Path, default=ROOT / "runs" / "bench_r1zero")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "r1zero_cpu")
    p.add_argument("--redo", action="store_true", help="rerun phases already in results.json")
    args = p.parse_args()

    import torch
    from transformers.utils import logging as hf_logging
    torch.set_num_threads(args.threads)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    from rlvr.trainer.models.smollm import smollm2_folder
    args.out.mkdir(parents=True, exist_ok=True)
    store = args.out / "results.json"
    results = _load(store)
    results["command"] = "python benchmarks/r1zero_cpu.py " + " ".join(sys.argv[1:])
    results["machine"] = {"cpus": os.cpu_count(), "torch_threads": args.threads}
    results["settings"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    model = smollm2_folder()
    steps = {"base": lambda: _evaluate(model, args),
             "grpo": lambda: _train(args.runs / "grpo", "grpo", args),
             "grpo_eval": lambda: _evaluate(_latest_policy(args.runs / "grpo"), args),
             "dr_grpo": lambda: _train(args.runs / "dr_grpo", "dr_grpo", args),
             "dr_eval": lambda: _evaluate(_latest_policy(args.runs / "dr_grpo"), args),
             "plots": lambda: _plots(args.runs, args.out, results)}
    for phase in args.phases.split(","):
        if phase not in steps:
            raise SystemExit(f"unknown phase {phase!r}; expected {PHASES}")
        if phase in results["phases"] and not args.redo and phase != "plots":
            print(f"[{phase}] done earlier; skipped", flush=True)
            continue
        print(f"[{phase}] starting at {time.strftime('%H:%M:%S')}, load {os.getloadavg()}", flush=True)
        t0, load0 = time.perf_counter(), os.getloadavg()
        out = steps[phase]()
        out.update({"seconds": round(time.perf_counter() - t0, 1), "load_before": load0,
                    "load_after": os.getloadavg(), "finished": time.strftime("%Y-%m-%d %H:%M:%S")})
        results["phases"][phase] = out
        _save(store, results, phase)
        print(f"[{phase}] {out['seconds']:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
