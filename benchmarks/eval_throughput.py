"""`rlvr eval` sampling throughput vs a plain Hugging Face `generate` loop doing the same sampling.

Both draw n samples per held-out task at the same temperature and token limit from the same
model on the same tasks; rounds alternate (eval, loop, eval, loop...) so a change in the
machine's load hits both. `rlvr eval`'s side is the whole of `evaluate()` (sampling with the
shared-prefix sampler, per-task seeds, scoring every sample); the loop only samples (one
`model.generate(num_return_sequences=n)` per task, the usual way to do pass@k by hand).

    python benchmarks/eval_throughput.py                      # SmolLM2-135M, 4 tasks x 32 samples
    python benchmarks/eval_throughput.py --tiny --rounds 1    # seconds, a smoke test

Target: eval samples/s >= 1.0x the loop's. Prints one JSON line with both rates and the load.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time


def _load(tiny: bool):
    import torch

    from rlvr.trainer.models import load_policy, load_tokenizer
    if tiny:
        import tempfile

        from rlvr.trainer.tiny import build_tiny_model
        path = build_tiny_model(os.path.join(tempfile.mkdtemp(), "tiny"))
    else:
        from rlvr.trainer.smollm import smollm2_folder
        path = smollm2_folder()
    return load_policy(path, "float32", torch.device("cpu")), load_tokenizer(path)


def plain_loop(model, tok, tasks, n, max_tokens, temperature, seed) -> tuple[int, int]:
    """n samples per task with `generate`, one call per task; (samples, completion tokens)."""
    import torch
    from transformers import GenerationConfig

    from rlvr.trainer.rollout import encode_prompt
    cfg = GenerationConfig(do_sample=True, temperature=temperature, top_p=1.0, top_k=0,
                           max_new_tokens=max_tokens, num_return_sequences=n,
                           pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    samples = tokens = 0
    for i, task in enumerate(tasks):
        ids = torch.tensor([encode_prompt(tok, task.prompt)])
        torch.manual_seed(seed + i)
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                             generation_config=cfg)[:, ids.size(1):]
        samples += out.size(0)
        tokens += int((out != tok.pad_token_id).sum())
    return samples, tokens


def rlvr_eval(model, tok, env, cfg) -> tuple[int, int]:
    from rlvr.trainer.evaluation.evaluate import LocalSampler, evaluate
    result = evaluate(LocalSampler(model, tok, cfg.batch_size), env, cfg, progress=False)
    return result.generated, round(result.mean_length * result.generated)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tiny", action="store_true", help="a tiny random model (smoke test)")
    p.add_argument("--tasks", type=int, default=4)
    p.add_argument("--n", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    args = p.parse_args()
    import torch

    import rlvr
    from rlvr.trainer.evaluation.evaluate import EvalConfig, distinct_tasks
    if args.threads:
        torch.set_num_threads(args.threads)
    env_args = {"n_terms": 2, "max_value": 20, "ops": "+", "test_fraction": 0.5}
    env = rlvr.load_env("arithmetic", **env_args)
    cfg = EvalConfig(env="arithmetic", env_kwargs=env_args, tasks=args.tasks, ks=(1,),
                     samples=args.n, greedy=False, temperature=args.temperature,
                     max_completion_length=args.max_tokens, batch_size=args.n, bootstrap=0)
    tasks = distinct_tasks(env, "test", args.tasks)
    model, tok = _load(args.tiny)
    rates = {"rlvr_eval": [], "generate_loop": []}
    tokens = {"rlvr_eval": [], "generate_loop": []}
    for r in range(args.rounds):
        for name, fn in (("rlvr_eval", lambda: rlvr_eval(model, tok, env, cfg)),
                         ("generate_loop", lambda: plain_loop(model, tok, tasks, args.n,
                                                              args.max_tokens,
                                                              args.temperature, r))):
            t0 = time.perf_counter()
            samples, toks = fn()
            dt = time.perf_counter() - t0
            rates[name].append(samples / dt)
            tokens[name].append(toks / dt)
            print(f"round {r + 1} {name:<14} {samples} samples {toks} tokens in {dt:6.1f} s = "
                  f"{samples / dt:6.2f} samples/s", flush=True)
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(json.dumps({"model": "tiny" if args.tiny else "SmolLM2-135M-Instruct",
                      "tasks": args.tasks, "n": args.n, "max_tokens": args.max_tokens,
                      "temperature": args.temperature, "rounds": args.rounds,
                      "samples_per_s": med, "ratio": med["rlvr_eval"] / med["generate_loop"],
                      "tokens_per_s": {k: statistics.median(v) for k, v in tokens.items()},
                      "torch_threads": torch.get_num_threads(), "loadavg": os.getloadavg()}))


if __name__ == "__main__":
    main()
