"""What the update asks of a forward: the interface every way of computing log-probs meets.

The update (trainer/objective/update.py) never sees how log-probs are computed. It cuts a rollout into
micro-batches, asks for log pi(y_t | x, y_<t) of the sampled tokens (and, for distillation, the
teacher's distribution and the reverse KL to it; for PPO, the critic's values), and brackets
each pass over the micro-batches with `pass_over`. Three forwards implement it: the reference
one (trainer/forwards/reference.py, the definition), the fast one (trainer/forwards/fast.py, tested equal to it)
and the sharded one (trainer/parallel/fsdp.py, the reference forward over FSDP2-sharded models).
"""
from __future__ import annotations

import contextlib
from typing import Protocol, Sequence, runtime_checkable

import torch

__all__ = ["Forward", "Micro"]


@runtime_checkable
class Micro(Protocol):
    """One micro-batch as the update reads it; its tensors are the forward's business."""

    rows: list[int]
    """Rollout rows, in this micro-batch's order."""
    mask: torch.Tensor
    """[m, C] bool: real completion tokens (row k is rollout row rows[k])."""
    silent: bool
    """True when the forward will give this micro-batch no gradient (every advantage 0 and
    nothing else in the loss): its log-probs are placeholders, not measurements."""


@runtime_checkable
class Forward(Protocol):
    """Log-probs (and critic values) for the update, computed one way or another but equal."""

    name: str
    """'reference', 'fast' or 'fsdp': which forward ran (logged, and read by tests)."""

    def micro_batches(self, rollout, size: int,
                      advantages: torch.Tensor | None = None) -> Sequence[Micro]:
        """The rollout's rows, `size` at a time. `advantages` [N] are given only when a zero
        advantage means a zero gradient, so a forward may skip such rows (`Micro.silent`)."""

    def logprobs(self, model, mb: Micro, temperature: float = 1.0,
                 with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """log softmax(logits / T)[y_t] of the sampled tokens [m, C] (with the graph), and if
        asked the entropy of that distribution at each position [m, C] (with the graph too,
        except on a silent micro-batch, which has none)."""

    def vocab_logprobs(self, model, mb: Micro, temperature: float = 1.0) -> torch.Tensor:
        """log softmax(logits / T) over the whole vocabulary at every completion position
        [m, C, V]: a distillation teacher's distribution."""

    def logprobs_and_kl(self, model, mb: Micro, teacher_logp: torch.Tensor,
                        temperature: float = 1.0, with_entropy: bool = False):
        """(`logprobs`, reverse KL(pi_theta || teacher) at each position [m, C], entropy) from
        one forward of `model`; `teacher_logp` is `vocab_logprobs` of the teacher."""

    def values(self, critic, mb: Micro) -> torch.Tensor:
        """V(s_t) [m, C]: the critic's value of the state before completion token t."""

    def pass_over(self, micro: Sequence[Micro]) -> contextlib.AbstractContextManager:
        """Context around one pass of one model over the micro-batches (work they share, such
        as a prompt prefix common to the batch, runs once inside it)."""

    def checkpoint_layers(self, model) -> None:
        """Turn on activation checkpointing for `model`'s decoder layers in the way this
        forward's calls stay exact under it (gradient_checkpointing = true)."""
