"""Policy, reference and critic models, and the batched log-prob / value forward passes.

A micro-batch holds whole groups. Each group's prompt goes through the model once and its KV
cache is repeated over the group's G completions (the prompt is usually longer than the
completion, so this removes most of the forward/backward cost); logits are computed only at
positions that predict completion tokens (with a 49k vocabulary, prompt logits would be most of
the memory), and log-probs are `gather - logsumexp`, never a second vocabulary-sized tensor.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["load_policy", "load_tokenizer", "ValueModel", "MicroBatch", "pack",
           "completion_logprobs", "completion_values", "frozen_copy"]

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def load_tokenizer(name: str):
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(name)
    if tok.pad_token_id is None:
        # Padding positions are masked everywhere; any id works, EOS is always present.
        tok.pad_token = tok.eos_token
    return tok


def load_policy(name: str, dtype: str, device: torch.device):
    """Any AutoModelForCausalLM from a local folder or a hub id, in eval mode (no dropout: the
    log-probs of pi_old and pi must come from the same deterministic function)."""
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(name, dtype=_DTYPES[dtype])
    return model.to(device).eval()


def frozen_copy(model: nn.Module) -> nn.Module:
    """The reference policy: the model as it was before RL started, never trained."""
    ref = copy.deepcopy(model).eval()
    ref.requires_grad_(False)
    return ref


class ValueModel(nn.Module):
    """PPO's critic: the policy's transformer body with a scalar value head per position.

    Built from the same checkpoint as the policy (seed note: "a copy of the policy with its LM
    head swapped for a value head") and trained on its own MSE objective from then on. The head
    starts at zero so the first advantages are plain returns instead of noise.
    """

    def __init__(self, name: str, dtype: str = "float32"):
        super().__init__()
        from transformers import AutoModel
        self.backbone = AutoModel.from_pretrained(name, dtype=_DTYPES[dtype])
        self.value_head = nn.Linear(self.backbone.config.hidden_size, 1, dtype=_DTYPES[dtype])
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)



@dataclass
class MicroBatch:
    """Packed tensors for whole groups of completions that share one prompt each.

    Completions are right-padded in [m, C]; the g distinct prompts are left-padded in [g, P],
    and row i of the completions continues prompt i // repeats. With `share_prefix`, each prompt
    is run once and its KV cache repeated over its group (exact: the same attention inputs,
    G times fewer prompt tokens through the model, gradients flow through the shared prefix);
    otherwise each row is the full [prompt | completion] sequence.
    """
    rows: list[int]                # rollout rows, in this micro-batch's order
    prompt_ids: torch.Tensor       # [g, P]
    prompt_mask: torch.Tensor      # [g, P]
    targets: torch.Tensor          # [m, C] completion token ids
    mask: torch.Tensor             # [m, C] bool, real completion tokens
    repeats: int                   # completions per prompt in this micro-batch
    share_prefix: bool = True


def pack(groups: list[list[int]], prompts: list[list[int]], completions: list[list[int]],
         pad_id: int, device, share_prefix: bool = True) -> MicroBatch:
    """Groups (lists of rollout rows with the same prompt and equal size) -> one MicroBatch."""
    rows = [r for grp in groups for r in grp]
    heads = [prompts[grp[0]] for grp in groups]
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
                      mask.to(device), len(groups[0]), share_prefix)


def cache_kwarg(model) -> str:
    """The forward argument that takes a KV cache: `cache` in newer transformers,
    `past_key_values` before."""
    import inspect
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def returned_cache(out):
    """The KV cache a forward returned, checked to be one whose rows can be repeated/selected."""
    found = getattr(out, "cache", None)
    cache = found if found is not None else getattr(out, "past_key_values", None)
    if not (hasattr(cache, "batch_repeat_interleave") and hasattr(cache, "batch_select_indices")):
        raise ValueError(f"this model's KV cache ({type(cache).__name__}) cannot be repeated "
                         "over a group; set share_prefix = false")
    return cache


def _hidden_or_logits(model, mb: MicroBatch, logits: bool) -> torch.Tensor:
    """Outputs at the positions that predict each completion token: [m, C, V] logits from a
    causal LM, or [m, C, H] last hidden states from a bare backbone (the critic)."""
    G, C = mb.repeats, mb.targets.size(1)
    pick = (lambda o: o.logits) if logits else (lambda o: o.last_hidden_state)
    keep = {"logits_to_keep": 1} if logits else {}
    if not mb.share_prefix:
        ids = torch.cat([mb.prompt_ids.repeat_interleave(G, 0), mb.targets], 1)
        attn = torch.cat([mb.prompt_mask.repeat_interleave(G, 0), mb.mask.long()], 1)
        pos = (attn.cumsum(-1) - 1).clamp_min(0)
        keep = {"logits_to_keep": C + 1} if logits else {}
        out = pick(model(input_ids=ids, attention_mask=attn, position_ids=pos, **keep))
        return out[:, -(C + 1):-1]
    # The prompt once per group; its last position predicts the first completion token.
    pos = (mb.prompt_mask.cumsum(-1) - 1).clamp_min(0)
    out = model(input_ids=mb.prompt_ids, attention_mask=mb.prompt_mask, position_ids=pos,
                use_cache=True, **keep)
    first = pick(out)[:, -1:].repeat_interleave(G, 0)
    if C == 1:
        return first
    cache = returned_cache(out)
    cache.batch_repeat_interleave(G)
    pmask = mb.prompt_mask.repeat_interleave(G, 0)
    attn = torch.cat([pmask, mb.mask[:, :-1].long()], 1)
    cpos = pmask.sum(-1, keepdim=True) + torch.arange(C - 1, device=pmask.device)[None, :]
    rest = model(input_ids=mb.targets[:, :-1], attention_mask=attn, position_ids=cpos,
                 use_cache=True, **{cache_kwarg(model): cache},
                 **({"logits_to_keep": C - 1} if logits else {}))
    return torch.cat([first, pick(rest)], 1)


def completion_logprobs(model, mb: MicroBatch, temperature: float = 1.0,
                        with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log pi(y_t | x, y_<t) for every completion token [m, C] (and the entropy of pi there).

    Logits are divided by the sampling temperature: the policy being optimised is the
    distribution the completions were drawn from (as TRL does).
    """
    logits = _hidden_or_logits(model, mb, logits=True).float()
    if temperature != 1.0:
        logits = logits / temperature
    # gather - logsumexp instead of log_softmax: never materialises a second [m, C, V] tensor.
    logp = logits.gather(-1, mb.targets.unsqueeze(-1)).squeeze(-1) - logits.logsumexp(-1)
    entropy = None
    if with_entropy:
        from .algorithms import entropy_from_logits
        with torch.no_grad():
            entropy = entropy_from_logits(logits)
    return logp, entropy


def completion_values(critic: ValueModel, mb: MicroBatch) -> torch.Tensor:
    """V(s_t) for the state before each completion token [m, C]: read at the position that
    predicts token t (the same alignment as the log-probs)."""
    hidden = _hidden_or_logits(critic.backbone, mb, logits=False)
    return critic.value_head(hidden).squeeze(-1).float()
