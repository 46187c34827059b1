"""The sections of the training config: one small dataclass per concern, each field documented
by the docstring under it (`rlvr train --help-config`).

`TrainConfig` (trainer/config.py) is all of them at once, so every field keeps its flat name
(`cfg.lr`, `lr=1e-5`, `--lr`); `TrainConfig.section(name)` reads one of them on its own. A
section whose knobs only matter in some configurations says which of its knobs the current
configuration never reads (`unused_knobs`), next to the knobs themselves. Knobs written
`by_preset(...)` take the preset's value unless given (trainer/objective/presets.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

from rlvr.trainer.objective.algorithms import TOKEN_ADVANTAGES
from rlvr.trainer.objective.presets import by_preset

__all__ = ["SECTIONS", "Run", "Model", "Sampling", "Engine", "Algorithm", "KL", "Critic",
           "Optimizer", "Rewards", "Distillation", "Parallel", "Evaluation", "Logging"]

_NOT_USED = "not used by this configuration"
_NO_RATIO = ("pg", "nll", "none")
"""Policy losses without a ratio, so without its clamp."""


@dataclass
class Run:
    """What is trained on what, where the run goes, for how long."""
    preset: str = "grpo"
    """Algorithm preset whose knobs the run starts from (grpo, dr_grpo, dapo, gspo, rloo,
    reinforce, reinforce_pp, ppo, expert_iteration, onpolicy_distill); fields given beside it
    override single knobs."""
    strict: bool = False
    """Refuse (instead of warning about) a knob set away from its default that the chosen
    estimator ignores, e.g. gamma or critic_lr with GRPO."""
    env: str = "arithmetic"
    """Environment name (`rlvr envs list`)."""
    env_args: dict = field(default_factory=dict)
    """Keyword arguments for the environment factory, e.g. {n_terms = 2} (once env_kwargs)."""
    output_dir: str = "runs/rlvr"
    """Run folder: config.json, metrics.jsonl, samples.jsonl, tensorboard/, checkpoints/."""
    seed: int = 0
    """Seeds sampling, data order and initialisation of new heads."""
    steps: int = 100
    """Number of training steps (one rollout batch + its inner updates each)."""


@dataclass
class Model:
    """The policy model, its precision, and how its forwards and weights are computed."""
    model: str = "smollm2"
    """Policy: any AutoModelForCausalLM, as a local folder or a hub id; 'smollm2' is the packaged
    SmolLM2-135M-Instruct (hub id HuggingFaceTB/SmolLM2-135M-Instruct), which needs no hub."""
    tokenizer: str = ""
    """Tokenizer folder or hub id; empty means the model's own."""
    device: str = "auto"
    """'auto' (cuda if available), 'cpu' or 'cuda'."""
    dtype: str = "float32"
    """Compute dtype: float32, or bfloat16 = mixed precision (float32 master weights and AdamW
    states, forward passes under bf16 autocast on CPU and CUDA)."""
    forward: str = "fast"
    """How the update computes log-probs: 'fast' (shared prompt KV caches, packing, block-wise
    log-softmax, skipping groups without signal; tested equal to the reference) or 'reference'
    (one plain forward over whole sequences, and plain `generate` for sampling: public
    transformers API only). 'fast' falls back to 'reference' with a warning when a transformers
    internal it relies on has moved."""
    share_prefix: str = "auto"
    """Run each prompt once per group and repeat its KV cache over the G completions, in
    sampling and in every loss forward, there with the completions packed back to back
    (exact). 'auto' = on for CPU (saves compute), off for CUDA (a small model there is
    launch-bound and the repeated cache costs more); 'false' = full sequences and HF
    `generate`, for models whose cache cannot be repeated."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward pass instead of keeping them
    (less memory, one more forward); exact, and works with share_prefix."""
    tune_allocator: bool = False
    """CPU: pin glibc's mmap threshold so freed activations go back to the OS at once, and
    reuse the heap while sampling (lower peak memory; changes this process's malloc
    settings, so it is opt-in; the main job turns it on)."""
    lora_rank: int = 0
    """LoRA adapter rank; 0 = full fine-tuning. With LoRA the reference policy is the base
    model with the adapters disabled (no second copy) and checkpoints hold only the adapters."""
    lora_alpha: float = 32.0
    """LoRA scaling numerator (the update is scaled by alpha / rank)."""
    lora_dropout: float = 0.0
    """Dropout on the adapters' inputs in the update's forward passes (sampling and the
    pi_old/reference log-probs run without it)."""
    lora_target_modules: tuple = ("all-linear",)
    """Modules that get adapters: ('all-linear',) = every linear layer but the output head, or
    names such as ('q_proj', 'v_proj')."""

    def unused_knobs(self) -> dict[str, str]:
        """knob -> why this configuration never reads it ('' when it does)."""
        off = "" if self.lora_rank else "LoRA is off (lora_rank = 0)"
        return {k: off for k in ("lora_alpha", "lora_dropout", "lora_target_modules")}


