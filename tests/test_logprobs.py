"""The block-wise log-softmax (trainer/forwards/logprobs.py): the same values and gradients as the
autograd formula, and no vocabulary-sized tensor beyond the logits in forward or backward."""
from __future__ import annotations

import pytest
import torch

from rlvr.trainer.forwards.logprobs import selective_log_softmax


def naive(logits, targets, temperature):
    """The formula the trainer used before: autograd through z / T, gather and logsumexp."""
    z = logits.float() / temperature
    logp = z.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - z.logsumexp(-1)
    p = torch.softmax(z, -1)
    return logp, (z.logsumexp(-1) - (p * z).sum(-1)).detach()


def case(dtype=torch.float32, m=3, C=5, V=97, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(m, C, V, generator=g) * 3).to(dtype)
    targets = torch.randint(0, V, (m, C), generator=g)
    weights = torch.randn(m, C, generator=g)          # an arbitrary upstream gradient
    return logits, targets, weights


def grads(fn, logits, targets, weights, temperature):
    leaf = logits.clone().requires_grad_(True)
    logp, entropy = fn(leaf.clone(), targets, temperature)
    (logp * weights).sum().backward()
    return logp.detach(), entropy, leaf.grad


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("block", [10_000, 97 * 2, 40])    # whole rows, parts of rows, < V
def test_values_entropy_and_gradients_equal_the_autograd_formula(temperature, block):
    logits, targets, weights = case()
    ours = lambda x, t, T: selective_log_softmax(x, t, T, with_entropy=True, block=block)
    lp, ent, g = grads(ours, logits, targets, weights, temperature)
    lp0, ent0, g0 = grads(naive, logits, targets, weights, temperature)
    torch.testing.assert_close(lp, lp0, rtol=0, atol=1e-6)
    torch.testing.assert_close(ent, ent0, rtol=0, atol=1e-5)
    torch.testing.assert_close(g, g0, rtol=0, atol=1e-6)
    assert lp.dtype == torch.float32


def test_bfloat16_logits_give_float32_logprobs_and_bfloat16_gradients():
    logits, targets, weights = case(torch.bfloat16)
    lp, _, g = grads(lambda x, t, T: selective_log_softmax(x, t, T), logits, targets, weights, 0.7)
    lp0, _, g0 = grads(naive, logits, targets, weights, 0.7)
    assert lp.dtype == torch.float32 and g.dtype == torch.bfloat16
    torch.testing.assert_close(lp, lp0, rtol=0, atol=1e-6)
    torch.testing.assert_close(g.float(), g0.float(), rtol=0, atol=1e-2)


def test_no_vocabulary_sized_tensor_is_saved_or_allocated_beyond_the_logits():
    # What autograd keeps for the backward, and where the logits' gradient lives: with the
    # formula above, z / T (a second [m, C, V] tensor) is saved and the gradient is new memory.
    logits, targets, weights = case(m=4, C=6, V=1000)
    big = logits.numel()
    for fn, ok in ((lambda x, t, T: selective_log_softmax(x, t, T), True), (naive, False)):
        x = logits.clone().requires_grad_(True)
        y = x * 1.0                      # a non-leaf, as the model's logits are
        saved = []
        with torch.autograd.graph.saved_tensors_hooks(
                lambda t: saved.append(t) or t, lambda t: t):
            logp, _ = fn(y, targets, 0.7)
        seen = []
        y.register_hook(lambda g: seen.append(g.data_ptr()))
        (logp * weights).sum().backward()
        extra = [t for t in saved if t.numel() >= big and t.data_ptr() != y.data_ptr()]
        assert (not extra and seen == [y.data_ptr()]) is ok


def test_shape_errors_are_clear():
    with pytest.raises(ValueError, match=r"logits \[m, C, V\]"):
        selective_log_softmax(torch.zeros(4, 10), torch.zeros(4, dtype=torch.long))


def test_a_second_backward_through_the_reused_logits_is_an_error_not_a_wrong_gradient():
    logits, targets, weights = case()
    y = logits.clone().requires_grad_(True) * 1.0
    logp, _ = selective_log_softmax(y, targets, 0.7)
    (logp * weights).sum().backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        (logp * weights).sum().backward()
