"""The RLVR loop: sample, verify, update, repeat.

    for step in 1..steps:
        rollout   <- G completions per prompt from pi_old (= the current policy), scored by the env
        batch     <- frozen per batch: pi_ref log-probs, critic values, advantages (once!)
        for k in 1..mu:                       # pi_old and the advantages stay frozen
            loss  <- -objective(pi/pi_old, A) + beta*KL  aggregated per the preset
            theta <- AdamW step (gradient accumulated over micro-batches, norm-clipped)
        theta_old <- theta                    # the next rollout samples from the new policy
        beta      <- KL controller(observed KL)

Under `torchrun` every rank runs this same loop on its share of the prompts; the few places
where ranks meet (global normalisers, summed gradients, gathered metrics) go through
`self.dist` and are no-ops in a single process (see trainer/distributed.py).

pi_old's log-probs cost no extra forward pass: at inner step 1 theta == theta_old (the optimizer
steps once per inner step, after all micro-batches), so the log-probs computed there, detached,
*are* pi_old's, and the ratio is exactly 1. Only when the KL goes into the reward (PPO,
REINFORCE, RLOO) are they needed before the advantages, and then a no-grad pass computes them.
"""
from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch

from rlvr.envs.registry import pooled_env_reward
from rlvr.pooled_reward import derive_deadline

from . import algorithms as alg
from .allocator import heap_reuse, release_freed_memory
from .checkpoint import (latest_checkpoint, read_state, restore_trainer_state, seed_everything,
                         write_checkpoint)
from .config import TrainConfig, load_config
from .distributed import group_seeds, init_distributed, shard
from .engines import make_engine
from .episodes import (episode_engine, episode_metrics, episode_sample, overlong_lengths,
                       policy_tokens)
from .metrics import (MetricsLogger, UpdateStats, merge_inner_steps, peak_memory_gib,
                      rollout_metrics)
from .models import (AdaptersOff, MicroBatch, SharedPrefix, ValueModel, add_lora, autocast,
                     completion_logprobs, completion_values, enable_checkpointing, frozen_copy,
                     load_lora, load_policy, load_tokenizer, lora_dropout_active, one_pass, pack)
from .rollout import PromptStream, Rollout, sampled_entropy, score

__all__ = ["Trainer", "train", "resume"]


@dataclass
class Batch:
    """A scored rollout made ready for the update; everything here is frozen for the mu steps."""
    rollout: Rollout
    micro: list[MicroBatch]
    loss_mask: list[torch.Tensor]             # per micro-batch [m, C]: real tokens of valid samples
    advantages: list[torch.Tensor]            # per micro-batch [m, C]
    old_logp: list[torch.Tensor | None]       # filled at inner step 1 when not precomputed
    ref_logp: list[torch.Tensor | None]
    returns: list[torch.Tensor | None]        # PPO critic targets
    old_values: list[torch.Tensor | None]     # PPO critic's V_old (value clipping)
    num_seqs: float
    num_tokens: float
    stats: dict = field(default_factory=dict)
    prefix: SharedPrefix | None = None        # prompt tokens every row begins with, run once a pass
    silent: list[bool] = field(default_factory=list)   # per micro-batch: its gradient is exactly 0


