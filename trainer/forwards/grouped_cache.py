"""The packed decoder's KV cache: a prompt's keys and values once for all of its rows.

The G completions of a prompt share its keys and values. A cache with one copy per row (the
layout the model's forward reads) repeats the prompt's part G times, reads it G times at every
decode step and copies it whenever rows finish. Here each prompt's part is kept once and each
row holds only its own completion's keys and values; attention scores a group's rows against
their prompt in one product (the queries of a group's rows stacked as one matrix) and against
their own tokens row by row, under one softmax over both parts: the same attention over the
same keys, summed in another order ("cascade" or shared-prefix attention: Juravsky et al.
2024, "Hydragen"; Ye et al. 2024, "Cascade Inference"). It saves most at many rows per
prompt, where the prompt's part was most of what attention read (`rlvr eval`'s n samples).

Keys and values are kept, and attention summed, in float32 whatever the model's dtype: for a
bfloat16 model that is what PyTorch's CPU attention kernels do inside (they accumulate in
float32 and round the output to bfloat16, as `attend` does), and it measured faster than
products in bfloat16 at these small shapes.
"""
from __future__ import annotations

import torch

from rlvr.trainer.forwards.hf_adapter import layer_keys_values

__all__ = ["GroupedCache"]


class GroupedCache:
    """Keys and values of B rows in P prompt groups, per layer: `prompt_k`/`prompt_v`
    [P, kv, Lp, d] (left-padded, `prompt_bias` [P, Lp] is -inf on padding) and `row_k`/`row_v`
    [B, kv, room, d], all float32, the rows' own tokens at columns below `fill` (`row_bias`
    [B, room] is -inf where a row has no token: columns written before it joined). Row b
    belongs to prompt `group[b]` and is its `rank[b]`-th row."""

    def __init__(self, cache, attn: torch.Tensor, G: int, room: int):
        """From a prefill `cache` of P prompts with attention mask `attn` [P, Lp]: G rows per
        prompt (rows g*G .. g*G + G - 1 for prompt g), room for `room` tokens each."""
        self.prompt_k, self.prompt_v, self.prompt_bias = _prompt_part(cache, attn)
        P, (_, kv, _, d) = attn.size(0), self.prompt_k[0].shape
        self.group = _groups(P, G, attn.device)
        B = P * G
        self.row_k = [k.new_empty(B, kv, room, d) for k in self.prompt_k]
        self.row_v = [v.new_empty(B, kv, room, d) for v in self.prompt_v]
        self.row_bias = self.prompt_bias.new_full((B, room), float("-inf"))
        self.fill = 0
        self._ranks()

    @property
    def rows(self) -> int:
        return self.group.size(0)

    @property
    def prompts(self) -> int:
        return self.prompt_bias.size(0)

    def _ranks(self) -> None:
        """Each row's place in its group and the largest group (the width of the stacked
        queries); refreshed when rows change."""
        seen: dict[int, int] = {}
        rank = []
        for g in self.group.tolist():
            rank.append(seen.get(g, 0))
            seen[g] = rank[-1] + 1
        self.rank = torch.tensor(rank, dtype=torch.long, device=self.group.device)
        self.width = max(seen.values(), default=1)
        self._step_bias = None

    def attend(self, idx: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               scaling: float) -> torch.Tensor:
        """Layer `idx`: write this step's key and value ([B, kv, 1, d]) at column `fill` and
        return attention of `q` [B, kv, h, d] (h query heads per key-value head) over each
        row's prompt and its own tokens, this one included: [B, kv, h, d] in `q`'s dtype."""
        dtype, q = q.dtype, q.float()
        f, rk, rv = self.fill, self.row_k[idx], self.row_v[idx]
        rk[:, :, f] = k[:, :, 0]
        rv[:, :, f] = v[:, :, 0]
        pk, pv = self.prompt_k[idx], self.prompt_v[idx]
        rk, rv = rk[:, :, :f + 1], rv[:, :, :f + 1]
        to_prompt = self._per_row(self._stacked(q) @ pk.transpose(-1, -2), q.size(2))
        scores = torch.cat([to_prompt, q @ rk.transpose(-1, -2)], -1) * scaling + self._bias()
        p_prompt, p_own = torch.softmax(scores, -1).split([pk.size(2), f + 1], -1)
        out = self._per_row(self._stacked(p_prompt) @ pv, q.size(2)) + p_own @ rv
        return out.to(dtype)

    def _stacked(self, x: torch.Tensor) -> torch.Tensor:
        """[B, kv, h, n] per row -> [P, kv, width * h, n]: each group's rows one matrix (the
        slots of a group with fewer rows are zeros)."""
        B, kv, h, n = x.shape
        out = x.new_zeros(self.prompts, kv, self.width, h, n)
        out[self.group, :, self.rank] = x
        return out.view(out.size(0), kv, self.width * h, n)

    def _per_row(self, x: torch.Tensor, h: int) -> torch.Tensor:
        """The inverse of `_stacked`: [P, kv, width * h, n] -> [B, kv, h, n]."""
        P, kv, _, n = x.shape
        return x.view(P, kv, self.width, h, n)[self.group, :, self.rank]

    def _bias(self) -> torch.Tensor:
        """[B, 1, 1, Lp + fill + 1]: 0 where a row attends, -inf elsewhere (once per step)."""
        if self._step_bias is None or self._step_bias.size(-1) != \
                self.prompt_bias.size(1) + self.fill + 1:
            self.row_bias[:, self.fill] = 0.0
            self._step_bias = torch.cat([self.prompt_bias[self.group],
                                         self.row_bias[:, :self.fill + 1]], 1)[:, None, None]
        return self._step_bias

    def advance(self) -> None:
        """After a step's layers: the next step writes the next column (the buffers double
        when out of room)."""
        self.fill += 1
        if self.fill == self.row_bias.size(1):
            _each(self.row_k, self.row_v, lambda t: torch.cat([t, torch.empty_like(t)], 2))
            self.row_bias = torch.cat([self.row_bias, torch.full_like(self.row_bias,
                                                                      float("-inf"))], 1)

    def select(self, keep: torch.Tensor) -> None:
        """Keep rows `keep` (in that order); once half the prompts have no rows left, their
        keys and values are dropped (a copy of the rest: not at every finished row)."""
        _each(self.row_k, self.row_v, lambda t: _take(t, keep, self.fill))
        self.row_bias = self.row_bias[keep]
        self.group = self.group[keep]
        used = torch.unique(self.group)          # sorted
        if used.numel() * 2 <= self.prompts:
            _each(self.prompt_k, self.prompt_v, lambda t: t[used])
            self.prompt_bias = self.prompt_bias[used]
            self.group = torch.searchsorted(used, self.group)
        self._ranks()

    def join(self, keep: torch.Tensor, cache, attn: torch.Tensor, G: int, room: int) -> None:
        """In place: rows `keep` of this cache, then G rows for each prompt of another prefill
        (`cache`, `attn` as for the constructor), the prompts' parts padded on the left to a
        common width, the rows' columns no kept row uses dropped, room for `room` more."""
        self.select(keep)
        kept, prompts = self.rows, self.prompts
        own = self.row_bias[:, :self.fill] == 0
        start = int(own.any(0).long().argmax()) if own.numel() and own.any() else self.fill
        used = self.fill - start
        new_k, new_v, new_bias = _prompt_part(cache, attn)
        width = max(self.prompt_bias.size(1), new_bias.size(1))
        for mine, theirs in ((self.prompt_k, new_k), (self.prompt_v, new_v)):
            for i, t in enumerate(theirs):
                mine[i] = torch.cat([_left_pad(mine[i], width), _left_pad(t, width)])
        self.prompt_bias = torch.cat([_left_pad(self.prompt_bias, width, float("-inf")),
                                      _left_pad(new_bias, width, float("-inf"))])
        new_group = _groups(attn.size(0), G, attn.device)
        B = kept + new_group.size(0)

        def cat_rows(a):
            out = a.new_empty((B, a.size(1), used + room, a.size(3)))
            out[:kept, :, :used] = a[:, :, start:self.fill]
            out[kept:, :, :used] = 0        # masked, but read: 0 * garbage may be nan
            return out
        _each(self.row_k, self.row_v, cat_rows)
        bias = self.row_bias.new_full((B, used + room), float("-inf"))
        bias[:kept, :used] = self.row_bias[:, start:self.fill]
        self.row_bias, self.fill = bias, used
        self.group = torch.cat([self.group, new_group + prompts])
        self._ranks()


