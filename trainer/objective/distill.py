"""On-policy distillation's two pieces below the update: the teacher, and the per-token reverse
KL to it over the whole vocabulary computed in bounded memory.

The student samples; the teacher scores every position the student visited with its full
next-token distribution; the loss is KL(pi_student || pi_teacher) there (GKD, Agarwal et al.
2024, "On-Policy Distillation of Language Models: Learning from Self-Generated Mistakes";
Thinking Machines, "On-Policy Distillation", 2025). `trainer/objective/algorithms.py` `reverse_kl` is the
definition; `logprobs_and_reverse_kl` here computes the same numbers block by block, with the
student's per-token log-probs from the same logits, so one student forward serves both the
policy-gradient term and the distillation term.
"""
from __future__ import annotations

import torch

from rlvr.trainer.forwards.logprobs import BLOCK_ELEMENTS, _blocks, _scaled

__all__ = ["load_teacher", "log_softmax_", "logprobs_and_reverse_kl"]


def load_teacher(name: str, tokenizer, policy, device):
    """The teacher: a model folder, hub id, 'smollm2' or an rlvr run folder (its latest
    checkpoint's policy), loaded frozen in float32 like the reference model. Its vocabulary
    must be the student's, token for token: the KL compares distributions over the same ids."""
    from rlvr.trainer.evaluation.evaluate import resolve_model
    from rlvr.trainer.models.loading import load_policy, load_tokenizer
    path = resolve_model(name)
    theirs = load_tokenizer(path).get_vocab()
    ours = tokenizer.get_vocab()
    width = _output_size(path)
    if theirs != ours or width != _output_size(policy):
        differ = len(set(theirs.items()) ^ set(ours.items()))
        raise ValueError(f"teacher {name!r} has another vocabulary than the student ({len(theirs)} "
                         f"vs {len(ours)} tokens, {differ} entries differ; logits {width} vs "
                         f"{_output_size(policy)}): on-policy distillation needs a teacher with "
                         "the student's tokenizer")
    teacher = load_policy(path, "float32", device)
    teacher.requires_grad_(False)
    return teacher


def _output_size(model_or_path) -> int:
    """The logits' width: the output embedding's rows (read from the config for a folder)."""
    if isinstance(model_or_path, str):
        from transformers import AutoConfig
        return AutoConfig.from_pretrained(model_or_path).vocab_size
    return model_or_path.get_output_embeddings().weight.size(0)


def _block_log_softmax(logits: torch.Tensor, temperature: float):
    """log softmax(z / T) of one block, and its log-sum-exp; one arithmetic for the teacher and
    the student, so equal logits give bit-equal log-probs (and a KL of exactly 0)."""
    z = _scaled(logits, temperature)
    lse = z.logsumexp(-1, keepdim=True)
    return z - lse, lse


@torch.no_grad()
def log_softmax_(logits: torch.Tensor, temperature: float = 1.0,
                 block: int = BLOCK_ELEMENTS) -> torch.Tensor:
    """log softmax(logits / T) over the last dimension of [m, C, V], as float32, block by block
    and in place when the logits are float32 already (the teacher's: no gradient)."""
    out = logits if logits.dtype == torch.float32 else torch.empty_like(logits, dtype=torch.float32)
    for rows, cols in _blocks(logits.shape, block):
        out[rows, cols] = _block_log_softmax(logits[rows, cols], temperature)[0]
    return out


