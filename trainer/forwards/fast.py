"""The fast forward: the log-probs (and critic values) the update asks for, computed the way
CPU training can afford. Equal to the reference forward (trainer/forwards/reference.py) up to float
rounding -- tests/test_forwards.py checks log-probs, gradients and weights -- and chosen with
`forward = "fast"` (the default).

What it does, each measured in benchmarks/README.md:
- micro-batches of whole groups, longest first (less padding);
- a group's prompt run once and its completions continuing its KV cache, packed back to back
  without padding between them (trainer/forwards/packing.py), and a prefix shared by every prompt run
  once per pass (trainer/forwards/prefix.py);
- the graph cut between the prompt and the completions (`_defer_prompt_backward`): no
  parameter-sized gradient held across the two;
- logits only where they predict a completion token, log-probs block by block
  (trainer/forwards/logprobs.py);
- groups without signal (every advantage 0 and nothing else in the loss) skip their forward
  and backward: their gradient is exactly zero.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from rlvr.trainer.objective.distill import log_softmax_, logprobs_and_reverse_kl
from rlvr.trainer.forwards.hf_adapter import (cache_kwarg, checkpoint_with_replay, repeat_rows, returned_cache,
                         select_rows)
from rlvr.trainer.forwards.packing import Packing, Piece, mask_dtype, packs
from rlvr.trainer.forwards.prefix import SharedPrefix, cut_cache, one_pass, prompt_forward
from rlvr.trainer.sampling.rollout import left_pad, sampled_entropy

__all__ = ["MicroBatch", "pack", "plan_groups", "completion_logprobs", "completion_values",
           "completion_vocab_logprobs", "completion_logprobs_and_kl", "FastForward"]


@dataclass
class MicroBatch:
    """Packed tensors for whole groups of completions that share one prompt each.

    Completions are right-padded in [m, C]; the g distinct prompts are left-padded in [g, P],
    and row i of the completions continues prompt i // repeats. With `share_prefix`, each prompt
    is run once and its group's completions continue its KV cache (packed, see `Packing`;
    exact: the same attention inputs, G times fewer prompt tokens through the model, gradients
    flow through the shared prefix); otherwise each row is the full [prompt | completion]
    sequence. With a `prefix` (tokens that begin every prompt of the batch), the prompts here
    are what follows it.
    """
    rows: list[int]                # rollout rows, in this micro-batch's order
    prompt_ids: torch.Tensor       # [g, P]
    prompt_mask: torch.Tensor      # [g, P]
    targets: torch.Tensor          # [m, C] completion token ids
    mask: torch.Tensor             # [m, C] bool, real completion tokens
    repeats: int                   # completions per prompt in this micro-batch
    share_prefix: bool = True
    prefix: "SharedPrefix | None" = None
    silent: bool = False           # every advantage 0 and nothing else in the loss: no gradient
    sampled_entropy: torch.Tensor | None = None   # [m, C] the sampler's, when it measured it


def pack(groups: list[list[int]], prompts: list[list[int]], completions: list[list[int]],
         pad_id: int, device, share_prefix: bool = True,
         prefix: SharedPrefix | None = None) -> MicroBatch:
    """Groups (lists of rollout rows with the same prompt and equal size) -> one MicroBatch
    (with a `prefix`, its prompts keep what follows it)."""
    rows = [r for grp in groups for r in grp]
    heads = [prompts[grp[0]] for grp in groups]
    if prefix is not None:
        if not share_prefix:
            raise ValueError("a shared prefix needs share_prefix (the prompt run once per group)")
        ids = prefix.ids[0].tolist()
        if any(h[:len(ids)] != ids or len(h) <= len(ids) for h in heads):
            raise ValueError("a prompt does not begin with the shared prefix")
        heads = [h[len(ids):] for h in heads]
    C = max(max(len(completions[r]) for r in rows), 1)
    pids, pmask = left_pad(heads, pad_id, "cpu")
    targets = torch.full((len(rows), C), pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        targets[i, :len(completions[r])] = torch.tensor(completions[r], dtype=torch.long)
    mask = torch.arange(C)[None, :] < torch.tensor([len(completions[r]) for r in rows])[:, None]
    return MicroBatch(rows, pids.to(device), pmask.to(device), targets.to(device),
                      mask.to(device), len(groups[0]), share_prefix, prefix)


def _hidden_or_logits(model, mb: MicroBatch, logits: bool) -> list[Piece]:
    """Outputs at the positions that predict each completion token, in pieces ([m, C, V] logits
    from a causal LM, or [m, C, H] last hidden states from a bare backbone, the critic).
    Pieces, not one tensor: joining vocabulary-sized logits would copy them all once more."""
    G, C = mb.repeats, mb.targets.size(1)
    pick = (lambda o: o.logits) if logits else (lambda o: o.last_hidden_state)
    keep = {"logits_to_keep": 1} if logits else {}
    if not mb.share_prefix:
        ids = torch.cat([mb.prompt_ids.repeat_interleave(G, 0), mb.targets], 1)
        attn = torch.cat([mb.prompt_mask.repeat_interleave(G, 0), mb.mask.long()], 1)
        pos = (attn.cumsum(-1) - 1).clamp_min(0)
        keep = {"logits_to_keep": C + 1} if logits else {}
        out = pick(model(input_ids=ids, attention_mask=attn, position_ids=pos, **keep))
        return [Piece(out[:, -(C + 1):-1], mb.targets)]
    # The prompt once per group; its last position predicts the first completion token.
    out, pmask = _prompt_forward(model, mb, keep)
    first = Piece(pick(out)[:, -1:].repeat_interleave(G, 0), mb.targets[:, :1])
    if C == 1:
        return [first]
    cache = returned_cache(out)
    packed = Packing.of(mb, pmask) if packs(model) else None
    if packed is None:
        repeat_rows(cache, G)
        pmask = pmask.repeat_interleave(G, 0)
        attn = torch.cat([pmask, mb.mask[:, :-1].long()], 1)
        cpos = pmask.sum(-1, keepdim=True) + torch.arange(C - 1, device=pmask.device)[None, :]
        ids, targets = mb.targets[:, :-1], mb.targets[:, 1:]
    else:
        select_rows(cache, packed.prompt)
        attn = packed.attention(mask_dtype(model))
        cpos, ids, targets = packed.positions, packed.ids, packed.targets
    first.out = _defer_prompt_backward(first.out, cache)
    rest = model(input_ids=ids, attention_mask=attn, position_ids=cpos, use_cache=True,
                 **{cache_kwarg(model): cache}, **({"logits_to_keep": ids.size(1)} if logits else {}))
    return [first, Piece(pick(rest), targets, packed.where if packed is not None else None)]


def _prompt_forward(model, mb: MicroBatch, keep: dict):
    """The micro-batch's prompts through the model, once each (see `prompt_forward`)."""
    return prompt_forward(model, mb.prompt_ids, mb.prompt_mask, mb.prefix, keep)


