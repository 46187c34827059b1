"""The KL estimators k1, k2, k3 on real rollouts: bias and variance against the exact KL.

    python benchmarks/kl_estimators.py                      # SmolLM2-135M after a few GRPO steps
    python benchmarks/kl_estimators.py --tiny               # a tiny random model: a pipeline check

A policy is trained a few GRPO steps from its reference (the model before RL) on the main job's
task, in the main job's settings (trainer/recipes/r1zero.py: arithmetic with the format reward
at half weight, 4 prompts x 8 completions of <= 64 tokens at temperature 0.7, lr 1e-5) but
without the KL term (the drift is what is measured); then it samples fresh completions of
held-out tasks, and at every completion position both models' full next-token distributions
at the sampling temperature, p = softmax(z / T) and q = softmax(z_ref / T) (the distributions
the trainer's KL compares), give, in float64,

    the exact KL_t = sum_v p_v (log p_v - log q_v)

and, with r_v = log q_v - log p_v (log w of the sampled token, Schulman 2020, "Approximating KL
Divergence"), each estimator's value at every token v the sampler might have drawn:

    k1 = -r        k2 = r^2 / 2        k3 = (e^r - 1) - r

so each estimator's conditional mean and variance under y ~ p are exact sums over the
vocabulary, not sample averages: bias_t = E_p[k] - KL_t and Var_p[k] per position. Per token,
the table reports their means over all completion positions (relative to the mean KL), the
share of draws that would come out negative, and the same errors measured on the token the
sampler did draw. Per sequence, the estimate of a completion's KL is the sum of its tokens'
estimates and the exact value the sum of its KL_t; the errors of different positions are
uncorrelated (each is centred given its prefix), so the sequence's exact variance is the sum
of its positions' variances; the measured spread over the sampled completions is beside it.

Writes benchmarks/results/kl_estimators/{NAME}.json, .md (the table) and .png (the plot).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "kl_estimators"
ESTIMATORS = ("k1", "k2", "k3")


RARE = 1e-3
"""A token the policy gives less than this probability is 'rare' (drawn about once in a
thousand): the share of an estimator's second moment E_p[k^2] that rare tokens carry says how
much of its variance a batch of a few thousand tokens ever sees."""


def estimator_moments(logp: torch.Tensor, logq: torch.Tensor) -> dict:
    """Per position [...]: the exact KL(p || q) and, for each estimator, its mean, variance,
    probability of a negative value under y ~ p, and the second moment E_p[k^2] with the part
    of it on rare tokens, from full log-probs [..., V] (float64)."""
    p = logp.exp()
    r = logq - logp
    kl = -(p * r).sum(-1)
    values = {"k1": -r, "k2": 0.5 * r * r, "k3": torch.expm1(r) - r}
    out = {"kl": kl}
    rare = p < RARE
    for name, k in values.items():
        mean = (p * k).sum(-1)
        second = p * k * k
        out[name] = {"mean": mean, "var": (second.sum(-1) - mean ** 2).clamp_min(0.0),
                     "p_negative": (p * (k < 0)).sum(-1), "second": second.sum(-1),
                     "second_rare": (second * rare).sum(-1)}
    return out


def sampled_values(logp_y: torch.Tensor, logq_y: torch.Tensor) -> dict:
    """Each estimator on the sampled token's log-probs (what a trainer computes)."""
    r = logq_y - logp_y
    return {"k1": -r, "k2": 0.5 * r * r, "k3": torch.expm1(r) - r}


@torch.no_grad()
def full_logprobs(model, seqs, temperature: float) -> torch.Tensor:
    """log softmax(z / T) at every position that predicts a completion token, float64
    [m, C, V] (the reference forward's layout: completion token t at column P + t)."""
    logits = model(input_ids=seqs.input_ids, attention_mask=seqs.attention_mask,
                   position_ids=seqs.position_ids, use_cache=False).logits
    P, C = seqs.prompt_len, seqs.targets.size(1)
    return torch.log_softmax(logits[:, P - 1:P - 1 + C].double() / temperature, -1)


