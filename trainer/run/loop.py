"""The RLVR loop: sample, verify, update, repeat.

    for step in 1..steps:
        rollout   <- G completions per prompt from pi_old (= the current policy), scored by the env
        batch     <- frozen per batch: pi_ref log-probs, critic values, advantages (once!)
        for k in 1..mu:                       # pi_old and the advantages stay frozen
            loss  <- -objective(pi/pi_old, A) + beta*KL  aggregated per the preset
                     (+ distill_coef * reverse KL to a teacher: on-policy distillation)
            theta <- AdamW step (gradient accumulated over micro-batches, norm-clipped)
        theta_old <- theta                    # the next rollout samples from the new policy
        beta      <- KL controller(observed KL)

Under `torchrun` every rank runs this same loop on its share of the prompts; the few places
where ranks meet (global normalisers, summed gradients, gathered metrics) go through
`self.dist` and are no-ops in a single process (see trainer/parallel/distributed.py).

pi_old's log-probs cost no extra forward pass: at inner step 1 theta == theta_old (the optimizer
steps once per inner step, after all micro-batches), so the log-probs computed there, detached,
*are* pi_old's, and the ratio is exactly 1. Only when the KL goes into the reward (PPO,
REINFORCE, RLOO) are they needed before the advantages, and then a no-grad pass computes them.

This file is the loop and the run around it (models, rollouts, metrics, checkpoints); the
update's maths is trainer/objective/update.py, and how its log-probs are computed is a forward's
business (trainer/forwards/reference.py, the definition; trainer/forwards/fast.py, the default).
"""
from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import torch

from rlvr.envs.multiturn import is_multiturn
from rlvr.envs.registry import pooled_env_reward
from rlvr.monitor import Monitor, MonitorSettings
from rlvr.pooled_reward import derive_deadline

from rlvr.trainer.objective import algorithms as alg
from rlvr.trainer.forwards.allocator import heap_reuse, release_freed_memory
from rlvr.trainer.run.checkpoint import read_state, restore_trainer_state, seed_everything, write_checkpoint
from rlvr.trainer.config import TrainConfig, load_config
from rlvr.trainer.objective.control import RewardControl
from rlvr.trainer.objective.distill import load_teacher
from rlvr.trainer.parallel.distributed import group_seeds, init_distributed, shard
from rlvr.trainer.sampling.engines import make_engine
from rlvr.trainer.sampling.episodes import episode_engine, episode_metrics, episode_sample, overlong_lengths
from rlvr.trainer.forwards.fast import FastForward
from rlvr.trainer.parallel.fsdp import placement
from rlvr.trainer.forwards.hf_adapter import contract_holds
from rlvr.trainer.run.metrics import MetricsLogger, merge_inner_steps, peak_memory_gib, rollout_metrics
from rlvr.trainer.models.loading import (AdaptersOff, ValueModel, add_lora, autocast, frozen_copy, load_lora,
                     load_policy, load_tokenizer)
from rlvr.trainer.forwards.reference import ReferenceForward
from rlvr.trainer.sampling.rollout import PromptStream, Rollout, score
from rlvr.trainer.run import resume_config, run_steps, start_run, write_run_config
from rlvr.trainer.objective.update import Batch, PolicyUpdate

__all__ = ["Trainer", "train", "resume"]


