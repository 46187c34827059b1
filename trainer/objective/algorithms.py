"""The math of every algorithm, as small pure functions on tensors.

Each estimator, objective and penalty is one equation from the paper it cites, named by its
equation number (or by its section where the paper leaves it unnumbered); helpers such as
`masked_mean` or the whitening statistics cite none. The trainer calls them in order, and
tests/test_algorithms.py checks each against numbers derived by hand. Advantage estimators and
policy losses are chosen by name from two tables (`ADVANTAGES`, `POLICY_LOSSES`): adding one is
one function and one table row.

Shapes: `B` completions, `T` response tokens (padded); `mask` is a bool [B, T] marking real
response tokens. Rewards arranged by prompt are [P, G] (P prompts, G completions each).
Advantage functions take a `valid` mask so that samples whose verdict failed (timeout, error...)
are left out of baselines; their advantage is 0, so they carry no gradient.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch

from rlvr.trainer.objective.entropy import clip_cov_objective, kl_cov_objective


__all__ = [
    "masked_mean", "group_mean_std", "reinforce_advantages", "rloo_advantages",
    "grpo_advantages", "MovingAverageBaseline", "AdvantageInputs", "OUTCOME_ADVANTAGES",
    "TOKEN_ADVANTAGES", "ADVANTAGES", "outcome_advantages", "kl_k1", "kl_k2", "kl_k3", "kl_estimate",
    "kl_shaped_token_rewards", "returns_to_go", "gae", "clipped_surrogate",
    "gspo_sequence_log_ratio", "policy_objective", "POLICY_LOSSES", "aggregate_loss", "LOSS_AGGREGATIONS", "value_loss",
    "explained_variance", "AdaptiveKLController", "FixedKLController",
    "overlong_penalty", "groups_with_signal", "whiten", "whitening_stats", "global_std",
    "reinforce_pp_returns", "gspo_token_objective", "filter_advantages", "SAMPLE_FILTERS",
    "nll_objective", "no_objective", "reverse_kl",
]


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim=None) -> torch.Tensor:
    """Mean of `x` over the positions where `mask` is true (0 when there are none)."""
    mask = mask.to(x.dtype)
    if dim is None:
        return (x * mask).sum() / mask.sum().clamp_min(1.0)
    return (x * mask).sum(dim) / mask.sum(dim).clamp_min(1.0)


def group_mean_std(rewards: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-prompt mean and unbiased std of the valid rewards in each row of a [P, G] grid.

    Unbiased (n-1) std, as in TRL's GRPOTrainer, so the two report the same advantages. A row
    with fewer than two valid rewards has std 0. A row whose valid rewards are all equal gets
    that value as its mean exactly, so its deviations and std are exactly 0: a float sum of
    eight 1.2s divided by 8 is not 1.2, which gave such a group a std of ~1e-7, GRPO advantages
    of ~1e-3 instead of 0, and kept it through DAPO's dynamic sampling.
    """
    v = valid.to(rewards.dtype)
    n = v.sum(-1)
    mean = (rewards * v).sum(-1) / n.clamp_min(1.0)
    lo = rewards.masked_fill(~valid, float("inf")).amin(-1)
    hi = rewards.masked_fill(~valid, float("-inf")).amax(-1)
    mean = torch.where((n > 0) & (lo == hi), lo, mean)
    var = (((rewards - mean[:, None]) ** 2) * v).sum(-1) / (n - 1).clamp_min(1.0)
    return mean, var.sqrt()


def reinforce_advantages(rewards: torch.Tensor, valid: torch.Tensor,
                         baseline: float | None = None) -> torch.Tensor:
    """REINFORCE with a baseline (Williams 1992, the REINFORCE update's (r - b) factor):
    A_i = r_i - b, with b the batch mean of valid rewards unless given (e.g. a moving
    average). Shape-agnostic."""
    if baseline is None:
        baseline = masked_mean(rewards, valid)
    return torch.where(valid, rewards - baseline, torch.zeros_like(rewards))