def measure(policy, ref, rollout, pad_id: int, chunk: int, temperature: float) -> dict:
    """Per-token and per-sequence records of the exact KL and each estimator."""
    from rlvr.trainer.forwards.reference import Sequences
    fields = ("mean", "var", "p_negative", "second", "second_rare")
    tokens = {"kl": [], **{k: {f: [] for f in (*fields, "sampled")} for k in ESTIMATORS}}
    seqs_out = {"kl": [], "length": [], **{k: {"bias": [], "var": [], "error": []}
                                           for k in ESTIMATORS}}
    for i in range(0, len(rollout.completion_ids), chunk):
        rows = list(range(i, min(i + chunk, len(rollout.completion_ids))))
        seqs = Sequences.of(rows, rollout.prompt_ids, rollout.completion_ids, pad_id, "cpu")
        logp = full_logprobs(policy, seqs, temperature)
        logq = full_logprobs(ref, seqs, temperature)
        moments = estimator_moments(logp, logq)
        y = seqs.targets.unsqueeze(-1)
        drawn = sampled_values(logp.gather(-1, y).squeeze(-1), logq.gather(-1, y).squeeze(-1))
        mask = seqs.mask
        for k, row in enumerate(rows):
            m = mask[k]
            kl = moments["kl"][k][m]
            tokens["kl"].append(kl)
            seqs_out["kl"].append(float(kl.sum()))
            seqs_out["length"].append(int(m.sum()))
            for name in ESTIMATORS:
                mo = {f: moments[name][f][k][m] for f in fields}
                for f, v in mo.items():
                    tokens[name][f].append(v)
                tokens[name]["sampled"].append(drawn[name][k][m])
                seqs_out[name]["bias"].append(float((mo["mean"] - kl).sum()))
                seqs_out[name]["var"].append(float(mo["var"].sum()))
                seqs_out[name]["error"].append(float((drawn[name][k][m] - kl).sum()))
        del logp, logq, moments
    tokens["kl"] = torch.cat(tokens["kl"])
    for name in ESTIMATORS:
        tokens[name] = {f: torch.cat(v) for f, v in tokens[name].items()}
    return {"tokens": tokens, "sequences": seqs_out}


def summary(records: dict) -> dict:
    """The table's numbers: per token and per sequence, for each estimator."""
    tok, seq = records["tokens"], records["sequences"]
    kl = tok["kl"]
    mean_kl = float(kl.mean())
    seq_kl = torch.tensor(seq["kl"], dtype=torch.float64)
    out = {"tokens": int(kl.numel()), "sequences": len(seq_kl), "mean_kl_token": mean_kl,
           "median_kl_token": float(kl.median()), "max_kl_token": float(kl.max()),
           "mean_kl_sequence": float(seq_kl.mean()),
           "mean_length": sum(seq["length"]) / max(len(seq["length"]), 1), "estimators": {}}
    for name in ESTIMATORS:
        t, s = tok[name], seq[name]
        err = t["sampled"] - kl
        s_err = torch.tensor(s["error"], dtype=torch.float64)
        out["estimators"][name] = {
            "token": {"bias": float((t["mean"] - kl).mean()),
                      "rel_bias": float((t["mean"] - kl).mean()) / mean_kl,
                      "std": math.sqrt(float(t["var"].mean())),
                      "rel_std": math.sqrt(float(t["var"].mean())) / mean_kl,
                      "p_negative": float(t["p_negative"].mean()),
                      "rare_share": float(t["second_rare"].sum() / t["second"].sum()),
                      "sampled_mean_error": float(err.mean()),
                      "sampled_se": float(err.std()) / math.sqrt(max(len(err), 1)),
                      "sampled_rmse": float(err.pow(2).mean().sqrt()),
                      "sampled_negative": float((t["sampled"] < 0).double().mean())},
            "sequence": {"bias": sum(s["bias"]) / len(s["bias"]),
                         "rel_bias": sum(s["bias"]) / len(s["bias"]) / float(seq_kl.mean()),
                         "std": math.sqrt(sum(s["var"]) / len(s["var"])),
                         "rel_std": math.sqrt(sum(s["var"]) / len(s["var"])) / float(seq_kl.mean()),
                         "sampled_mean_error": float(s_err.mean()),
                         "sampled_std_error": float(s_err.std()) if len(s_err) > 1 else 0.0,
                         "sampled_se": (float(s_err.std()) / math.sqrt(len(s_err))
                                        if len(s_err) > 1 else 0.0)}}
    return out