@dataclass
class Sampling:
    """The rollout batch: how many prompts and completions, how they are sampled, and DAPO's
    dynamic sampling and overlong shaping."""
    prompts_per_step: int = 8
    """Prompts per rollout batch."""
    group_size: int = 8
    """Completions sampled per prompt (G, RLOO's K)."""
    max_completion_length: int = 256
    """Generation stops here (finish_reason 'length'); also Dr. GRPO's constant normaliser."""
    temperature: float = 1.0
    """Sampling temperature."""
    top_p: float = 1.0
    """Nucleus sampling threshold."""
    generation_batch_size: int = 0
    """Completions generated per `generate` call; 0 = the whole rollout batch at once."""
    dynamic_sampling: bool = by_preset(False)
    """Drop prompts whose completions all score the same and sample more until the batch is full."""
    max_sampling_rounds: int = 3
    """Bound on dynamic-sampling rounds per step (the batch may stay short after it)."""
    overlong_buffer: int = by_preset(0)
    """DAPO overlong shaping: length band before the limit where the penalty ramps to -1; 0 = off."""
    overlong_penalty: float = 1.0
    """Scale of the overlong penalty."""
    mask_truncated_completions: bool = False
    """Overlong filtering (DAPO sec. 3.4, TRL's option of this name): completions that hit
    max_completion_length carry no loss (they still count in the group baselines)."""
    async_steps: int = 0
    """Overlap sampling with the update (docs/scaling.md): the sampler runs up to this many
    policy versions ahead of the trainer, and no sample older than that is trained on; the
    sampler's log-probs correct the gap (importance_correction). With rollout_engine='hf' the
    sampler is its own process on this machine. 0 = sample, then update, in turn."""
    partial_rollouts: bool = False
    """async_steps > 0 with rollout_engine='hf': a generation a weight update interrupts
    continues under the new weights (the cached keys of earlier tokens stay), each token
    recording the version that sampled it and its log-prob; the correction applies per token."""
    sampler_threads: int = 0
    """async_steps > 0 with rollout_engine='hf': torch threads of the sampler process
    (0 = torch's default)."""

    def unused_knobs(self) -> dict[str, str]:
        """knob -> why this configuration never reads it ('' when it does)."""
        return {"max_sampling_rounds": "" if self.dynamic_sampling else _NOT_USED,
                "overlong_penalty": "" if self.overlong_buffer else _NOT_USED,
                "sampler_threads": "" if self.async_steps and self.rollout_engine == "hf"
                else "only the sampler process of async_steps > 0 with rollout_engine='hf'"}


