"""Policy, reference and critic models, and the batched log-prob / value forward passes.

Sequences are packed per micro-batch as [left-padded prompt | right-padded completion], so every
completion starts at the same column: one `logits_to_keep` slice returns exactly the logits that
predict completion tokens, and no logits are computed for prompt positions (with a 49k
vocabulary, prompt logits would be most of the forward pass's memory).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["load_policy", "load_tokenizer", "ValueModel", "MicroBatch", "pack",
           "completion_logprobs", "completion_values"]

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

    def forward(self, input_ids, attention_mask, position_ids=None):
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask,
                               position_ids=position_ids).last_hidden_state
        return self.value_head(hidden).squeeze(-1).float()


@dataclass
class MicroBatch:
    """Packed tensors for a set of sequences (`rows` index the rollout)."""
    rows: list[int]
    input_ids: torch.Tensor        # [m, P + C]
    attention_mask: torch.Tensor   # [m, P + C]
    position_ids: torch.Tensor     # [m, P + C]
    targets: torch.Tensor          # [m, C] completion token ids
    mask: torch.Tensor             # [m, C] bool, real completion tokens

    @property
    def prompt_len(self) -> int:
        return self.input_ids.size(1) - self.targets.size(1)


def pack(rows: list[int], prompts: list[list[int]], completions: list[list[int]], pad_id: int,
         device) -> MicroBatch:
    """Left-pad prompts and right-pad completions so completions share their start column."""
    P = max(len(prompts[r]) for r in rows)
    C = max(max(len(completions[r]) for r in rows), 1)
    m = len(rows)
    ids = torch.full((m, P + C), pad_id, dtype=torch.long)
    attn = torch.zeros((m, P + C), dtype=torch.long)
    for i, r in enumerate(rows):
        p, c = prompts[r], completions[r]
        ids[i, P - len(p):P] = torch.tensor(p, dtype=torch.long)
        ids[i, P:P + len(c)] = torch.tensor(c, dtype=torch.long)
        attn[i, P - len(p):P + len(c)] = 1
    positions = (attn.cumsum(-1) - 1).clamp_min(0)
    mask = attn[:, P:].bool()
    return MicroBatch(rows, ids.to(device), attn.to(device), positions.to(device),
                      ids[:, P:].to(device), mask.to(device))


def completion_logprobs(model, mb: MicroBatch, temperature: float = 1.0,
                        with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log pi(y_t | x, y_<t) for every completion token [m, C] (and the entropy of pi there).

    Logits are divided by the sampling temperature: the policy being optimised is the
    distribution the completions were drawn from (as TRL does).
    """
    C = mb.targets.size(1)
    logits = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask,
                   position_ids=mb.position_ids, logits_to_keep=C + 1).logits[:, :-1]
    logits = logits.float()
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
    """V(s_t) for the state before each completion token [m, C]: the value read at the position
    that predicts token t (the same alignment as the log-probs)."""
    values = critic(mb.input_ids, mb.attention_mask, mb.position_ids)
    P, C = mb.prompt_len, mb.targets.size(1)
    return values[:, P - 1:P - 1 + C]
