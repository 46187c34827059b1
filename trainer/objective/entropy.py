"""Keeping the policy's entropy from collapsing: Clip-Cov and KL-Cov (policy losses).

Under policy-gradient training the policy's entropy falls fastest on the tokens whose
log-probability and advantage co-vary most: a confident token with a high advantage is pushed
further up (Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning
Language Models", sec. 3: the entropy change is driven by Cov(log pi(y), A(y))). Both remedies
measure that covariance per token over the (micro-)batch,

    Cov_t = (log pi(y_t) - mean_s log pi(y_s)) * (A_t - mean_s A_s)        (over response tokens)

and restrain only a small share of the tokens with the largest:

- **Clip-Cov** (sec. 4): a random r * N of the tokens whose Cov_t lies in [omega_low, omega_high]
  are taken out of the gradient (their surrogate term is dropped); the rest is PPO's clipped
  surrogate.
- **KL-Cov** (sec. 4): the k * N tokens of largest Cov_t get a penalty beta * |log pi(y_t) -
  log pi_old(y_t)| on top of the unclipped surrogate rho_t * A_t; no clipping elsewhere.

The defaults are the paper's settings for its smaller models (r = 2e-4, omega in [1, 5];
k = 2e-3, beta = 1). They were set for batches of millions of tokens: on a few thousand tokens
per micro-batch r * N rounds down to zero tokens, so raise the ratio for small runs.
"""
from __future__ import annotations

import math

import torch

__all__ = ["token_covariance", "clip_cov_objective", "kl_cov_objective", "COV_LOSSES"]

COV_LOSSES = ("clip_cov", "kl_cov")


def token_covariance(logp: torch.Tensor, advantages: torch.Tensor,
                     mask: torch.Tensor) -> torch.Tensor:
    """[B, T] Cov_t = (log pi_t - mean log pi) * (A_t - mean A), the means over the masked
    tokens; 0 off the mask. No gradient: it only chooses tokens."""
    logp, adv = logp.detach().float(), advantages.detach().float()
    n = mask.sum().clamp_min(1)
    mean_logp = (logp * mask).sum() / n
    mean_adv = (adv * mask).sum() / n
    return ((logp - mean_logp) * (adv - mean_adv)).masked_fill(~mask, 0.0)


def _count(share: float, mask: torch.Tensor) -> int:
    """How many tokens a share of the masked ones is (at least 0, floor as the paper)."""
    return int(math.floor(share * int(mask.sum())))


def clip_cov_objective(logp, old_logp, advantages, mask, eps_low, eps_high, *,
                       ratio: float = 2e-4, cov_low: float = 1.0, cov_high: float = 5.0):
    """PPO's clipped surrogate with floor(ratio * N) tokens drawn at random among those whose
    covariance is in [cov_low, cov_high] removed from it (Clip-Cov, Cui et al. 2025, sec. 4).
    Returns (objective, clipped_low, clipped_high) per token, as every policy loss."""
    log_ratio = (logp - old_logp).masked_fill(~mask, 0.0)
    rho = torch.exp(log_ratio)
    obj = torch.minimum(rho * advantages, rho.clamp(1 - eps_low, 1 + eps_high) * advantages)
    low = (rho < 1 - eps_low) & (advantages < 0) & mask
    high = (rho > 1 + eps_high) & (advantages > 0) & mask
    cov = token_covariance(logp, advantages, mask)
    candidates = ((cov >= cov_low) & (cov <= cov_high) & mask).flatten().nonzero().flatten()
    n = min(_count(ratio, mask), len(candidates))
    restrained = torch.zeros_like(mask)
    if n:
        pick = candidates[torch.randperm(len(candidates), device=candidates.device)[:n]]
        restrained.view(-1)[pick] = True
    return obj.masked_fill(restrained, 0.0), low, high


def kl_cov_objective(logp, old_logp, advantages, mask, eps_low, eps_high, *,
                     ratio: float = 2e-3, coef: float = 1.0):
    """The unclipped surrogate rho_t * A_t, minus coef * |log pi_t - log pi_old_t| on the
    floor(ratio * N) tokens of largest covariance (KL-Cov, Cui et al. 2025, sec. 4).
    Returns (objective, clipped_low, clipped_high); nothing is clipped."""
    log_ratio = (logp - old_logp).masked_fill(~mask, 0.0)
    obj = torch.exp(log_ratio) * advantages
    cov = token_covariance(logp, advantages, mask).masked_fill(~mask, -math.inf)
    n = _count(ratio, mask)
    restrained = torch.zeros_like(mask)
    if n:
        restrained.view(-1)[cov.flatten().topk(n).indices] = True
    obj = obj - coef * log_ratio.abs() * restrained
    none = torch.zeros_like(mask)
    return obj, none, none