def logprobs_and_reverse_kl(logits: torch.Tensor, targets: torch.Tensor,
                            teacher_logp: torch.Tensor, temperature: float = 1.0,
                            with_entropy: bool = False, block: int = BLOCK_ELEMENTS):
    """From the student's logits [m, C, V]: log pi(y_t) [m, C], the reverse KL to the teacher's
    log-probs `teacher_logp` [m, C, V] at each position [m, C], and with `with_entropy` the
    student's entropy there. All three differentiable in `logits`; equal in value and
    gradient to `algorithms.reverse_kl` of `log_softmax(logits / T)`, its gather and its
    entropy."""
    if logits.shape != teacher_logp.shape or targets.shape != logits.shape[:2]:
        raise ValueError(f"student logits {tuple(logits.shape)}, teacher log-probs "
                         f"{tuple(teacher_logp.shape)} and targets {tuple(targets.shape)} differ")
    logp, kl, entropy = _LogprobsAndReverseKL.apply(logits, targets, teacher_logp,
                                                    float(temperature), with_entropy, int(block))
    return logp, kl, (entropy if with_entropy else None)


class _LogprobsAndReverseKL(torch.autograd.Function):
    """One pass over the logits for both outputs. With s = z / T, p = softmax(s), q the
    teacher's log-probs and KL = sum_v p_v (log p_v - q_v):

        d log p_y / d z_v = (1[v = y] - p_v) / T
        d KL      / d z_v = p_v (log p_v - q_v - KL) / T
        d H       / d z_v = -p_v (log p_v + H) / T        (H = -sum_v p_v log p_v)

    Saved: the logits (the model's own tensor), the teacher's log-probs, the log-sum-exp and the
    KL; the backward recomputes p block by block and, for float32 logits, writes the gradient
    into the logits in place (as trainer/forwards/logprobs.py does, for the same reason: no second
    vocabulary-sized tensor)."""

    @staticmethod
    def forward(ctx, logits, targets, teacher_logp, temperature, with_entropy, block):
        m, C, _ = logits.shape
        picked = torch.empty(m, C, dtype=torch.float32, device=logits.device)
        lse, kl = torch.empty_like(picked), torch.empty_like(picked)
        entropy = torch.empty_like(picked) if with_entropy else None
        for rows, cols in _blocks(logits.shape, block):
            logp_all, lse_b = _block_log_softmax(logits[rows, cols], temperature)
            p = logp_all.exp()
            lse[rows, cols] = lse_b.squeeze(-1)
            picked[rows, cols] = logp_all.gather(-1, targets[rows, cols].unsqueeze(-1)).squeeze(-1)
            kl[rows, cols] = (p * (logp_all - teacher_logp[rows, cols])).sum(-1)
            if with_entropy:
                entropy[rows, cols] = -(p * logp_all).sum(-1)
        ctx.save_for_backward(logits, targets, teacher_logp, lse, kl, entropy)
        ctx.temperature, ctx.block = temperature, block
        ctx.set_materialize_grads(False)     # an unused output's gradient stays None
        return picked, kl, entropy

    @staticmethod
    def backward(ctx, grad_logp, grad_kl, grad_entropy):
        logits, targets, teacher_logp, lse, kl, entropy = ctx.saved_tensors
        T = ctx.temperature
        zeros = torch.zeros_like(lse)
        grad_logp = zeros if grad_logp is None else grad_logp.float()
        grad_kl = zeros if grad_kl is None else grad_kl.float()
        grad = logits        # written in place, block by block (see the class docstring)
        for rows, cols in _blocks(logits.shape, ctx.block):
            logp_all = _scaled(logits[rows, cols], T) - lse[rows, cols].unsqueeze(-1)
            p = logp_all.exp()
            g_lp, g_kl = grad_logp[rows, cols].unsqueeze(-1), grad_kl[rows, cols].unsqueeze(-1)
            q, k = teacher_logp[rows, cols], kl[rows, cols].unsqueeze(-1)
            inner = g_kl * (logp_all - q - k) - g_lp
            if grad_entropy is not None:       # the entropy bonus's share
                h = entropy[rows, cols].unsqueeze(-1)
                inner = inner - grad_entropy[rows, cols].float().unsqueeze(-1) * (logp_all + h)
            out = p * inner
            out.scatter_add_(-1, targets[rows, cols].unsqueeze(-1), g_lp)
            grad[rows, cols] = (out / T).to(grad.dtype)
        return grad, None, None, None, None, None