@dataclass
class Engine:
    """The rollout engine, and the inference server when it is one (with the stale-sample
    correction its samples need)."""
    rollout_engine: str = "hf"
    """'hf' (the policy module itself; tested), 'vllm' (colocated vLLM with weight sync
    each step; optional extra `rlvr[vllm]`, needs a CUDA GPU, not exercised by our tests) or
    'server' (an OpenAI-compatible completions server: server_url, sync_every)."""
    vllm_gpu_memory_utilization: float = 0.3
    """Share of GPU memory vLLM may take for weights and KV cache (rollout_engine='vllm')."""
    server_url: str = ""
    """rollout_engine='server': base URL of an OpenAI-compatible completions server (vLLM or
    SGLang; many replicas behind one URL are the server's business), e.g. http://host:8000/v1."""
    server_model: str = ""
    """Model name sent with each request; empty = the first model the server lists."""
    server_sync: str = "sglang"
    """How new weights reach the server: 'sglang' (/update_weights_from_disk), 'vllm'
    (/collective_rpc reload_weights; the server must serve server_weights_dir) or 'none'
    (never: the server keeps its own weights)."""
    server_weights_dir: str = ""
    """Folder, readable by the server, where the policy is written (safetensors and config, a
    transformers folder) before each sync; empty = output_dir/server_weights."""
    sync_every: int = 1
    """rollout_engine='server' (or async_steps > 0): push the policy to the sampler every N
    steps; samples are then up to N - 1 updates stale (and corrected, see
    importance_correction)."""
    server_concurrency: int = 8
    """Requests in flight at once (one per prompt)."""
    server_timeout_s: float = 300.0
    """Deadline per request attempt (and for a weight sync)."""
    server_retries: int = 3
    """Retries per request after the first attempt; then the step is refused with an error and
    the run resumes from its last checkpoint."""
    importance_correction: str = "token"
    """How samples from a server's policy copy are reweighted (docs/rollout_server.md): token,
    sequence, token_mask, sequence_mask, geometric_mask, icepop, offpolicy_mask or none."""
    importance_threshold: float = 2.0
    """C: token and sequence truncate importance weights above it to it."""
    importance_mask_low: float = 0.5
    """token_mask / sequence_mask drop a token / completion whose ratio is below it."""
    importance_mask_high: float = 2.0
    """token_mask / sequence_mask drop a token / completion whose ratio is above it."""
    importance_geo_low: float = 0.99
    """geometric_mask drops a completion whose geometric-mean ratio is below it."""
    importance_geo_high: float = 1.01
    """geometric_mask drops a completion whose geometric-mean ratio is above it."""
    importance_icepop_low: float = 0.5
    """icepop's alpha: a token whose ratio is below it gets no gradient (IcePop's value)."""
    importance_icepop_high: float = 5.0
    """icepop's beta: a token whose ratio is above it gets no gradient (IcePop's value)."""
    importance_kl_threshold: float = 1e-3
    """offpolicy_mask's delta: drop a negative-advantage completion whose mean KL is above it."""

    def unused_knobs(self) -> dict[str, str]:
        """knob -> why this configuration never reads it ('' when it does)."""
        server = "" if self.rollout_engine == "server" else _NOT_USED
        corrected = "" if self.rollout_engine == "server" or self.async_steps else _NOT_USED
        return {"vllm_gpu_memory_utilization": "" if self.rollout_engine == "vllm" else _NOT_USED,
                **{k: server for k in ("server_url", "server_model", "server_sync",
                                       "server_weights_dir", "server_concurrency",
                                       "server_timeout_s", "server_retries")},
                "sync_every": corrected,
                **{f.name: corrected for f in fields(self)
                   if f.name.startswith("importance_")}}


