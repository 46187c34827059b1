"""What each sampler-trainer correction does to the policy gradient: the table "which
correction to use" in docs/rollout_server.md.

    python benchmarks/correction_bias.py            # rewrites the table in docs/rollout_server.md
    python benchmarks/correction_bias.py --print    # prints it instead
    python benchmarks/correction_bias.py --smollm2  # SmolLM2-135M's bf16 gap, for scale

A random Llama small enough to enumerate every completion: vocabulary V = 8, completions of
L = 4 tokens after a fixed 6-token prompt, so all V^L = 4096 completions are scored at once and
expectations are sums, not samples. The trainer's policy pi_old is the model in float32 (SDPA
attention); the sampler pi_s is a second copy that differs the way real samplers do:

  attention    the same weights in float32 with eager attention (another kernel)
  bf16         the same weights in bfloat16 (an inference engine's precision)
  bf16 + k     bfloat16 and k updates stale: the trainer has taken k sign-gradient steps
               (Adam's first steps) of size lr since the sampler's weights were synced

With a 0/1 reward R (fixed at random per completion, P(R = 1) = 0.3), the exact on-policy
gradient is g* = sum_o pi_old(o) (R(o) - E_old R) sum_t grad log pi(o_t); a correction's
expected gradient is g_c = sum_o pi_s(o) (R(o) - E_s R) sum_t w_t(o) grad log pi(o_t), its
weights w from trainer/objective/importance.py. The table reports the bias of each correction as the
cosine of g_c to g* and the relative error |g_c - g*| / |g*| (exact, no sampling noise), the
share of tokens it truncates or masks under pi_s, and the mean relative error of 16 sampled
batches of 64 completions (bias plus sampling noise, batch-mean baseline).
"""
from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "rollout_server.md"
BEGIN, END = "<!-- correction-bias: begin -->", "<!-- correction-bias: end -->"
V, L, PROMPT = 8, 4, 6
CHUNK = 4096


def build(seed: int, attn: str = "sdpa"):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64,
                      initializer_range=0.3, tie_word_embeddings=True, attn_implementation=attn)
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg).eval()


def with_attention(model, attn: str):
    other = copy.deepcopy(model)
    other.config._attn_implementation = attn
    for module in other.modules():
        if hasattr(module, "config"):
            module.config._attn_implementation = attn
    return other


def token_logprobs(model, inputs: torch.Tensor) -> torch.Tensor:
    """[n, L] log pi(o_t | prompt, o_<t) of the completion tokens (log-softmax in float32)."""
    logits = model(input_ids=inputs).logits[:, PROMPT - 1:-1].float()
    return torch.log_softmax(logits, -1).gather(-1, inputs[:, PROMPT:, None]).squeeze(-1)


@torch.no_grad()
def scored(model, inputs):
    return torch.cat([token_logprobs(model, inputs[i:i + CHUNK])
                      for i in range(0, len(inputs), CHUNK)])


def gradient(model, inputs, coef: torch.Tensor) -> torch.Tensor:
    """grad of sum_o sum_t coef[o, t] log pi(o_t): a policy-gradient step's direction."""
    model.zero_grad()
    for i in range(0, len(inputs), CHUNK):
        (token_logprobs(model, inputs[i:i + CHUNK]) * coef[i:i + CHUNK]).sum().backward()
    return torch.cat([p.grad.flatten().clone() for p in model.parameters()])


def stale(model, inputs, reward, steps: int, lr: float):
    """The trainer `steps` sign-gradient ascent steps past `model` (whose copy the sampler
    keeps), each on the exact on-policy gradient."""
    trainer = copy.deepcopy(model)
    for _ in range(steps):
        logp = scored(trainer, inputs)
        g = gradient(trainer, inputs, exact_coef(logp, reward))
        with torch.no_grad():
            offset = 0
            for p in trainer.parameters():
                p += lr * g[offset:offset + p.numel()].view_as(p).sign()
                offset += p.numel()
    return trainer


def exact_coef(logp: torch.Tensor, reward: torch.Tensor) -> torch.Tensor:
    prob = logp.double().sum(-1).exp()
    adv = reward - (prob * reward).sum()
    return (prob * adv)[:, None].expand(-1, L).float()


