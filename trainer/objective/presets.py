"""Algorithm presets: each sets every knob its algorithm depends on together (Dr. GRPO is two
coordinated settings; forgetting one is how people half-configure it).

A knob a preset sets is declared `by_preset(default)` in its section (trainer/sections.py): the
config takes the preset's value for it unless the knob is given, and `default` when the preset
leaves it alone. `TrainConfig(preset="ppo", lr=...)`, a TOML file with `preset = "ppo"` and
`rlvr train preset=ppo` all start from the preset's knobs and override the fields given.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PRESETS", "ByPreset", "by_preset", "resolve_presets"]


@dataclass(frozen=True)
class ByPreset:
    """The default of a knob the preset sets: its value when the preset leaves it alone."""
    default: object

    def __str__(self) -> str:        # as `--help` shows the default
        return "set by the preset"


def by_preset(default):
    """A field default meaning "the preset's value, else `default`"."""
    return ByPreset(default)


def resolve_presets(cfg) -> None:
    """Give each knob left `by_preset` the chosen preset's value (else its own default), then
    DAPO's "overlong shaping on" (-1): a quarter of max_completion_length, as in the paper
    (4k of 16k)."""
    if cfg.preset not in PRESETS:
        raise ValueError(f"unknown preset {cfg.preset!r}; expected one of {sorted(PRESETS)}")
    chosen = PRESETS[cfg.preset]
    for name, value in vars(cfg).items():
        if isinstance(value, ByPreset):
            setattr(cfg, name, chosen.get(name, value.default))
    if cfg.overlong_buffer == -1:
        cfg.overlong_buffer = max(1, cfg.max_completion_length // 4)


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
