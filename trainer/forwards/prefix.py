"""A prompt prefix run through a model once and continued many times.

Two things repeat a prompt in RLVR: a group's G completions all continue the same prompt, and
the prompts of a batch often begin with the same system turn and instructions (96 of the main
job's 112 tokens). Running each shared part once and continuing its KV cache gives the same
attention inputs, so the same numbers up to float rounding, for a fraction of the compute.
The sampler (trainer/sampling/rollout.py) and the fast forward (trainer/forwards/fast.py) both use this.
"""
from __future__ import annotations

import contextlib
import os

import torch

from rlvr.trainer.forwards.hf_adapter import (cache_kwarg, cache_tensors, copy_cache, repeat_rows, returned_cache,
                         swap_cache_tensor, base_model)

__all__ = ["MIN_COMMON_PREFIX", "common_prefix", "SharedPrefix", "one_pass", "prompt_forward",
           "cut_cache"]


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
        copied = copy_cache(self._passes[key][0])
        repeat_rows(copied, rows)
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
    """Changes whenever any weight is written in place (an optimizer step, a load): torch
    counts in-place writes per tensor (`_version`, the counter autograd checks saved tensors
    with)."""
    return sum(p._version for p in base_model(model).parameters())


@contextlib.contextmanager
def one_pass(prefix: SharedPrefix | None):
    """A pass over a batch's micro-batches: the shared prefix's cache lives for it only (the
    next pass may run another model or new weights), even when the pass fails midway."""
    try:
        yield
    finally:
        if prefix is not None:
            prefix.release()


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
    for layer, name, t in cache_tensors(cache):
        if t.requires_grad:
            outs.append(t)
            leaves.append(t.detach().requires_grad_())
            swap_cache_tensor(layer, name, leaves[-1])
    return outs, leaves