def rloo_advantages(rewards: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """RLOO (Kool et al. 2019, "Buy 4 REINFORCE samples, get a baseline for free!"; Ahmadian
    et al. 2024, sec. 3.3's RLOO estimator) on a [P, K] grid, one-pass form:
    A_i = K/(K-1) * (r_i - mean_j r_j).

    Equal to r_i minus the mean of the other K-1 rewards (the leave-one-out baseline):
    r_i - (S - r_i)/(K-1) = (K r_i - S)/(K-1) = K/(K-1) (r_i - S/K). K counts only valid samples
    of the group; a group with fewer than two valid samples has no baseline, so advantage 0.
    """
    v = valid.to(rewards.dtype)
    k = v.sum(-1, keepdim=True)
    mean = (rewards * v).sum(-1, keepdim=True) / k.clamp_min(1.0)
    adv = k / (k - 1).clamp_min(1.0) * (rewards - mean)
    return torch.where(valid & (k >= 2), adv, torch.zeros_like(adv))


def grpo_advantages(rewards: torch.Tensor, valid: torch.Tensor, scale: bool = True,
                    eps: float = 1e-4) -> torch.Tensor:
    """GRPO on a [P, G] grid (DeepSeekMath, Shao et al. 2024, sec. 4.1.2, outcome supervision:
    the advantage of every token of o_i in eq. 3): A_ij = (r_ij - mean_i) / (std_i + eps).

    `scale=False` is Dr. GRPO: no division by the group std, which over-weights prompts that
    are nearly all-right or all-wrong (Liu et al. 2025, "Understanding R1-Zero-Like
    Training: A Critical Perspective", section 3.1, the question-level difficulty bias).
    """
    mean, std = group_mean_std(rewards, valid)
    adv = rewards - mean[:, None]
    if scale:
        adv = adv / (std[:, None] + eps)
    return torch.where(valid, adv, torch.zeros_like(adv))


@dataclass
class MovingAverageBaseline:
    """REINFORCE's running-average baseline: b <- decay*b + (1-decay)*mean(batch rewards).

    The baseline used for a batch is the value *before* that batch is folded in, so a sample
    never baselines itself. Starts at the first batch's mean.
    """
    decay: float = 0.9
    value: float | None = None

    def __call__(self, batch_mean: float) -> float:
        if self.value is None:
            self.value = batch_mean
        used = self.value
        self.value = self.decay * self.value + (1.0 - self.decay) * batch_mean
        return used

    def state_dict(self) -> dict:
        return {"decay": self.decay, "value": self.value}

    def load_state_dict(self, state: dict) -> None:
        self.decay, self.value = state["decay"], state["value"]


@dataclass
class AdvantageInputs:
    """What an outcome-level estimator sees: one reward per completion, rows grouped by prompt
    (rows g*G .. g*G+G-1 share prompt g). `global_sum` sums a list of numbers over the
    data-parallel ranks (identity in one process), for estimators whose baseline is a
    statistic of the whole batch."""
    rewards: torch.Tensor                  # [N]
    valid: torch.Tensor                    # [N] bool: counted in baselines
    group_size: int
    scale_rewards: str = "group"           # grpo: 'group' | 'batch' | 'none'
    baseline: Callable[[float], float] | None = None   # reinforce: batch mean -> baseline used
    global_sum: Callable[[list], list] = field(default=lambda xs: list(xs))
    ok: torch.Tensor | None = None         # filter: [N] bool, verdict status ok
    answer_scores: torch.Tensor | None = None   # filter: [N] the answer reward's score
    keep_threshold: float = 1.0            # filter: the answer score a kept completion reaches

    def grid(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(-1, self.group_size)


def _reinforce(x: AdvantageInputs) -> torch.Tensor:
    total, count = x.global_sum([float(x.rewards[x.valid].sum()), float(x.valid.sum())])
    base = total / max(count, 1.0)               # the mean of the *global* batch
    if x.baseline is not None:
        base = x.baseline(base)
    return reinforce_advantages(x.rewards, x.valid, base)


def _rloo(x: AdvantageInputs) -> torch.Tensor:
    return rloo_advantages(x.grid(x.rewards), x.grid(x.valid)).flatten()


def _grpo(x: AdvantageInputs) -> torch.Tensor:
    adv = grpo_advantages(x.grid(x.rewards), x.grid(x.valid),
                          scale=x.scale_rewards == "group").flatten()
    if x.scale_rewards == "batch":      # TRL's scale_rewards="batch": one std for the whole batch
        adv = adv / (global_std(x.rewards, x.valid, x.global_sum) + 1e-4)
    return adv


def global_std(x: torch.Tensor, mask: torch.Tensor, global_sum=lambda xs: list(xs)) -> float:
    """Unbiased (n-1) std of x where mask is true, over every rank's batch (0 below 2 values)."""
    return whitening_stats(x[mask], global_sum)[1]


def whitening_stats(values: torch.Tensor, global_sum=lambda xs: list(xs)) -> tuple[float, float]:
    """Mean and unbiased (n-1) std of a flat tensor gathered over every rank (std 0 below 2)."""
    v = values.double()
    n, s1, s2 = global_sum([float(v.numel()), float(v.sum()), float((v * v).sum())])
    mean = s1 / max(n, 1.0)
    var = (s2 - s1 * mean) / (n - 1) if n >= 2 else 0.0
    return mean, max(var, 0.0) ** 0.5


def whiten(x: torch.Tensor, mask: torch.Tensor, stats: tuple[float, float] | None = None,
           eps: float = 1e-8) -> torch.Tensor:
    """(x - mean) / (std + eps) on the masked entries, 0 off them: advantage whitening as in
    TRL's and OpenRLHF's PPO (unbiased std). `stats` = whitening_stats of the global batch
    when x is only a micro-batch of it; default: x's own masked entries."""
    mean, std = stats if stats is not None else whitening_stats(x[mask])
    return ((x - mean) / (std + eps)).masked_fill(~mask, 0.0)


def filter_advantages(ok: torch.Tensor, answer_scores: torch.Tensor,
                      threshold: float = 1.0) -> torch.Tensor:
    """Expert iteration's sample weights (STaR, Zelikman et al. 2022; rejection-sampling
    fine-tuning, Yuan et al. 2023): 1 for a completion the verifier accepted -- status ok and
    an answer score >= threshold -- and 0 for every other one, which is as if never sampled
    (see SAMPLE_FILTERS). The answer score, not the weighted reward: a well-formatted wrong
    answer earns format reward but has not solved its task."""
    return (ok & (answer_scores >= threshold)).to(torch.float32)


def _filter(x: AdvantageInputs) -> torch.Tensor:
    if x.ok is None or x.answer_scores is None:
        raise ValueError("the filter advantage needs the verdicts' statuses and answer scores")
    return filter_advantages(x.ok & x.valid, x.answer_scores.to(x.rewards.device),
                             x.keep_threshold).to(x.rewards.device)


# name -> f(AdvantageInputs) -> [N] advantages, one per completion (repeated on its tokens).
OUTCOME_ADVANTAGES: dict[str, Callable[[AdvantageInputs], torch.Tensor]] = {
    "reinforce": _reinforce,
    "rloo": _rloo,
    "grpo": _grpo,
    "filter": _filter,
}
SAMPLE_FILTERS = ("filter",)
"""Estimators whose 0 means 'not a training sample': such a completion carries no loss and
does not count in the loss normalisers (SFT on the kept set averages over the kept tokens)."""


def outcome_advantages(name: str, inputs: AdvantageInputs) -> torch.Tensor:
    """Completion-level advantages by estimator name (see OUTCOME_ADVANTAGES)."""
    return _lookup(OUTCOME_ADVANTAGES, name, "outcome advantage")(inputs)


def _lookup(table: dict, name: str, what: str):
    if name not in table:
        raise ValueError(f"unknown {what} {name!r}; expected one of {sorted(table)}")
    return table[name]


# --- KL estimators (John Schulman, "Approximating KL Divergence", 2020) ---------------------
# With samples from the current policy pi and log w = log pi_ref - log pi (per token):
#   k1 = -log w            unbiased for KL(pi || ref); single values can be negative; high variance
#   k2 = (log w)^2 / 2     biased (tends to over-estimate as the policies part), always >= 0, low variance
#   k3 = (w - 1) - log w   unbiased and always >= 0 (w - 1 >= log w), low variance when close
def kl_k1(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k1 = log pi - log pi_ref (Schulman 2020, "Approximating KL Divergence"; the per-token
    penalty in the KL-shaped reward of Ziegler et al. 2019, sec. 2)."""
    return logp - ref_logp


def kl_k2(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k2 = (log pi_ref - log pi)^2 / 2 (Schulman 2020, "Approximating KL Divergence")."""
    return 0.5 * (ref_logp - logp) ** 2


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k3 = pi_ref/pi - log(pi_ref/pi) - 1 (DeepSeekMath, Shao et al. 2024, eq. 4; Schulman
    2020)."""
    log_w = ref_logp - logp
    return torch.expm1(log_w) - log_w


_KL = {"k1": kl_k1, "k2": kl_k2, "k3": kl_k3}


def kl_estimate(name: str, logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token KL estimate by estimator name (k1, k2 or k3)."""
    if name not in _KL:
        raise ValueError(f"unknown KL estimator {name!r}; expected one of {sorted(_KL)}")
    return _KL[name](logp, ref_logp)


def reverse_kl(logp_all: torch.Tensor, teacher_logp_all: torch.Tensor) -> torch.Tensor:
    """On-policy distillation's per-token loss (GKD, Agarwal et al. 2024; Thinking Machines,
    "On-Policy Distillation", 2025): the reverse KL from the student to the teacher over the
    whole vocabulary at each position the student sampled,

        KL_t(pi_theta || pi_teacher) = sum_v pi_theta(v | s_t) (log pi_theta(v | s_t) - log pi_teacher(v | s_t))

    from full-vocabulary log-probs [..., V] -> [...]. Exact (no sampling estimate), >= 0, and
    0 exactly where the two distributions agree. Mode-seeking: the student is pushed off
    tokens the teacher finds unlikely. The definition; trainer/objective/distill.py computes the same
    block by block."""
    return (logp_all.exp() * (logp_all - teacher_logp_all)).sum(-1)


# --- PPO: token rewards, returns, GAE --------------------------------------------------------
def kl_shaped_token_rewards(outcome: torch.Tensor, kl: torch.Tensor, mask: torch.Tensor,
                            beta: float) -> torch.Tensor:
    """Per-token MDP rewards: -beta*kl_t on every response token, plus the outcome reward on
    the last response token (the verifier only speaks once the completion is finished)."""
    rewards = (-beta * kl).masked_fill(~mask, 0.0)
    positions = torch.arange(mask.size(1), device=mask.device).expand_as(mask)
    last = positions.masked_fill(~mask, -1).amax(-1)
    rows = torch.arange(mask.size(0), device=mask.device)
    has_tokens = last >= 0
    rewards[rows[has_tokens], last[has_tokens]] += outcome[has_tokens].to(rewards.dtype)
    return rewards


def returns_to_go(rewards: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0) -> torch.Tensor:
    """Monte Carlo return G_t = sum_{k>=t} gamma^(k-t) r_k over each response (0 off-mask)."""
    out = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.size(1))):
        running = (rewards[:, t] + gamma * running).masked_fill(~mask[:, t], 0.0)
        out[:, t] = running
    return out


def gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0,
        lam: float = 0.95) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation (Schulman et al. 2016, eq. 16). Returns (advantages,
    returns).

    delta_t = r_t + gamma V_{t+1} - V_t;  A_t = delta_t + gamma lam A_{t+1}, with V and A zero
    past the response's end. lam=1 gives A_t = G_t - V_t (Monte Carlo); lam=0 gives delta_t.
    Returns (A + V) are the critic's fixed targets.
    """
    adv = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    next_value = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.size(1))):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        running = (delta + gamma * lam * running).masked_fill(~mask[:, t], 0.0)
        adv[:, t] = running
        next_value = values[:, t].masked_fill(~mask[:, t], 0.0)
    returns = (adv + values).masked_fill(~mask, 0.0)
    return adv, returns


# name -> f(token_rewards, values, mask, gamma, lam) -> (advantages, returns), both [B, T]:
# estimators that work per token (the PPO critic's GAE). `values` is None without a critic.
def reinforce_pp_returns(rewards: torch.Tensor, values, mask: torch.Tensor, gamma: float = 1.0,
                         lam: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """REINFORCE++ (Hu 2025, arXiv:2501.03262, eq. 7-9): no critic; the advantage of token t is
    the return of the KL-shaped token rewards, G_t = sum_{s>=t} gamma^(s-t) r_s (so each
    token's KL penalty reaches only the tokens before it); the loop then whitens it over the
    global batch. Returns (advantages, returns), both G."""
    ret = returns_to_go(rewards, mask, gamma)
    return ret, ret


TOKEN_ADVANTAGES: dict[str, Callable] = {
    "gae": gae,
    "reinforce_pp": reinforce_pp_returns,
}
ADVANTAGES = (*OUTCOME_ADVANTAGES, *TOKEN_ADVANTAGES)


# --- Policy objectives -----------------------------------------------------------------------
def clipped_surrogate(log_ratio: torch.Tensor, advantages: torch.Tensor, eps_low: float,
                      eps_high: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PPO's clipped objective per token (Schulman et al. 2017, eq. 7, L^CLIP):
    min(rho*A, clamp(rho, 1-eps_low, 1+eps_high)*A).

    Returns (objective, clipped_low, clipped_high); the two bool tensors mark where the clamp
    was the active branch (ratio below 1-eps_low with A<0, above 1+eps_high with A>0), which
    is what the `clip_ratio/*` metrics count. `eps_high > eps_low` is DAPO's clip-higher
    (Yu et al. 2025, sec. 3.1).
    """
    ratio = torch.exp(log_ratio)
    clipped = ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    objective = torch.minimum(ratio * advantages, clipped * advantages)
    low = (ratio < 1.0 - eps_low) & (advantages < 0)
    high = (ratio > 1.0 + eps_high) & (advantages > 0)
    return objective, low, high


def gspo_sequence_log_ratio(log_ratio: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """GSPO's sequence ratio (Zheng et al. 2025, sec. 4.1), in log space:
    log s_i = (1/|y_i|) sum_t log rho_it, i.e. s_i is the geometric mean of the token ratios.
    Returned broadcast over the tokens [B, T] so the clipped surrogate can be applied per token
    with identical values along each sequence."""
    seq = masked_mean(log_ratio, mask, dim=-1)
    return seq[:, None].expand_as(log_ratio)


def pg_objective(logp, old_logp, advantages, mask, eps_low, eps_high):
    """A * log pi(y_t): the plain policy gradient (Williams 1992; RLOO, Ahmadian et al. 2024),
    on-policy, no ratio."""
    none = torch.zeros_like(mask)
    return logp * advantages, none, none


def clip_objective(logp, old_logp, advantages, mask, eps_low, eps_high):
    """min(rho_t A, clip(rho_t) A) with the token ratio rho_t = pi/pi_old (PPO's eq. 7; GRPO,
    DeepSeekMath eq. 3; DAPO)."""
    log_ratio = (logp - old_logp).masked_fill(~mask, 0.0)
    obj, low, high = clipped_surrogate(log_ratio, advantages, eps_low, eps_high)
    return obj, low & mask, high & mask


def gspo_objective(logp, old_logp, advantages, mask, eps_low, eps_high):
    """min(s A, clip(s) A) on each token, s = the geometric mean of the sequence's rho_t (GSPO,
    Zheng et al. 2025, sec. 4.1)."""
    log_ratio = gspo_sequence_log_ratio((logp - old_logp).masked_fill(~mask, 0.0), mask)
    obj, low, high = clipped_surrogate(log_ratio, advantages, eps_low, eps_high)
    return obj, low & mask, high & mask


def gspo_token_objective(logp, old_logp, advantages, mask, eps_low, eps_high):
    """GSPO-token (Zheng et al. 2025, sec. 4.3): s_it = sg[s_i] * pi(y_t)/sg[pi(y_t)], whose
    value is the sequence ratio s_i (so the clip acts per sequence) but whose gradient reaches
    each token with its own advantage A_it. With A constant over a sequence it equals GSPO."""
    seq = gspo_sequence_log_ratio((logp - old_logp).masked_fill(~mask, 0.0), mask)
    log_ratio = seq.detach() + logp - logp.detach()
    obj, low, high = clipped_surrogate(log_ratio, advantages, eps_low, eps_high)
    return obj, low & mask, high & mask


def nll_objective(logp, old_logp, advantages, mask, eps_low, eps_high):
    """w * log pi(y_t): supervised fine-tuning's log-likelihood, each completion weighted by its
    w >= 0 (expert iteration's 1 for kept, 0 for the rest: the NLL of the kept completions).
    No ratio and no clip: a supervised target, so epochs over the kept set (inner_steps > 1)
    are plain SFT epochs, not off-policy policy-gradient steps. (The same product as
    `pg_objective`; the config tells the two apart: weights >= 0, epochs allowed.)"""
    return pg_objective(logp, old_logp, advantages, mask, eps_low, eps_high)


def no_objective(logp, old_logp, advantages, mask, eps_low, eps_high):
    """No policy-gradient term: the loss is what else is configured (pure on-policy
    distillation: the reverse KL to the teacher)."""
    none = torch.zeros_like(mask)
    return torch.zeros_like(logp), none, none


# name -> f(logp, old_logp, advantages, mask, eps_low, eps_high) -> (objective, low, high):
# the per-token objective to maximise and where the low/high clamp was the active branch.
POLICY_LOSSES: dict[str, Callable] = {
    "pg": pg_objective,
    "clip": clip_objective,
    "gspo": gspo_objective,
    "gspo_token": gspo_token_objective,
    "nll": nll_objective,
    "none": no_objective,
    "clip_cov": clip_cov_objective,      # entropy.py: Clip-Cov and KL-Cov (Cui et al. 2025)
    "kl_cov": kl_cov_objective,
}


def policy_objective(kind: str, logp: torch.Tensor, old_logp: torch.Tensor,
                     advantages: torch.Tensor, mask: torch.Tensor, eps_low: float = 0.2,
                     eps_high: float = 0.2, **knobs) -> tuple[torch.Tensor, torch.Tensor,
                                                              torch.Tensor]:
    """Per-token objective to maximise (the loss is its negative), with clip indicators, by
    name from POLICY_LOSSES. `advantages` is [B, T] (a completion-level advantage repeated
    over its tokens, or per-token advantages such as GAE's); `knobs`: a loss's own settings
    (Clip-Cov's and KL-Cov's ratios and bounds)."""
    return _lookup(POLICY_LOSSES, kind, "policy loss")(logp, old_logp, advantages, mask,
                                                      eps_low, eps_high, **knobs)


LOSS_AGGREGATIONS = ("seq_mean_token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm",
                     "token_mean")


def aggregate_loss(per_token: torch.Tensor, mask: torch.Tensor, mode: str, *,
                   num_seqs: float | None = None, num_tokens: float | None = None,
                   max_len: int | None = None) -> torch.Tensor:
    """Reduce a per-token loss [B, T] to a scalar.

    - seq_mean_token_mean      (1/N) sum_i (1/T_i) sum_t l_it     GRPO, GSPO, PPO: each response weighs equally
    - seq_mean_token_sum       (1/N) sum_i sum_t l_it             REINFORCE/RLOO: the completion is one action
    - seq_mean_token_sum_norm  (1/N) sum_i (1/L_max) sum_t l_it   Dr. GRPO: constant normaliser, no length bias
    - token_mean               (1/sum_i T_i) sum_i sum_t l_it     DAPO: every token weighs equally

    `num_seqs`/`num_tokens` default to this batch's counts; a caller splitting a batch into
    micro-batches passes the whole batch's counts so the micro-batch losses sum to the full one.
    Sequences with no masked token (left out, e.g. a failed verdict) count for nothing.
    """
    m = mask.to(per_token.dtype)
    tok_sum = (per_token * m).sum(-1)
    if num_seqs is None:
        num_seqs = float(mask.any(-1).sum().clamp_min(1))
    if mode == "seq_mean_token_mean":
        return (tok_sum / m.sum(-1).clamp_min(1.0)).sum() / num_seqs
    if mode == "seq_mean_token_sum":
        return tok_sum.sum() / num_seqs
    if mode == "seq_mean_token_sum_norm":
        if not max_len:
            raise ValueError("seq_mean_token_sum_norm needs max_len (max_completion_length)")
        return tok_sum.sum() / (max_len * num_seqs)
    if mode == "token_mean":
        if num_tokens is None:
            num_tokens = float(m.sum().clamp_min(1.0))
        return tok_sum.sum() / num_tokens
    raise ValueError(f"unknown loss aggregation {mode!r}; expected one of {LOSS_AGGREGATIONS}")


def value_loss(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor,
               old_values: torch.Tensor | None = None, clip: float = 0.0) -> torch.Tensor:
    """Per-token squared error (V_t - G_t)^2 (PPO, Schulman et al. 2017, eq. 9's L^VF);
    aggregate it like the policy loss.

    With `clip > 0` (PPO's value clipping, TRL's `cliprange_value`): the new value may move at
    most `clip` from V_old before the error stops shrinking, max((V - G)^2, (V_clip - G)^2)
    with V_clip = V_old + clamp(V - V_old, -clip, clip)."""
    err = (values - returns) ** 2
    if clip > 0:
        clipped = old_values + (values - old_values).clamp(-clip, clip)
        err = torch.maximum(err, (clipped - returns) ** 2)
    return err * mask


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    """1 - Var[G - V] / Var[G] over response tokens: 1 is a perfect critic, <= 0 a useless one."""
    g, v = returns[mask], values[mask]
    var_g = g.var(unbiased=False)
    if g.numel() < 2 or var_g == 0:
        return float("nan")
    return float(1.0 - (g - v).var(unbiased=False) / var_g)


# --- KL coefficient ----------------------------------------------------------------------------
@dataclass
class FixedKLController:
    """beta stays where the config put it."""
    beta: float

    def update(self, observed_kl: float, n_steps: int = 1) -> float:
        return self.beta

    def state_dict(self) -> dict:
        return {"beta": self.beta}

    def load_state_dict(self, state: dict) -> None:
        self.beta = state["beta"]


@dataclass
class AdaptiveKLController:
    """Proportional controller of Ziegler et al. (2019), "Fine-Tuning LMs from Human Preferences":

        e = clip(KL_observed / KL_target - 1, -0.2, 0.2);   beta <- beta * (1 + e * n_steps / horizon)

    KL above the target raises beta (a stronger pull to the reference), below lowers it. The
    clip bounds how fast beta moves after one bad batch.
    """
    beta: float
    target: float
    horizon: float = 10000.0

    def update(self, observed_kl: float, n_steps: int = 1) -> float:
        if not math.isfinite(observed_kl):
            return self.beta
        error = min(max(observed_kl / self.target - 1.0, -0.2), 0.2)
        self.beta *= 1.0 + error * n_steps / self.horizon
        return self.beta

    def state_dict(self) -> dict:
        return {"beta": self.beta, "target": self.target, "horizon": self.horizon}

    def load_state_dict(self, state: dict) -> None:
        self.beta, self.target, self.horizon = state["beta"], state["target"], state["horizon"]


# --- DAPO pieces -------------------------------------------------------------------------------
def overlong_penalty(lengths: torch.Tensor, max_len: int, buffer: int,
                     factor: float = 1.0) -> torch.Tensor:
    """DAPO's soft overlong punishment (Yu et al. 2025, sec. 3.4), added to the reward:

        0                                   if L <= L_max - L_buf
        ((L_max - L_buf) - L) / L_buf       if L_max - L_buf < L <= L_max   (ramps 0 -> -1)
        -1                                  if L > L_max
    times `factor`. It tells the policy "too long" gently instead of zeroing truncated answers.
    """
    if buffer <= 0 or buffer > max_len:
        raise ValueError(f"overlong buffer must be in (0, max_len={max_len}], got {buffer}")
    lengths = lengths.to(torch.float32)
    soft = ((max_len - buffer) - lengths) / buffer
    out = torch.where(lengths <= max_len - buffer, torch.zeros_like(lengths), soft)
    out = torch.where(lengths > max_len, torch.full_like(lengths, -1.0), out)
    return factor * out


def groups_with_signal(rewards: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Bool [P]: prompts whose valid rewards are not all equal (DAPO's dynamic sampling keeps
    only these, Yu et al. 2025, sec. 3.2: a zero-variance group has zero advantage and teaches
    nothing)."""
    _, std = group_mean_std(rewards, valid)
    return std > 0