def _each(keys: list, values: list, change) -> None:
    """Replace every layer's tensor in place, one at a time (each old one is freed before the
    next new one is made: no second copy of the whole cache)."""
    for tensors in (keys, values):
        for i, t in enumerate(tensors):
            tensors[i] = change(t)


def _prompt_part(cache, attn: torch.Tensor):
    """A prefill's keys and values per layer ([P, kv, Lp, d] in float32: the cache's own tensors
    for a float32 model) and the bias of its mask `attn` [P, Lp]."""
    kvs = layer_keys_values(cache)
    keys, values = [k.float() for k, _ in kvs], [v.float() for _, v in kvs]
    return keys, values, _bias(attn != 0, torch.float32)


def _groups(P: int, G: int, device) -> torch.Tensor:
    """Row -> prompt for G rows per prompt, rows g*G .. g*G + G - 1 for prompt g."""
    return torch.arange(P, device=device).repeat_interleave(G)


def _bias(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(
        ~mask, float("-inf"))


def _take(buf: torch.Tensor, rows: torch.Tensor, filled: int) -> torch.Tensor:
    """Rows `rows` of a row buffer: the filled columns copied, the room kept."""
    out = buf.new_empty((rows.size(0),) + tuple(buf.shape[1:]))
    out[:, :, :filled] = buf[rows, :, :filled]
    return out


def _left_pad(t: torch.Tensor, width: int, value: float = 0.0) -> torch.Tensor:
    """Pad dimension 1 of a [P, Lp] bias, or dimension 2 of [P, kv, Lp, d], on the left."""
    dim = 1 if t.dim() == 2 else 2
    missing = width - t.size(dim)
    if not missing:
        return t
    shape = list(t.shape)
    shape[dim] = missing
    return torch.cat([t.new_full(shape, value), t], dim)
