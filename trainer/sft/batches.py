"""Micro-batches of supervised examples and their loss: the summed negative log-likelihood of
the trained tokens,

    L = - sum_i sum_t m_it log pi(x_it | x_i,<t),     m_it = 1 on completion tokens (and EOS)

divided by the caller by the trained tokens of the whole optimizer step (a token mean over the
step, the same for any split into micro-batches and for packed or padded rows).

Two layouts of the same examples, the same numbers (tests/test_sft.py):
- `padded`: one example per row, right-padded; the logits are kept only from the first
  position that predicts a trained token (`logits_to_keep`), so prompt-only columns cost no
  vocabulary projection.
- `packed`: examples back to back in rows of at most max_length tokens (first-fit
  decreasing), each attending only to its own earlier tokens through a block-diagonal causal
  mask, positions restarting at 0: the packing of Krell et al., 2021 ("Efficient Sequence
  Packing without Cross-contamination"). No padding is computed.
The log-softmax runs block by block (trainer/forwards/logprobs.py): no float32 copy of the logits.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from rlvr.trainer.forwards.logprobs import selective_log_softmax
from rlvr.trainer.forwards.packing import mask_dtype
from rlvr.trainer.sft.data import Example

__all__ = ["SFTBatch", "padded", "packed", "nll_sum"]


@dataclass
class SFTBatch:
    """Model inputs and, per input position, the token it predicts and whether that counts."""
    input_ids: torch.Tensor       # [r, T]
    attention_mask: torch.Tensor  # [r, T] (padded) or [r, 1, T, T] (packed)
    position_ids: torch.Tensor    # [r, T]
    targets: torch.Tensor         # [r, K] the token each of the last K positions predicts
    weights: torch.Tensor         # [r, K] 1.0 where that prediction is trained, else 0
    keep: int                     # K: logits kept for the last K positions
    real_tokens: int              # non-padding tokens in the batch

    @property
    def n_targets(self) -> int:
        return int(self.weights.sum())


def _shifted(rows: list[list[int]], trained: list[list[bool]], pad: int, T: int):
    """targets[t] = ids[t + 1], weighted when that next token is trained (same row only)."""
    targets = torch.full((len(rows), T), pad, dtype=torch.long)
    weights = torch.zeros(len(rows), T)
    for i, (ids, tr) in enumerate(zip(rows, trained)):
        n = len(ids)
        if n > 1:
            targets[i, :n - 1] = torch.tensor(ids[1:])
            weights[i, :n - 1] = torch.tensor(tr[1:], dtype=torch.float32)
    return targets, weights


def padded(examples: list[Example], pad_id: int, device) -> SFTBatch:
    """One example per row, right-padded to the longest."""
    T = max(len(e) for e in examples)
    ids = torch.full((len(examples), T), pad_id, dtype=torch.long)
    attn = torch.zeros(len(examples), T, dtype=torch.long)
    for i, e in enumerate(examples):
        ids[i, :len(e)] = torch.tensor(e.ids)
        attn[i, :len(e)] = 1
    targets, weights = _shifted([e.ids for e in examples], [e.trained for e in examples],
                                pad_id, T)
    # Logits only from the first column that predicts a trained token (a right-padded batch's
    # prompts all start at column 0, so the shortest prompt decides).
    first = int(weights.any(0).float().argmax()) if weights.any() else T - 1
    keep = T - first
    pos = torch.arange(T)[None, :].expand(len(examples), T)
    return SFTBatch(ids.to(device), attn.to(device), pos.to(device),
                    targets[:, first:].to(device), weights[:, first:].to(device), keep,
                    sum(len(e) for e in examples))


def fit_rows(lengths: list[int], capacity: int) -> list[list[int]]:
    """First-fit decreasing: example indices grouped into rows of at most `capacity` tokens."""
    rows: list[tuple[int, list[int]]] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        for r, (used, members) in enumerate(rows):
            if used + lengths[i] <= capacity:
                rows[r] = (used + lengths[i], members + [i])
                break
        else:
            rows.append((lengths[i], [i]))
    return [members for _, members in rows]


def packed(examples: list[Example], pad_id: int, capacity: int, device, dtype) -> SFTBatch:
    """The examples back to back in rows of at most `capacity` tokens, under a block-diagonal
    causal mask (`dtype`: bool for SDPA, float for eager attention; see packing.mask_dtype)."""
    groups = fit_rows([len(e) for e in examples], max(capacity, max(len(e) for e in examples)))
    T = max(sum(len(examples[i]) for i in g) for g in groups)
    ids = torch.full((len(groups), T), pad_id, dtype=torch.long)
    segment = torch.full((len(groups), T), -1, dtype=torch.long)
    pos = torch.zeros(len(groups), T, dtype=torch.long)
    targets = torch.full((len(groups), T), pad_id, dtype=torch.long)
    weights = torch.zeros(len(groups), T)
    for r, g in enumerate(groups):
        at = 0
        for s, i in enumerate(g):
            e, n = examples[i], len(examples[i])
            ids[r, at:at + n] = torch.tensor(e.ids)
            segment[r, at:at + n], pos[r, at:at + n] = s, torch.arange(n)
            t, w = _shifted([e.ids], [e.trained], pad_id, n)
            targets[r, at:at + n], weights[r, at:at + n] = t[0], w[0]
            at += n
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    mask = ((segment[:, :, None] == segment[:, None, :]) & causal)[:, None]
    if dtype != torch.bool:
        mask = torch.zeros(mask.shape, dtype=dtype).masked_fill_(~mask, torch.finfo(dtype).min)
    return SFTBatch(ids.to(device), mask.to(device), pos.to(device), targets.to(device),
                    weights.to(device), T, sum(len(e) for e in examples))


def make_batch(examples: list[Example], pad_id: int, device, model, pack: bool,
               capacity: int) -> SFTBatch:
    """`packed` when asked for (the model's attention must take a 4D mask, packing.packs),
    else `padded`."""
    if pack:
        return packed(examples, pad_id, capacity, device, mask_dtype(model))
    return padded(examples, pad_id, device)


def nll_sum(model, batch: SFTBatch) -> torch.Tensor:
    """L above: the summed NLL of the batch's trained tokens (a scalar with its gradient)."""
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                position_ids=batch.position_ids, logits_to_keep=batch.keep, use_cache=False)
    logp, _ = selective_log_softmax(out.logits, batch.targets)
    return -(logp * batch.weights).sum()
