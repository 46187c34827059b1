"""The one training config. Field docstrings are the documentation (`rlvr train --help-config`).

Algorithms are presets that set every knob they depend on together (Dr. GRPO is two coordinated
settings; forgetting one is how people half-configure it). `TrainConfig(preset="ppo", lr=...)`,
a TOML file with `preset = "ppo"` and `rlvr train preset=ppo` all start from the preset's knobs
and override the fields given; a knob the chosen estimator ignores is warned about (refused
with `strict = true`).
"""
from __future__ import annotations

import dataclasses
import tomllib
import typing
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from rlvr.usage import coerce
from rlvr.usage import field_docs as usage_field_docs

from .algorithms import ADVANTAGES, LOSS_AGGREGATIONS, POLICY_LOSSES, TOKEN_ADVANTAGES

__all__ = ["TrainConfig", "PRESETS", "load_config", "field_docs"]


@dataclass
class TrainConfig:
    # --- what to train on what --------------------------------------------------------------
    preset: str = "grpo"
    """Algorithm preset whose knobs the run starts from (grpo, dr_grpo, dapo, gspo, rloo,
    reinforce, reinforce_pp, ppo, expert_iteration, onpolicy_distill); fields given beside it
    override single knobs."""
    strict: bool = False
    """Refuse (instead of warning about) a knob set away from its default that the chosen
    estimator ignores, e.g. gamma or critic_lr with GRPO."""
    model: str = "smollm2"
    """Policy: any AutoModelForCausalLM, as a local folder or a hub id; 'smollm2' is the packaged
    SmolLM2-135M-Instruct (hub id HuggingFaceTB/SmolLM2-135M-Instruct), which needs no hub."""
    tokenizer: str = ""
    """Tokenizer folder or hub id; empty means the model's own."""
    env: str = "arithmetic"
    """Environment name (`rlvr envs list`)."""
    env_kwargs: dict = field(default_factory=dict)
    """Keyword arguments for the environment factory, e.g. {n_terms = 2}."""
    output_dir: str = "runs/rlvr"
    """Run folder: config.json, metrics.jsonl, samples.jsonl, tensorboard/, checkpoints/."""
    seed: int = 0
    """Seeds sampling, data order and initialisation of new heads."""
    steps: int = 100
    """Number of training steps (one rollout batch + its inner updates each)."""
    device: str = "auto"
    """'auto' (cuda if available), 'cpu' or 'cuda'."""
    dtype: str = "float32"
    """Compute dtype: float32, or bfloat16 = mixed precision (float32 master weights and AdamW
    states, forward passes under bf16 autocast on CPU and CUDA)."""
    # --- sampling ---------------------------------------------------------------------------
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
    rollout_engine: str = "hf"
    """'hf' (the policy module itself; tested), 'vllm' (colocated vLLM with weight sync
    each step; optional extra `rlvr[vllm]`, needs a CUDA GPU, not exercised by our tests) or
    'server' (an OpenAI-compatible completions server: server_url, sync_every)."""
    vllm_gpu_memory_utilization: float = 0.3
    """Share of GPU memory vLLM may take for weights and KV cache (rollout_engine='vllm')."""
    # --- rollout server ---
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
    """rollout_engine='server': push the policy to the server every N steps; samples are then
    up to N - 1 updates stale (and corrected, see importance_correction)."""
    server_concurrency: int = 8
    """Requests in flight at once (one per prompt)."""
    server_timeout_s: float = 300.0
    """Deadline per request attempt (and for a weight sync)."""
    server_retries: int = 3
    """Retries per request after the first attempt; then the step is refused with an error and
    the run resumes from its last checkpoint."""
    importance_correction: str = "token"
    """Correction of samples drawn by a server's copy of the policy (truncated importance
    sampling, Yao et al. 2025): 'token' (weight min(pi_old/pi_server, C) per token),
    'sequence' (one weight per completion, the product of its ratios, truncated) or 'none'.
    The mismatch is logged as mismatch/* either way."""
    importance_threshold: float = 2.0
    """C: importance weights above it are truncated to it."""
    # --- advantages -------------------------------------------------------------------------
    advantage: str = "grpo"
    """reinforce (reward - baseline), rloo (leave-one-out), grpo (group-normalised), gae (PPO
    critic), reinforce_pp (REINFORCE++), filter (expert iteration: 1 for a verified completion,
    0 for the rest, which then carry no loss)."""
    scale_rewards: str = "group"
    """GRPO's advantage scale (TRL's names): 'group' divides r - mean_group by the group's std,
    'batch' by the std of the whole batch's rewards, 'none' not at all (Dr. GRPO). The old
    boolean still loads: true = 'group', false = 'none'."""
    baseline: str = "batch"
    """REINFORCE baseline: 'batch' mean or 'moving_average'."""
    baseline_decay: float = 0.9
    """Moving-average baseline decay."""
    gamma: float = 1.0
    """PPO discount."""
    gae_lambda: float = 0.95
    """PPO GAE lambda; 1.0 = Monte Carlo return-to-go."""
    whiten_advantages: bool = False
    """Normalise advantages to mean 0, std 1 over the batch's loss tokens (PPO and REINFORCE++
    presets: on, as TRL, verl and OpenRLHF do for PPO)."""
    # --- policy loss ------------------------------------------------------------------------
    policy_loss: str = "clip"
    """pg (A * log-prob, REINFORCE/RLOO), clip (token ratio, PPO/GRPO), gspo (sequence ratio),
    gspo_token (sequence ratio's value, per-token advantages' gradient; GSPO paper sec. 4.3),
    nll (SFT's log-likelihood weighted by the filter advantage; epochs allowed), none (no
    policy-gradient term: pure on-policy distillation)."""
    loss_aggregation: str = "seq_mean_token_mean"
    """seq_mean_token_mean (GRPO), seq_mean_token_sum (REINFORCE/RLOO), seq_mean_token_sum_norm (Dr. GRPO), token_mean (DAPO)."""
    clip_eps_low: float = 0.2
    """Ratio clamp below: 1 - eps_low."""
    clip_eps_high: float = 0.2
    """Ratio clamp above: 1 + eps_high (> eps_low is DAPO's clip-higher)."""
    inner_steps: int = 1
    """mu: gradient steps per rollout batch, pi_old and advantages frozen across them."""
    # --- KL to the reference ----------------------------------------------------------------
    beta: float = 0.04
    """KL coefficient (initial value when adaptive). 0 = no reference model is loaded."""
    kl_estimator: str = "k3"
    """k1, k2 or k3 (see trainer/algorithms.py for bias and sign)."""
    kl_in: str = "loss"
    """'loss' (GRPO: beta*KL per token in the loss) or 'reward' (PPO/REINFORCE: subtracted from rewards).
    k1 is refused in the loss: its expected gradient is zero (use k3 or k2 there)."""
    kl_target: float = 0.0
    """Adaptive KL controller target (per-completion KL, k1 summed); 0 = fixed beta."""
    kl_horizon: float = 10000.0
    """Adaptive controller horizon, in samples (Ziegler et al.: each step moves beta by
    error * completions_in_step / horizon)."""
    # --- PPO critic -------------------------------------------------------------------------
    critic_weight: float = 0.5
    """Weight of the value MSE loss (PPO)."""
    cliprange_value: float = 0.0
    """PPO value clipping: V may move at most this far from V_old before its error stops
    shrinking (TRL's cliprange_value; the ppo preset uses 0.2); 0 = off."""
    critic_lr: float = 0.0
    """Critic learning rate; 0 = same as lr."""
    # --- DAPO -------------------------------------------------------------------------------
    dynamic_sampling: bool = False
    """Drop prompts whose completions all score the same and sample more until the batch is full."""
    max_sampling_rounds: int = 3
    """Bound on dynamic-sampling rounds per step (the batch may stay short after it)."""
    overlong_buffer: int = 0
    """DAPO overlong shaping: length band before the limit where the penalty ramps to -1; 0 = off."""
    overlong_penalty: float = 1.0
    """Scale of the overlong penalty."""
    mask_truncated_completions: bool = False
    """Overlong filtering (DAPO sec. 3.4, TRL's option of this name): completions that hit
    max_completion_length carry no loss (they still count in the group baselines)."""
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
    # --- distillation and expert iteration ------------------------------------------------
    keep_threshold: float = 1.0
    """Expert iteration (advantage = "filter"): a completion is kept, and trained on, when its
    verdict is ok and its answer score (the answer reward's, not format or shaping terms)
    is at least this."""
    teacher: str = ""
    """On-policy distillation: the teacher that scores the student's tokens (a model folder,
    hub id, 'smollm2' or an rlvr run folder), loaded frozen; it must have the student's
    tokenizer. Empty = no teacher."""
    distill_coef: float = 1.0
    """Weight of the token-mean reverse KL(student || teacher) over the vocabulary added to the
    loss when a teacher is set (the onpolicy_distill preset: the whole loss)."""
    # --- optimisation -----------------------------------------------------------------------
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
    share_prefix: str = "auto"
    """Run each prompt once per group and repeat its KV cache over the G completions, in
    sampling and in every loss forward, there with the completions packed back to back
    (exact). 'auto' = on for CPU (saves compute), off for CUDA (a small model there is
    launch-bound and the repeated cache costs more); 'false' = full sequences and HF
    `generate`, for models whose cache cannot be repeated."""
    forward: str = "fast"
    """How the update computes log-probs: 'fast' (shared prompt KV caches, packing, block-wise
    log-softmax, skipping groups without signal; tested equal to the reference) or 'reference'
    (one plain forward over whole sequences, and plain `generate` for sampling: public
    transformers API only). 'fast' falls back to 'reference' with a warning when a transformers
    internal it relies on has moved."""
    tune_allocator: bool = False
    """CPU: pin glibc's mmap threshold so freed activations go back to the OS at once, and
    reuse the heap while sampling (lower peak memory; changes this process's malloc
    settings, so it is opt-in; the main job turns it on)."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward pass instead of keeping them
    (less memory, one more forward); exact, and works with share_prefix."""
    # --- LoRA (peft) -------------------------------------------------------------------------
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
    # --- data-parallel (torchrun) ------------------------------------------------------------
    dist_backend: str = "auto"
    """torch.distributed backend under torchrun: 'auto' (nccl on GPUs, gloo on CPUs), 'nccl',
    'gloo'. prompts_per_step is the global batch, shared by the ranks; a plain run ignores it."""
    parallel: str = "replicate"
    """How the ranks hold the models: 'replicate' (each rank a whole copy, gradients summed
    over ranks) or 'fsdp' (FSDP2: weights, gradients and AdamW states sharded over the ranks,
    for a policy too large for one device; the update uses the reference forward, sampling
    the gathered policy; needs prompts_per_step divisible by the ranks, rollout_engine='hf'
    and no dynamic_sampling). docs/scaling.md says when to use which."""
    # --- logging, evaluation, checkpoints ---------------------------------------------------
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
    eval_every: int = 0
    """Evaluate on the test split every N steps (and at the end); 0 = never."""
    eval_tasks: int = 32
    """Test tasks per evaluation."""
    eval_k: int = 4
    """Samples per test task for pass@k (pass@1 is greedy)."""
    monitor_action: str = "log"
    """Reward-hacking monitor (docs/monitoring.md): 'log', 'screen', 'stop' or 'off'."""
    monitor_every: int = 10
    """Second opinion on 32 of the step's samples every N steps; 0 = never."""
    monitor_threshold: float = 0.5
    """monitor_action='stop': a hack/* or monitor/disagree_reward rate above this ..."""
    monitor_patience: int = 3
    """... for this many observed steps in a row stops the run (checkpoint written)."""
    monitor_detectors: tuple = ()
    """Detectors run, by name (`rlvr monitor --list`); empty = all that apply."""
    honeypot_frac: float = 0.0
    """Share of prompts that are honeypots (planted loophole; never trained on)."""

    def __post_init__(self):
        self.scale_rewards = _legacy_scale_rewards(self.scale_rewards)
        self.share_prefix = _legacy_bool_choice(self.share_prefix)
        self.validate()
        ignored = self.ignored_knobs()
        if ignored:
            msg = (f"preset {self.preset!r} (advantage {self.advantage!r}, policy_loss "
                   f"{self.policy_loss!r}, beta {self.beta}) ignores {'; '.join(ignored)}")
            if self.strict:
                raise ValueError(msg + "; remove them or pick a preset that uses them")
            warnings.warn(msg, UserWarning, stacklevel=4)

    def ignored_knobs(self) -> list[str]:
        """'name (why)' for each knob set away from its default that this config never reads."""
        unused = {
            "baseline": self.advantage != "reinforce",
            "baseline_decay": self.advantage != "reinforce" or self.baseline != "moving_average",
            "gamma": self.advantage not in TOKEN_ADVANTAGES,
            "gae_lambda": self.advantage != "gae",
            "critic_lr": self.advantage != "gae", "critic_weight": self.advantage != "gae",
            "cliprange_value": self.advantage != "gae",
            "scale_rewards": self.advantage != "grpo",
            "clip_eps_low": self.policy_loss in _NO_RATIO,
            "clip_eps_high": self.policy_loss in _NO_RATIO,
            "keep_threshold": self.advantage != "filter", "distill_coef": not self.teacher,
            "kl_estimator": not self.needs_reference, "kl_in": not self.needs_reference,
            "kl_horizon": not self.adaptive_kl,
            "max_sampling_rounds": not self.dynamic_sampling,
            "overlong_penalty": not self.overlong_buffer,
            "lora_alpha": not self.lora_rank, "lora_dropout": not self.lora_rank,
            "lora_target_modules": not self.lora_rank,
            "vllm_gpu_memory_utilization": self.rollout_engine != "vllm",
            "ray_address": self.reward_backend != "ray",
            **{k: self.rollout_engine != "server" for k in (
                "server_url", "server_model", "server_sync", "server_weights_dir", "sync_every",
                "server_concurrency", "server_timeout_s", "server_retries",
                "importance_correction", "importance_threshold")},
        }
        defaults = {**_DEFAULTS, **PRESETS.get(self.preset, {})}
        why = {"baseline": "only the reinforce advantage has a baseline",
               "scale_rewards": "only the grpo advantage scales rewards",
               "gamma": "only per-token advantages (gae, reinforce_pp) discount"}
        return [f"{k} ({why.get(k, 'not used by this configuration')})"
                for k, off in unused.items()
                if off and _differs(getattr(self, k), defaults.get(k))]

    def validate(self) -> None:
        """Fail loud on impossible combinations, naming the fix."""
        if self.rollout_engine == "server":     # before any model loads
            from .server_engine import check_settings
            check_settings(self)
        unknown_sinks = set(self.report_to) - {"tensorboard", "wandb"}
        if isinstance(self.report_to, str) or unknown_sinks:
            raise ValueError(f"report_to={self.report_to!r}; expected a list of "
                             "'tensorboard' and/or 'wandb'")
        choices = {"advantage": ADVANTAGES, "baseline": ("batch", "moving_average"),
                   "scale_rewards": ("group", "batch", "none"),
                   "share_prefix": ("auto", "true", "false"),
                   "policy_loss": POLICY_LOSSES, "loss_aggregation": LOSS_AGGREGATIONS,
                   "kl_estimator": ("k1", "k2", "k3"), "kl_in": ("loss", "reward"),
                   "dtype": ("float32", "bfloat16"), "device": ("auto", "cpu", "cuda"),
                   "rollout_engine": ("hf", "vllm", "server"), "dist_backend": ("auto", "nccl", "gloo"),
                   "forward": ("fast", "reference"), "preset": tuple(PRESETS),
                   "reward_backend": ("process", "ray"), "parallel": ("replicate", "fsdp")}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name}={getattr(self, name)!r}; expected one of {list(allowed)}")
        for name in ("steps", "prompts_per_step", "group_size", "max_completion_length",
                     "inner_steps", "micro_batch_size", "eval_k", "max_sampling_rounds"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.advantage == "rloo" and self.group_size < 2:
            raise ValueError("rloo needs group_size >= 2 (a leave-one-out baseline needs company)")
        if self.policy_loss == "pg" and self.inner_steps != 1:
            raise ValueError("policy_loss='pg' is on-policy: set inner_steps=1 or use 'clip'")
        if self.policy_loss == "nll" and self.advantage != "filter":
            raise ValueError("policy_loss='nll' is supervised learning on the kept completions: "
                             "use advantage='filter' (preset expert_iteration), or 'pg'/'clip'")
        if self.advantage == "filter" and self.needs_reference and self.kl_in == "reward":
            raise ValueError("advantage='filter' keeps completions by their verdict, not by a "
                             "KL-shaped reward: set kl_in='loss' (or beta=0)")
        if self.distill_coef < 0:
            raise ValueError(f"distill_coef must be >= 0, got {self.distill_coef}")
        if self.dynamic_sampling and self.group_size < 2:
            raise ValueError("dynamic_sampling needs group_size >= 2")
        if self.overlong_buffer > self.max_completion_length:
            raise ValueError("overlong_buffer must be <= max_completion_length")
        if self.reward_workers < 0:
            raise ValueError(f"reward_workers must be >= 0, got {self.reward_workers}")
        if self.reward_backend == "ray" and self.reward_deadline_s == 0:
            raise ValueError("reward_backend='ray' scores in the pool: set reward_deadline_s > 0")
        if not 0 < self.vllm_gpu_memory_utilization <= 1:
            raise ValueError("vllm_gpu_memory_utilization must be in (0, 1]")
        if self.beta < 0 or self.kl_target < 0 or (self.reward_deadline_s or 0) < 0 \
                or self.cliprange_value < 0 or self.lora_rank < 0:
            raise ValueError("beta, kl_target, reward_deadline_s, cliprange_value and lora_rank "
                             "must be >= 0")
        if self.kl_target > 0 and self.beta == 0:
            raise ValueError("kl_target > 0 needs a starting beta > 0 (the adaptive controller "
                             "multiplies beta, so from 0 it stays 0): set e.g. beta=0.05")
        if self.needs_reference and self.kl_estimator == "k1" and self.kl_in == "loss":
            raise ValueError("kl_estimator='k1' in the loss has zero expected gradient "
                             "(E_pi[grad log pi] = 0): use kl_estimator='k3' or 'k2' with "
                             "kl_in='loss', or keep k1 with kl_in='reward'")
        if self.whiten_advantages and self.advantage not in TOKEN_ADVANTAGES:
            raise ValueError(f"whiten_advantages is for per-token advantages "
                             f"({', '.join(TOKEN_ADVANTAGES)}); advantage={self.advantage!r} is "
                             "normalised per group already (see scale_rewards='batch')")
        if self.lora_rank and self.rollout_engine == "vllm":
            raise ValueError("LoRA with rollout_engine='vllm' is not supported: use 'hf'")
        if not 0 <= self.lora_dropout < 1:
            raise ValueError(f"lora_dropout must be in [0, 1), got {self.lora_dropout}")

    @property
    def adaptive_kl(self) -> bool:
        return self.kl_target > 0

    @property
    def needs_reference(self) -> bool:
        return self.beta > 0 or self.adaptive_kl

    def prefix_sharing(self, device_type: str) -> bool:
        """share_prefix resolved for a device ('auto': on for CPU, off for CUDA)."""
        return device_type != "cuda" if self.share_prefix == "auto" else self.share_prefix == "true"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_preset(cls, name: str, **overrides) -> "TrainConfig":
        """A config from a named preset, with single fields overridden (= TrainConfig(preset=name, ...))."""
        return cls(**{**overrides, "preset": name})


_fields_init = TrainConfig.__init__


def _preset_init(self, **fields):
    """TrainConfig(preset=..., **fields): the preset's knobs, then the fields given. The field
    `algorithm` (the preset's name before it was called `preset`) still loads, with a warning."""
    if "algorithm" in fields:
        legacy = fields.pop("algorithm")
        warnings.warn("the config field 'algorithm' is now 'preset' (it names the preset the "
                      "knobs start from); write preset = " + repr(legacy), DeprecationWarning,
                      stacklevel=2)
        fields.setdefault("preset", legacy)
    name = fields.get("preset", "grpo")
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; expected one of {sorted(PRESETS)}")
    unknown = set(fields) - {f.name for f in dataclasses.fields(TrainConfig)}
    if unknown:
        raise ValueError(f"unknown config keys {sorted(unknown)}; see `rlvr train --help-config`")
    _fields_init(self, **_resolve_overlong({**PRESETS[name], **fields}))


_preset_init.__doc__ = _fields_init.__doc__
TrainConfig.__init__ = _preset_init


def _differs(value, default) -> bool:
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return list(value) != list(default)
    return value != default


_NO_RATIO = ("pg", "nll", "none")
"""Policy losses without a ratio, so without its clamp."""

_GRPO = dict(advantage="grpo", scale_rewards="group", policy_loss="clip",
             loss_aggregation="seq_mean_token_mean", clip_eps_low=0.2, clip_eps_high=0.2,
             beta=0.04, kl_estimator="k3", kl_in="loss", kl_target=0.0, inner_steps=1,
             dynamic_sampling=False, overlong_buffer=0, whiten_advantages=False,
             cliprange_value=0.0)

PRESETS: dict[str, dict] = {
    # DeepSeekMath GRPO: group-normalised advantages, token ratio clip, k3 KL in the loss.
    "grpo": _GRPO,
    # Dr. GRPO (Liu et al. 2025): no std division AND a constant length normaliser, no KL.
    "dr_grpo": {**_GRPO, "scale_rewards": "none", "loss_aggregation": "seq_mean_token_sum_norm",
                "beta": 0.0},
    # DAPO (Yu et al. 2025): clip-higher, token-level loss, dynamic sampling, overlong shaping.
    "dapo": {**_GRPO, "clip_eps_low": 0.2, "clip_eps_high": 0.28, "loss_aggregation": "token_mean",
             "beta": 0.0, "dynamic_sampling": True, "overlong_buffer": -1},
    # GSPO (Zheng et al. 2025): sequence-level ratio and clip (small eps: ratios are geometric means).
    "gspo": {**_GRPO, "policy_loss": "gspo", "clip_eps_low": 3e-4, "clip_eps_high": 4e-4,
             "beta": 0.0, "inner_steps": 2},
    # RLOO (Ahmadian et al. 2024): leave-one-out baseline, whole completion = one action, k1 KL in reward.
    "rloo": dict(_GRPO, advantage="rloo", policy_loss="pg", loss_aggregation="seq_mean_token_sum",
                 beta=0.05, kl_estimator="k1", kl_in="reward"),
    # REINFORCE with a batch-mean baseline, k1 KL folded into the completion reward.
    "reinforce": dict(_GRPO, advantage="reinforce", baseline="batch", policy_loss="pg",
                      loss_aggregation="seq_mean_token_sum", beta=0.05, kl_estimator="k1",
                      kl_in="reward"),
    # PPO: critic + GAE, per-token k1 KL in the reward, 4 inner steps, per-response masked mean,
    # whitened advantages and value clipping 0.2 (TRL's, verl's and OpenRLHF's defaults).
    "ppo": dict(_GRPO, advantage="gae", gamma=1.0, gae_lambda=0.95, policy_loss="clip",
                loss_aggregation="seq_mean_token_mean", beta=0.05, kl_estimator="k1",
                kl_in="reward", inner_steps=4, critic_weight=0.5, whiten_advantages=True,
                cliprange_value=0.2),
    # REINFORCE++ (Hu 2025): no critic; per-token k1 KL in the token rewards, the return-to-go
    # as the advantage, whitened over the batch; PPO's clipped token ratio, token-level mean.
    "reinforce_pp": dict(_GRPO, advantage="reinforce_pp", gamma=1.0, policy_loss="clip",
                         loss_aggregation="token_mean", beta=0.01, kl_estimator="k1",
                         kl_in="reward", whiten_advantages=True),
    # Expert iteration / rejection-sampling fine-tuning (STaR, Zelikman et al. 2022; RFT, Yuan
    # et al. 2023): keep the verified completions, SFT on them (token-mean NLL), no KL;
    # inner_steps = epochs over the kept set.
    "expert_iteration": dict(_GRPO, advantage="filter", policy_loss="nll",
                             loss_aggregation="token_mean", beta=0.0, keep_threshold=1.0),
    # On-policy distillation (GKD, Agarwal et al. 2024): the loss is the token-mean reverse KL
    # to `teacher` on the student's samples, nothing else (set teacher=...).
    "onpolicy_distill": dict(_GRPO, policy_loss="none", beta=0.0, distill_coef=1.0),
}


_DEFAULTS = {f.name: (f.default if f.default is not dataclasses.MISSING else f.default_factory())
             for f in dataclasses.fields(TrainConfig)}


def _resolve_overlong(cfg: dict) -> dict:
    """DAPO's preset says 'overlong shaping on' (-1); the band is a quarter of the limit, as in
    the paper (4k of 16k), once max_completion_length is known."""
    if cfg.get("overlong_buffer") == -1:
        cfg["overlong_buffer"] = max(1, cfg.get("max_completion_length", 256) // 4)
    return cfg


def _legacy_scale_rewards(value):
    """scale_rewards was a boolean before it had three values: true = 'group', false = 'none'
    (configs and saved runs written then still load)."""
    legacy = {"true": "group", "false": "none", "1": "group", "0": "none"}
    if isinstance(value, bool):
        return "group" if value else "none"
    return legacy.get(value.lower(), value) if isinstance(value, str) else value


def _legacy_bool_choice(value):
    """A field that was a boolean before it had an 'auto': true/false (any spelling) -> 'true'/'false'."""
    if isinstance(value, bool):
        return "true" if value else "false"
    spelled = {"true": "true", "1": "true", "yes": "true", "false": "false", "0": "false", "no": "false"}
    return spelled.get(value.lower(), value) if isinstance(value, str) else value


def _coerce(name: str, value, typ):
    """A value for field `name` (a command-line string, or already typed) -> the field's type."""
    return coerce(name, value, typ, optional=name in _OPTIONAL)


def _field_types() -> dict:
    """Each field's type, `X | None` read as X (such a field also takes the value `none`)."""
    hints = typing.get_type_hints(TrainConfig)
    return {f.name: _OPTIONAL.get(f.name, hints[f.name]) for f in dataclasses.fields(TrainConfig)}


def _optional_fields() -> dict:
    hints = typing.get_type_hints(TrainConfig)
    out = {}
    for name, hint in hints.items():
        args = typing.get_args(hint)
        if type(None) in args and len(args) == 2:
            out[name] = next(a for a in args if a is not type(None))
    return out


_OPTIONAL = _optional_fields()


def parse_overrides(pairs: list[str]) -> dict:
    """['lr=1e-5', 'env_kwargs={"n_terms": 2}'] -> typed values for TrainConfig fields."""
    types, out = _field_types(), {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"expected KEY=VALUE, got {pair!r}")
        if key in ("preset", "algorithm"):     # 'algorithm': the old name, mapped in load_config
            out[key] = value
        elif key not in types:
            raise ValueError(f"unknown config key {key!r}; known: {', '.join(types)}")
        else:
            out[key] = _coerce(key, value, types[key])
    return out


def load_config(path: str | Path | None = None, overrides: list[str] | dict | None = None) -> TrainConfig:
    """TOML file (`preset = "grpo"` plus any fields) + overrides -> a validated TrainConfig."""
    data: dict = {}
    if path is not None:
        data = tomllib.loads(Path(path).read_text())
    if isinstance(overrides, dict):
        data.update(overrides)
    else:
        data.update(parse_overrides(overrides or []))
    if "algorithm" in data:
        warnings.warn("the config key 'algorithm' is now 'preset'", DeprecationWarning, stacklevel=2)
        data.setdefault("preset", data.pop("algorithm"))
    preset = data.pop("preset", "grpo")
    types = _field_types()
    unknown = set(data) - set(types)
    if unknown:
        raise ValueError(f"unknown config keys {sorted(unknown)}; known: {', '.join(types)}")
    data = {k: _coerce(k, v, types[k]) for k, v in data.items()}
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; expected one of {sorted(PRESETS)}")
    return TrainConfig(**data, preset=preset)


def field_docs() -> list[tuple[str, str, object, str]]:
    """(name, type, default, docstring) of every field; the docstring under each field in the
    source is its documentation (`rlvr.usage.field_docs`, the one reader of them)."""
    docs, types = usage_field_docs(TrainConfig), _field_types()
    return [(name, types[name].__name__, default, docs.get(name, ""))
            for name, default in _DEFAULTS.items()]