def measure(trainer, sampler_logp, inputs, reward, knobs, batches: int, batch: int, seed: int):
    from rlvr.trainer.objective.importance import CORRECTIONS, correction_weights
    old = scored(trainer, inputs)
    mask = torch.ones_like(old, dtype=torch.bool)
    g_star = gradient(trainer, inputs, exact_coef(old, reward))
    p_s = sampler_logp.double().sum(-1).exp()
    adv_s = (reward - (p_s * reward).sum()).float()
    log_r = (old - sampler_logp).double()
    kl = float((p_s[:, None] * -log_r).sum() / L)
    gen = torch.Generator().manual_seed(seed)
    draws = [torch.multinomial(p_s.float(), batch, replacement=True, generator=gen)
             for _ in range(batches)]
    rows = {"kl": kl, "ratio": _ratio_quantiles(log_r.exp(), p_s)}
    for name in CORRECTIONS:
        marks = correction_weights(old, sampler_logp, mask, name, knobs,
                                   adv_s[:, None].expand(-1, L))
        g = gradient(trainer, inputs, p_s[:, None].float() * marks.weights * adv_s[:, None])
        cut = ((marks.clipped | marks.masked).double() * p_s[:, None]).sum() / L
        noisy = []
        for idx in draws:
            r = reward[idx]
            a = (r - r.mean()).float()[:, None].expand(-1, L)
            w = correction_weights(old[idx], sampler_logp[idx], mask[idx], name, knobs, a).weights
            ghat = gradient(trainer, inputs[idx], w * a / batch)
            noisy.append(float((ghat - g_star).norm() / g_star.norm()))
        rows[name] = {"cos": float(torch.nn.functional.cosine_similarity(g, g_star, dim=0)),
                      "err": float((g - g_star).norm() / g_star.norm()), "cut": float(cut),
                      "mc": sum(noisy) / len(noisy)}
    return rows


def _ratio_quantiles(ratio: torch.Tensor, p_s: torch.Tensor) -> tuple[float, float]:
    """The 5th and 95th percentiles of the token ratio under pi_s (weighted by pi_s(o))."""
    r = ratio.flatten()
    w = p_s[:, None].expand(-1, L).flatten()
    order = r.argsort()
    cdf = w[order].cumsum(0) / w.sum()
    return tuple(float(r[order][int((cdf < q).sum())]) for q in (0.05, 0.95))