def table(s: dict) -> str:
    """The summary as a markdown table."""
    lines = [f"{s['tokens']} completion tokens in {s['sequences']} completions (mean length "
             f"{s['mean_length']:.1f}); exact KL per token: mean {s['mean_kl_token']:.3g}, median "
             f"{s['median_kl_token']:.3g}, max {s['max_kl_token']:.3g}; per completion: mean "
             f"{s['mean_kl_sequence']:.3g}.", "",
             "Exact (under y ~ pi, summed over the vocabulary): bias and std, relative to the "
             "mean exact KL in brackets; P(k < 0); the share of E[k^2] on tokens the policy "
             "rarely draws. Drawn (the sampled tokens): mean error ± its "
             "standard error, and the error's RMSE (token) or std (sequence).", "",
             "| estimator | token bias (rel.) | token std (rel.) | P(k < 0) "
             f"| E[k^2] on p < {RARE:g} "
             "| token error, drawn: mean ± s.e. [RMSE] "
             "| sequence bias (rel.) | sequence std (rel.) "
             "| sequence error, drawn: mean ± s.e. [std] |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name in ESTIMATORS:
        t, q = s["estimators"][name]["token"], s["estimators"][name]["sequence"]
        lines.append(
            f"| {name} | {t['bias']:.2e} ({t['rel_bias']:+.1%}) | {t['std']:.2e} "
            f"({t['rel_std']:.2f}x) | {t['p_negative']:.1%} | {t['rare_share']:.1%} | "
            f"{t['sampled_mean_error']:+.1e} ± "
            f"{t['sampled_se']:.1e} [{t['sampled_rmse']:.1e}] | {q['bias']:.2e} "
            f"({q['rel_bias']:+.1%}) | {q['std']:.2e} ({q['rel_std']:.2f}x) | "
            f"{q['sampled_mean_error']:+.1e} ± {q['sampled_se']:.1e} "
            f"[{q['sampled_std_error']:.1e}] |")
    return "\n".join(lines) + "\n"


COLOURS = {"k1": "tab:red", "k2": "tab:blue", "k3": "tab:green"}


def plot(records: dict, s: dict, path: Path, title: str) -> None:
    """Left: each estimator's value on the drawn token against the exact KL of its position.
    Right: the spread of each estimator's error on whole completions (sum over its tokens minus
    the exact sum), relative to the mean exact KL of a completion."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    tok, seq = records["tokens"], records["sequences"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.8))
    kl = tok["kl"].numpy()
    for name, marker in (("k1", "o"), ("k3", "o"), ("k2", "x")):     # k2 over k3: they touch
        a.scatter(kl, tok[name]["sampled"].numpy(), s=4, alpha=0.35, marker=marker,
                  color=COLOURS[name], label=name)
    lim = [max(float(kl.min()), 1e-8), float(kl.max())]
    a.plot(lim, lim, color="black", lw=0.8, label="exact KL_t")
    if lim[1] > 20 * lim[0]:
        a.set_xscale("log")
    a.set_yscale("symlog", linthresh=1e-4)
    a.set_xlabel("exact KL_t of the position")
    a.set_ylabel("estimate on the drawn token")
    a.legend(markerscale=3)
    a.set_title("per token")
    scale = s["mean_kl_sequence"]
    errors = {n: [e / scale for e in seq[n]["error"]] for n in ESTIMATORS}
    lo = min(min(v) for v in errors.values())
    hi = max(max(v) for v in errors.values())
    bins = [lo + (hi - lo) * i / 40 for i in range(41)]
    for name in ESTIMATORS:
        e = s["estimators"][name]["sequence"]
        b.hist(errors[name], bins=bins, histtype="step", lw=1.5, color=COLOURS[name],
               label=f"{name}: exact bias {e['rel_bias']:+.1%}, std {e['rel_std']:.2f}x")
    b.axvline(0, color="black", lw=0.8)
    b.set_xlabel("(estimate - exact) / mean exact KL of a completion")
    b.set_ylabel("completions")
    b.set_title("per completion (sum over its tokens)")
    b.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def train_policy(args, out_dir: str):
    """A few GRPO steps from the base model (no KL term: the drift is what is measured)."""
    from rlvr.trainer.config import TrainConfig
    from rlvr.trainer.run.loop import Trainer
    cfg = TrainConfig(preset="grpo", model=args.model, env="arithmetic", env_args=ENV_ARGS,
                      output_dir=out_dir, seed=args.seed, steps=args.steps,
                      prompts_per_step=args.prompts, group_size=args.group,
                      max_completion_length=args.tokens, temperature=args.temperature,
                      lr=args.lr, beta=0.0, micro_batch_size=4, entropy_coef=args.entropy_coef,
                      checkpoint_every=0, eval_every=0, progress=False, tensorboard=False,
                      reward_deadline_s=0, log_completions=0, monitor_action="off")
    tr = Trainer(cfg)
    rewards = []
    for _ in range(args.steps):
        metrics, _ = tr.train_step()
        tr.step += 1
        rewards.append(metrics["reward"])
        print(f"step {tr.step}: reward {metrics['reward']:.3f} loss {metrics['loss']:.4f}",
              flush=True)
    return tr, rewards


ENV_ARGS = {"n_terms": 2, "max_value": 20, "ops": "+", "test_fraction": 0.5,
            "prompt_style": "chat", "format_weight": 0.5}      # the main job's


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true",
                    help="a tiny random model moved by an entropy bonus (pipeline check only)")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument("--entropy-coef", type=float, default=0.0)
    ap.add_argument("--eval-prompts", type=int, default=16)
    ap.add_argument("--eval-group", type=int, default=4)
    ap.add_argument("--chunk", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="")
    args = ap.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("KL_THREADS", "1")))
    t0 = time.perf_counter()
    from rlvr.trainer.models.loading import load_policy
    from rlvr.trainer.sampling.rollout import generate
    with tempfile.TemporaryDirectory() as tmp:
        if args.tiny:
            from rlvr.trainer.models.tiny import build_tiny_model
            args.model = build_tiny_model(Path(tmp) / "tiny")
            args.lr, args.entropy_coef, args.tokens = 1e-2, args.entropy_coef or 0.5, 24
        name = args.name or ("tiny" if args.tiny else Path(str(args.model)).name)
        tr, rewards = train_policy(args, str(Path(tmp) / "run"))
        t_train = time.perf_counter() - t0
        ref = load_policy(args.model, "float32", "cpu")
        tasks = tr.env.sample(args.eval_prompts, split="test", seed=args.seed + 1)
        rollout = generate(tr.policy, tr.tokenizer, tasks, args.eval_group, args.tokens,
                           temperature=args.temperature, share_prefix=True,
                           seeds=[args.seed * 1000 + i for i in range(len(tasks))])
        records = measure(tr.policy.eval(), ref, rollout, tr.tokenizer.pad_token_id, args.chunk,
                          args.temperature)
    s = summary(records)
    s.update({"model": "tiny random Llama" if args.tiny else str(args.model),
              "train": {"steps": args.steps, "prompts": args.prompts, "group": args.group,
                        "tokens": args.tokens, "lr": args.lr, "temperature": args.temperature,
                        "entropy_coef": args.entropy_coef,
                        "env": "arithmetic", "env_args": ENV_ARGS, "rewards": rewards},
              "eval": {"prompts": args.eval_prompts, "group": args.eval_group,
                       "temperature": args.temperature},
              "wall_s": {"train": round(t_train, 1), "total": round(time.perf_counter() - t0, 1)},
              "load_average_end": os.getloadavg()})
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(s, indent=1))
    text = table(s)
    (OUT / f"{name}.md").write_text(text)
    plot(records, s, OUT / f"{name}.png",
         f"{s['model']}, {args.steps} GRPO steps (lr {args.lr:g}) vs its start: k1, k2, k3")
    print(text)
    print(f"wall {s['wall_s']}, load {s['load_average_end']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
