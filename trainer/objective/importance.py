"""Sampler-trainer mismatch correction: a menu of importance weights and masks.

When rollouts come from another engine's copy of the policy, pi_s (an inference server's, up to
`sync_every - 1` updates old, and even freshly synced computed by other kernels), the tokens were
not drawn from the trainer's pi_old, which the policy gradient assumes. Each correction turns
the per-token ratio r_it = pi_old(o_it) / pi_s(o_it) (log-probs of the sampled tokens under
softmax(logits / temperature)) into a weight w_it, a constant (no gradient) multiplying token
t's policy-gradient term; a weight of 0 drops the token (its gradient is exactly zero; the loss
normalisers still count it). The menu, `CORRECTIONS` (C, [lo, hi] and delta are config knobs):

  token           truncated IS, per token:      w_it = min(r_it, C)
  sequence        truncated IS, per sequence:   w_it = min(R_i, C),  R_i = prod_t r_it
      (Yao et al. 2025, "Your efficient RL framework secretly brings you off-policy RL
      training"; the truncation is IMPALA's V-trace rho-bar, Espeholt et al. 2018)
  token_mask      rejection per token:          w_it = 1[lo <= r_it <= hi]
  sequence_mask   rejection per sequence:       w_it = 1[lo <= R_i <= hi]
      (masking instead of truncating: Liu et al. 2025, "When speed kills stability:
      demystifying RL collapse from the training-inference mismatch")
  geometric_mask  rejection on the geometric mean:  w_it = 1[lo <= G_i <= hi],
                  G_i = exp(1/|o_i| sum_t log r_it)  (length-free, unlike R_i; Liu et al. 2025)
  icepop          two-sided masked IS per token:    w_it = r_it * 1[alpha <= r_it <= beta]
      (IcePop: Ling Team 2025, "Small leak can sink a great ship: boost RL training on MoE
      with IcePop", used to train Ring-1T, "Every step evolves", Ling Team 2025)
  offpolicy_mask  DeepSeek-V3.2's off-policy sequence mask:
                  w_it = 0 if A_i < 0 and 1/|o_i| sum_t log(pi_s(o_it) / pi_old(o_it)) > delta,
                  else 1   (DeepSeek-AI 2025, "DeepSeek-V3.2: pushing the frontier of open
                  large language models"; A_i is the sequence's mean advantage, and the
                  trainer's pi_old stands for the paper's pi_theta: weights are frozen)
  none            w_it = 1 (the mismatch is still measured)

Truncation bounds the variance a token with a tiny pi_s could add, at the price of a bias
towards pi_s where the cut binds; masks drop such tokens or sequences whole (biased as well, but
a dropped sample cannot push the policy towards what the sampler got wrong).

The mismatch is logged every step (`mismatch_metrics`): KL(pi_s || pi_old) estimated on the
sampled tokens (k1 = log pi_s - log pi_old, and Schulman's k3 = (r - 1) - log r, unbiased and
never negative), quantiles of the ratio the correction reads (r_it, R_i or G_i), the effective
sample size of the ratios and of the weights applied ((sum w)^2 / (n sum w^2): 1 when every
weight is equal), and the share of those units whose weight was truncated or masked.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

__all__ = ["Knobs", "Correction", "CORRECTIONS", "LEVELS", "check_settings", "log_ratios",
           "correction_weights", "truncated_weights", "mismatch_metrics", "sampler_logprobs",
           "applies", "correct"]

_QUANTILES = (0.05, 0.5, 0.95)


@dataclass(frozen=True)
class Knobs:
    """The corrections' thresholds, from TrainConfig's importance_* fields."""
    threshold: float = 2.0       # C: truncated IS cuts ratios above it
    mask_low: float = 0.5        # [lo, hi]: token_mask and sequence_mask keep ratios inside
    mask_high: float = 2.0
    geo_low: float = 0.99        # the band of geometric_mask
    geo_high: float = 1.01
    icepop_low: float = 0.5      # ICEPOP's [alpha, beta] (its published values)
    icepop_high: float = 5.0
    kl_threshold: float = 1e-3   # delta of offpolicy_mask (DeepSeek-V3.2 publishes none)

    @classmethod
    def of(cls, cfg) -> "Knobs":
        return cls(cfg.importance_threshold, cfg.importance_mask_low, cfg.importance_mask_high,
                   cfg.importance_geo_low, cfg.importance_geo_high, cfg.importance_icepop_low,
                   cfg.importance_icepop_high, cfg.importance_kl_threshold)


@dataclass(frozen=True)
class Marks:
    """What a correction did to a batch [n, T]: the weights (0 off the mask) and where the
    weight was truncated or masked (False off the mask)."""
    weights: torch.Tensor
    clipped: torch.Tensor
    masked: torch.Tensor


def log_ratios(trainer_logp: torch.Tensor, sampler_logp: torch.Tensor,
               mask: torch.Tensor) -> torch.Tensor:
    """[n, T] log pi_old - log pi_s on the masked tokens, 0 elsewhere."""
    return (trainer_logp.float() - sampler_logp.float()).masked_fill(~mask, 0.0)


def _per_sequence(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[n] -> [n, T]: a sequence's value on each of its tokens."""
    return x[:, None].expand_as(mask)


