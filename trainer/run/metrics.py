"""Step metrics (names documented in docs/trainer.md) and where they go: metrics.jsonl,
TensorBoard (RUN/tensorboard), optionally Weights & Biases (`report_to`), the progress bar,
and a per-step sample of completions.
`MetricsLogger` is the one logger of every training command (`rlvr train`, `rlvr train-rm`)."""
from __future__ import annotations

import json
import math
import resource
from pathlib import Path

import torch

from rlvr.core import STATUSES
from rlvr.stats import quantile
from rlvr.verifiers.parser import ThinkParser

from rlvr.trainer.objective import algorithms as alg

__all__ = ["rollout_metrics", "MetricsLogger", "peak_memory_gib", "UpdateStats",
           "merge_inner_steps"]


def _mean(xs) -> float:
    xs = list(xs)
    return float(sum(xs) / len(xs)) if xs else float("nan")


def rollout_metrics(rollout, env, tokenizer, reflection_phrases) -> dict:
    """Everything measurable from a scored rollout before any update."""
    valid, rewards = rollout.valid, rollout.rewards
    r = rewards[valid]
    m = {"reward": float(r.mean()) if len(r) else float("nan"),
         "reward_std": float(r.std()) if len(r) > 1 else 0.0,
         "samples/count": len(rollout), "samples/excluded": int((~valid).sum())}
    names = {n for v in rollout.verdicts for n in v.components}
    for name in sorted(names):
        vals = [v.components[name] for v, ok in zip(rollout.verdicts, valid) if ok and name in v.components]
        m[f"rewards/{name}/mean"] = _mean(vals)
    m.update(_verifier_metrics(rollout, env.name))
    m.update(_length_metrics(rollout))
    m.update(think_metrics([c.text for c in rollout.completions], tokenizer,
                           getattr(env, "parser", None) or ThinkParser(), reflection_phrases))
    G = rollout.group_size
    if G > 1:     # over valid samples only: a failed verdict's 0 is not a reward
        from rlvr.trainer.objective.algorithms import groups_with_signal
        signal = groups_with_signal(rewards.view(-1, G), valid.view(-1, G))
        m["frac_reward_zero_std"] = float((~signal).float().mean())
    return m


def _verifier_metrics(rollout, name: str) -> dict:
    n = max(len(rollout), 1)
    out = {f"verifier/{name}/{s}_rate": sum(v.status == s for v in rollout.verdicts) / n
           for s in STATUSES}
    lat = [v.latency_s for v in rollout.verdicts]
    out[f"verifier/{name}/latency_p50_s"] = quantile(lat, 0.5)
    out[f"verifier/{name}/latency_p99_s"] = quantile(lat, 0.99)
    return out


def _length_metrics(rollout) -> dict:
    lengths = [len(c) for c in rollout.completion_ids]
    stopped = [len(c.token_ids) for c in rollout.completions if c.finish_reason == "stop"]
    return {"completions/mean_length": _mean(lengths), "completions/min_length": min(lengths),
            "completions/max_length": max(lengths),
            "completions/clipped_ratio": 1.0 - len(stopped) / len(lengths),
            "completions/mean_terminated_length": _mean(stopped)}


def think_metrics(texts: list[str], tokenizer, parser, reflection_phrases) -> dict:
    """How the think/answer format is doing: the R1-Zero story (longer thinking, 'aha'
    reflections) is read from these, not from the reward alone."""
    parsed = [parser.parse(t) for t in texts]
    n = max(len(texts), 1)
    count = lambda s: len(tokenizer(s, add_special_tokens=False).input_ids) if s else 0
    phrases = [p.lower() for p in reflection_phrases]
    return {
        "think/present_rate": sum(p.think_present for p in parsed) / n,
        "think/closed_rate": sum(p.think_closed for p in parsed) / n,
        "think/well_formed_rate": sum(p.well_formed for p in parsed) / n,
        "think/unclosed_rate": sum(p.think_present and not p.think_closed for p in parsed) / n,
        "think/mean_tokens": _mean(count(p.think) for p in parsed if p.think_present),
        "answer/mean_tokens": _mean(count(p.answer) for p in parsed),
        "think/reflection_rate": sum(any(ph in t.lower() for ph in phrases) for t in texts) / n,
    }


