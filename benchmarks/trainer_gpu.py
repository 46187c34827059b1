"""GRPO steps on a CUDA GPU: our shared-prefix sampler vs Hugging Face `generate`, side by side.

    python benchmarks/trainer_gpu.py [--steps 3] [--prompts 8] [--group 8] [--tokens 128]

The policy is a random Llama with SmolLM2-135M's shape (30 layers, hidden 576, 9 heads, 3 KV
heads) but the character-level vocabulary of trainer/models/tiny.py (~100 tokens, so the LM head is
far cheaper than SmolLM2's 49k): the real weights do not fit the GPU machine's transfer limit,
and random weights rarely emit EOS, so every completion runs to --tokens (the worst case).
bf16, GRPO preset with k3 KL (reference model on the GPU too), scored in-process. Prints
seconds per step (after one warm-up step) for share_prefix=true and false, split into sampling
(generate_s), scoring and the update (reference + policy forward/backward), and their ratio.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def build_model(path: Path) -> str:
    from rlvr.trainer.models.tiny import build_tiny_model
    return build_tiny_model(path, layers=30, hidden=576, heads=9, kv_heads=3, intermediate=1536)


def seconds_per_step(model: str, out: Path, share_prefix: bool, args) -> dict:
    import torch
    from rlvr.trainer.config import TrainConfig
    from rlvr.trainer.run.loop import Trainer
    cfg = TrainConfig.from_preset(
        "grpo", model=model, output_dir=str(out), device="cuda", dtype="bfloat16",
        steps=args.steps + 1, prompts_per_step=args.prompts, group_size=args.group,
        max_completion_length=args.tokens, micro_batch_size=args.prompts * args.group,
        share_prefix=share_prefix, reward_deadline_s=0, progress=False, tensorboard=False,
        checkpoint_every=0, env_kwargs={"n_terms": 2, "prompt_style": "base"})
    tr = Trainer(cfg)
    tr.train_step()                                  # warm-up: kernels, allocator
    torch.cuda.synchronize()
    t0, parts = time.perf_counter(), {}
    for _ in range(args.steps):
        metrics, _ = tr.train_step()
        for key in ("generate_s", "score_s", "update_s"):
            parts[key] = parts.get(key, 0.0) + metrics[f"timing/{key}"] / args.steps
    torch.cuda.synchronize()
    return {"step_s": round((time.perf_counter() - t0) / args.steps, 3),
            **{k: round(v, 3) for k, v in parts.items()}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--tokens", type=int, default=128)
    args = p.parse_args()
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")
    work = Path(tempfile.mkdtemp())
    model = build_model(work / "model")
    shared = seconds_per_step(model, work / "shared", True, args)
    plain = seconds_per_step(model, work / "plain", False, args)
    print(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "batch": f"{args.prompts} prompts x {args.group} x {args.tokens} tokens",
                      "shared_prefix": shared, "hf_generate": plain,
                      "step_time_hf_generate_over_shared_prefix":
                          round(plain["step_s"] / shared["step_s"], 2)}, indent=1))


if __name__ == "__main__":
    main()
