"""The policy update, as the papers write it.

Given a rollout -- G completions o_1..o_G per prompt q, sampled from pi_old and scored -- one
training step is (DeepSeekMath, Shao et al. 2024, eq. 3, GRPO):

    J(theta) = E[ 1/G sum_i 1/|o_i| sum_t  min( r_it A_it, clip(r_it, 1-eps, 1+eps) A_it )
                                           - beta KL_t(pi_theta || pi_ref) ]
    r_it = pi_theta(o_it | q, o_i,<t) / pi_old(o_it | q, o_i,<t)

computed in this order, each step one block below:
  1. `prepare`  frozen for the mu inner steps: pi_ref's log-probs, the rewards (minus beta*KL
                when the KL goes into the reward), the advantages A (trainer/objective/algorithms.py:
                GRPO's group z-score, RLOO, REINFORCE, PPO's GAE, REINFORCE++), the normalisers;
  2. `step`     -J(theta) on each micro-batch, gradients accumulated, one optimizer step.

The presets are rows of algorithms.py's tables: Dr. GRPO (Liu et al. 2025) drops the std
division and the 1/|o_i| length normaliser; DAPO (Yu et al. 2025) clips asymmetrically
(eps_high > eps_low) and averages over all tokens of the batch; GSPO (Zheng et al. 2025) uses a
sequence-level ratio; PPO (Schulman et al. 2017) adds a critic and a value loss. Expert
iteration (STaR, Zelikman et al. 2022; RFT, Yuan et al. 2023) is a 0/1 filter as the advantage
and the NLL as the objective: SFT on the verified completions.

An entropy bonus (Williams & Peng 1991; the A3C loss of Mnih et al. 2016, sec. 4) subtracts
entropy_coef times the policy's mean token entropy over the completion tokens, averaged with
the same normaliser as the surrogate (`loss_aggregation`): against entropy collapse, which Cui
et al. 2025 measure in RL for reasoning models.

On-policy distillation (GKD, Agarwal et al. 2024) adds one term: with a teacher, the loss is

    -J(theta) + distill_coef * 1/sum_i |o_i| sum_i sum_t KL(pi_theta(. | q, o_i,<t) || pi_teacher(. | q, o_i,<t))

the reverse KL over the vocabulary at every position the student sampled (pure distillation:
policy_loss = "none", no J at all).

The log-probs come from a *forward* (`forward.logprobs`): the reference one (trainer/forwards/reference.py)
computes them by their definition; the fast one (trainer/forwards/fast.py) equals it and is what runs by
default. This file never sees how they were computed.
"""
from __future__ import annotations

import types
from dataclasses import dataclass, field

import torch

from rlvr.trainer.objective import algorithms as alg
from rlvr.trainer.objective import importance
from rlvr.trainer.objective.control import RewardControl
from rlvr.trainer.sampling.episodes import policy_tokens
from rlvr.trainer.forwards.protocol import Forward, Micro
from rlvr.trainer.run.metrics import UpdateStats
from rlvr.trainer.models.loading import lora_dropout_active
from rlvr.trainer.sampling.rollout import Rollout

__all__ = ["Batch", "InnerSteps", "PolicyUpdate"]


@dataclass(frozen=True)
class Batch:
    """A scored rollout made ready for the update: frozen, the same at each of the mu steps."""
    rollout: Rollout
    micro: tuple[Micro, ...]                  # the forward's micro-batches
    loss_mask: tuple[torch.Tensor, ...]       # per micro-batch [m, C]: tokens that carry loss
    advantages: tuple[torch.Tensor, ...]      # per micro-batch [m, C]
    old_logp: tuple[torch.Tensor | None, ...]   # pi_old when computed here (KL in the reward,
                                              # stale samples); else taken at inner step 1
    ref_logp: tuple[torch.Tensor | None, ...]   # pi_ref (None without a KL term)
    returns: tuple[torch.Tensor | None, ...]    # PPO critic targets
    old_values: tuple[torch.Tensor | None, ...]  # PPO critic's V_old (value clipping)
    num_seqs: float                           # normalisers of the *global* batch
    num_tokens: float
    stats: types.MappingProxyType = field(default_factory=lambda: types.MappingProxyType({}))
    is_weights: tuple[torch.Tensor, ...] | None = None   # stale-sample correction, or None


