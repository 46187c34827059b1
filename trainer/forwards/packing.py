"""Completions packed back to back for the loss-side forwards, and the pieces those return.

A group's completions differ in length, and in a padded [m, C] micro-batch every padding
position costs a full forward and backward (30% of the positions in the learning benchmark's
batches of 64 completions of <= 64 tokens). Packed, a prompt's completions share rows that
continue its KV cache, under a block-diagonal causal mask: the packing of Krell et al., 2021
("Efficient Sequence Packing without Cross-contamination"), here on top of a prompt cache.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from rlvr.trainer.forwards.hf_adapter import attention_implementation

__all__ = ["Piece", "Packing", "packs", "mask_dtype"]


@dataclass
class Piece:
    """Model outputs at positions that predict completion tokens: `out` [r, n, X] (logits or
    hidden states), the token each position predicts `targets` [r, n], and `where`: None when
    the rows are the micro-batch's rows and the positions its columns, else, for packed rows,
    [m, k] indices into the flattened [r * n] positions (r * n: a padding position, read as 0)."""
    out: torch.Tensor
    targets: torch.Tensor
    where: torch.Tensor | None = None

    def place(self, x: torch.Tensor | None) -> torch.Tensor | None:
        """Per-position values [r, n] -> the micro-batch's layout [m, k]."""
        if x is None or self.where is None:
            return x
        return torch.cat([x.reshape(-1), x.new_zeros(1)])[self.where]


def packs(model) -> bool:
    """Whether the model's attention takes the custom 4D mask packing needs (transformers'
    eager and SDPA attention do; FlashAttention and flex attention do not)."""
    return attention_implementation(model) in ("sdpa", "eager")


def mask_dtype(model):
    """bool for SDPA; eager attention adds the mask to the scores, so a float one for it."""
    return torch.bool if attention_implementation(model) == "sdpa" else torch.float32


@dataclass
class Packing:
    """A micro-batch's completions packed back to back, no padding between them.

    The completions of one prompt share rows (first-fit decreasing), each row continuing the
    prompt's KV cache; a block-diagonal causal mask keeps each completion attending to its
    prompt and its own earlier tokens, and positions restart after the prompt: the same
    attention inputs as the padded layout. Rows hold at most C - 1 positions, the padded
    layout's, so no row's attention grows (it is quadratic in the row's length); on the
    learning benchmark's batches 91% of the packed positions are real tokens.
    """
    prompt: torch.Tensor       # [r] the prompt each packed row continues
    prompt_mask: torch.Tensor  # [r, S] bool, that prompt's real tokens (shared prefix included)
    ids: torch.Tensor          # [r, T] input tokens (each completion but its last token)
    targets: torch.Tensor      # [r, T] the token each position predicts
    segment: torch.Tensor      # [r, T] which completion a position belongs to (-1: padding)
    offset: torch.Tensor       # [r, T] position within its completion
    where: torch.Tensor        # [m, C - 1] flat index of (row, position), r * T for none

    @property
    def positions(self) -> torch.Tensor:
        """Position ids [r, T]: a completion's first input token comes right after its prompt."""
        return self.prompt_mask.sum(-1, keepdim=True) + self.offset

    @classmethod
    def of(cls, mb, pmask: torch.Tensor) -> "Packing | None":
        """Packed rows for a MicroBatch `mb` whose prompts have the attention mask `pmask`
        [g, S] (shared prefix included), or None when packing would not remove any padding."""
        m, C = mb.targets.shape
        n = (mb.mask.sum(-1) - 1).clamp_min(0).tolist()     # inputs per completion
        T = max(max(n), 1)
        bins = _first_fit(n, mb.repeats, T)
        if len(bins) >= m:
            return None
        dev, r = mb.targets.device, len(bins)
        row_of, start = [0] * m, [0] * m
        for b, (_, members) in enumerate(bins):
            at = 0
            for i in members:
                row_of[i], start[i], at = b, at, at + n[i]
        t = torch.arange(C - 1, device=dev)
        real = t[None, :] < torch.tensor(n, device=dev)[:, None]
        flat = (torch.tensor(row_of, device=dev)[:, None] * T
                + torch.tensor(start, device=dev)[:, None] + t[None, :])
        where = torch.where(real, flat, r * T)
        slots = where[real]

        def scatter(values, fill):
            out = torch.full((r * T + 1,), fill, dtype=values.dtype, device=dev)
            out[slots] = values[real]
            return out[:-1].view(r, T)
        segment = scatter(torch.arange(m, device=dev)[:, None].expand(m, C - 1), -1)
        prompt = torch.tensor([p for p, _ in bins], device=dev)
        return cls(prompt, pmask[prompt].bool(), scatter(mb.targets[:, :-1], 0),
                   scatter(mb.targets[:, 1:], 0), segment, scatter(t[None, :].expand(m, C - 1), 0),
                   where)

    def attention(self, dtype) -> torch.Tensor:
        """[r, 1, T, S + T] mask: a position sees its prompt's real tokens and its own
        completion up to itself (padding positions see the prompt and earlier padding)."""
        T = self.ids.size(1)
        causal = torch.ones(T, T, dtype=torch.bool, device=self.ids.device).tril()
        own = (self.segment[:, :, None] == self.segment[:, None, :]) & causal
        mask = torch.cat([self.prompt_mask[:, None, :].expand(-1, T, -1), own], -1)[:, None]
        if dtype == torch.bool:
            return mask
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(
            ~mask, torch.finfo(dtype).min)


def _first_fit(n: list[int], repeats: int, capacity: int) -> list[tuple[int, list[int]]]:
    """Rows of completions, longest first, each into the first row of its prompt with room:
    -> [(prompt index, [completion rows])]."""
    bins: list[tuple[int, list[int], list[int]]] = []     # (prompt, members, [used])
    for i in sorted(range(len(n)), key=lambda i: -n[i]):
        p = i // repeats
        for prompt, members, used in bins:
            if prompt == p and used[0] + n[i] <= capacity:
                members.append(i)
                used[0] += n[i]
                break
        else:
            bins.append((p, [i], [n[i]]))
    bins.sort(key=lambda b: (b[0], min(b[1])))
    return [(prompt, members) for prompt, members, _ in bins]