def _sequence_log_ratio(log_r, mask):
    return _per_sequence(log_r.sum(-1), mask)                       # log R_i


def _geometric_log_ratio(log_r, mask):
    return _per_sequence(log_r.sum(-1) / mask.sum(-1).clamp_min(1), mask)   # log G_i


def _truncate(ratio, mask, cap) -> Marks:
    none = torch.zeros_like(mask)
    return Marks(ratio.clamp(max=cap).masked_fill(~mask, 0.0), (ratio > cap) & mask, none)


def _band(ratio, mask, lo, hi, keep) -> Marks:
    """Weight `keep` inside [lo, hi], 0 outside (and off the mask)."""
    out = ((ratio < lo) | (ratio > hi)) & mask
    return Marks(keep.masked_fill(out | ~mask, 0.0), torch.zeros_like(mask), out)


def token_tis(log_r, mask, adv, k: Knobs) -> Marks:
    """min(r_it, C)."""
    return _truncate(log_r.exp(), mask, k.threshold)


def sequence_tis(log_r, mask, adv, k: Knobs) -> Marks:
    """min(prod_t r_it, C) on every token of the sequence."""
    return _truncate(_sequence_log_ratio(log_r, mask).exp(), mask, k.threshold)


def token_mask(log_r, mask, adv, k: Knobs) -> Marks:
    """1[lo <= r_it <= hi]."""
    return _band(log_r.exp(), mask, k.mask_low, k.mask_high, torch.ones_like(log_r))


def sequence_mask(log_r, mask, adv, k: Knobs) -> Marks:
    """1[lo <= prod_t r_it <= hi] on every token of the sequence."""
    return _band(_sequence_log_ratio(log_r, mask).exp(), mask, k.mask_low, k.mask_high,
                 torch.ones_like(log_r))


def geometric_mask(log_r, mask, adv, k: Knobs) -> Marks:
    """1[lo <= exp(mean_t log r_it) <= hi] on every token of the sequence."""
    return _band(_geometric_log_ratio(log_r, mask).exp(), mask, k.geo_low, k.geo_high,
                 torch.ones_like(log_r))


def icepop(log_r, mask, adv, k: Knobs) -> Marks:
    """r_it * 1[alpha <= r_it <= beta]: the ratio inside the band, 0 outside."""
    ratio = log_r.exp()
    return _band(ratio, mask, k.icepop_low, k.icepop_high, ratio)


def offpolicy_mask(log_r, mask, adv, k: Knobs) -> Marks:
    """0 on a sequence with A_i < 0 whose mean log(pi_s / pi_old) exceeds delta, else 1."""
    if adv is None:
        raise ValueError("importance_correction='offpolicy_mask' needs the advantages")
    n = mask.sum(-1).clamp_min(1)
    kl = -log_r.sum(-1) / n
    negative = (adv.float() * mask).sum(-1) / n < 0
    out = _per_sequence(negative & (kl > k.kl_threshold), mask) & mask
    return Marks(mask.float().masked_fill(out, 0.0), torch.zeros_like(mask), out)


def no_correction(log_r, mask, adv, k: Knobs) -> Marks:
    """1 on every token."""
    none = torch.zeros_like(mask)
    return Marks(mask.float(), none, none)


