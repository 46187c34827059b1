"""Peak memory and step time of the memory savers on SmolLM2-135M (CPU).

    python benchmarks/trainer_memory.py                     # the three variants, side by side
    python benchmarks/trainer_memory.py --micro-batch 64    # one micro-batch = the whole rollout
    python benchmarks/trainer_memory.py --variants full --profile   # + peak RSS per phase
    python benchmarks/trainer_memory.py --main-job steps=2  # scripts/r1zero.sh's job, profiled

GRPO (beta = 0.04, so a reference policy is in memory) on the arithmetic environment, 8 prompts
x 8 completions x 64 tokens, `--steps` steps (default 1); each variant runs in its own process so
its peak RSS is its own. Variants: full fine-tune; full fine-tune + gradient checkpointing; LoRA (rank 16, all
linear layers) + gradient checkpointing (the reference is the base with adapters off). Reported:
peak RSS of the process (ru_maxrss: model load included), the last step's wall time and
its update phase, and the CPU seconds (user + system) the steps took, which a busy machine
distorts less than wall time.
Targets (issue 15): LoRA + checkpointing <= 0.5x the full fine-tune's peak RSS, full
fine-tune + checkpointing <= 0.75x. Timings swing with machine load: the rows run back to back.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

VARIANTS = {
    "full": {},
    "full+ckpt": {"gradient_checkpointing": True},
    "lora+ckpt": {"gradient_checkpointing": True, "lora_rank": 16, "lora_alpha": 32.0},
}


def run_variant(name: str, micro_batch: int, steps: int, out: Path, profile: bool = False) -> dict:
    """Train `steps` steps in this process and return the measurements."""
    import resource
    prof = _profiler(profile)

    from rlvr.trainer.config import TrainConfig
    from rlvr.trainer.run.loop import Trainer
    cfg = TrainConfig.from_preset(
        "grpo", model="smollm2", output_dir=str(out), steps=steps, prompts_per_step=8,
        group_size=8, max_completion_length=64, micro_batch_size=micro_batch, lr=1e-6,
        reward_deadline_s=0, tensorboard=False, progress=False, checkpoint_every=0,
        **VARIANTS[name])
    tr = Trainer(cfg)
    tr.save_checkpoint = lambda: None            # the write is not what is measured
    cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
    c0 = cpu()
    tr.train()
    cpu_s = cpu() - c0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return {"variant": name, "micro_batch": micro_batch,
            "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
            "step_s": rows[-1]["timing/step_s"], "update_s": rows[-1]["timing/update_s"],
            "generate_s": rows[-1]["timing/generate_s"], "cpu_s_per_step": cpu_s / steps,
            "trainable_params": sum(p.numel() for p in tr.policy.parameters() if p.requires_grad),
            **({"phases": prof.table()} if prof else {})}


def _profiler(on: bool):
    """A started PhaseProfiler with the trainer instrumented, or None."""
    if not on:
        return None
    sys.path.insert(0, str(Path(__file__).parent))
    from memory_phases import PhaseProfiler
    prof = PhaseProfiler().start()
    prof.instrument()
    return prof


def run_main_job(overrides: list[str], out: Path, profile: bool = True) -> dict:
    """scripts/r1zero.sh's job (trainer/recipes/r1zero.py, its own settings + `overrides`) in this
    process, with its closing held-out evaluation; peak RSS per phase."""
    import resource

    from rlvr.trainer import r1zero
    prof = _profiler(profile)
    r1zero.run(str(out), overrides=list(overrides))
    return {"variant": "main job " + " ".join(overrides),
            "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
            **({"phases": prof.table()} if prof else {})}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--micro-batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated subset")
    ap.add_argument("--variant", choices=sorted(VARIANTS), help="(internal) run one variant")
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    ap.add_argument("--profile", action="store_true", help="peak RSS per trainer phase")
    ap.add_argument("--main-job", nargs="*", metavar="KEY=VALUE",
                    help="profile scripts/r1zero.sh's job instead (its overrides, e.g. steps=2)")
    args = ap.parse_args()
    if args.main_job is not None:
        with tempfile.TemporaryDirectory() as tmp:
            r = run_main_job(args.main_job, Path(tmp) / "run")
        print(f"\n{r['variant']}: peak RSS {r['peak_rss_gib']:.2f} GiB\n{r['phases']}")
        return
    if args.variant:
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(run_variant(args.variant, args.micro_batch, args.steps, Path(tmp),
                                         args.profile)))
        return
    results = []
    for name in args.variants.split(","):
        proc = subprocess.run([sys.executable, __file__, "--variant", name, "--micro-batch",
                               str(args.micro_batch), "--steps", str(args.steps)]
                              + (["--profile"] if args.profile else []),
                              capture_output=True, text=True,
                              env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
        if proc.returncode:
            sys.exit(f"{name} failed:\n{proc.stderr[-3000:]}")
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(json.dumps({k: v for k, v in results[-1].items() if k != "phases"}), flush=True)
        if "phases" in results[-1]:
            print(results[-1]["phases"], flush=True)
    full = results[0]
    print("\n| variant | peak RSS (GiB) | x full | step wall (s) | update (s) | CPU s/step | x full "
          "| trainable params |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['variant']} | {r['peak_rss_gib']:.2f} | {r['peak_rss_gib'] / full['peak_rss_gib']:.2f} "
              f"| {r['step_s']:.1f} | {r['update_s']:.1f} | {r['cpu_s_per_step']:.0f} "
              f"| {r['cpu_s_per_step'] / full['cpu_s_per_step']:.2f} | {r['trainable_params']:,} |")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
