"""Continuous batching: many groups of completions through one decode batch that stays full.

Sampling n completions for each of many tasks one task (or a few) at a time leaves the batch
shrinking as rows finish, down to a few stragglers decoded alone, and the next task waits for
them. Here a batch of at most `max_rows` rows is refilled: whenever a whole group's worth of
rows has finished, the next waiting tasks are prefilled (a prefix common to them once) and join
the running rows, their cache right-aligned to the running one (padding masked), the same way
continuous batching serves requests in inference servers (Yu et al. 2022, "Orca").

Every group samples from its own generator, its rows adjacent and in order, so a task's
completions follow the same distribution whatever shares its batch. On one CPU thread a row's
logits do not depend on the other rows or on masked padding either, and the tokens are those
the task gets decoded alone (`tests/test_sampler.py`); with several threads the decode step's
float rounding can depend on the batch size, and a token drawn where two are nearly tied can
differ. A finished row stays in the batch (computed, never sampled)
until enough have finished to make dropping them worth the copy of the cache.
"""
from __future__ import annotations

from collections import deque

import torch

from rlvr.trainer.forwards.prefix import SharedPrefix, one_pass
from rlvr.trainer.sampling.rollout import _pick, prefill
from rlvr.trainer.sampling.rows import start_rows

__all__ = ["sample_refilling"]


@torch.no_grad()
def sample_refilling(model, prompts: list[list[int]], G: int, max_new: int, eos: set[int],
                     pad_id: int, temperature: float = 1.0, top_p: float = 1.0,
                     greedy: bool = False, seeds: list[int] | None = None,
                     max_rows: int = 256, draw: str = "multinomial",
                     packed: bool = True) -> list[list[int]]:
    """G completions per prompt (rows g*G .. g*G+G-1 for prompt g, uncut at EOS), decoded
    in one batch of at most `max_rows` rows (one group when G is larger) that admits waiting
    prompts as rows finish. `seeds`: one per prompt; its group draws from its own generator.
    `draw`: how tokens are drawn (`draws.DRAWS`: the same law, different random streams).
    `packed`: decode steps through the packed decoder where it applies
    (trainer/sampling/rows.py), else the model's forward."""
    device = next(model.parameters()).device
    gens = None if seeds is None or greedy else \
        [torch.Generator(device).manual_seed(s) for s in seeds]
    out: list[list[int]] = [[] for _ in range(len(prompts) * G)]
    waiting = deque(range(len(prompts)))
    # the prefix every prompt shares (a system turn, instructions), computed once for every
    # admission instead of again with each prompt admitted
    prefix = SharedPrefix.of(prompts, device) if len(prompts) > 1 else None
    state = _Batch(model, device, packed, prefix)
    with one_pass(prefix):      # the prefix's cache lives for this call only
        while waiting or state.live:
            admit = []
            while waiting and (state.live_count + (len(admit) + 1) * G <= max_rows
                               or not (state.live or admit)):
                admit.append(waiting.popleft())
            if admit:
                state.admit(admit, [prompts[g] for g in admit], G, pad_id, max_new)
            elif state.dead_count * 8 >= state.size:      # an eighth of the batch finished: drop
                state.compact()
            live = [r for r, row in enumerate(state.rows) if row is not None]
            idx = torch.tensor(live, device=device)
            logits = state.logits if len(live) == state.size else state.logits[idx]
            tok = _pick(logits, temperature, top_p, greedy,
                        [state.rows[r] // G for r in live], gens, draw=draw)
            step = torch.full((state.size,), pad_id, dtype=torch.long, device=device)
            step[idx] = tok
            for r, t in zip(live, tok.tolist()):
                row = state.rows[r]
                out[row].append(t)
                if t in eos or len(out[row]) == max_new:
                    state.rows[r] = None
            if state.live:
                state.forward(step)
    return out


class _Batch:
    """The running rows (`rows.py`: their cache, masks and positions), their last logits and
    which output row each batch row writes to (None: finished, still in the cache)."""

    def __init__(self, model, device, packed: bool, prefix: SharedPrefix | None = None):
        self.model, self.device, self.packed, self.prefix = model, device, packed, prefix
        self.state = self.logits = None
        self.rows: list[int | None] = []

    @property
    def size(self) -> int:
        return len(self.rows)

    @property
    def live(self) -> bool:
        return any(r is not None for r in self.rows)

    @property
    def live_count(self) -> int:
        return sum(r is not None for r in self.rows)

    @property
    def dead_count(self) -> int:
        return self.size - self.live_count

    def _live_index(self) -> torch.Tensor:
        return torch.tensor([r for r, row in enumerate(self.rows) if row is not None],
                            dtype=torch.long, device=self.device)

    def admit(self, groups: list[int], prompts: list[list[int]], G: int, pad_id: int,
              room: int) -> None:
        """Prefill `prompts` (groups `groups`) and join G rows of each below the live rows
        (finished rows are dropped on the way)."""
        cache, logits, attn = prefill(self.model, prompts, pad_id, self.prefix)
        logits = logits.repeat_interleave(G, 0)
        rows = [g * G + j for g in groups for j in range(G)]
        if self.state is None or not self.live:
            self.state = start_rows(self.model, cache, attn, G, room, self.packed)
            self.logits, self.rows = logits, rows
            return
        keep = self._live_index()
        self.state.join(keep, cache, attn, G, room)
        self.logits = torch.cat([self.logits[keep], logits])
        self.rows = [self.rows[r] for r in keep.tolist()] + rows

    def compact(self) -> None:
        """Drop the finished rows from the cache (a copy of the rows' part of it: done in bulk,
        not per row)."""
        keep = self._live_index()
        self.state.select(keep)
        self.logits = self.logits[keep]
        self.rows = [self.rows[r] for r in keep.tolist()]

    def forward(self, tokens: torch.Tensor) -> None:
        """One decode step for every row (finished rows get padding, their output unused)."""
        self.logits = self.state.step(tokens)