@dataclass(frozen=True)
class Correction:
    """A row of the menu: its weights, the ratio it reads (`level`: 'token' r_it, 'sequence'
    R_i or 'geometric' G_i; the unit its metrics count) and the knobs it uses."""
    weights: Callable[..., Marks]
    level: str
    knobs: tuple[str, ...] = ()


CORRECTIONS: dict[str, Correction] = {
    "token": Correction(token_tis, "token", ("threshold",)),
    "sequence": Correction(sequence_tis, "sequence", ("threshold",)),
    "token_mask": Correction(token_mask, "token", ("mask_low", "mask_high")),
    "sequence_mask": Correction(sequence_mask, "sequence", ("mask_low", "mask_high")),
    "geometric_mask": Correction(geometric_mask, "geometric", ("geo_low", "geo_high")),
    "icepop": Correction(icepop, "token", ("icepop_low", "icepop_high")),
    "offpolicy_mask": Correction(offpolicy_mask, "geometric", ("kl_threshold",)),
    "none": Correction(no_correction, "token"),
}
LEVELS = tuple(CORRECTIONS)      # the accepted names of importance_correction

_BANDS = (("mask_low", "mask_high"), ("geo_low", "geo_high"), ("icepop_low", "icepop_high"))


def check_settings(cfg) -> None:
    """Refuse an unknown correction or knobs it cannot use, in one line naming the fix."""
    if cfg.importance_correction not in CORRECTIONS:
        raise ValueError(f"importance_correction={cfg.importance_correction!r}; choose from "
                         f"{', '.join(CORRECTIONS)}")
    k = Knobs.of(cfg)
    if not k.threshold > 0:
        raise ValueError(f"importance_threshold must be > 0, got {k.threshold}")
    for lo, hi in _BANDS:
        if not 0 <= getattr(k, lo) < getattr(k, hi):
            raise ValueError(f"need 0 <= importance_{lo} < importance_{hi}, got "
                             f"{getattr(k, lo)} and {getattr(k, hi)}")
    if not k.kl_threshold >= 0:
        raise ValueError(f"importance_kl_threshold must be >= 0, got {k.kl_threshold}")


def _row(name: str) -> Correction:
    if name not in CORRECTIONS:
        raise ValueError(f"importance_correction={name!r}; choose from {', '.join(CORRECTIONS)}")
    return CORRECTIONS[name]


def correction_weights(trainer_logp: torch.Tensor, sampler_logp: torch.Tensor,
                       mask: torch.Tensor, name: str, knobs: Knobs,
                       advantages: torch.Tensor | None = None) -> Marks:
    """The weights [n, T] of correction `name` (0 off the mask), with where it truncated and
    masked. `advantages` [n, T]: needed by offpolicy_mask only."""
    row = _row(name)
    return row.weights(log_ratios(trainer_logp, sampler_logp, mask), mask, advantages, knobs)


