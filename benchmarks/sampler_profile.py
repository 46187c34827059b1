"""Where the sampler's time goes: matmuls vs attention vs KV-cache handling vs sampling vs the
rest (Python and framework dispatch), per generated token, plus the batch sizes decoding reached.

Two workloads on SmolLM2-135M-Instruct (float32, CPU, the main job's chat prompt opening the
think block, T = 0.7, <= 64 tokens):

  rollout   the main job's step: 4 prompts x 8 completions, one `generate` call
  eval      `rlvr eval`'s sampling: n = 32 on 8 held-out tasks, through `rlvr eval`'s
            continuous batching (`--batch-size` rows) and its inverse-CDF draw; `--dtype
            bfloat16` as `rlvr eval --dtype bfloat16`

`--before`: the sampler as it was (a concatenated KV cache; eval two tasks per call, each call
decoded until its last row finishes).

    taskset -c 0 env OMP_NUM_THREADS=1 python benchmarks/sampler_profile.py [--before]

Self CPU time of every aten op under `torch.profiler`, grouped; "rest" is wall time minus the
ops' self time (Python, module calls, dispatch). Prints a table per workload and one JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import time

GROUPS = {
    "matmul": ("aten::mm", "aten::addmm", "aten::linear", "aten::_mkldnn", "mkldnn"),
    # (batched products: attention's, in both decode steps; the model's own forward uses
    # scaled_dot_product_attention, the packed step bmm)
    "attention": ("scaled_dot_product", "flash_attention", "aten::_softmax_backward",
                  "aten::bmm"),
    "cache (cat, select, copy)": ("aten::cat", "aten::index_select", "aten::repeat_interleave",
                                  "aten::index", "aten::copy_", "aten::clone",
                                  "aten::contiguous", "aten::index_copy_", "aten::index_put_",
                                  "aten::_to_copy", "aten::to"),
    "views, allocation": ("aten::empty", "aten::slice", "aten::select", "aten::expand",
                          "aten::zeros", "aten::ones", "aten::full", "aten::narrow",
                          "aten::view", "aten::reshape", "aten::transpose", "aten::as_strided",
                          "aten::unsqueeze", "aten::permute", "aten::t", "aten::detach",
                          "aten::alias", "aten::_unsafe_view", "aten::resolve"),
    "sampling": ("aten::multinomial", "aten::softmax", "aten::_softmax", "aten::special_entr",
                 "aten::sum", "aten::sort", "aten::cumsum", "aten::argmax", "aten::div",
                 "aten::exponential_", "aten::item", "aten::_local_scalar_dense",
                 # the inverse-CDF draw (trainer/sampling/draws.py)
                 "aten::exp", "aten::amax", "aten::searchsorted", "aten::uniform_",
                 "aten::rand", "aten::nextafter", "aten::minimum"),
}


def group_of(name: str) -> str:
    for group, keys in GROUPS.items():
        if any(name.startswith(k) or k in name for k in keys):
            return group
    return "other ops"   # norms, activations, rotary embedding, elementwise


def load(tiny: bool, dtype: str = "float32"):
    import tempfile

    import torch

    from rlvr.trainer.models.loading import load_policy, load_tokenizer
    if tiny:
        from rlvr.trainer.models.tiny import build_tiny_model
        path = build_tiny_model(os.path.join(tempfile.mkdtemp(), "tiny"))
        return load_policy(path, dtype, torch.device("cpu")), load_tokenizer(path)
    from rlvr.trainer.recipes.r1zero import think_tokenizer
    from rlvr.trainer.models.smollm import default_cache_dir, smollm2_folder
    path = smollm2_folder()
    tok_path = think_tokenizer(path, default_cache_dir())
    return load_policy(path, dtype, torch.device("cpu")), load_tokenizer(tok_path)


def workloads(args):
    import rlvr
    from rlvr.trainer.evaluation.evaluate import distinct_tasks
    env = rlvr.load_env("arithmetic", n_terms=2, max_value=20, ops="+", test_fraction=0.5,
                        prompt_style="chat", format_weight=0.5)
    train = distinct_tasks(env, "train", 4, seed=0)
    held_out = distinct_tasks(env, "test", args.eval_tasks, seed=0)
    per = 64 // args.n if args.before else len(held_out)
    return {"rollout": [(train, 8, list(range(4)))],
            "eval": [(held_out[i:i + per], args.n, list(range(i, i + per)))
                     for i in range(0, len(held_out), per)]}


def profile(model, tok, calls, max_tokens, temperature, sampler, eval_rows=0):
    """Run the sampler over `calls` under the profiler: (rows of the table, totals)."""
    import torch
    from torch.profiler import ProfilerActivity, profile as torch_profile

    from rlvr.trainer.sampling import rollout as R
    from rlvr.trainer.sampling.rows import ForwardRows, PackedRows
    steps: list[int] = []       # batch size of every decode step, recorded by wrapped steps
    real_steps = {cls: cls.step for cls in (ForwardRows, PackedRows)}

    def counting(real):
        def step(self, tokens):
            steps.append(tokens.size(0))
            return real(self, tokens)
        return step

    for cls, real in real_steps.items():
        cls.step = counting(real)
    tokens = completions = 0
    try:
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            for tasks, n, seeds in calls:
                if eval_rows:       # rlvr eval's sampler
                    from rlvr.trainer.evaluation.evaluate import LocalSampler
                    got = LocalSampler(model, tok, eval_rows, continuous=True).sample(
                        tasks, n, seeds, max_tokens=max_tokens, temperature=temperature)
                    ids = [c.token_ids for comps in got for c in comps]
                else:
                    ids = R.generate(model, tok, tasks, n, max_tokens, temperature,
                                     share_prefix=sampler == "rlvr", seeds=seeds).completion_ids
                tokens += sum(map(len, ids))
                completions += len(ids)
            wall = time.perf_counter() - t0
    finally:
        for cls, real in real_steps.items():
            cls.step = real
    by_group: dict[str, float] = {}
    for ev in prof.key_averages():
        by_group[group_of(ev.key)] = by_group.get(group_of(ev.key), 0.0) + ev.self_cpu_time_total
    by_group = {k: v / 1e6 for k, v in by_group.items()}     # seconds
    by_group["rest (Python, dispatch)"] = max(0.0, wall - sum(by_group.values()))
    decoded_rows = sum(steps)
    return {"wall_s": wall, "tokens": tokens, "completions": completions,
            "tokens_per_s": tokens / wall, "seconds": by_group,
            "decode_steps": len(steps), "mean_batch": decoded_rows / max(1, len(steps)),
            "max_batch": max(steps, default=0),
            # rows decoded that produced no kept token (finished rows still decoded, padding)
            "wasted_row_fraction": 1 - tokens / max(1, decoded_rows + completions)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--eval-tasks", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=0,
                   help="rlvr eval's rows at once (0 = rlvr eval's default)")
    p.add_argument("--before", action="store_true", help="the sampler as it was")
    p.add_argument("--n", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--sampler", choices=("rlvr", "hf"), default="rlvr")
    p.add_argument("--only", default="rollout,eval")
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"),
                   help="the model's weights and arithmetic (bfloat16: `rlvr eval --dtype`)")
    args = p.parse_args()
    import torch
    model, tok = load(args.tiny, args.dtype)
    from rlvr.trainer.evaluation.evaluate import EvalConfig
    args.batch_size = args.batch_size or EvalConfig.batch_size
    if args.before:
        import rlvr.trainer.sampling.rollout as R
        R.preallocate = lambda cache, room: None
    out = {"sampler": args.sampler + (" before" if args.before else ""), "dtype": args.dtype,
           "torch_threads": torch.get_num_threads(),
           "load_before": os.getloadavg()}
    for name, calls in workloads(args).items():
        if name not in args.only.split(","):
            continue
        rows = args.batch_size if name == "eval" and args.sampler == "rlvr" and not args.before \
            else 0
        res = profile(model, tok, calls, args.max_tokens, args.temperature, args.sampler, rows)
        out[name] = res
        print(f"\n{name}: {res['completions']} completions, {res['tokens']} tokens in "
              f"{res['wall_s']:.1f} s = {res['tokens_per_s']:.1f} tok/s; decode steps "
              f"{res['decode_steps']}, mean batch {res['mean_batch']:.1f} (max "
              f"{res['max_batch']}), wasted rows {res['wasted_row_fraction']:.1%}")
        for g, s in sorted(res["seconds"].items(), key=lambda kv: -kv[1]):
            print(f"  {g:<26}{s:8.2f} s {s / res['wall_s']:6.1%} "
                  f"{1e3 * s / res['tokens']:7.2f} ms/token")
    out["load_after"] = os.getloadavg()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
