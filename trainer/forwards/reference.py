"""The reference forward: log-probs by their definition, one plain model call per micro-batch.

    logits = model([prompt | completion])                  # every position, the whole vocabulary
    log pi(y_t | x, y_<t) = log_softmax(logits_{t-1} / T)[y_t]

Nothing but transformers' public forward (input ids, attention mask, position ids). Every
fast path (trainer/forwards/fast.py) is tested equal to this one on the same batch. Select it with
`forward = "reference"`: to read the update without the speed machinery, to check a new model
family, or when the fast path's transformers internals have moved (trainer/forwards/hf_adapter.py).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from rlvr.trainer.objective.algorithms import reverse_kl
from rlvr.trainer.models.loading import enable_checkpointing
from rlvr.trainer.sampling.rollout import left_pad

__all__ = ["Sequences", "ReferenceForward"]


@dataclass
class Sequences:
    """Rows of [prompt | completion], prompts left-padded to P tokens and completions
    right-padded to C, so completion token t of every row sits at column P + t."""
    rows: list[int]                # rollout rows, in this micro-batch's order
    input_ids: torch.Tensor        # [m, P + C]
    attention_mask: torch.Tensor   # [m, P + C]
    prompt_len: int                # P
    targets: torch.Tensor          # [m, C] completion token ids
    mask: torch.Tensor             # [m, C] bool, real completion tokens
    silent: bool = False           # never: the reference forward computes every row

    @classmethod
    def of(cls, rows: list[int], prompts: list[list[int]], completions: list[list[int]],
           pad_id: int, device) -> "Sequences":
        prompt_ids, prompt_mask = left_pad([prompts[r] for r in rows], pad_id, "cpu")
        C = max(max(len(completions[r]) for r in rows), 1)
        targets = torch.full((len(rows), C), pad_id, dtype=torch.long)
        for i, r in enumerate(rows):
            targets[i, :len(completions[r])] = torch.tensor(completions[r], dtype=torch.long)
        mask = torch.arange(C)[None, :] < torch.tensor([len(completions[r]) for r in rows])[:, None]
        return cls(rows, torch.cat([prompt_ids, targets], 1).to(device),
                   torch.cat([prompt_mask, mask.long()], 1).to(device), prompt_ids.size(1),
                   targets.to(device), mask.to(device))

    @property
    def position_ids(self) -> torch.Tensor:
        """Positions count real tokens from the first one (left padding takes none)."""
        return (self.attention_mask.cumsum(-1) - 1).clamp_min(0)


class ReferenceForward:
    """The update's forward (the `Forward` protocol, trainer/forwards/protocol.py), plainly."""

    name = "reference"

    def __init__(self, pad_id: int, device):
        self.pad_id, self.device = pad_id, device

    def micro_batches(self, rollout, size: int, advantages: torch.Tensor | None = None):
        """Rows in order, `size` at a time (`advantages` are for forwards that skip work)."""
        return [Sequences.of(list(range(i, min(i + size, len(rollout)))), rollout.prompt_ids,
                             rollout.completion_ids, self.pad_id, self.device)
                for i in range(0, len(rollout), size)]

    def logprobs(self, model, mb: Sequences, temperature: float = 1.0,
                 with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """log pi(y_t | x, y_<t) [m, C] with the logits divided by the sampling temperature
        (the policy optimised is the distribution the completions were drawn from), and the
        entropy of that distribution at each position (differentiable: the entropy bonus)."""
        return _at_targets(self.vocab_logprobs(model, mb, temperature), mb, with_entropy)

    def vocab_logprobs(self, model, mb: Sequences, temperature: float = 1.0) -> torch.Tensor:
        """log softmax(logits / T) over the whole vocabulary at every position that predicts a
        completion token [m, C, V] (the distribution token t was drawn from)."""
        logits = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask,
                       position_ids=mb.position_ids, use_cache=False).logits
        P, C = mb.prompt_len, mb.targets.size(1)
        return torch.log_softmax(logits[:, P - 1:P - 1 + C].float() / temperature, dim=-1)

    def logprobs_and_kl(self, model, mb: Sequences, teacher_logp: torch.Tensor,
                        temperature: float = 1.0, with_entropy: bool = False):
        """`logprobs` and, from the same forward, the reverse KL to the teacher's log-probs
        `teacher_logp` [m, C, V] (`vocab_logprobs` of the teacher) at each position [m, C]."""
        logp_all = self.vocab_logprobs(model, mb, temperature)
        logp, entropy = _at_targets(logp_all, mb, with_entropy)
        return logp, reverse_kl(logp_all, teacher_logp), entropy

    def values(self, critic, mb: Sequences) -> torch.Tensor:
        """V(s_t) [m, C]: the critic's value of the state before completion token t."""
        hidden = critic.backbone(input_ids=mb.input_ids, attention_mask=mb.attention_mask,
                                 position_ids=mb.position_ids, use_cache=False).last_hidden_state
        P, C = mb.prompt_len, mb.targets.size(1)
        return critic.value_head(hidden[:, P - 1:P - 1 + C]).squeeze(-1).float()

    def pass_over(self, micro: list[Sequences]):
        """A pass over the micro-batches: nothing is shared between them."""
        return contextlib.nullcontext()

    def checkpoint_layers(self, model) -> None:
        """Activation checkpointing through public API only: no cache reaches the layers here
        (every call above passes use_cache=False), so a replayed layer has none to disturb."""
        enable_checkpointing(model, replay_cache=False)


def _at_targets(logp_all: torch.Tensor, mb: Sequences, with_entropy: bool):
    """Full-vocabulary log-probs [m, C, V] -> those of the sampled tokens [m, C] and, if asked,
    the entropy H = -sum_v p_v log p_v at each position (with its graph)."""
    logp = logp_all.gather(-1, mb.targets.unsqueeze(-1)).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1) if with_entropy else None
    return logp, entropy
