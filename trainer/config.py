"""The one training config. Field docstrings are the documentation (`rlvr train --help-config`).

`TrainConfig` is its sections at once (trainer/sections.py: the run, the model and precision,
sampling, the rollout engine and server, the algorithm, the KL, the critic, the optimizer, the
rewards, distillation, parallelism, evaluation, logging), so every field keeps its flat name:
`TrainConfig(lr=1e-5)`, `cfg.lr`, `lr=1e-5` and `--lr 1e-5` alike. Algorithms are presets
(trainer/objective/presets.py) that set every knob they depend on together; a knob the chosen estimator
ignores is warned about (refused with `strict = true`).
"""
from __future__ import annotations

import dataclasses
import typing
import warnings
from dataclasses import InitVar, dataclass
from pathlib import Path

from rlvr.usage import coerce
from rlvr.usage import field_docs as usage_field_docs

from rlvr.trainer.objective.algorithms import ADVANTAGES, LOSS_AGGREGATIONS, POLICY_LOSSES, TOKEN_ADVANTAGES
from rlvr.trainer.objective.control import check_control
from rlvr.trainer.objective.presets import PRESETS, ByPreset, resolve_presets
from rlvr.trainer.run.loader import ALIASES, read_toml, rename_aliases, unknown_key
from rlvr.trainer.sections import (SECTIONS, KL, Algorithm, Critic, Distillation, Engine, Evaluation, Logging,
                       Model, Monitoring, Optimizer, Parallel, Rewards, Run, Sampling)

__all__ = ["TrainConfig", "PRESETS", "SECTIONS", "load_config", "field_docs"]


# Bases in reverse: a dataclass lists its bases' fields last base first, so Run's come first.
@dataclass
class TrainConfig(Logging, Monitoring, Evaluation, Parallel, Distillation, Rewards, Optimizer,
                  Critic, KL, Algorithm, Engine, Sampling, Model, Run):
    """Every section's fields under their flat names (trainer/sections.py)."""

    algorithm: InitVar[str | None] = None
    """The preset's old name: `TrainConfig(algorithm="ppo")` still loads, with a warning."""
    env_kwargs: InitVar[dict | None] = None
    """env_args' old name: `TrainConfig(env_kwargs={...})` still loads, with a warning."""

    def __post_init__(self, algorithm: str | None = None, env_kwargs: dict | None = None):
        if env_kwargs is not None:
            warnings.warn("TrainConfig's env_kwargs is now env_args", DeprecationWarning,
                          stacklevel=3)
            self.env_args = {**env_kwargs, **self.env_args}
        if algorithm is not None:
            warnings.warn("the config field 'algorithm' is now 'preset' (it names the preset the "
                          "knobs start from); write preset = " + repr(algorithm),
                          DeprecationWarning, stacklevel=3)
            if self.preset == "grpo":
                self.preset = algorithm
        resolve_presets(self)
        self.scale_rewards = _legacy_scale_rewards(self.scale_rewards)
        self.share_prefix = _legacy_bool_choice(self.share_prefix)
        self.validate()
        ignored = self.ignored_knobs()
        if ignored:
            msg = (f"preset {self.preset!r} (advantage {self.advantage!r}, policy_loss "
                   f"{self.policy_loss!r}, beta {self.beta}) ignores {'; '.join(ignored)}")
            if self.strict:
                raise ValueError(msg + "; remove them or pick a preset that uses them")
            warnings.warn(msg, UserWarning, stacklevel=3)

    def section(self, name: str):
        """Section `name` (a key of SECTIONS) as its own dataclass, with this config's values."""
        cls = SECTIONS[name]
        return cls(**{f.name: getattr(self, f.name) for f in dataclasses.fields(cls)})

    def ignored_knobs(self) -> list[str]:
        """'name (why)' for each knob set away from its default that this config never reads
        (each section names its own: `unused_knobs`)."""
        unused = {}
        for cls in SECTIONS.values():
            if "unused_knobs" in vars(cls):
                unused.update(cls.unused_knobs(self))
        defaults = {**_DEFAULTS, **PRESETS.get(self.preset, {})}
        return [f"{k} ({why})" for k, why in unused.items()
                if why and _differs(getattr(self, k), defaults.get(k))]

    def validate(self) -> None:
        """Fail loud on impossible combinations, naming the fix."""
        if self.rollout_engine == "server":     # before any model loads
            from rlvr.trainer.sampling.server_engine import check_settings
            check_settings(self)
        if self.async_steps or self.partial_rollouts:
            from rlvr.trainer.sampling.pipeline import check_settings as check_pipeline
            check_pipeline(self)
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
        check_control(self)       # the spurious-reward control (trainer/objective/control.py)
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


def _old_env_kwargs(self) -> dict:
    warnings.warn("TrainConfig.env_kwargs is now env_args", DeprecationWarning, stacklevel=2)
    return self.env_args


# read access under the old name (set after the class is built: the InitVar of that name only
# exists in the constructor's signature)
TrainConfig.env_kwargs = property(_old_env_kwargs, doc="The old name of env_args.")


def _differs(value, default) -> bool:
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return list(value) != list(default)
    return value != default


def _default(f: dataclasses.Field):
    value = f.default if f.default is not dataclasses.MISSING else f.default_factory()
    return value.default if isinstance(value, ByPreset) else value


_DEFAULTS = {f.name: _default(f) for f in dataclasses.fields(TrainConfig)}
"""Each field's default (a preset's knob: its value when the preset leaves it alone)."""


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
    """['lr=1e-5', 'env_args={"n_terms": 2}'] -> typed values for TrainConfig fields."""
    types, out = _field_types(), {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"expected KEY=VALUE, got {pair!r}")
        if key in ("preset", "algorithm"):     # 'algorithm': the old name, mapped in load_config
            out[key] = value
        elif ALIASES.get(key) in types:     # an old name, renamed (with a warning) by load_config
            out[key] = value
        elif key not in types:
            raise ValueError(unknown_key(key, types, "`rlvr train --help-config`"))
        else:
            out[key] = _coerce(key, value, types[key])
    return out


def load_config(path: str | Path | None = None, overrides: list[str] | dict | None = None) -> TrainConfig:
    """TOML file (`preset = "grpo"` plus any fields) + overrides -> a validated TrainConfig."""
    types = _field_types()      # each layer's old names renamed, so a later layer's win
    data = rename_aliases(read_toml(path), types) if path is not None else {}
    data.update(rename_aliases(overrides if isinstance(overrides, dict)
                               else parse_overrides(overrides or []), types))
    if "algorithm" in data:
        warnings.warn("the config key 'algorithm' is now 'preset'", DeprecationWarning, stacklevel=2)
        data.setdefault("preset", data.pop("algorithm"))
    preset = data.pop("preset", "grpo")
    unknown = sorted(set(data) - set(types))
    if unknown:
        raise ValueError(unknown_key(unknown[0], types, "`rlvr train --help-config`"))
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
