"""Per-token log-probs log softmax(z / T)[y] from vocabulary-sized logits, in bounded memory.

With a 49k vocabulary the logits of one micro-batch (16 completions x 64 tokens) are 200 MB
in float32. Written with autograd (`z / T`, `logsumexp`, `gather`), the forward keeps the
scaled copy for the backward and allocates a second one inside `logsumexp`, and the backward
allocates three more (exp(z - lse), the scattered one-hot, the division's gradient): about
five times the logits at the peak (measured in benchmarks/README.md, "Trainer memory").

`selective_log_softmax` computes the same numbers block by block: a block of rows is
up-cast, scaled, reduced and dropped, so the only vocabulary-sized tensor alive is the
model's own logits. Its backward, d log p_y / d z_v = (1[v = y] - p_v) / T, is also computed
block by block and written into that logits tensor in place (the forward saved it for
exactly this and nothing else reads it afterwards; autograd's version counter turns any
other use of it into an error, not a wrong number). A custom autograd.Function rather than a
library kernel: the fused ones (Liger's cross entropy) fuse a *mean loss* and need a GPU,
while here each token's log-prob feeds the loss on its own.
"""
from __future__ import annotations

import torch

__all__ = ["selective_log_softmax", "BLOCK_ELEMENTS"]

BLOCK_ELEMENTS = 1 << 22
"""Logit entries per block (4M: 16 MB of float32): small next to the logits, large enough
that the per-block overhead does not show."""


def selective_log_softmax(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0,
                          with_entropy: bool = False,
                          block: int = BLOCK_ELEMENTS) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log softmax(logits / T)[targets] as float32 [m, C] for logits [m, C, V] (any float
    dtype), and with `with_entropy` the entropy of softmax(logits / T) at each position
    (no gradient). Differentiable in `logits`; equal to the autograd formulation
    `gather(z / T) - logsumexp(z / T)` in value and gradient."""
    if logits.dim() != 3 or targets.shape != logits.shape[:2]:
        raise ValueError(f"logits [m, C, V] and targets [m, C] expected, got "
                         f"{tuple(logits.shape)} and {tuple(targets.shape)}")
    logp, entropy = _SelectiveLogSoftmax.apply(logits, targets, float(temperature),
                                               with_entropy, int(block))
    return logp, (entropy if with_entropy else None)


def _blocks(shape: torch.Size, block: int):
    """(row slice, column slice) pairs covering [m, C, V] with about `block` entries each."""
    m, C, V = shape
    if C * V <= block:
        step = max(1, block // max(C * V, 1))
        for i in range(0, m, step):
            yield slice(i, i + step), slice(None)
        return
    step = max(1, block // V)
    for i in range(m):
        for j in range(0, C, step):
            yield slice(i, i + 1), slice(j, j + step)


def _scaled(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    z = logits.float()
    return z / temperature if temperature != 1.0 else z


class _SelectiveLogSoftmax(torch.autograd.Function):

    @staticmethod
    def forward(ctx, logits, targets, temperature, with_entropy, block):
        m, C, _ = logits.shape
        picked = torch.empty(m, C, dtype=torch.float32, device=logits.device)
        lse, entropy = torch.empty_like(picked), torch.empty_like(picked) if with_entropy else None
        for rows, cols in _blocks(logits.shape, block):
            z = _scaled(logits[rows, cols], temperature)
            lse[rows, cols] = z.logsumexp(-1)
            picked[rows, cols] = z.gather(-1, targets[rows, cols].unsqueeze(-1)).squeeze(-1)
            if with_entropy:
                p = torch.softmax(z, dim=-1)
                entropy[rows, cols] = lse[rows, cols] - (p * z).sum(-1)
        ctx.save_for_backward(logits, targets, lse)
        ctx.temperature, ctx.block = temperature, block
        if entropy is not None:
            ctx.mark_non_differentiable(entropy)
        return picked - lse, entropy

    @staticmethod
    def backward(ctx, grad_logp, _grad_entropy):
        logits, targets, lse = ctx.saved_tensors
        grad = logits        # written in place, block by block (see the module docstring)
        T = ctx.temperature
        for rows, cols in _blocks(logits.shape, ctx.block):
            g = grad_logp[rows, cols].float().unsqueeze(-1) / T
            if grad.dtype == torch.float32:     # the block itself becomes its gradient
                z = grad[rows, cols]
                z = z.div_(T) if T != 1.0 else z
                z.sub_(lse[rows, cols].unsqueeze(-1)).exp_().mul_(-g)
                z.scatter_add_(-1, targets[rows, cols].unsqueeze(-1), g)
                continue
            p = torch.exp(_scaled(logits[rows, cols], T) - lse[rows, cols].unsqueeze(-1))
            out = (-p * g).scatter_add_(-1, targets[rows, cols].unsqueeze(-1), g)
            grad[rows, cols] = out.to(grad.dtype)
        return grad, None, None, None, None