class Trainer:
    """One training run. `Trainer(config).train()`; `Trainer.resume(run_dir).train()`."""

    def __init__(self, config: TrainConfig, checkpoint: Path | None = None):
        import rlvr
        self.cfg = cfg = config
        self.run_dir = Path(cfg.output_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        seed_everything(cfg.seed)
        self.dist, device = init_distributed(cfg.device, cfg.dist_backend)
        self.device = torch.device("cuda" if device == "auto" and torch.cuda.is_available()
                                   else "cpu" if device == "auto" else device)
        if self.device.type == "cpu":
            release_freed_memory()      # freed activations leave the process (allocator.py)
        self.env = rlvr.load_env(cfg.env, **cfg.env_kwargs)
        if cfg.reward_deadline_s != 0:   # verifiers run in the pool, under hard deadlines
            self.env.reward = pooled_env_reward(
                self.env, env_args=cfg.env_kwargs,
                deadline_s=derive_deadline(self.env.reward, cfg.reward_deadline_s),
                registered_as=cfg.env, pool=_reward_pool(cfg))
        self.tokenizer = load_tokenizer(cfg.tokenizer or cfg.model)
        self.share_prefix = cfg.prefix_sharing(self.device.type)
        self.policy, self.ref = self._build_policy(checkpoint)
        self.dist.broadcast_parameters([self.policy])
        self.critic = ValueModel(cfg.model).to(self.device).eval() if cfg.advantage == "gae" else None
        if self.critic is not None:
            if cfg.gradient_checkpointing:
                enable_checkpointing(self.critic.backbone)
            self.dist.broadcast_parameters([self.critic])
        trainable = [p for p in self.policy.parameters() if p.requires_grad]   # LoRA: adapters
        groups = [{"params": trainable, "lr": cfg.lr}]
        if self.critic is not None:
            groups.append({"params": list(self.critic.parameters()), "lr": cfg.critic_lr or cfg.lr})
        # Fused AdamW: one kernel over all parameters, no per-parameter temporaries (on CPU the
        # default implementation's temporaries add ~0.4 GiB peak for a 135M model).
        self.optimizer = torch.optim.AdamW(groups, betas=tuple(cfg.adam_betas),
                                           weight_decay=cfg.weight_decay,
                                           fused=self.device.type in ("cpu", "cuda"))
        warm = cfg.warmup_steps
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0)
        self.kl_ctl = (alg.AdaptiveKLController(cfg.beta, cfg.kl_target, cfg.kl_horizon)
                       if cfg.adaptive_kl else alg.FixedKLController(cfg.beta))
        self.baseline = alg.MovingAverageBaseline(cfg.baseline_decay)
        self.stream = PromptStream(self.env, cfg.seed)
        self.step = 0
        if checkpoint:
            self._load_checkpoint(checkpoint)
        self.engine = episode_engine(make_engine(cfg.rollout_engine, self.policy, self.tokenizer,
                                                 cfg), self.env, self.tokenizer)

    def _build_policy(self, checkpoint: Path | None):
        """The policy (float32 master weights; LoRA adapters when lora_rank > 0) and the frozen
        reference: the model before RL started -- a copy, or under LoRA the same module with
        its adapters disabled."""
        cfg, ref = self.cfg, None
        if cfg.lora_rank:
            base = load_policy(cfg.model, "float32", self.device)
            policy = (load_lora(base, str(checkpoint / "policy")) if checkpoint else
                      add_lora(base, cfg.lora_rank, cfg.lora_alpha, cfg.lora_dropout,
                               tuple(cfg.lora_target_modules)))
            ref = AdaptersOff(policy) if cfg.needs_reference else None
        else:
            policy = load_policy(str(checkpoint / "policy") if checkpoint else cfg.model,
                                 "float32", self.device)
            if cfg.needs_reference:
                ref = load_policy(cfg.model, "float32", self.device) if checkpoint \
                    else frozen_copy(policy)
                ref.requires_grad_(False)
        if cfg.gradient_checkpointing:      # after the copy: the reference never backpropagates
            enable_checkpointing(policy)
        return policy, ref

    def precision(self):
        """bf16 autocast around every forward when dtype = bfloat16 (weights stay float32)."""
        return autocast(self.device, self.cfg.dtype)

    @classmethod
    def resume(cls, run_dir: str | Path, **overrides) -> "Trainer":
        """Continue a run from its latest checkpoint (overrides: e.g. steps=200)."""
        run_dir = Path(run_dir)
        ckpt = latest_checkpoint(run_dir)
        saved = json.loads((run_dir / "config.json").read_text())["config"]
        cfg = load_config(None, {**saved, **overrides, "output_dir": str(run_dir)})
        return cls(cfg, ckpt)

    # --- the loop ---------------------------------------------------------------------------
    def train(self) -> Path:
        cfg, main = self.cfg, self.dist.is_main
        if main:
            self._write_run_config()
        log = MetricsLogger(self.run_dir, self.step, cfg.steps, cfg.tensorboard, cfg.progress,
                            report_to=cfg.report_to, config=cfg.to_dict()) \
            if main else None
        try:
            while self.step < cfg.steps:
                metrics, samples = self.train_step()
                self.step += 1
                if main:
                    log.log(self.step, metrics)
                    log.samples(self.step, samples)
                last = self.step == cfg.steps
                if cfg.eval_every and (self.step % cfg.eval_every == 0 or last):
                    result = self.evaluate()
                    if main:
                        log.log(self.step, result, "eval.jsonl")
                if last or (cfg.checkpoint_every and self.step % cfg.checkpoint_every == 0):
                    self.save_checkpoint()
        finally:
            if log is not None:
                log.close()
        return self.run_dir

    def train_step(self) -> tuple[dict, list[dict]]:
        """One step of the pseudo-code at the top of this file."""
        cfg, t0 = self.cfg, time.perf_counter()
        rollout, metrics = self.collect()                       # sample with pi_old, score
        t1 = time.perf_counter()
        batch = self.prepare(rollout)                           # freeze ref/values/advantages
        inner = [self.update(batch, first=(k == 0)) for k in range(cfg.inner_steps)]
        self.engine.sync_weights(self.policy)                  # theta_old <- theta
        t2 = time.perf_counter()
        beta = self.kl_ctl.beta
        n_samples, n_tokens = self.dist.sum([len(rollout),
                                             sum(len(c) for c in rollout.completion_ids)])
        if self.ref is not None:      # Ziegler et al.'s horizon counts samples, not steps
            self.kl_ctl.update(inner[0].get("kl/k1_seq_sum", float("nan")), int(n_samples))
        metrics.update(batch.stats)
        metrics.update(merge_inner_steps(inner))
        metrics.update({"beta": beta, "lr": self.scheduler.get_last_lr()[0],
                        "timing/update_s": t2 - t1, "timing/step_s": t2 - t0,
                        "throughput/tokens_per_s": n_tokens / (t2 - t0),
                        "memory/peak_gib": self.dist.max(peak_memory_gib())})
        if self.dist.enabled:
            metrics["world_size"] = self.dist.world_size
        return metrics, self._sample_rows(batch)

    # --- 1. rollout ---------------------------------------------------------------------------
    def collect(self) -> tuple[Rollout, dict]:
        """G completions for each of P prompts, scored. DAPO's dynamic sampling keeps only
        groups whose rewards differ and samples more prompts (bounded rounds) to refill.
        Under torchrun each rank samples its share of every round's global prompt list."""
        cfg, ctx, G = self.cfg, self.dist, self.cfg.group_size
        kept, sampled, timing = [], [], {"timing/generate_s": 0.0, "timing/score_s": 0.0}
        first, stop = shard(cfg.prompts_per_step, ctx)
        need, rounds = stop - first, 0
        for rounds in range(1, (cfg.max_sampling_rounds if cfg.dynamic_sampling else 1) + 1):
            needs = ctx.gather(need)            # the same global prompt list on every rank
            offset = sum(needs[:ctx.rank])
            tasks = self.stream.take(sum(needs))[offset:offset + need]
            if tasks:
                t0 = time.perf_counter()
                seeds = group_seeds(cfg.seed, self.step, rounds, count=need, offset=offset)
                with self.precision(), heap_reuse():     # allocator.py: why here only
                    r = self.engine.generate(tasks, G, cfg.max_completion_length,
                                             temperature=cfg.temperature, top_p=cfg.top_p,
                                             seeds=seeds)
                t1 = time.perf_counter()
                score(self.env, r, cfg.drop_failed)
                timing["timing/generate_s"] += t1 - t0
                timing["timing/score_s"] += time.perf_counter() - t1
                self._shape_overlong(r)
                sampled.append(r)
                if not cfg.dynamic_sampling:
                    kept.append(r)
                    break
                signal = alg.groups_with_signal(r.rewards.view(-1, G), r.valid.view(-1, G))
                keep = signal.nonzero().flatten().tolist()[:need]
                if keep:
                    kept.append(r.select_groups(keep))
                    need -= len(keep)
            if sum(ctx.gather(need)) == 0:
                break
        # Nothing with signal after every round: train on the last batch (zero advantages).
        rollout = Rollout.concat(kept) if kept else sampled[-1]
        metrics = self._rollout_metrics(Rollout.concat(sampled))
        metrics.update(timing)
        if cfg.dynamic_sampling:
            metrics["dynamic_sampling/rounds"] = rounds
            metrics["dynamic_sampling/kept_groups"] = int(ctx.sum([rollout.num_groups if kept else 0])[0])
        return rollout, metrics

    def _shape_overlong(self, r: Rollout) -> None:
        """DAPO's overlong penalty, added to the verdict rewards of this rollout."""
        cfg = self.cfg
        if cfg.overlong_buffer:
            lengths, limit = overlong_lengths(r, self.env, cfg.max_completion_length)
            r.rewards = r.rewards + alg.overlong_penalty(
                lengths, limit, cfg.overlong_buffer, cfg.overlong_penalty)

    def _rollout_metrics(self, local: Rollout) -> dict:
        """Metrics of the whole step's rollout: the ranks' rollouts are gathered (in rank order,
        which is prompt order) and measured once, by rank 0; other ranks get {}."""
        parts = self.dist.gather(local)
        if not self.dist.is_main:
            return {}
        everything = Rollout.concat(parts)
        m = rollout_metrics(everything, self.env, self.tokenizer, self.cfg.reflection_phrases)
        m.update(episode_metrics(everything))
        if m["completions/clipped_ratio"] > 0.5 and self.step == 0:
            warnings.warn(f"{m['completions/clipped_ratio']:.0%} of completions hit "
                          f"max_completion_length={self.cfg.max_completion_length}; raise it or "
                          "their answers are never read")
        return m

    # --- 2. freeze what the inner steps reuse -------------------------------------------------
    @torch.no_grad()
    def prepare(self, rollout: Rollout) -> Batch:
        with self.precision(), heap_reuse():
            return self._prepare(rollout)

    def _prepare(self, rollout: Rollout) -> Batch:
        cfg = self.cfg
        kl_in_reward = cfg.kl_in == "reward" and self.ref is not None
        # Outcome advantages need only the rewards unless the KL goes into them: computed once,
        # here, so the groups they leave without a gradient can go into micro-batches of their own.
        adv = (self._outcome_values(rollout) if cfg.advantage not in alg.TOKEN_ADVANTAGES
               and not kl_in_reward else None)
        quiet = self._silent_groups(rollout, adv)
        parts, silent = _split_micro_batches(rollout, cfg.micro_batch_size, quiet)
        # a system turn that begins every prompt: once per pass, not once per micro-batch
        prefix = (SharedPrefix.of(rollout.prompt_ids, self.device)
                  if self.share_prefix and len(parts) > 1 else None)
        micro = [pack(groups, rollout.prompt_ids, rollout.completion_ids,
                      self.tokenizer.pad_token_id, self.device, self.share_prefix, prefix)
                 for groups in parts]
        valid = rollout.valid.to(self.device)
        trains = valid      # samples that carry loss: valid ones, minus truncated if filtered
        if cfg.mask_truncated_completions:
            cut = torch.tensor([c.finish_reason == "length" for c in rollout.completions])
            trains = valid & ~cut.to(self.device)
        own = [policy_tokens(rollout, mb) for mb in micro]    # environment tokens: never trained
        loss_mask = [o & trains[mb.rows, None] for o, mb in zip(own, micro)]
        with one_pass(prefix):
            ref = [completion_logprobs(self.ref, mb, cfg.temperature)[0] if self.ref else None
                   for mb in micro]
        with one_pass(prefix):
            old = [completion_logprobs(self.policy, mb, cfg.temperature)[0] if kl_in_reward
                   else None for mb in micro]
        kl_tok = [alg.kl_estimate(cfg.kl_estimator, o, r).masked_fill(~p, 0.0)
                  if kl_in_reward else None for o, r, p in zip(old, ref, own)]
        # Normalisers of the *global* batch: each rank's loss is then its share of the whole.
        n_seqs, n_tokens = self.dist.sum([int(trains.sum()), sum(int(m.sum()) for m in loss_mask)])
        batch = Batch(rollout, micro, loss_mask, [], old, ref, [None] * len(micro),
                      [None] * len(micro), num_seqs=max(n_seqs, 1.0), num_tokens=max(n_tokens, 1.0),
                      prefix=prefix, silent=silent)
        if cfg.advantage in alg.TOKEN_ADVANTAGES:
            self._token_advantages(batch, kl_tok)
        else:
            if adv is None:       # the KL is in the reward: it needed the micro-batches first
                adv = self._outcome_values(rollout, self._kl_per_sequence(batch, kl_tok))
            batch.advantages = [adv[mb.rows, None].expand_as(mb.mask).float() for mb in micro]
            batch.stats.update(self._advantage_stats(adv[valid]))
        batch.stats["update/silent_group_frac"] = len(quiet) / max(rollout.num_groups, 1)
        return batch

    def _outcome_values(self, r: Rollout, kl_seq: torch.Tensor | None = None) -> torch.Tensor:
        """Completion-level advantages [N] (REINFORCE, RLOO, GRPO family), to be repeated on every
        token. With the KL in the reward, each completion's reward loses beta * sum_t KL_t first.
        Called once per batch: the moving-average baseline is folded forward by each call."""
        cfg = self.cfg
        rewards = r.rewards.to(self.device).clone()
        if kl_seq is not None:
            rewards -= self.kl_ctl.beta * kl_seq
        return alg.outcome_advantages(cfg.advantage, alg.AdvantageInputs(
            rewards, r.valid.to(self.device), r.group_size, cfg.scale_rewards,
            baseline=self.baseline if cfg.baseline == "moving_average" else None,
            global_sum=self.dist.sum))

    def _kl_per_sequence(self, batch: Batch, kl_tok: list) -> torch.Tensor:
        kl_seq = torch.zeros(len(batch.rollout), device=self.device)
        for mb, k in zip(batch.micro, kl_tok):
            kl_seq[mb.rows] = k.sum(-1)
        return kl_seq

    def _silent_groups(self, r: Rollout, adv: torch.Tensor | None) -> set[int]:
        """Groups whose every advantage is exactly 0 when nothing else reaches the gradient (no
        KL term, no critic): their loss terms are A * (...) = 0, so their gradient is exactly 0
        and the update skips their backward -- in RLVR's sparse early rewards, most groups
        (every completion wrong). They still count in the normalisers and the metrics."""
        if adv is None or self.ref is not None or self.critic is not None:
            return set()
        zero = (adv == 0).view(-1, r.group_size).all(-1)
        return set(zero.nonzero().flatten().tolist())

    def _advantage_stats(self, adv: torch.Tensor) -> dict:
        a = torch.cat([x.to(torch.float64) for x in self.dist.gather(adv.detach().cpu())])
        return {"advantages/mean": float(a.mean()) if len(a) else 0.0,
                "advantages/std": float(a.std()) if len(a) > 1 else 0.0}

    def _token_advantages(self, batch: Batch, kl_tok: list) -> None:
        """Per-token estimators (PPO's GAE, REINFORCE++'s return): token rewards (-beta*KL per
        token + outcome at the end), critic values V_old when there is a critic, advantages
        (whitened over the global batch if asked) and returns -- computed once here, frozen
        for every inner step."""
        cfg, evs = self.cfg, []
        with one_pass(batch.prefix):
            values = [completion_values(self.critic, mb) if self.critic is not None else None
                      for mb in batch.micro]
        for i, (mb, v) in enumerate(zip(batch.micro, values)):
            outcome = batch.rollout.rewards.to(self.device)[mb.rows]
            kl = kl_tok[i] if kl_tok[i] is not None else torch.zeros_like(mb.mask, dtype=torch.float32)
            token_r = alg.kl_shaped_token_rewards(outcome, kl, mb.mask, self.kl_ctl.beta)
            adv, ret = alg.TOKEN_ADVANTAGES[cfg.advantage](token_r, v, mb.mask, cfg.gamma,
                                                           cfg.gae_lambda)
            batch.advantages.append(adv.masked_fill(~batch.loss_mask[i], 0.0))
            batch.returns[i], batch.old_values[i] = ret, v
            if v is not None:
                evs.append((v[batch.loss_mask[i]], ret[batch.loss_mask[i]]))
        if cfg.whiten_advantages:
            stats = alg.whitening_stats(torch.cat([a[m] for a, m in zip(batch.advantages,
                                                                       batch.loss_mask)]),
                                        self.dist.sum)
            batch.advantages = [alg.whiten(a, m, stats)
                                for a, m in zip(batch.advantages, batch.loss_mask)]
        if self.critic is not None:
            batch.stats.update(self._critic_stats(evs))
        batch.stats.update(self._advantage_stats(
            torch.cat([a[m] for a, m in zip(batch.advantages, batch.loss_mask)])))

    def _critic_stats(self, evs: list) -> dict:
        pairs = self.dist.gather([(v.cpu(), g.cpu()) for v, g in evs])
        v = torch.cat([v for rank in pairs for v, _ in rank])
        g = torch.cat([g for rank in pairs for _, g in rank])
        return {"critic/explained_variance": alg.explained_variance(v, g, torch.ones_like(v, dtype=torch.bool)),
                "critic/value_mean": float(v.mean()) if len(v) else float("nan")}

    # --- 3. one inner step --------------------------------------------------------------------
    def update(self, batch: Batch, first: bool) -> dict:
        """One optimizer step over the whole batch (gradients accumulated per micro-batch)."""
        cfg, acc = self.cfg, UpdateStats()
        self.optimizer.zero_grad(set_to_none=True)
        # (dropout stays on for the backward: checkpointed layers replay their forward there)
        with lora_dropout_active(self.policy, cfg.lora_dropout > 0), one_pass(batch.prefix):
            for i in range(len(batch.micro)):
                if not batch.silent[i]:
                    with self.precision():
                        loss = self._micro_loss(batch, i, first, acc)
                    loss.backward()
            if batch.prefix is not None:
                batch.prefix.backward()         # the shared prompt prefix's gradient, once
            for i in range(len(batch.micro)):
                if batch.silent[i]:
                    self._silent_micro(batch, i, first, acc)
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        if all(batch.silent):       # no backward ran: a zero gradient, so AdamW still steps
            for p in params:        # on its moments (and decay) as after an all-zero backward
                p.grad = torch.zeros_like(p) if p.grad is None else p.grad
        self.dist.sum_gradients(params)      # ranks' shares of the global loss -> its gradient
        grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm or float("inf"))
        self.optimizer.step()
        # The gradients are spent: freed now, not at the next update, so sampling, evaluation
        # and checkpoints do not carry a parameter-sized buffer (0.5 GiB for 135M).
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        return UpdateStats.merged(self.dist.gather(acc)).result(float(grad_norm))

    def _silent_micro(self, batch: Batch, i: int, first: bool, acc: UpdateStats) -> None:
        """A micro-batch with an exactly zero loss and gradient: no backward. Its tokens still
        count in the metrics; inner step 1 takes their entropy from the sampler, which measured
        the same policy, or else from a forward without autograd (a third of a forward and
        backward)."""
        mask = batch.loss_mask[i]
        entropy = sampled_entropy(batch.rollout, batch.micro[i]) if first else None
        if first and entropy is None:
            with torch.no_grad(), self.precision():
                _, entropy = completion_logprobs(self.policy, batch.micro[i], self.cfg.temperature,
                                                 with_entropy=True)
        acc.add("loss", 0.0)
        acc.add("loss/policy", 0.0)
        none = torch.zeros_like(mask)
        acc.tokens(mask, none, none, entropy)

    def _micro_loss(self, batch: Batch, i: int, first: bool, acc: UpdateStats) -> torch.Tensor:
        """-objective(pi/pi_old, A) + beta*KL on micro-batch i, aggregated per the preset and
        normalised by the whole batch's counts (plus the critic's value loss for PPO)."""
        cfg, mb, mask = self.cfg, batch.micro[i], batch.loss_mask[i]
        logp, entropy = completion_logprobs(self.policy, mb, cfg.temperature, with_entropy=first)
        if batch.old_logp[i] is None:       # inner step 1: theta == theta_old, ratio == 1
            batch.old_logp[i] = logp.detach()
        obj, low, high = alg.policy_objective(cfg.policy_loss, logp, batch.old_logp[i],
                                              batch.advantages[i], mask,
                                              cfg.clip_eps_low, cfg.clip_eps_high)
        per_token = -obj
        if self.ref is not None:
            kl = alg.kl_estimate(cfg.kl_estimator, logp, batch.ref_logp[i])
            if cfg.kl_in == "loss":
                per_token = per_token + self.kl_ctl.beta * kl
            if first:
                acc.kl(logp.detach(), batch.ref_logp[i], mask)
        norm = dict(num_seqs=batch.num_seqs, num_tokens=batch.num_tokens,
                    max_len=cfg.max_completion_length)
        policy_loss = alg.aggregate_loss(per_token, mask, cfg.loss_aggregation, **norm)
        loss = policy_loss
        if self.critic is not None:
            values = completion_values(self.critic, mb)
            per_tok_v = alg.value_loss(values, batch.returns[i], mask, batch.old_values[i],
                                       cfg.cliprange_value)
            vloss = alg.aggregate_loss(per_tok_v, mask, "seq_mean_token_mean", **norm)
            loss = loss + cfg.critic_weight * vloss
            acc.add("loss/value", vloss.item())
        acc.add("loss", loss.item())
        acc.add("loss/policy", policy_loss.item())
        acc.tokens(mask, low, high, entropy)
        return loss

    # --- evaluation ---------------------------------------------------------------------------
    def evaluate(self) -> dict:
        """pass@1 (greedy) and pass@k on the test split (trainer/evaluate.py)."""
        from .evaluate import evaluate_in_training
        with self.precision():
            return evaluate_in_training(self.env, self.engine, self.cfg, self.step, self.dist)

    # --- checkpoints --------------------------------------------------------------------------
    def save_checkpoint(self) -> Path:
        """Everything needed to continue exactly: weights (safetensors), optimizer, scheduler,
        RNG states, data cursor, KL controller, baseline, step and the resolved config.
        Replicas are identical, so rank 0 writes it (any world size can resume it)."""
        root, name = self.run_dir / "checkpoints", f"step-{self.step:06d}"
        if self.dist.is_main:
            self._write_checkpoint(root, name)
        self.dist.barrier()
        return root / name

    def _write_checkpoint(self, root: Path, name: str) -> None:
        state = {"step": self.step, "cursor": self.stream.cursor,
                 "kl_controller": self.kl_ctl.state_dict(), "baseline": self.baseline.state_dict(),
                 "config": self.cfg.to_dict()}
        write_checkpoint(root, name, policy=self.policy, tokenizer=self.tokenizer,
                         critic=self.critic, optimizer=self.optimizer, scheduler=self.scheduler,
                         state=state)

    def _load_checkpoint(self, ckpt: Path) -> None:
        state = read_state(ckpt)
        self.step = state["step"]
        self.stream = PromptStream(self.env, self.cfg.seed, cursor=state["cursor"])
        self.kl_ctl.load_state_dict(state["kl_controller"])
        self.baseline.load_state_dict(state["baseline"])
        restore_trainer_state(ckpt, self.critic, self.optimizer, self.scheduler)   # RNG last

    def _write_run_config(self) -> None:
        import rlvr
        import transformers
        info = {"config": self.cfg.to_dict(),
                "versions": {"rlvr": rlvr.__version__, "torch": torch.__version__,
                             "transformers": transformers.__version__},
                "env": self.env.describe()}
        (self.run_dir / "config.json").write_text(json.dumps(info, indent=1, default=str))

    def _sample_rows(self, batch: Batch) -> list[dict]:
        r, rows = batch.rollout, []
        adv = {}
        for mb, a in zip(batch.micro, batch.advantages):
            for j, row in enumerate(mb.rows):
                adv[row] = float(a[j][mb.mask[j]].mean()) if mb.mask[j].any() else 0.0
        for i in range(min(self.cfg.log_completions, len(r))):
            v = r.verdicts[i]
            rows.append({"task_id": r.tasks[i].id, "answer": r.tasks[i].answer,
                         "completion": r.completions[i].text,
                         **episode_sample(r.tasks[i], r.completions[i]),
                         "finish_reason": r.completions[i].finish_reason,
                         "reward": float(r.rewards[i]), "advantage": adv.get(i, 0.0),
                         "verdict": {"score": v.score, "status": v.status,
                                     "extracted": v.extracted, "reason": v.reason}})
        return rows