@dataclass
class Algorithm:
    """The advantage estimator and the policy loss (the presets' knobs, with the KL and the
    critic below)."""
    advantage: str = by_preset("grpo")
    """reinforce (reward - baseline), rloo (leave-one-out), grpo (group-normalised), gae (PPO
    critic), reinforce_pp (REINFORCE++), filter (expert iteration: 1 for a verified completion,
    0 for the rest, which then carry no loss)."""
    scale_rewards: str = by_preset("group")
    """GRPO's advantage scale (TRL's names): 'group' divides r - mean_group by the group's std,
    'batch' by the std of the whole batch's rewards, 'none' not at all (Dr. GRPO). The old
    boolean still loads: true = 'group', false = 'none'."""
    baseline: str = by_preset("batch")
    """REINFORCE baseline: 'batch' mean or 'moving_average'."""
    baseline_decay: float = 0.9
    """Moving-average baseline decay."""
    gamma: float = by_preset(1.0)
    """PPO discount."""
    gae_lambda: float = by_preset(0.95)
    """PPO GAE lambda; 1.0 = Monte Carlo return-to-go."""
    whiten_advantages: bool = by_preset(False)
    """Normalise advantages to mean 0, std 1 over the batch's loss tokens (PPO and REINFORCE++
    presets: on, as TRL, verl and OpenRLHF do for PPO)."""
    policy_loss: str = by_preset("clip")
    """pg (A * log-prob, REINFORCE/RLOO), clip (token ratio, PPO/GRPO), gspo (sequence ratio),
    gspo_token (sequence ratio's value, per-token advantages' gradient; GSPO paper sec. 4.3),
    nll (SFT's log-likelihood weighted by the filter advantage; epochs allowed), none (no
    policy-gradient term: pure on-policy distillation), clip_cov and kl_cov (clip, and the
    unclipped ratio, restraining the tokens whose log-prob and advantage co-vary most, against
    entropy collapse; Cui et al. 2025)."""
    loss_aggregation: str = by_preset("seq_mean_token_mean")
    """seq_mean_token_mean (GRPO), seq_mean_token_sum (REINFORCE/RLOO), seq_mean_token_sum_norm (Dr. GRPO), token_mean (DAPO)."""
    clip_eps_low: float = by_preset(0.2)
    """Ratio clamp below: 1 - eps_low."""
    clip_eps_high: float = by_preset(0.2)
    """Ratio clamp above: 1 + eps_high (> eps_low is DAPO's clip-higher)."""
    clip_cov_ratio: float = 2e-4
    """clip_cov: the share of the batch's tokens taken out of the gradient (the paper's r)."""
    clip_cov_low: float = 1.0
    """clip_cov: a token is a candidate when its log-prob/advantage covariance is >= this ..."""
    clip_cov_high: float = 5.0
    """... and <= this (the paper's omega_low, omega_high)."""
    kl_cov_ratio: float = 2e-3
    """kl_cov: the share of the batch's tokens, largest covariance first, that get the KL
    penalty (the paper's k)."""
    kl_cov_coef: float = 1.0
    """kl_cov: the penalty's weight on |log pi - log pi_old| (the paper's beta)."""
    entropy_coef: float = 0.0
    """Entropy bonus: the loss loses entropy_coef times the policy's mean token entropy over
    the completion tokens, averaged as the surrogate is (loss_aggregation), at every inner step
    (Williams & Peng 1991; Mnih et al. 2016); against entropy collapse. 0 = off (the update as
    without it, bit for bit); negative values minimise the entropy."""
    inner_steps: int = by_preset(1)
    """mu: gradient steps per rollout batch, pi_old and advantages frozen across them."""
    keep_threshold: float = by_preset(1.0)
    """Expert iteration (advantage = "filter"): a completion is kept, and trained on, when its
    verdict is ok and its answer score (the answer reward's, not format or shaping terms)
    is at least this."""

    def unused_knobs(self) -> dict[str, str]:
        """knob -> why this configuration never reads it ('' when it does)."""
        no_ratio = _NOT_USED if self.policy_loss in _NO_RATIO else ""
        no_clip = "kl_cov penalises instead of clipping" if self.policy_loss == "kl_cov" else ""
        # pi_old is the policy before the batch's first gradient step: with only that step the
        # ratio is exactly 1, so a clamp never binds and |log ratio| (KL-Cov) is 0, gradient too
        one_step = ("one gradient step per batch (inner_steps=1): the ratio to pi_old is 1 "
                    "there; set inner_steps >= 2") if self.inner_steps == 1 else ""
        kl_cov = "" if self.policy_loss == "kl_cov" else _NOT_USED
        return {"baseline": "" if self.advantage == "reinforce" else
                "only the reinforce advantage has a baseline",
                "baseline_decay": "" if self.advantage == "reinforce" and
                self.baseline == "moving_average" else _NOT_USED,
                "gamma": "" if self.advantage in TOKEN_ADVANTAGES else
                "only per-token advantages (gae, reinforce_pp) discount",
                "gae_lambda": "" if self.advantage == "gae" else _NOT_USED,
                "scale_rewards": "" if self.advantage == "grpo" else
                "only the grpo advantage scales rewards",
                "clip_eps_low": no_ratio or no_clip or one_step,
                "clip_eps_high": no_ratio or no_clip or one_step,
                **{k: "" if self.policy_loss == "clip_cov" else _NOT_USED
                   for k in ("clip_cov_ratio", "clip_cov_low", "clip_cov_high")},
                **{k: kl_cov or one_step for k in ("kl_cov_ratio", "kl_cov_coef")},
                "keep_threshold": "" if self.advantage == "filter" else _NOT_USED}