class Trainer:
    """One training run. `Trainer(config).train()`; `Trainer.resume(run_dir).train()`."""

    def __init__(self, config: TrainConfig, checkpoint: Path | None = None):
        import rlvr
        self.cfg = cfg = config
        self.run_dir = Path(cfg.output_dir)
        seed_everything(cfg.seed)
        self.dist, device = init_distributed(cfg.device, cfg.dist_backend)
        self.device = torch.device("cuda" if device == "auto" and torch.cuda.is_available()
                                   else "cpu" if device == "auto" else device)
        if cfg.tune_allocator and self.device.type == "cpu":
            release_freed_memory()      # freed activations leave the process (allocator.py)
        self.env = rlvr.load_env(cfg.env, **cfg.env_args)
        self.control = RewardControl.of(cfg, self.env)    # the reward trained on (control.py)
        # reward hacking caught while it happens (docs/monitoring.md)
        self.monitor = Monitor(self.env, cfg.env, MonitorSettings.from_config(cfg),
                               self.run_dir, cfg.seed, self.dist.is_main, self.dist)
        if cfg.reward_deadline_s != 0:   # verifiers run in the pool, under hard deadlines
            self.env.reward = pooled_env_reward(
                self.env, env_args=cfg.env_args,
                deadline_s=derive_deadline(self.env.reward, cfg.reward_deadline_s),
                registered_as=cfg.env, pool=_reward_pool(cfg))
        self.tokenizer = load_tokenizer(cfg.tokenizer or cfg.model)
        # how the ranks hold the models (trainer/parallel/placement.py; FSDP2: trainer/parallel/fsdp.py)
        self.placement = placement(cfg, self.dist, self.device)
        self.build_device = self.placement.build_device(self.device)
        self.policy, self.ref = self._build_policy(checkpoint)
        self.forward = self._build_forward()
        self.teacher = self._load_teacher()
        self._refuse_async()
        self.run_dir.mkdir(parents=True, exist_ok=True)     # after the loads that can refuse
        self.dist.broadcast_parameters([self.policy])
        self.critic = ValueModel(cfg.model).to(self.build_device).eval() if cfg.advantage == "gae" else None
        if self.critic is not None:
            self.dist.broadcast_parameters([self.critic])
        if cfg.gradient_checkpointing:      # the way the chosen forward stays exact under it
            for model in (self.policy, self.critic.backbone if self.critic else None):
                if model is not None:
                    self.forward.checkpoint_layers(model)
        self.placement.place(self.policy, self.ref, self.critic)   # before the optimizer
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
        self.learner = PolicyUpdate(cfg, self.policy, self.ref, self.critic, self.optimizer,
                                    self.scheduler, self.kl_ctl, self.baseline, self.forward,
                                    self.dist, self.device, self.precision, teacher=self.teacher,
                                    control=self.control)
        self.engine = episode_engine(make_engine(cfg.rollout_engine, self.policy, self.tokenizer,
                                                 cfg, share_prefix=self.share_prefix),
                                     self.env, self.tokenizer)
        self.pipeline = None        # async_steps > 0: started by train() (start_pipeline)

    def _build_forward(self):
        """The forward the update asks for log-probs: `cfg.forward`, and the reference one
        (with one warning) when transformers' internals the fast one relies on have moved."""
        cfg, pad = self.cfg, self.tokenizer.pad_token_id
        self.share_prefix = cfg.prefix_sharing(self.device.type)
        if cfg.forward == "fast":
            moved = contract_holds(self.policy)
            if moved is None:
                return self.placement.forward(FastForward(self.share_prefix, pad, self.device))
            warnings.warn(f"{moved}. Training continues with forward = \"reference\" and "
                          "plain generate (same results, slower)", stacklevel=3)
        self.share_prefix = False      # the sampler's shared prefix is the same internals
        return self.placement.forward(ReferenceForward(pad, self.device))

    def _load_teacher(self):
        """On-policy distillation's frozen teacher (trainer/objective/distill.py), or None without one;
        a loss with no term but the teacher's is refused without a teacher."""
        cfg = self.cfg
        if not cfg.teacher:
            if cfg.policy_loss == "none":
                raise ValueError(f"preset {cfg.preset!r} (policy_loss='none') trains on the "
                                 "teacher's reverse KL alone: set teacher=MODEL (a folder, hub "
                                 "id, 'smollm2' or a run folder with the student's tokenizer)")
            return None
        return load_teacher(cfg.teacher, self.tokenizer, self.policy, self.device)

    def _build_policy(self, checkpoint: Path | None):
        """The policy (float32 master weights; LoRA adapters when lora_rank > 0) and the frozen
        reference: the model before RL started -- a copy, or under LoRA the same module with
        its adapters disabled."""
        cfg, ref = self.cfg, None
        if cfg.lora_rank:
            base = load_policy(cfg.model, "float32", self.build_device)
            policy = (load_lora(base, str(checkpoint / "policy")) if checkpoint else
                      add_lora(base, cfg.lora_rank, cfg.lora_alpha, cfg.lora_dropout,
                               tuple(cfg.lora_target_modules)))
            ref = AdaptersOff(policy) if cfg.needs_reference else None
        else:
            policy = load_policy(str(checkpoint / "policy") if checkpoint else cfg.model,
                                 "float32", self.build_device)
            if cfg.needs_reference:
                ref = load_policy(cfg.model, "float32", self.build_device) if checkpoint \
                    else frozen_copy(policy)
                ref.requires_grad_(False)
        return policy, ref

    def precision(self):
        """bf16 autocast around every forward when dtype = bfloat16 (weights stay float32)."""
        return autocast(self.device, self.cfg.dtype)

    @classmethod
    def resume(cls, run_dir: str | Path, **overrides) -> "Trainer":
        """Continue a run from its latest checkpoint (overrides: e.g. steps=200; only the
        fields in trainer/run/resume.py's RESUMABLE may change)."""
        cfg, ckpt = resume_config(run_dir, overrides, lambda d: load_config(None, d),
                                  "rlvr train")
        return cls(cfg, ckpt)

    # --- the loop ---------------------------------------------------------------------------
    def train(self) -> Path:
        cfg, main = self.cfg, self.dist.is_main
        if main:
            self._write_run_config()
        if cfg.async_steps and self.pipeline is None:
            self.start_pipeline(cfg.async_steps)
        log = MetricsLogger(self.run_dir, self.step, cfg.steps, cfg.tensorboard, cfg.progress,
                            report_to=cfg.report_to, config=cfg.to_dict()) \
            if main else None
        def one_step():
            metrics, samples = self.train_step()
            self.step += 1
            if main:
                log.log(self.step, metrics)
                log.samples(self.step, samples)
            if cfg.eval_every and (self.step % cfg.eval_every == 0 or self.step == cfg.steps):
                result = self.evaluate()
                if main:
                    log.log(self.step, result, "eval.jsonl")

        def monitor_stop():      # monitor_action='stop': any rank's verdict ends the run
            return next((r for r in self.dist.gather(self.monitor.stop_reason) if r), None)
        try:       # checkpoints, and a stop at Ctrl-C that keeps the step: trainer/run/
            stopped = run_steps(self, cfg.steps, one_step, cfg.checkpoint_every, "rlvr train",
                                self.dist, early_stop=monitor_stop)
            if stopped and main:
                print(stopped, file=sys.stderr, flush=True)
        finally:
            if log is not None:
                log.close()
            self.stop_pipeline()
        return self.run_dir

    def start_pipeline(self, depth: int) -> None:
        """Sample through the pipeline, up to `depth` versions ahead of the update
        (trainer/sampling/pipeline.py). The built-in sampler runs in its own process for
        depth >= 1 (in this one, in turn with the update, for depth 0); a server, from here."""
        from rlvr.trainer.sampling.pipeline import Pipeline, Planned
        cfg, P = self.cfg, self.cfg.prompts_per_step
        self._refuse_async()
        engine = self.engine
        if depth and cfg.rollout_engine == "hf":
            from rlvr.trainer.sampling.process_engine import ProcessEngine
            engine = episode_engine(ProcessEngine(cfg, self.policy, cfg.tokenizer or cfg.model,
                                                  self.step), self.env, self.tokenizer)

        def plan(step: int) -> Planned:         # the synchronous loop's prompts and seeds
            cursor = self.stream.cursor
            tasks = self.monitor.plant(self.stream.take(P), step - 1)
            return Planned(step, tasks, group_seeds(cfg.seed, step - 1, 1, count=P), cursor)

        def sample(engine, req: Planned) -> Rollout:
            return engine.generate(req.tasks, cfg.group_size, cfg.max_completion_length,
                                   temperature=cfg.temperature, top_p=cfg.top_p, seeds=req.seeds)
        self.pipeline = Pipeline(engine, depth, cfg.sync_every if depth else 1, self.step,
                                 cfg.steps, plan, sample, self.precision)

    def _refuse_async(self) -> None:
        """What sampling ahead cannot do in this run, refused before the run folder is made."""
        cfg = self.cfg
        if cfg.async_steps and self.dist.enabled:
            raise ValueError("async_steps > 0 runs in one process: start it without torchrun")
        if cfg.partial_rollouts and (is_multiturn(self.env) or
                                     not cfg.prefix_sharing(self.device.type)):
            raise ValueError("partial_rollouts needs single-turn episodes and the shared-prefix "
                             "sampler (share_prefix=true): only it records each token's version")

    def stop_pipeline(self) -> None:
        if self.pipeline is None:
            return
        self.pipeline.stop()
        if self.pipeline.engine is not self.engine:
            self.pipeline.engine.engine.close()         # the sampler process
        self.pipeline.join()
        self.pipeline = None

    def train_step(self) -> tuple[dict, list[dict]]:
        """One step of the pseudo-code at the top of this file."""
        cfg, t0 = self.cfg, time.perf_counter()
        with self.placement.gathered():      # sample from the whole policy
            rollout, metrics = self.collect() if self.pipeline is None else \
                self._collect_ahead()                           # sample with pi_old, score
        watch = self.monitor.observe(rollout, self.step + 1)    # flags, second opinion
        t1 = time.perf_counter()
        batch = self.prepare(rollout)                           # freeze ref/values/advantages
        batch = self.monitor.screen(batch, watch)               # flagged rows: no gradient
        inner = [self.update(batch, first=(k == 0)) for k in range(cfg.inner_steps)]
        self._sync()                                            # theta_old <- theta
        t2 = time.perf_counter()
        beta = self.kl_ctl.beta
        n_samples, n_tokens = self.dist.sum([len(rollout),
                                             sum(len(c) for c in rollout.completion_ids)])
        if self.ref is not None:      # Ziegler et al.'s horizon counts samples, not steps
            self.kl_ctl.update(inner[0].get("kl/k1_seq_sum", float("nan")), int(n_samples))
        metrics.update(batch.stats)
        metrics.update(watch.metrics)
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
            tasks = self.monitor.plant(self.stream.take(sum(needs))[offset:offset + need],
                                       self.step)               # honeypot_frac
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

    def _collect_ahead(self) -> tuple[Rollout, dict]:
        """The step's rollout from the pipeline (sampled up to async_steps versions ago),
        scored here."""
        rollout, ahead = self.pipeline.next_rollout(self.step)
        t1 = time.perf_counter()
        score(self.env, rollout, self.cfg.drop_failed)
        score_s = time.perf_counter() - t1
        self._shape_overlong(rollout)
        metrics = self._rollout_metrics(rollout)
        metrics.update(ahead)
        metrics["timing/score_s"] = score_s
        restarts = getattr(self.pipeline.engine, "restarts", None)    # the sampler process's
        if restarts is not None:
            metrics["async/sampler_restarts"] = restarts
        return rollout, metrics

    def _sync(self) -> None:
        """The weights to the sampler(s), every sync_every steps (each engine counts)."""
        self.engine.sync_weights(self.policy)
        if self.pipeline is not None:
            if self.pipeline.engine is not self.engine:
                self.pipeline.engine.sync_weights(self.policy)
            self.pipeline.synced(self.step + 1)

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

    # --- 2. the update (trainer/objective/update.py) ------------------------------------------------------
    def prepare(self, rollout: Rollout) -> Batch:
        """Freeze what the inner steps reuse: reference log-probs, values, advantages."""
        with heap_reuse():      # allocator.py: a no-op unless tune_allocator
            return self.learner.prepare(rollout)

    def update(self, batch: Batch, first: bool) -> dict:
        """One optimizer step over the whole batch."""
        return self.learner.step(batch, first)

    # --- evaluation ---------------------------------------------------------------------------
    def evaluate(self) -> dict:
        """pass@1 (greedy) and pass@k on the test split (trainer/evaluation/evaluate.py)."""
        from rlvr.trainer.evaluation.evaluate import evaluate_in_training
        with self.precision(), self.placement.gathered():
            return evaluate_in_training(self.env, self.engine, self.cfg, self.step, self.dist)

    # --- checkpoints --------------------------------------------------------------------------
    def save_checkpoint(self) -> Path:
        """Everything needed to continue exactly: weights (safetensors), optimizer, scheduler,
        RNG states, data cursor, KL controller, baseline, step and the resolved config.
        Replicas are identical, so rank 0 writes it (any world size can resume it)."""
        root, name = self.run_dir / "checkpoints", f"step-{self.step:06d}"
        if self.placement.writes_checkpoints:
            self._write_checkpoint(root, name)
        self.dist.barrier()
        return root / name

    def _write_checkpoint(self, root: Path, name: str) -> None:
        cursor = self.stream.cursor if self.pipeline is None else \
            self.pipeline.cursor(self.stream.cursor, self.step)
        state = {"step": self.step, "cursor": cursor,
                 "kl_controller": self.kl_ctl.state_dict(), "baseline": self.baseline.state_dict(),
                 "config": self.cfg.to_dict()}
        write_checkpoint(root, name, policy=self.policy, tokenizer=self.tokenizer,
                         critic=self.critic, optimizer=self.optimizer, scheduler=self.scheduler,
                         state=state, placement=self.placement)

    def _load_checkpoint(self, ckpt: Path) -> None:
        state = read_state(ckpt)
        self.step = state["step"]
        self.stream = PromptStream(self.env, self.cfg.seed, cursor=state["cursor"])
        self.kl_ctl.load_state_dict(state["kl_controller"])
        self.baseline.load_state_dict(state["baseline"])
        restore_trainer_state(ckpt, self.critic, self.optimizer, self.scheduler,   # RNG last
                              placement=self.placement)

    def _write_run_config(self) -> None:
        write_run_config(self.run_dir, self.cfg, env=self.env.describe())

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


def train(config: TrainConfig | str | Path | None = None, overwrite: bool = False,
          **overrides) -> Path:
    """Python API mirroring `rlvr train`: a TrainConfig, or a TOML path, plus field overrides.
    A folder that already holds a run is refused (`resume` continues it), or with `overwrite`
    emptied of that run once the trainer is built.

    >>> train("configs/grpo_arithmetic.toml", steps=10)        # doctest: +SKIP
    """
    if isinstance(config, TrainConfig):
        cfg = load_config(None, {**config.to_dict(), **overrides}) if overrides else config
    else:
        cfg = load_config(config, overrides)
    return start_run(cfg, Trainer, overwrite, "rlvr train")


def resume(run_dir: str | Path, **overrides) -> Path:
    """Python API mirroring `rlvr train --resume RUN_DIR`."""
    return Trainer.resume(run_dir, **overrides).train()