def truncated_weights(trainer_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor,
                      level: str, threshold: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(weights [n, T], truncated [n, T] bool) of truncated IS at `level` ('token', 'sequence'
    or 'none') with C = `threshold`."""
    if level not in ("token", "sequence", "none"):
        raise ValueError(f"truncated IS level {level!r}; expected token, sequence or none")
    marks = correction_weights(trainer_logp, sampler_logp, mask, level, Knobs(threshold=threshold))
    return marks.weights, marks.clipped


def _units(x: torch.Tensor, mask: torch.Tensor, level: str) -> torch.Tensor:
    """The values of [n, T] `x` per unit of `level`: each masked token, or each non-empty
    sequence (where `x` is constant along the sequence)."""
    if level == "token":
        return x[mask]
    rows = mask.any(-1)
    first = mask.float().argmax(-1)
    return x.gather(-1, first[:, None]).squeeze(-1)[rows]


def _ess(w: torch.Tensor) -> float:
    """(sum w)^2 / (n sum w^2): 1 when every weight is equal, 1/n when one carries all."""
    w = w.double()
    sq = float((w * w).sum())
    return float(w.sum()) ** 2 / (len(w) * sq) if sq > 0 else 0.0


def mismatch_metrics(trainer_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor,
                     name: str, knobs: Knobs,
                     advantages: torch.Tensor | None = None) -> dict:
    """`mismatch/*` metrics of one batch ([n, T], one row per sequence): KL(pi_s || pi_old) by
    k1 and k3 per token; per unit of the correction's level (tokens, or sequences): the ratio's
    5th, 50th and 95th percentiles, the effective sample size of the ratios (`ess_raw`) and of
    the weights applied (`ess`), and the share truncated or masked."""
    row = _row(name)
    log_r = log_ratios(trainer_logp, sampler_logp, mask)
    n = max(float(mask.sum()), 1.0)
    out = {"mismatch/kl_k1": float((-log_r).sum()) / n,
           "mismatch/kl_k3": float(((log_r.exp() - 1) - log_r).masked_fill(~mask, 0.0).sum()) / n}
    level_log_r = {"token": lambda: log_r, "sequence": lambda: _sequence_log_ratio(log_r, mask),
                   "geometric": lambda: _geometric_log_ratio(log_r, mask)}[row.level]()
    ratios = _units(level_log_r, mask, row.level).exp()
    if not len(ratios):
        return out
    marks = row.weights(log_r, mask, advantages, knobs)
    qs = torch.quantile(ratios.double(), torch.tensor(_QUANTILES, dtype=torch.float64))
    out.update({f"mismatch/ratio_p{round(q * 100):02d}": float(v) for q, v in zip(_QUANTILES, qs)})
    unit = "token" if row.level == "token" else "sequence"
    out["mismatch/ess_raw"] = _ess(ratios)
    out["mismatch/ess"] = _ess(_units(marks.weights, mask, unit))
    out["mismatch/truncated_frac"] = float(_units(marks.clipped, mask, unit).double().mean())
    out["mismatch/masked_frac"] = float(_units(marks.masked, mask, unit).double().mean())
    return out


def sampler_logprobs(rollout, mb) -> torch.Tensor:
    """[m, C]: the sampler's log-prob of each completion token of micro-batch `mb`, laid out like
    its mask (`Rollout.sampler_logp`)."""
    out = torch.zeros(mb.mask.shape, dtype=torch.float32)
    for k, row in enumerate(mb.rows):
        lp = rollout.sampler_logp[row]
        out[k, :len(lp)] = torch.tensor(lp, dtype=torch.float32)
    return out.to(mb.mask.device)


def applies(rollout) -> bool:
    """Whether the update weighs and measures this rollout: its sampler reported log-probs
    (`Rollout.sampler_logp`). With importance_correction = "none" every weight is 1 and the
    mismatch is still logged."""
    return rollout.sampler_logp is not None


def correct(rollout, micro, loss_mask, advantages, old_logp, cfg,
            gather=None) -> tuple[tuple, dict]:
    """The update's hook: (the correction's weights, one [m, C] tensor per micro-batch; the
    `mismatch/*` metrics of the whole batch), measured over the micro-batches the forward
    computed (a silent one, skipped for lack of signal, carries no gradient, so no weight
    matters there). `advantages`: per micro-batch (the off-policy mask reads their sign);
    `old_logp`: the trainer's pi_old log-probs per micro-batch; `gather`: the ranks' gather
    (metrics over the global batch under torchrun)."""
    name, knobs = cfg.importance_correction, Knobs.of(cfg)
    weights, parts = [], []
    for mb, old, mask, adv in zip(micro, old_logp, loss_mask, advantages):
        sampler = sampler_logprobs(rollout, mb)
        weights.append(correction_weights(old, sampler, mask, name, knobs, adv).weights)
        if mb.silent:                        # skipped by the forward: no log-probs measured
            continue
        for k in range(len(mb.rows)):        # one row per sequence, for the quantiles
            m = mask[k]
            parts.append((old[k][m].float().cpu(), sampler[k][m].cpu(), adv[k][m].float().cpu()))
    weights = tuple(weights)
    if gather is not None:
        parts = [p for rank in gather(parts) for p in rank]
    if not parts:                             # every group skipped: nothing measured
        return weights, {}
    width = max((len(o) for o, _, _ in parts), default=0)
    old_t, samp_t, adv_t = (torch.zeros(len(parts), width) for _ in range(3))
    mask_t = torch.zeros(len(parts), width, dtype=torch.bool)
    for k, (o, s, a) in enumerate(parts):
        old_t[k, :len(o)], samp_t[k, :len(s)], adv_t[k, :len(a)] = o, s, a
        mask_t[k, :len(o)] = True
    return weights, mismatch_metrics(old_t, samp_t, mask_t, name, knobs, adv_t)