@dataclass
class KL:
    """The KL penalty to the reference policy."""
    beta: float = by_preset(0.04)
    """KL coefficient (initial value when adaptive). 0 = no reference model is loaded."""
    kl_estimator: str = by_preset("k3")
    """k1, k2 or k3 (see trainer/objective/algorithms.py for bias and sign)."""
    kl_in: str = by_preset("loss")
    """'loss' (GRPO: beta*KL per token in the loss) or 'reward' (PPO/REINFORCE: subtracted from rewards).
    k1 is refused in the loss: its expected gradient is zero (use k3 or k2 there)."""
    kl_target: float = by_preset(0.0)
    """Adaptive KL controller target (per-completion KL, k1 summed); 0 = fixed beta."""
    kl_horizon: float = 10000.0
    """Adaptive controller horizon, in samples (Ziegler et al.: each step moves beta by
    error * completions_in_step / horizon)."""

    def unused_knobs(self) -> dict[str, str]:
        """knob -> why this configuration never reads it ('' when it does)."""
        off = "" if self.beta > 0 or self.kl_target > 0 else _NOT_USED
        return {"kl_estimator": off, "kl_in": off,
                "kl_horizon": "" if self.kl_target > 0 else _NOT_USED}


@dataclass
class Critic:
    """PPO's value model."""
    critic_weight: float = by_preset(0.5)
    """Weight of the value MSE loss (PPO)."""
    cliprange_value: float = by_preset(0.0)
    """PPO value clipping: V may move at most this far from V_old before its error stops
    shrinking (TRL's cliprange_value; the ppo preset uses 0.2); 0 = off."""
    critic_lr: float = 0.0
    """Critic learning rate; 0 = same as lr."""

    def unused_knobs(self) -> dict[str, str]:
        """knob -> why this configuration never reads it ('' when it does)."""
        off = "" if self.advantage == "gae" else _NOT_USED
        return {"critic_lr": off, "critic_weight": off, "cliprange_value": off}


@dataclass
class Optimizer:
    """AdamW and the micro-batches its gradients accumulate over."""
    lr: float = 1e-6
    """AdamW learning rate of the policy."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    adam_betas: tuple = (0.9, 0.999)
    """AdamW betas."""
    warmup_steps: int = 0
    """Linear learning-rate warm-up (optimizer steps), then constant."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip (0 = none)."""
    micro_batch_size: int = 16
    """Sequences per forward/backward; gradients accumulate over the rollout batch."""


@dataclass
class Rewards:
    """Where and under which deadlines the verifiers score, and what a failed verdict does."""
    drop_failed: bool = True
    """Leave samples whose verdict failed (timeout, error, infra_error, gold_unparseable) out of baselines and losses."""
    reward_deadline_s: float | None = None
    """Score in rlvr's worker pool with this hard deadline per completion (a hung verifier
    becomes a `timeout` verdict, never a stalled run); 0 scores in the training process. Unset
    (none): derived from the environment's declared longest verification (`max_verify_s`, e.g.
    a code reward's sandbox limits), and a value that does not exceed it is refused: a program
    that stalls must meet its own limit and score 0, never become a left-out `timeout`."""
    reward_backend: str = "process"
    """Where pooled rewards run: 'process' (worker processes on this machine) or 'ray' (Ray
    actors, e.g. sandboxed code tests on a cluster's CPUs; `pip install 'rlvr[ray]'`)."""
    reward_workers: int = 0
    """Reward workers; 0 = this machine's CPUs ('process') or the Ray cluster's CPUs ('ray')."""
    ray_address: str = ""
    """Ray cluster to join with reward_backend='ray'; empty starts a local Ray instance."""
    control: str = "none"
    """Spurious-reward control (Shao et al. 2025): 'none' trains on the verifier's reward,
    'random' on a seeded coin of the same mean as the verifier's reward in each step, 'format'
    on the environment's format reward alone. The verifier's reward is still logged as
    `reward`; the one trained on as `control/reward`."""

    def unused_knobs(self) -> dict[str, str]:
        """knob -> why this configuration never reads it ('' when it does)."""
        return {"ray_address": "" if self.reward_backend == "ray" else _NOT_USED}


