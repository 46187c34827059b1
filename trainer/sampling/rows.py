"""The rows a sampler decodes: their KV cache, attention mask and next positions, stepped one
token at a time, in one of two layouts behind the same four calls (`step`, `select`, `join`,
`reload`).

`PackedRows`: the packed decode step over a `GroupedCache` (each prompt's keys and values once
for its group of rows; trainer/forwards/decode.py), where it applies. `ForwardRows`: the
model's own forward over its own cache, one copy of the prompt per row (any model). Both
compute the same function; `tests/test_decode.py` holds them equal.
"""
from __future__ import annotations

import torch

from rlvr.trainer.forwards.decode import PackedDecoder
from rlvr.trainer.forwards.grouped_cache import GroupedCache
from rlvr.trainer.forwards.hf_adapter import (cache_kwarg, join_rows, preallocate, repeat_rows,
                                              select_rows)

__all__ = ["ForwardRows", "PackedRows", "start_rows"]


def start_rows(model, cache, attn: torch.Tensor, G: int, room: int, packed: bool = True):
    """G rows per prompt of a prefill (`cache`, mask `attn` [P, L]), each with room for `room`
    tokens: `PackedRows` when `packed` and the packed decoder applies, else `ForwardRows`."""
    decoder = PackedDecoder.build(model) if packed else None
    if decoder is None:
        return ForwardRows(model, cache, attn, G, room)
    return PackedRows(model, decoder, cache, attn, G, room)


class ForwardRows:
    """The model's cache with the prompt repeated per row, stepped by the model's forward."""

    def __init__(self, model, cache, attn: torch.Tensor, G: int, room: int):
        repeat_rows(cache, G)
        preallocate(cache, room)     # each step writes one column instead of copying the cache
        self.model, self.cache, self.kw = model, cache, cache_kwarg(model)
        self.attn = attn.repeat_interleave(G, 0)
        self.pos = self.attn.sum(-1)

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """One token per row ([B]) in: each row's next-token logits [B, V] out."""
        self.attn = torch.cat([self.attn, torch.ones_like(self.attn[:, :1])], 1)
        logits = self.model(input_ids=tokens[:, None], attention_mask=self.attn,
                            position_ids=self.pos[:, None], use_cache=True,
                            **{self.kw: self.cache}).logits[:, -1]
        self.pos = self.pos + 1
        return logits

    def select(self, keep: torch.Tensor) -> None:
        """Keep rows `keep`, in that order."""
        select_rows(self.cache, keep)
        self.attn, self.pos = self.attn[keep], self.pos[keep]

    def join(self, keep: torch.Tensor, cache, attn: torch.Tensor, G: int, room: int) -> None:
        """Rows `keep`, then G rows per prompt of another prefill, right-aligned (padding
        masked), with room for `room` more tokens."""
        repeat_rows(cache, G)
        attn = attn.repeat_interleave(G, 0)
        old = self.attn[keep]
        trim = int(old.any(0).long().argmax())       # columns masked for every kept row
        old = old[:, trim:]
        join_rows(self.cache, keep, trim, cache, room)
        width = max(old.size(1), attn.size(1))
        pad = lambda m: torch.cat([m.new_zeros(m.size(0), width - m.size(1)), m], 1)
        self.attn = torch.cat([pad(old), pad(attn)])
        self.pos = torch.cat([self.pos[keep], attn.sum(-1)])

    def reload(self) -> None:
        """The weights changed in place: the forward reads them as they are."""


class PackedRows:
    """A `GroupedCache` stepped by the packed decoder."""

    def __init__(self, model, decoder: PackedDecoder, cache, attn: torch.Tensor, G: int,
                 room: int):
        self.model, self.decoder = model, decoder
        self.cache = GroupedCache(cache, attn, G, room)
        self.pos = attn.sum(-1).repeat_interleave(G)

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        logits = self.decoder(tokens, self.pos, self.cache)
        self.pos = self.pos + 1
        return logits

    def select(self, keep: torch.Tensor) -> None:
        self.cache.select(keep)
        self.pos = self.pos[keep]

    def join(self, keep: torch.Tensor, cache, attn: torch.Tensor, G: int, room: int) -> None:
        self.cache.join(keep, cache, attn, G, room)
        self.pos = torch.cat([self.pos[keep], attn.sum(-1).repeat_interleave(G)])

    def reload(self) -> None:
        """The weights changed in place: pack them again."""
        self.decoder = PackedDecoder(self.model)
