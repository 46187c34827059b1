"""Per-token log-probs log softmax(z / T)[y] from vocabulary-sized logits, in bounded memory.

With a 49k vocabulary the logits of one micro-batch (16 completions x 64 tokens) are 200 MB
in float32. Written with autograd (`z / T`, `logsumexp`, `gather`), the forward keeps the
scaled copy for the backward and allocates a second one inside `logsumexp`, and the backward
allocates three more (exp(z - lse), the scattered one-hot, the division's gradient): about
five times the logits at the peak (measured in benchmarks/README.md, "Trainer memory").

`selective_log_softmax` computes the same numbers block by block: a block of rows is
up-cast, scaled, reduced and dropped, so the only vocabulary-sized tensor alive is the
model's own logits. Its backward is also computed block by block and written into that
logits tensor in place (the forward saved it for exactly this and nothing else reads it
afterwards; autograd's version counter turns any other use of it into an error, not a wrong
number). With p = softmax(z / T), the two outputs and their derivatives are

    log p_y                      d log p_y / d z_v = (1[v = y] - p_v) / T
    H = -sum_v p_v log p_v       d H / d z_v       = -p_v (log p_v + H) / T

(the entropy is differentiable for the entropy bonus; when nothing downstream uses it, its
gradient never enters the backward, which is then the log-prob's alone, unchanged).

A custom autograd.Function rather than a library kernel: the fused ones (Liger's cross
entropy) fuse a *mean loss* and need a GPU, while here each token's log-prob feeds the loss on
its own.
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
    dtype), and with `with_entropy` the entropy of softmax(logits / T) at each position.
    Both differentiable in `logits`; equal to the autograd formulations
    `gather(z / T) - logsumexp(z / T)` and `-sum softmax(z / T) * log_softmax(z / T)` in
    value and gradient."""
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
        ctx.set_materialize_grads(False)     # an unused output's gradient stays None
        return picked - lse, entropy

    @staticmethod
    def backward(ctx, grad_logp, grad_entropy):
        logits, targets, lse = ctx.saved_tensors
        grad = logits        # written in place, block by block (see the module docstring)
        T = ctx.temperature
        if grad_logp is None:
            grad_logp = torch.zeros_like(lse)
        for rows, cols in _blocks(logits.shape, ctx.block):
            g = grad_logp[rows, cols].float().unsqueeze(-1) / T
            idx = targets[rows, cols].unsqueeze(-1)
            if grad_entropy is not None:
                g_h = grad_entropy[rows, cols].float().unsqueeze(-1) / T
                grad[rows, cols] = _with_entropy_grad(logits[rows, cols], T, lse[rows, cols],
                                                      g, g_h, idx, grad.dtype)
                continue
            if grad.dtype == torch.float32:     # the block itself becomes its gradient
                z = grad[rows, cols]
                z = z.div_(T) if T != 1.0 else z
                z.sub_(lse[rows, cols].unsqueeze(-1)).exp_().mul_(-g)
                z.scatter_add_(-1, idx, g)
                continue
            p = torch.exp(_scaled(logits[rows, cols], T) - lse[rows, cols].unsqueeze(-1))
            out = (-p * g).scatter_add_(-1, idx, g)
            grad[rows, cols] = out.to(grad.dtype)
        return grad, None, None, None, None


def _with_entropy_grad(z, T, lse, g, g_h, idx, dtype):
    """One block's gradient when the entropy is in the loss too:
    g (1[v = y] - p_v) - g_h p_v (log p_v + H), with g and g_h already divided by T. H is
    summed again from this p (not the forward's lse - E[z], which cancels large terms): the
    gradient then sums to 0 over v as it should, to float32 rounding."""
    logp = _scaled(z, T) - lse.unsqueeze(-1)
    p = logp.exp()
    entropy = -(p * logp).sum(-1, keepdim=True)
    out = logp.add_(entropy).mul_(-g_h).sub_(g).mul_(p)
    return out.scatter_add_(-1, idx, g).to(dtype)