def _defer_prompt_backward(first: torch.Tensor, cache) -> torch.Tensor:
    """Cut the graph between the prompt forward and the completion forward; the prompt's
    backward runs once the completion's has delivered the gradients of everything crossing
    the cut (the first-token outputs and the repeated KV cache). The gradients are the same.

    Why: with the prompt and the completions in two forward calls, every weight is used twice
    in one graph, and autograd holds each weight's gradient from the completion pass until
    the prompt pass (run last) adds its share: a whole set of parameter-sized gradients alive
    at once beside the accumulated ones (+0.5 GiB for SmolLM2-135M, benchmarks/README.md,
    "Trainer memory"). Cut, each pass accumulates into .grad as it goes."""
    if not (torch.is_grad_enabled() and first.requires_grad):
        return first
    outs, cut = cut_cache(cache)
    outs.insert(0, first)
    cut.insert(0, first.detach().requires_grad_())

    def prompt_backward(grads):
        pairs = [(o, g) for o, g in zip(outs, grads) if g is not None]
        outs.clear(), cut.clear(), handle[0].remove()   # no cycle keeps the prompt graph alive
        if pairs:
            torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
    handle = [torch.autograd.graph.register_multi_grad_hook(cut, prompt_backward)]
    return cut[0]


def completion_logprobs(model, mb: MicroBatch, temperature: float = 1.0,
                        with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log pi(y_t | x, y_<t) for every completion token [m, C] (and the entropy of pi there).

    Logits are divided by the sampling temperature: the policy being optimised is the
    distribution the completions were drawn from (as TRL does). The log-softmax runs block
    by block (trainer/forwards/logprobs.py): no vocabulary-sized copy of the logits beyond the
    model's own, in the forward or the backward.
    """
    from rlvr.trainer.forwards.logprobs import selective_log_softmax
    parts = []
    for piece in _hidden_or_logits(model, mb, logits=True):
        logp, entropy = selective_log_softmax(piece.out, piece.targets, temperature, with_entropy)
        parts.append((piece.place(logp), piece.place(entropy)))
    logp = torch.cat([lp for lp, _ in parts], 1)
    entropy = torch.cat([e for _, e in parts], 1) if with_entropy else None
    return logp, entropy


@torch.no_grad()
def completion_vocab_logprobs(model, mb: MicroBatch, temperature: float = 1.0) -> torch.Tensor:
    """log softmax(logits / T) over the vocabulary at every completion position, [m, C, V] in
    the micro-batch's layout, without gradient (a teacher's): each piece's logits turned into
    log-probs in place, block by block (trainer/objective/distill.py), then laid out once."""
    return torch.cat([_batch_layout(piece, log_softmax_(piece.out, temperature))
                      for piece in _hidden_or_logits(model, mb, logits=True)], 1)


def completion_logprobs_and_kl(model, mb: MicroBatch, teacher_logp: torch.Tensor,
                               temperature: float = 1.0, with_entropy: bool = False):
    """`completion_logprobs`, and from the same logits the reverse KL to the teacher's
    log-probs [m, C, V] at each completion position [m, C] (block by block, trainer/objective/distill.py):
    -> (log-probs, KL, entropy or None)."""
    parts, col = [], 0
    for piece in _hidden_or_logits(model, mb, logits=True):
        width = piece.out.size(1) if piece.where is None else piece.where.size(1)
        teacher = _piece_layout(piece, teacher_logp[:, col:col + width])
        col += width
        parts.append([piece.place(x) for x in logprobs_and_reverse_kl(
            piece.out, piece.targets, teacher, temperature, with_entropy)])
    logp, kl, entropy = (torch.cat(xs, 1) if xs[0] is not None else None for xs in zip(*parts))
    return logp, kl, entropy


def _batch_layout(piece: Piece, x: torch.Tensor) -> torch.Tensor:
    """A piece's per-position vectors [r, n, V] -> the micro-batch's layout [m, k, V] (zeros
    where a row has no token): `Piece.place` with a trailing dimension."""
    if piece.where is None:
        return x
    flat = x.reshape(-1, x.size(-1))
    out = flat.new_zeros(*piece.where.shape, x.size(-1))
    real = piece.where < flat.size(0)
    out[real] = flat[piece.where[real]]
    return out


def _piece_layout(piece: Piece, x: torch.Tensor) -> torch.Tensor:
    """The inverse of `_batch_layout`: [m, k, V] in the micro-batch's layout -> the piece's
    [r, n, V] (zeros at packed padding positions, which `place` never reads)."""
    if piece.where is None:
        return x
    r, n = piece.targets.shape
    out = x.new_zeros(r * n + 1, x.size(-1))
    out[piece.where.reshape(-1)] = x.reshape(-1, x.size(-1))     # padding all lands on r * n
    return out[:-1].view(r, n, -1)


def completion_values(critic, mb: MicroBatch) -> torch.Tensor:
    """V(s_t) for the state before each completion token [m, C]: read at the position that
    predicts token t (the same alignment as the log-probs)."""
    return torch.cat([piece.place(critic.value_head(piece.out).squeeze(-1).float())
                      for piece in _hidden_or_logits(critic.backbone, mb, logits=False)], 1)


class FastForward:
    """The update's forward (the `Forward` protocol, trainer/forwards/protocol.py) computed with the
    speed machinery listed in this module's docstring."""

    name = "fast"

    def __init__(self, share_prefix: bool, pad_id: int, device):
        self.share_prefix, self.pad_id, self.device = share_prefix, pad_id, device

    def micro_batches(self, rollout, size: int, advantages: torch.Tensor | None = None):
        """Micro-batches of `size` rows. `advantages` [N], given when a zero advantage means a
        zero gradient: groups whose advantages are all 0 go into micro-batches of their own,
        marked silent (in RLVR's sparse early rewards, most groups: every completion wrong)."""
        quiet = _silent_groups(rollout, advantages)
        live = [g for g in range(rollout.num_groups) if g not in quiet]
        loud, still = plan_groups(rollout, size, live), plan_groups(rollout, size, sorted(quiet))
        # a system turn that begins every prompt: once per pass, not once per micro-batch
        prefix = (SharedPrefix.of(rollout.prompt_ids, self.device)
                  if self.share_prefix and len(loud) + len(still) > 1 else None)
        micro = [pack(groups, rollout.prompt_ids, rollout.completion_ids, self.pad_id,
                      self.device, self.share_prefix, prefix) for groups in loud]
        for groups in still:        # never run with gradients: no shared prefix pass to join
            mb = pack(groups, rollout.prompt_ids, rollout.completion_ids, self.pad_id,
                      self.device, self.share_prefix)
            mb.silent, mb.sampled_entropy = True, sampled_entropy(rollout, mb)
            micro.append(mb)
        return micro

    def logprobs(self, model, mb: MicroBatch, temperature: float = 1.0,
                 with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """log pi(y_t | ...) [m, C] and, if asked, the entropy there. A silent micro-batch gets
        zeros without a graph (its loss is A * (...) = 0 whatever they are) and the sampler's
        entropy, measured from the same weights, or else one forward without autograd."""
        if not mb.silent:
            return completion_logprobs(model, mb, temperature, with_entropy)
        entropy = mb.sampled_entropy if with_entropy else None
        if with_entropy and entropy is None:
            with torch.no_grad():
                _, entropy = completion_logprobs(model, mb, temperature, with_entropy=True)
        return torch.zeros(mb.mask.shape, device=mb.mask.device), entropy

    def vocab_logprobs(self, model, mb: MicroBatch, temperature: float = 1.0) -> torch.Tensor:
        """The teacher's log-probs over the vocabulary [m, C, V], no gradient."""
        return completion_vocab_logprobs(model, mb, temperature)

    def logprobs_and_kl(self, model, mb: MicroBatch, teacher_logp: torch.Tensor,
                        temperature: float = 1.0, with_entropy: bool = False):
        """Log-probs, reverse KL to the teacher and entropy from one forward (never silent:
        the KL term reaches every micro-batch)."""
        return completion_logprobs_and_kl(model, mb, teacher_logp, temperature, with_entropy)

    def values(self, critic, mb: MicroBatch) -> torch.Tensor:
        return completion_values(critic, mb)

    def checkpoint_layers(self, model) -> None:
        """Activation checkpointing that replays each layer's KV cache entry (the shared
        prefix's cache must stay exact; the adapter's `checkpoint_with_replay`)."""
        checkpoint_with_replay(model)

    @contextlib.contextmanager
    def pass_over(self, micro: list[MicroBatch]):
        """One pass of a model over the micro-batches: a shared prefix runs once for all of
        them, and its gradient, gathered from every micro-batch, goes through it at the end."""
        prefix = next((mb.prefix for mb in micro if mb.prefix is not None), None)
        with one_pass(prefix):
            yield
            if prefix is not None:
                prefix.backward()


def _silent_groups(rollout, advantages: torch.Tensor | None) -> set[int]:
    if advantages is None:
        return set()
    zero = (advantages == 0).view(-1, rollout.group_size).all(-1)
    return set(zero.nonzero().flatten().tolist())


def plan_groups(rollout, size: int, which: list[int] | None = None) -> list[list[list[int]]]:
    """Rows of the groups `which` (default: all) -> micro-batches of equal-sized same-prompt units: whole
    groups when `size` >= G (size // G groups each), else slices of one group. Longest first,
    so padding stays small."""
    G = rollout.group_size
    which = range(rollout.num_groups) if which is None else which
    total = lambda rows: max(len(rollout.prompt_ids[r]) + len(rollout.completion_ids[r])
                             for r in rows)
    groups = sorted((list(range(g * G, (g + 1) * G)) for g in which), key=lambda rows: -total(rows))
    if size >= G:
        per = size // G
        return [groups[i:i + per] for i in range(0, len(groups), per)]
    return [[grp[j:j + size]] for grp in groups for j in range(0, G, size)]