@dataclass
class Distillation:
    """On-policy distillation's teacher."""
    teacher: str = ""
    """On-policy distillation: the teacher that scores the student's tokens (a model folder,
    hub id, 'smollm2' or an rlvr run folder), loaded frozen; it must have the student's
    tokenizer. Empty = no teacher."""
    distill_coef: float = by_preset(1.0)
    """Weight of the token-mean reverse KL(student || teacher) over the vocabulary added to the
    loss when a teacher is set (the onpolicy_distill preset: the whole loss)."""

    def unused_knobs(self) -> dict[str, str]:
        """knob -> why this configuration never reads it ('' when it does)."""
        return {"distill_coef": "" if self.teacher else _NOT_USED}


@dataclass
class Parallel:
    """How the ranks of a torchrun job hold the models."""
    dist_backend: str = "auto"
    """torch.distributed backend under torchrun: 'auto' (nccl on GPUs, gloo on CPUs), 'nccl',
    'gloo'. prompts_per_step is the global batch, shared by the ranks; a plain run ignores it."""
    parallel: str = "replicate"
    """How the ranks hold the models: 'replicate' (each rank a whole copy, gradients summed
    over ranks) or 'fsdp' (FSDP2: weights, gradients and AdamW states sharded over the ranks,
    for a policy too large for one device; the update uses the reference forward, sampling
    the gathered policy; needs prompts_per_step divisible by the ranks, rollout_engine='hf'
    and no dynamic_sampling). docs/scaling.md says when to use which."""


@dataclass
class Evaluation:
    """The held-out evaluation during training."""
    eval_every: int = 0
    """Evaluate on the test split every N steps (and at the end); 0 = never."""
    eval_tasks: int = 32
    """Test tasks per evaluation."""
    eval_k: int = 4
    """Samples per test task for pass@k (pass@1 is greedy)."""


@dataclass
class Logging:
    """What the run writes besides its checkpoints' weights, and how often it checkpoints."""
    log_completions: int = 4
    """Completions (with verdicts) written to samples.jsonl per step."""
    reflection_phrases: tuple = ("wait", "let me check", "re-evaluate", "double-check",
                                 "let me verify", "hmm")
    """Phrases counted by think/reflection_rate (case-insensitive)."""
    tensorboard: bool = True
    """Write TensorBoard event files under output_dir/tensorboard."""
    report_to: tuple = ("tensorboard",)
    """Where step metrics go besides metrics.jsonl: "tensorboard" (also needs tensorboard =
    true) and/or "wandb" (Weights & Biases, same metric names, config and plots as artifacts;
    `pip install 'rlvr[wandb]'`; WANDB_MODE=offline needs no account)."""
    progress: bool = True
    """Show a progress bar."""
    checkpoint_every: int = 50
    """Save a checkpoint every N steps (and at the end); 0 = only at the end."""


@dataclass
class Monitoring:
    """Reward hacking caught while it happens (docs/monitoring.md): per-sample hack detectors,
    an independent second opinion on a sample of each step, honeypot tasks, and what to do."""
    monitor_action: str = "log"
    """'log' (metrics and the disagreements file), 'screen' (flagged samples get no gradient),
    'stop' (end the run, checkpointed, when a rate stays above the threshold) or 'off'."""
    monitor_every: int = 10
    """Second opinion on monitor_sample of the step's samples every N steps; 0 = never."""
    monitor_sample: int = 32
    """Completions the second opinion re-scores each time it runs."""
    monitor_threshold: float = 0.5
    """monitor_action='stop': a hack/* or monitor/disagree_reward rate above this ..."""
    monitor_patience: int = 3
    """... for this many observed steps in a row stops the run (checkpoint written)."""
    monitor_detectors: tuple = ()
    """Detectors run, by name (`rlvr monitor --list`); empty = all that apply."""
    honeypot_frac: float = 0.0
    """Share of prompts that are honeypots (a planted loophole; never trained on)."""


SECTIONS: dict[str, type] = {"run": Run, "model": Model, "sampling": Sampling, "engine": Engine,
                             "algorithm": Algorithm, "kl": KL, "critic": Critic,
                             "optimizer": Optimizer, "rewards": Rewards,
                             "distillation": Distillation, "parallel": Parallel,
                             "evaluation": Evaluation, "monitoring": Monitoring,
                             "logging": Logging}
"""Every section by name, in the order `TrainConfig` lists their fields."""