def peak_memory_gib() -> float:
    """Peak resident memory of this process (CUDA: peak allocated) in GiB."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.max_memory_allocated() / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _finite(x):
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


class MetricsLogger:
    """Appends one JSON line per step to metrics.jsonl (and eval.jsonl), mirrors scalars to
    TensorBoard (RUN/tensorboard) and the progress bar, and writes sampled completions to
    samples.jsonl. Rows past `start_step` (a run that died after its last checkpoint) are
    dropped first: a resumed run rewrites them."""

    BAR_KEYS = ("reward", "kl", "completions/mean_length", "entropy")
    """The metrics an RL run's bar shows; `bar_keys` names others (SFT: its loss)."""

    def __init__(self, run_dir: Path, start_step: int, total_steps: int, tensorboard: bool,
                 progress: bool, desc: str = "rlvr train", report_to=("tensorboard",),
                 config: dict | None = None, bar_keys: tuple = BAR_KEYS):
        self.dir = Path(run_dir)
        self.bar_keys = bar_keys
        for name in ("metrics.jsonl", "eval.jsonl", "samples.jsonl"):
            _truncate_after(self.dir / name, start_step)
        self.wandb = None
        if "wandb" in report_to:       # optional: Weights & Biases (trainer/run/wandb_sink.py)
            from rlvr.trainer.run.wandb_sink import WandbSink
            self.wandb = WandbSink(self.dir, config or {})
        self.tb = None
        if tensorboard and "tensorboard" in report_to:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise ImportError("TensorBoard logging needs the tensorboard package: "
                                  "pip install tensorboard (or set tensorboard off)") from exc
            self.tb = SummaryWriter(str(self.dir / "tensorboard"), purge_step=start_step + 1)
        from tqdm.auto import tqdm
        self.bar = tqdm(total=total_steps, initial=start_step, disable=not progress,
                        desc=desc, dynamic_ncols=True)

    def log(self, step: int, metrics: dict, file: str = "metrics.jsonl") -> None:
        row = {"step": step, **{k: _finite(v) if isinstance(v, float) else v
                                for k, v in metrics.items()}}
        with open(self.dir / file, "a") as f:
            f.write(json.dumps(row) + "\n")
        if self.tb is not None:
            for k, v in metrics.items():
                if isinstance(v, (int, float)) and math.isfinite(v):
                    self.tb.add_scalar(k if file == "metrics.jsonl" else f"eval/{k}", v, step)
        if self.wandb is not None:
            self.wandb.log(step, metrics, file)
        if file == "metrics.jsonl":
            self.bar.update(1)
            self.bar.set_postfix({k: f"{metrics[k]:.3g}" for k in self.bar_keys
                                  if isinstance(metrics.get(k), float)}, refresh=False)

    def samples(self, step: int, rows: list[dict]) -> None:
        with open(self.dir / "samples.jsonl", "a") as f:
            for row in rows:
                f.write(json.dumps({"step": step, **row}, default=str) + "\n")

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.close()
        self.bar.close()


def _truncate_after(path: Path, step: int) -> None:
    """Drop rows of steps after `step` (written by a run that died after its last checkpoint),
    and a last line cut off mid-write (no newline)."""
    if not path.exists():
        return
    keep = [line for line in path.read_text().splitlines(keepends=True)
            if line.endswith("\n") and line.strip() and json.loads(line).get("step", 0) <= step]
    path.write_text("".join(keep))


# --- the update's own metrics ------------------------------------------------------------------
class UpdateStats:
    """Sums per-token statistics over micro-batches of one inner step."""

    def __init__(self):
        self.sums, self.n_tok, self.low, self.high = {}, 0.0, 0.0, 0.0
        self.ent_sum, self.ent_n = 0.0, 0.0
        self.kl_parts = None

    def add(self, key, value):
        self.sums[key] = self.sums.get(key, 0.0) + value

    def tokens(self, mask, low, high, entropy):
        self.n_tok += float(mask.sum())
        self.low += float((low & mask).sum())
        self.high += float((high & mask).sum())
        if entropy is not None:
            self.ent_sum += float(entropy[mask].sum())
            self.ent_n += float(mask.sum())

    def kl(self, logp, ref_logp, mask):
        k1, k3 = alg.kl_k1(logp, ref_logp) * mask, alg.kl_k3(logp, ref_logp) * mask
        parts = [float(k1.sum()), float(k3.sum()), float(mask.any(-1).sum())]
        self.kl_parts = parts if self.kl_parts is None else [a + b for a, b in zip(self.kl_parts, parts)]

    @classmethod
    def merged(cls, parts: list["UpdateStats"]) -> "UpdateStats":
        """The ranks' accumulators summed (every field is a sum)."""
        out = cls()
        for p in parts:
            for k, v in p.sums.items():
                out.add(k, v)
            out.n_tok, out.low, out.high = out.n_tok + p.n_tok, out.low + p.low, out.high + p.high
            out.ent_sum, out.ent_n = out.ent_sum + p.ent_sum, out.ent_n + p.ent_n
            if p.kl_parts is not None:
                out.kl_parts = p.kl_parts if out.kl_parts is None else \
                    [a + b for a, b in zip(out.kl_parts, p.kl_parts)]
        return out

    def result(self, grad_norm: float) -> dict:
        n = max(self.n_tok, 1.0)
        out = {**self.sums, "grad_norm": grad_norm, "clip_ratio/low_mean": self.low / n,
               "clip_ratio/high_mean": self.high / n,
               "clip_ratio/region_mean": (self.low + self.high) / n}
        if self.ent_n:
            out["entropy"] = self.ent_sum / self.ent_n
        if self.kl_parts is not None:
            k1, k3, seqs = self.kl_parts
            out.update({"kl": k3 / n, "kl/k1": k1 / n, "kl/k3": k3 / n,
                        "kl/k1_seq_sum": k1 / max(seqs, 1.0)})
        return out


def merge_inner_steps(inner: list[dict]) -> dict:
    """Losses, grad norms and clip fractions averaged over the mu inner steps; entropy and KL
    come from inner step 1 (measured at theta_old, the policy that sampled)."""
    out = {}
    for key in inner[0]:
        vals = [d[key] for d in inner if key in d]
        out[key] = inner[0][key] if key in ("entropy",) or key.startswith("kl") else sum(vals) / len(vals)
    out["inner_steps"] = len(inner)
    return out