def smollm2_mismatch(n: int = 8, tokens: int = 48, seed: int = 0) -> str:
    """The same bf16-vs-fp32 mismatch on SmolLM2-135M-Instruct: n completions of `tokens`
    sampled by the bf16 copy (T = 1, no top-k/top-p), scored by both (tokens after an EOS
    included). How large a real model's kernel gap is, next to the enumerable model's."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from rlvr.trainer.models.smollm import smollm2_folder
    path = smollm2_folder()
    tok = AutoTokenizer.from_pretrained(path)
    fp32 = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    bf16 = copy.deepcopy(fp32).to(torch.bfloat16)
    ids = tok.apply_chat_template([{"role": "user", "content": "What is 17 * 23? Think step by "
                                    "step."}], add_generation_prompt=True, return_tensors="pt")
    ids = ids if isinstance(ids, torch.Tensor) else ids["input_ids"]
    torch.manual_seed(seed)
    with torch.no_grad():
        out = bf16.generate(ids.repeat(n, 1), attention_mask=torch.ones_like(ids).repeat(n, 1),
                            do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                            max_new_tokens=tokens, pad_token_id=tok.pad_token_id)
        p = ids.shape[1]
        lp = [torch.log_softmax(m(out).logits[:, p - 1:-1].float(), -1)
              .gather(-1, out[:, p:, None]).squeeze(-1) for m in (fp32, bf16)]
    log_r = lp[0] - lp[1]
    r = log_r.exp()
    q = torch.quantile(r.flatten().double(), torch.tensor([0.05, 0.95], dtype=torch.float64))
    geo = log_r.mean(-1).exp()
    return (f"SmolLM2-135M-Instruct, bf16 sampler vs fp32 trainer, {n} x {out.shape[1] - p} "
            f"tokens: KL k3 {float((r - 1 - log_r).mean()):.1e} per token, token ratio p05 - "
            f"p95 {float(q[0]):.3f} - {float(q[1]):.3f}, geometric-mean ratios "
            f"{float(geo.min()):.3f} - {float(geo.max()):.3f}")


def table(results: dict, header: str) -> str:
    from rlvr.trainer.objective.importance import CORRECTIONS
    names = list(results)
    lines = [header, "",
             "| sampler vs trainer | " + " | ".join(names) + " |",
             "|---|" + "---|" * len(names),
             "| KL(pi_s \\|\\| pi_old) per token | "
             + " | ".join(f"{results[n]['kl']:.1e}" for n in names) + " |",
             "| token ratio p05 - p95 | "
             + " | ".join(f"{results[n]['ratio'][0]:.3f} - {results[n]['ratio'][1]:.3f}"
                          for n in names) + " |"]
    for c in CORRECTIONS:
        lines.append(f"| `{c}`: cos / rel. error / cut / batch-64 error | " + " | ".join(
            f"{results[n][c]['cos']:.4f} / {results[n][c]['err']:.1%} / "
            f"{results[n][c]['cut']:.0%} / {results[n][c]['mc']:.0%}" for n in names) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--print", action="store_true", help="print the table, leave the docs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=1e-4, help="size of a stale update")
    ap.add_argument("--stale", default="1,4", help="updates the stale samplers missed")
    ap.add_argument("--batches", type=int, default=16)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--smollm2", action="store_true",
                    help="only print the bf16-vs-fp32 mismatch of SmolLM2-135M (a few minutes)")
    args = ap.parse_args()
    if args.smollm2:
        load = os.getloadavg()[0]
        print(f"{smollm2_mismatch(seed=args.seed)} (load average {load:.1f})")
        return 0
    torch.set_num_threads(1)
    from rlvr.trainer.objective.importance import Knobs
    knobs = Knobs()
    start, load = time.time(), os.getloadavg()[0]
    model = build(args.seed)
    gen = torch.Generator().manual_seed(args.seed + 1)
    prompt = torch.randint(V, (PROMPT,), generator=gen)
    seqs = torch.cartesian_prod(*[torch.arange(V)] * L)
    inputs = torch.cat([prompt.expand(len(seqs), -1), seqs], 1)
    reward = (torch.rand(len(seqs), generator=gen, dtype=torch.float64) < 0.3).double()
    bf16 = copy.deepcopy(model).to(torch.bfloat16)
    eager = scored(with_attention(model, "eager"), inputs)
    scenarios = {"attention (eager vs SDPA)": (model, eager), "bf16": (model, scored(bf16, inputs))}
    for k in (int(s) for s in args.stale.split(",") if s):
        scenarios[f"bf16 + {k} stale"] = (stale(model, inputs, reward, k, args.lr),
                                          scored(bf16, inputs))
    results = {name: measure(trainer, samp, inputs, reward, knobs, args.batches, args.batch,
                             args.seed + 2) for name, (trainer, samp) in scenarios.items()}
    header = (f"`python benchmarks/correction_bias.py` (seed {args.seed}, stale updates of "
              f"lr = {args.lr} sign steps, the knobs' defaults: {_knobs(knobs)}), "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
              f"{time.time() - start:.0f} s on one thread, load average {load:.1f}.")
    text = table(results, header)
    if args.print:
        print(text)
        return 0
    doc = DOC.read_text()
    if BEGIN not in doc or END not in doc:
        print(f"{DOC}: no {BEGIN} ... {END} block to rewrite; use --print", file=sys.stderr)
        return 2
    head, rest = doc.split(BEGIN, 1)
    DOC.write_text(head + BEGIN + "\n" + text + "\n" + END + rest.split(END, 1)[1])
    print(text)
    return 0


def _knobs(k) -> str:
    return (f"C = {k.threshold}, masks [{k.mask_low}, {k.mask_high}], geometric "
            f"[{k.geo_low}, {k.geo_high}], ICEPOP [{k.icepop_low}, {k.icepop_high}], "
            f"delta = {k.kl_threshold}")


if __name__ == "__main__":
    sys.exit(main())
