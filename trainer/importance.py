"""Stale-sample correction: truncated importance sampling between the sampler and the trainer.

When rollouts come from an inference server, the tokens were drawn from the server's copy of the
policy, pi_s, not from the trainer's pi_old: the server's weights are up to `sync_every - 1`
updates old, and even freshly synced its kernels compute slightly different probabilities. The
policy gradient needs samples from pi_old, so each token's loss is reweighted by the importance
ratio pi_old / pi_s, truncated at C so that a rare token cannot dominate the batch (Yao et al.
2025, "Your efficient RL framework secretly brings you off-policy RL training": truncated
importance sampling, TIS; the truncation is IMPALA's, Espeholt et al. 2018, V-trace's rho-bar):

    token level:    w_it = min( pi_old(o_it) / pi_s(o_it), C )
    sequence level: w_i  = min( prod_t pi_old(o_it) / pi_s(o_it), C )   on every token of o_i

The weight is a constant (no gradient) multiplying each token's policy-gradient term. Both
log-probs are those of the sampled tokens under softmax(logits / temperature).

The mismatch is logged every step (`mismatch_metrics`): KL(pi_s || pi_old) estimated on the
sampled tokens (k1 = log pi_s - log pi_old, and Schulman's k3 = (r - 1) - log r with
r = pi_old / pi_s, unbiased and never negative), quantiles of the ratio, and the share of
weights the truncation cut.
"""
from __future__ import annotations

import torch

__all__ = ["LEVELS", "log_ratios", "truncated_weights", "mismatch_metrics", "sampler_logprobs",
           "applies", "correct"]

LEVELS = ("token", "sequence", "none")
_QUANTILES = (0.05, 0.5, 0.95)


def log_ratios(trainer_logp: torch.Tensor, sampler_logp: torch.Tensor,
               mask: torch.Tensor) -> torch.Tensor:
    """[n, T] log pi_old - log pi_s on the masked tokens, 0 elsewhere."""
    return (trainer_logp.float() - sampler_logp.float()).masked_fill(~mask, 0.0)


def truncated_weights(trainer_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor,
                      level: str, threshold: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(weights [n, T], truncated [n, T] bool): min(ratio, threshold) per token, or per sequence
    repeated on its tokens; 0 and False off the mask. `level = "none"` gives weights of 1."""
    if level not in LEVELS:
        raise ValueError(f"importance_correction={level!r}; expected one of {list(LEVELS)}")
    log_r = log_ratios(trainer_logp, sampler_logp, mask)
    if level == "none":
        return mask.float(), torch.zeros_like(mask)
    if level == "sequence":
        log_r = log_r.sum(-1, keepdim=True).expand_as(mask)
    ratio = log_r.exp()
    cut = (ratio > threshold) & mask
    return ratio.clamp(max=threshold).masked_fill(~mask, 0.0), cut


def mismatch_metrics(trainer_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor,
                     level: str, threshold: float) -> dict:
    """`mismatch/*` metrics of one batch ([n, T], one row per sequence): KL(pi_s || pi_old) by k1 and k3 per token, the ratio's 5th,
    50th and 95th percentiles (per token, or per sequence at sequence level) and the share of
    tokens (sequences) whose weight was truncated."""
    log_r = log_ratios(trainer_logp, sampler_logp, mask)
    n = max(float(mask.sum()), 1.0)
    k1 = float((-log_r).masked_fill(~mask, 0.0).sum()) / n
    k3 = float(((log_r.exp() - 1) - log_r).masked_fill(~mask, 0.0).sum()) / n
    if level == "sequence":
        ratios = log_r.sum(-1)[mask.any(-1)].exp()
    else:
        ratios = log_r[mask].exp()
    out = {"mismatch/kl_k1": k1, "mismatch/kl_k3": k3}
    if len(ratios):
        qs = torch.quantile(ratios.double(), torch.tensor(_QUANTILES, dtype=torch.float64))
        out.update({f"mismatch/ratio_p{round(q * 100):02d}": float(v)
                    for q, v in zip(_QUANTILES, qs)})
        out["mismatch/truncated_frac"] = float((ratios > threshold).double().mean()) \
            if level != "none" else 0.0
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


def correct(rollout, micro, loss_mask, old_logp, cfg, gather=None) -> tuple[tuple, dict]:
    """The update's hook: (the truncated weights, one [m, C] tensor per micro-batch; the
    `mismatch/*` metrics of the whole batch), measured over the micro-batches the forward
    computed (a silent one, skipped for lack of signal, carries no gradient, so no weight
    matters there). `old_logp`: the trainer's pi_old log-probs per micro-batch; `gather`: the
    ranks' gather (metrics over the global batch under torchrun)."""
    level, threshold = cfg.importance_correction, cfg.importance_threshold
    weights, parts = [], []
    for mb, old, mask in zip(micro, old_logp, loss_mask):
        sampler = sampler_logprobs(rollout, mb)
        weights.append(truncated_weights(old, sampler, mask, level, threshold)[0])
        if mb.silent:                        # skipped by the forward: no log-probs measured
            continue
        for k in range(len(mb.rows)):        # one row per sequence, for the quantiles
            m = mask[k]
            parts.append((old[k][m].float().cpu(), sampler[k][m].cpu()))
    weights = tuple(weights)
    if gather is not None:
        parts = [p for rank in gather(parts) for p in rank]
    if not parts:                             # every group skipped: nothing measured
        return weights, {}
    width = max((len(o) for o, _ in parts), default=0)
    old_t, samp_t = torch.zeros(len(parts), width), torch.zeros(len(parts), width)
    mask_t = torch.zeros(len(parts), width, dtype=torch.bool)
    for k, (o, s) in enumerate(parts):
        old_t[k, :len(o)], samp_t[k, :len(s)], mask_t[k, :len(o)] = o, s, True
    return weights, mismatch_metrics(old_t, samp_t, mask_t, level, threshold)