def _micro_batches(rollout: Rollout, size: int,
                   which: list[int] | None = None) -> list[list[list[int]]]:
    """Rows of the groups `which` (default: all) -> micro-batches of equal-sized same-prompt units: whole
    groups when `size` >= G (size // G groups each), else slices of one group. Longest first,
    so padding stays small."""
    G = rollout.group_size
    total = lambda rows: max(len(rollout.prompt_ids[r]) + len(rollout.completion_ids[r]) for r in rows)
    which = range(rollout.num_groups) if which is None else which
    groups = sorted((list(range(g * G, (g + 1) * G)) for g in which), key=lambda rows: -total(rows))
    if size >= G:
        per = size // G
        return [groups[i:i + per] for i in range(0, len(groups), per)]
    return [[grp[j:j + size]] for grp in groups for j in range(0, G, size)]


def _split_micro_batches(rollout: Rollout, size: int, quiet: set[int]):
    """Micro-batches of the groups with a gradient, then micro-batches of the silent groups
    (`quiet`) on their own, so that a whole micro-batch can skip its backward; and which is which."""
    live = [g for g in range(rollout.num_groups) if g not in quiet]
    loud, still = _micro_batches(rollout, size, live), _micro_batches(rollout, size, sorted(quiet))
    return loud + still, [False] * len(loud) + [True] * len(still)


def _reward_pool(cfg: TrainConfig):
    """The pool the rewards run in: None = the process-wide local pool (rlvr.pool)."""
    if cfg.reward_backend == "ray":
        from rlvr.ray_backend import RayPool, require_ray
        ray = require_ray()
        if not ray.is_initialized():
            ray.init(address=cfg.ray_address or None, include_dashboard=False, log_to_driver=False)
        workers = cfg.reward_workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        return RayPool(workers)
    if cfg.reward_workers:
        from rlvr.pool import WorkerPool
        return WorkerPool(cfg.reward_workers)
    return None


def train(config: TrainConfig | str | Path | None = None, **overrides) -> Path:
    """Python API mirroring `rlvr train`: a TrainConfig, or a TOML path, plus field overrides.

    >>> train("configs/grpo_arithmetic.toml", steps=10)        # doctest: +SKIP
    """
    if isinstance(config, TrainConfig):
        cfg = load_config(None, {**config.to_dict(), **overrides}) if overrides else config
    else:
        cfg = load_config(config, overrides)
    return Trainer(cfg).train()


def resume(run_dir: str | Path, **overrides) -> Path:
    """Python API mirroring `rlvr train --resume RUN_DIR`."""
    return Trainer.resume(run_dir, **overrides).train()