def loss_knobs(cfg) -> dict:
    """The policy loss's own settings (Clip-Cov's and KL-Cov's, objective/entropy.py)."""
    if cfg.policy_loss == "clip_cov":
        return {"ratio": cfg.clip_cov_ratio, "cov_low": cfg.clip_cov_low,
                "cov_high": cfg.clip_cov_high}
    if cfg.policy_loss == "kl_cov":
        return {"ratio": cfg.kl_cov_ratio, "coef": cfg.kl_cov_coef}
    return {}


@dataclass
class InnerSteps:
    """What changes across one batch's mu inner steps: pi_old's log-probs, taken from the
    policy's own at inner step 1 (theta == theta_old there) unless `prepare` computed them."""
    batch: Batch
    old_logp: list[torch.Tensor | None]

    @classmethod
    def of(cls, batch: Batch) -> "InnerSteps":
        return cls(batch, list(batch.old_logp))


class PolicyUpdate:
    """`prepare(rollout) -> Batch`, then `step(batch, first)` mu times."""

    def __init__(self, cfg, policy, ref, critic, optimizer, scheduler, kl_ctl, baseline,
                 forward: Forward, dist, device, precision, teacher=None,
                 control: RewardControl | None = None):
        self.cfg, self.policy, self.ref, self.critic = cfg, policy, ref, critic
        self.teacher = teacher          # on-policy distillation's frozen teacher, or None
        self.optimizer, self.scheduler, self.kl_ctl, self.baseline = (optimizer, scheduler,
                                                                      kl_ctl, baseline)
        self.forward, self.dist, self.device, self.precision = forward, dist, device, precision
        self._inner: InnerSteps | None = None
        self.loss_knobs = loss_knobs(cfg)
        self.control = control or RewardControl()   # the reward trained on (control.py)

    def inner_steps(self, batch: Batch) -> InnerSteps:
        """The inner steps' state of `batch` (started afresh for a batch not seen last)."""
        if self._inner is None or self._inner.batch is not batch:
            self._inner = InnerSteps.of(batch)
        return self._inner

    # --- 1. freeze what the inner steps reuse -------------------------------------------------
    @torch.no_grad()
    def prepare(self, rollout: Rollout) -> Batch:
        cfg, fwd, T = self.cfg, self.forward, self.cfg.temperature
        kl_in_reward = cfg.kl_in == "reward" and self.ref is not None
        # The reward trained on: the verifier's, or a spurious-reward control's (control.py).
        rewards, control_stats = self.control.rewards(
            rollout, self.scheduler.last_epoch // cfg.inner_steps, self.dist.gather,
            self.dist.rank)
        # Outcome advantages need only the rewards, unless the KL goes into them (then below).
        adv = (self.outcome_advantages(rollout, rewards=rewards)
               if cfg.advantage not in alg.TOKEN_ADVANTAGES and not kl_in_reward else None)
        # With no KL term, no critic, no teacher and no entropy bonus the loss is A * (...): a
        # zero A means a zero gradient, which a forward may use to skip work.
        zero_adv_is_zero_grad = (adv is not None and self.ref is None and self.critic is None
                                 and self.teacher is None and not cfg.entropy_coef)
        micro = tuple(fwd.micro_batches(rollout, cfg.micro_batch_size,
                                        adv if zero_adv_is_zero_grad else None))
        valid = rollout.valid.to(self.device)
        trains = valid      # samples that carry loss: valid ones, minus truncated if filtered
        if cfg.mask_truncated_completions:     # DAPO's overlong filtering
            cut = torch.tensor([c.finish_reason == "length" for c in rollout.completions])
            trains = valid & ~cut.to(self.device)
        if cfg.advantage in alg.SAMPLE_FILTERS:    # expert iteration: only the kept ones train
            trains = trains & (adv > 0)
        own = [policy_tokens(rollout, mb) for mb in micro]    # environment tokens: never trained
        loss_mask = tuple(o & trains[mb.rows, None] for o, mb in zip(own, micro))
        with self.precision(), fwd.pass_over(micro):
            ref = tuple(fwd.logprobs(self.ref, mb, T)[0] if self.ref else None for mb in micro)
        corrected = importance.applies(rollout)     # samples from another engine's copy
        with self.precision(), fwd.pass_over(micro):
            old = tuple(fwd.logprobs(self.policy, mb, T)[0] if kl_in_reward or corrected
                        else None for mb in micro)
        kl_tok = [alg.kl_estimate(cfg.kl_estimator, o, r).masked_fill(~p, 0.0)
                  if kl_in_reward else None for o, r, p in zip(old, ref, own)]
        n_seqs, n_tokens = self.dist.sum([int(trains.sum()), sum(int(m.sum()) for m in loss_mask)])
        stats, returns, old_values = {}, (None,) * len(micro), (None,) * len(micro)
        if cfg.advantage in alg.TOKEN_ADVANTAGES:
            advantages, returns, old_values, stats = self._token_advantages(
                rollout, micro, loss_mask, kl_tok, rewards)
        else:
            if adv is None:       # the KL is in the reward: r_i - beta * sum_t KL_it first
                adv = self.outcome_advantages(rollout, self._kl_per_sequence(rollout, micro,
                                                                             kl_tok), rewards)
            advantages = tuple(adv[mb.rows, None].expand_as(mb.mask).float() for mb in micro)
            stats.update(self._advantage_stats(adv[valid]))
        stats.update(control_stats)
        if cfg.advantage in alg.SAMPLE_FILTERS:
            stats["samples/kept_frac"] = n_seqs / max(self.dist.sum([len(rollout)])[0], 1)
        weights = None
        if corrected:     # truncated importance weights and mismatch metrics (importance.py)
            weights, mismatch = importance.correct(rollout, micro, loss_mask, advantages, old,
                                                   cfg, self.dist.gather)
            stats.update(mismatch)
        # rows the forward left without a gradient (the fast forward's silent groups)
        silent = sum(len(mb.rows) for mb in micro if mb.silent)
        stats["update/silent_group_frac"] = silent / max(len(rollout), 1)
        return Batch(rollout, micro, loss_mask, advantages, old, ref, returns, old_values,
                     num_seqs=max(n_seqs, 1.0), num_tokens=max(n_tokens, 1.0),
                     stats=types.MappingProxyType(stats), is_weights=weights)

    def outcome_advantages(self, r: Rollout, kl_seq: torch.Tensor | None = None,
                           rewards: torch.Tensor | None = None) -> torch.Tensor:
        """Completion-level advantages [N] (REINFORCE, RLOO, GRPO family), to be repeated on every
        token, from `rewards` (default: the rollout's; a spurious-reward control's otherwise).
        With the KL in the reward, each completion's reward loses beta * sum_t KL_t first.
        Called once per batch: the moving-average baseline is folded forward by each call."""
        cfg = self.cfg
        rewards = (r.rewards if rewards is None else rewards).to(self.device).clone()
        if kl_seq is not None:
            rewards -= self.kl_ctl.beta * kl_seq
        return alg.outcome_advantages(cfg.advantage, alg.AdvantageInputs(
            rewards, r.valid.to(self.device), r.group_size, cfg.scale_rewards,
            baseline=self.baseline if cfg.baseline == "moving_average" else None,
            global_sum=self.dist.sum, ok=torch.tensor([v.ok for v in r.verdicts]),
            answer_scores=torch.tensor([_answer_score(v) for v in r.verdicts]),
            keep_threshold=cfg.keep_threshold))

    def _kl_per_sequence(self, rollout: Rollout, micro, kl_tok: list) -> torch.Tensor:
        kl_seq = torch.zeros(len(rollout), device=self.device)
        for mb, k in zip(micro, kl_tok):
            kl_seq[mb.rows] = k.sum(-1)
        return kl_seq

    def _token_advantages(self, rollout: Rollout, micro, loss_mask, kl_tok: list, rewards):
        """Per-token estimators (PPO's GAE, REINFORCE++'s return): token rewards (-beta*KL per
        token + outcome at the end), critic values V_old when there is a critic, advantages
        (whitened over the global batch if asked) and returns -- frozen for every inner step.
        Returns (advantages, returns, V_old, stats), one entry per micro-batch."""
        cfg, evs, advantages, returns, stats = self.cfg, [], [], [], {}
        with self.precision(), self.forward.pass_over(micro):
            values = tuple(self.forward.values(self.critic, mb) if self.critic is not None
                           else None for mb in micro)
        for i, (mb, v) in enumerate(zip(micro, values)):
            outcome = rewards.to(self.device)[mb.rows]
            kl = kl_tok[i] if kl_tok[i] is not None else torch.zeros_like(mb.mask, dtype=torch.float32)
            token_r = alg.kl_shaped_token_rewards(outcome, kl, mb.mask, self.kl_ctl.beta)
            adv, ret = alg.TOKEN_ADVANTAGES[cfg.advantage](token_r, v, mb.mask, cfg.gamma,
                                                           cfg.gae_lambda)
            advantages.append(adv.masked_fill(~loss_mask[i], 0.0))
            returns.append(ret)
            if v is not None:
                evs.append((v[loss_mask[i]], ret[loss_mask[i]]))
        tokens = lambda xs: torch.cat([a[m] for a, m in zip(xs, loss_mask)])
        if cfg.whiten_advantages:
            whitening = alg.whitening_stats(tokens(advantages), self.dist.sum)
            advantages = [alg.whiten(a, m, whitening) for a, m in zip(advantages, loss_mask)]
        if self.critic is not None:
            stats.update(self._critic_stats(evs))
        stats.update(self._advantage_stats(tokens(advantages)))
        return tuple(advantages), tuple(returns), values, stats

    def _advantage_stats(self, adv: torch.Tensor) -> dict:
        a = torch.cat([x.to(torch.float64) for x in self.dist.gather(adv.detach().cpu())])
        return {"advantages/mean": float(a.mean()) if len(a) else 0.0,
                "advantages/std": float(a.std()) if len(a) > 1 else 0.0}

    def _critic_stats(self, evs: list) -> dict:
        pairs = self.dist.gather([(v.cpu(), g.cpu()) for v, g in evs])
        v = torch.cat([v for rank in pairs for v, _ in rank])
        g = torch.cat([g for rank in pairs for _, g in rank])
        return {"critic/explained_variance": alg.explained_variance(v, g, torch.ones_like(v, dtype=torch.bool)),
                "critic/value_mean": float(v.mean()) if len(v) else float("nan")}

    # --- 2. one inner step --------------------------------------------------------------------
    def step(self, batch: Batch, first: bool) -> dict:
        """One optimizer step over the whole batch (gradients accumulated per micro-batch)."""
        cfg, acc, backward = self.cfg, UpdateStats(), False
        self.optimizer.zero_grad(set_to_none=True)
        # (LoRA dropout is on for the backward too: checkpointed layers replay their forward)
        with lora_dropout_active(self.policy, cfg.lora_dropout > 0), \
                self.forward.pass_over(batch.micro):
            for i in range(len(batch.micro)):
                with self.precision():
                    loss = self.micro_loss(batch, i, first, acc)
                if loss.requires_grad:      # else nothing reaches the weights (all A = 0)
                    loss.backward()
                    backward = True
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        if not backward:     # a zero gradient: AdamW still steps on its moments and decay,
            for p in params:     # as it would after an all-zero backward
                p.grad = torch.zeros_like(p)
        self.dist.sum_gradients(params)      # ranks' shares of the global loss -> its gradient
        grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm or float("inf"))
        self.optimizer.step()
        # The gradients are spent: freed now, not at the next update, so sampling, evaluation
        # and checkpoints do not carry a parameter-sized buffer.
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        return UpdateStats.merged(self.dist.gather(acc)).result(float(grad_norm))

    def micro_loss(self, batch: Batch, i: int, first: bool, acc: UpdateStats) -> torch.Tensor:
        """-J(theta) on micro-batch i -- the clipped surrogate, per token, aggregated per the
        preset and normalised by the whole batch's counts -- plus the terms the configuration
        turns on, each below with its paper."""
        cfg, mb, mask = self.cfg, batch.micro[i], batch.loss_mask[i]
        logp, distill_kl, entropy = self.student_logprobs(mb, first)
        old = self.inner_steps(batch).old_logp
        if old[i] is None:       # inner step 1: theta == theta_old, ratio == 1
            old[i] = logp.detach()
        obj, low, high = alg.policy_objective(cfg.policy_loss, logp, old[i], batch.advantages[i],
                                              mask, cfg.clip_eps_low, cfg.clip_eps_high,
                                              **self.loss_knobs)
        per_token = -obj
        if batch.is_weights is not None:
            per_token = per_token * batch.is_weights[i]
        kl = self.kl_penalty(batch, i, logp, first, acc)
        if kl is not None:
            per_token = per_token + kl
        norm = dict(num_seqs=batch.num_seqs, num_tokens=batch.num_tokens,
                    max_len=cfg.max_completion_length)
        policy_loss = alg.aggregate_loss(per_token, mask, cfg.loss_aggregation, **norm)
        loss = policy_loss
        if cfg.entropy_coef:
            loss = loss - self.entropy_bonus(entropy, mask, norm, acc)
        if distill_kl is not None:
            loss = loss + self.distill_term(distill_kl, mask, norm, first, acc)
        if self.critic is not None:
            loss = loss + self.value_term(batch, i, norm, acc)
        acc.add("loss", loss.item())
        acc.add("loss/policy", policy_loss.item())
        acc.tokens(mask, low, high, entropy.detach() if first and entropy is not None else None)
        return loss

    # The terms. The importance weight (truncated importance sampling, Yao et al. 2025) is
    # `Batch.is_weights`, multiplied into the surrogate above; the others:
    def kl_penalty(self, batch: Batch, i: int, logp, first: bool, acc) -> torch.Tensor | None:
        """beta * KL(pi_theta || pi_ref) per token, in the loss (DeepSeekMath eq. 3's second
        term, estimated by eq. 4's k3 or k2); None when the KL is in the reward or off."""
        if self.ref is None:
            return None
        if first:
            acc.kl(logp.detach(), batch.ref_logp[i], batch.loss_mask[i])
        if self.cfg.kl_in != "loss":
            return None
        return self.kl_ctl.beta * alg.kl_estimate(self.cfg.kl_estimator, logp, batch.ref_logp[i])

    def entropy_bonus(self, entropy, mask, norm: dict, acc) -> torch.Tensor:
        """entropy_coef * the policy's token entropy H_t = -sum_v pi(v) log pi(v), aggregated as
        the surrogate is (Williams & Peng 1991; Mnih et al. 2016, sec. 4): subtracted from the
        loss, so the update also pushes the entropy up."""
        bonus = alg.aggregate_loss(entropy, mask, self.cfg.loss_aggregation, **norm)
        acc.add("loss/entropy_bonus", self.cfg.entropy_coef * bonus.item())
        return self.cfg.entropy_coef * bonus

    def distill_term(self, distill_kl, mask, norm: dict, first: bool, acc) -> torch.Tensor:
        """distill_coef * the token-mean reverse KL(pi_theta || teacher) (on-policy
        distillation, GKD, Agarwal et al. 2024)."""
        distill = alg.aggregate_loss(distill_kl, mask, "token_mean", **norm)
        acc.add("loss/distill", self.cfg.distill_coef * distill.item())
        if first:                   # at theta_old, the policy that sampled
            acc.add("kl/teacher", distill.item())
        return self.cfg.distill_coef * distill

    def value_term(self, batch: Batch, i: int, norm: dict, acc) -> torch.Tensor:
        """critic_weight * the critic's squared error to the returns (PPO, Schulman et al.
        2017, eq. 9's c1 * L^VF; clipped around V_old when cliprange_value > 0)."""
        mb, mask = batch.micro[i], batch.loss_mask[i]
        values = self.forward.values(self.critic, mb)
        per_tok_v = alg.value_loss(values, batch.returns[i], mask, batch.old_values[i],
                                   self.cfg.cliprange_value)
        vloss = alg.aggregate_loss(per_tok_v, mask, "seq_mean_token_mean", **norm)
        acc.add("loss/value", vloss.item())
        return self.cfg.critic_weight * vloss

    def student_logprobs(self, mb, first: bool):
        """log pi_theta of the sampled tokens [m, C], with a teacher the reverse KL to it at each
        position [m, C] (else None), and the entropy: at inner step 1 for the metric, and at
        every step, with its graph, when the entropy bonus is on (else detached)."""
        cfg, fwd = self.cfg, self.forward
        want = first or bool(cfg.entropy_coef)
        if self.teacher is None:
            logp, entropy = fwd.logprobs(self.policy, mb, cfg.temperature, with_entropy=want)
            return logp, None, _graph_if(entropy, cfg.entropy_coef)
        with torch.no_grad():      # the teacher scores the student's tokens, frozen
            teacher_logp = fwd.vocab_logprobs(self.teacher, mb, cfg.temperature)
        logp, kl, entropy = fwd.logprobs_and_kl(self.policy, mb, teacher_logp, cfg.temperature,
                                                with_entropy=want)
        return logp, kl, _graph_if(entropy, cfg.entropy_coef)


def _graph_if(entropy: torch.Tensor | None, coef: float) -> torch.Tensor | None:
    """The entropy with its graph when it is in the loss; else detached, a metric only."""
    return entropy if entropy is None or coef else entropy.detach()


def _answer_score(verdict) -> float:
    """The score of the verdict's answer reward (its total for a single reward): what says a
    task is solved, as `Verdict.solved` reads it."""
    score = verdict.components.get(verdict.primary, verdict.score) if verdict.primary \
        else verdict.score
    return float(score) if score is not None else float("-inf")
