"""The supervised fine-tuning config. Field docstrings are the documentation
(`rlvr sft --help-config`, `rlvr sft --help`)."""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from pathlib import Path

from rlvr.usage import coerce

from rlvr.trainer.run.loader import load_fields, unknown_key
from rlvr.usage import field_docs as usage_field_docs

__all__ = ["SFTConfig", "load_sft_config", "parse_sft_overrides", "sft_field_docs",
           "SCHEDULES"]

SCHEDULES = ("constant", "linear", "cosine")


@dataclass
class SFTConfig:
    # --- what to train on what --------------------------------------------------------------
    model: str = "smollm2"
    """Student: any AutoModelForCausalLM, as a local folder, a hub id, an rlvr run directory
    (its latest policy) or 'smollm2' (the packaged SmolLM2-135M-Instruct, no hub needed)."""
    tokenizer: str = ""
    """Tokenizer folder or hub id; empty means the model's own. Prompts are rendered with its
    chat template exactly as `rlvr train` and `rlvr eval` render them, so give the same one
    (e.g. a think-opening template) the student will be sampled with."""
    data: str = ""
    """Training rows: a JSONL file, a Parquet file, a folder saved by `datasets`, or a hub
    dataset id. Rows in TRL's formats: prompt + completion, messages, or text (docs/sft.md)."""
    split: str = "train"
    """Split to read from a `datasets` folder or hub dataset."""
    eval_data: str = ""
    """Held-out rows (same formats) whose loss is measured every eval_every steps; empty:
    `eval_fraction` of `data` is held out, or nothing when that is 0."""
    eval_fraction: float = 0.0
    """Share of `data` held out for the held-out loss when eval_data is empty."""
    output_dir: str = "runs/sft"
    """Run folder: config.json, metrics.jsonl, eval.jsonl, tensorboard/, checkpoints/."""
    seed: int = 0
    """Seeds the data order, the held-out split and LoRA's initialisation."""
    device: str = "auto"
    """'auto' (cuda if available), 'cpu' or 'cuda'."""
    dtype: str = "float32"
    """Compute dtype: float32, or bfloat16 = mixed precision (float32 master weights and AdamW
    states, forward passes under bf16 autocast on CPU and CUDA)."""
    # --- how long, how fast -------------------------------------------------------------------
    steps: int = 0
    """Optimizer steps; 0 = as many as `epochs` passes over the training rows take."""
    epochs: float = 1.0
    """Passes over the training rows when steps = 0 (fractions allowed)."""
    batch_size: int = 8
    """Examples per forward/backward (a micro-batch)."""
    grad_accumulation: int = 1
    """Micro-batches per optimizer step: a step trains on batch_size x grad_accumulation
    examples, and its loss is the mean over all their completion tokens."""
    max_length: int = 1024
    """Longest example in tokens (prompt + completion); longer ones are cut at the end
    (counted and warned about: a cut completion loses its EOS)."""
    packing: bool = False
    """Lay each micro-batch's examples back to back in rows of at most max_length tokens,
    each attending only to itself (block-diagonal mask, positions restarting): no padding
    computed, the same loss and gradient as the padded layout."""
    lr: float = 2e-5
    """AdamW learning rate."""
    lr_schedule: str = "constant"
    """After the warm-up: 'constant', 'linear' (decay to 0 at the last step) or 'cosine'."""
    warmup_steps: int = 0
    """Linear learning-rate warm-up (optimizer steps)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    adam_betas: tuple = (0.9, 0.999)
    """AdamW betas."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip (0 = none)."""
    gradient_checkpointing: bool = True
    """Recompute each decoder layer's activations in the backward pass instead of keeping them:
    on by default (as in TRL's SFTTrainer), since the kept activations are most of a step's
    memory (SmolLM2-135M, batch 8 packed into rows of 256: peak RSS 5.07 -> 3.28 GiB); false
    saves the extra forward per layer."""
    # --- LoRA (peft) -------------------------------------------------------------------------
    lora_rank: int = 0
    """LoRA adapter rank; 0 = full fine-tuning. With LoRA checkpoints hold only the adapters
    (`rlvr export RUN --merge` folds them into the model)."""
    lora_alpha: float = 32.0
    """LoRA scaling numerator (the update is scaled by alpha / rank)."""
    lora_dropout: float = 0.0
    """Dropout on the adapters' inputs during training."""
    lora_target_modules: tuple = ("all-linear",)
    """Modules that get adapters: ('all-linear',) = every linear layer but the output head, or
    names such as ('q_proj', 'v_proj')."""
    # --- logging, evaluation, checkpoints ---------------------------------------------------
    checkpoint_every: int = 100
    """Save a checkpoint every N steps (and at the end); 0 = only at the end."""
    eval_every: int = 0
    """Measure the held-out loss every N steps (and at the end; step 0 is the model before
    training); 0 = only at the end when there are held-out rows."""
    tensorboard: bool = True
    """Write TensorBoard event files under output_dir/tensorboard."""
    report_to: tuple = ("tensorboard",)
    """Where step metrics go besides metrics.jsonl: "tensorboard" (also needs tensorboard =
    true) and/or "wandb" (Weights & Biases; `pip install 'rlvr[wandb]'`)."""
    progress: bool = True
    """Show a progress bar."""

    def __post_init__(self):
        self.adam_betas, self.lora_target_modules = tuple(self.adam_betas), \
            tuple(self.lora_target_modules)
        self.report_to = tuple(self.report_to) if not isinstance(self.report_to, str) \
            else self.report_to
        self.validate()

    def validate(self) -> None:
        """Fail loud on impossible values, naming the fix."""
        choices = {"dtype": ("float32", "bfloat16"), "device": ("auto", "cpu", "cuda"),
                   "lr_schedule": SCHEDULES}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name}={getattr(self, name)!r}; expected one of {list(allowed)}")
        if isinstance(self.report_to, str) or set(self.report_to) - {"tensorboard", "wandb"}:
            raise ValueError(f"report_to={self.report_to!r}; expected a list of "
                             "'tensorboard' and/or 'wandb'")
        for name in ("batch_size", "grad_accumulation", "max_length"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("steps", "warmup_steps", "checkpoint_every", "eval_every", "lora_rank"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.steps == 0 and not self.epochs > 0:
            raise ValueError("set steps >= 1 or epochs > 0")
        if not 0 <= self.eval_fraction < 1:
            raise ValueError(f"eval_fraction must be in [0, 1), got {self.eval_fraction}")
        if not 0 <= self.lora_dropout < 1:
            raise ValueError(f"lora_dropout must be in [0, 1), got {self.lora_dropout}")

    @property
    def examples_per_step(self) -> int:
        return self.batch_size * self.grad_accumulation

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _field_types() -> dict:
    hints = typing.get_type_hints(SFTConfig)
    return {f.name: hints[f.name] for f in dataclasses.fields(SFTConfig)}


def parse_sft_overrides(pairs: list[str]) -> dict:
    """['lr=1e-5', 'packing=true'] -> typed values for SFTConfig fields."""
    types, out = _field_types(), {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"expected KEY=VALUE, got {pair!r}")
        if key not in types:
            raise ValueError(unknown_key(key, types, "`rlvr sft --help-config`"))
        out[key] = coerce(key, value, types[key])
    return out


def load_sft_config(path: str | Path | None = None,
                    overrides: list[str] | dict | None = None) -> SFTConfig:
    """TOML file (any fields) + overrides (KEY=VALUE strings or a dict) -> a checked SFTConfig
    (the run harness's loader: trainer/run/loader.py)."""
    return SFTConfig(**load_fields(SFTConfig, path, overrides,
                                   help_hint="`rlvr sft --help-config`"))


def sft_field_docs() -> list[tuple[str, str, object, str]]:
    """(name, type, default, docstring) of every field."""
    docs, types = usage_field_docs(SFTConfig), _field_types()
    defaults = {f.name: f.default for f in dataclasses.fields(SFTConfig)}
    return [(name, getattr(types[name], "__name__", str(types[name])), defaults[name],
             docs.get(name, "")) for name in types]
