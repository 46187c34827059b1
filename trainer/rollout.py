"""Sampling completions from the policy and scoring them with the environment's reward.

A `Rollout` is one batch of experience: G completions for each of P prompts, their token ids,
their verdicts and rewards. It is what `pi_old` produced; the update never regenerates it.
"""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import Iterator

import torch

from rlvr.core import Completion, Task, Verdict

__all__ = ["Rollout", "PromptStream", "encode_prompt", "generate", "score"]


_FINITE_CAP = 10_000   # a split yielding fewer tasks than this is treated as a finite dataset


class PromptStream:
    """Training prompts in a reproducible order, with a cursor a checkpoint can restore.

    Procedural environments (infinite task streams) are read in order; finite datasets are
    shuffled once per epoch with a seeded RNG. `cursor` counts tasks handed out so far.
    """

    def __init__(self, env, seed: int, split: str = "train", cursor: int = 0):
        self.env, self.seed, self.split = env, seed, split
        self.cursor = 0
        self._it = self._tasks()
        for _ in range(cursor):
            next(self._it)
        self.cursor = cursor

    def _tasks(self) -> Iterator[Task]:
        it = self.env.tasks(self.split, self.seed)
        head = list(itertools.islice(it, _FINITE_CAP))
        if not head:
            raise ValueError(f"environment {self.env.name!r} has no {self.split!r} tasks")
        if len(head) < _FINITE_CAP:         # a finite dataset: epochs of seeded shuffles
            for epoch in itertools.count():
                order = list(head)
                random.Random(f"{self.seed}/{epoch}").shuffle(order)
                yield from order
        yield from head                     # procedural: the generator's own seeded order
        yield from it

    def take(self, n: int) -> list[Task]:
        self.cursor += n
        return [next(self._it) for _ in range(n)]


def encode_prompt(tokenizer, prompt) -> list[int]:
    """Chat messages go through the tokenizer's chat template (environments write messages);
    plain strings (base-model templates like R1-Zero's) are tokenized as they are."""
    if isinstance(prompt, list):
        text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        return tokenizer(text, add_special_tokens=False).input_ids
    if isinstance(prompt, str):
        return tokenizer(prompt).input_ids
    raise TypeError(f"task prompt must be a string or chat messages, got {type(prompt).__name__}")


@dataclass
class Rollout:
    """Completions of one batch, grouped by prompt: rows g*G .. g*G+G-1 belong to prompt g."""
    tasks: list[Task]                 # one per completion (the prompt's task, repeated)
    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]   # ends with EOS when finish_reason == 'stop'
    completions: list[Completion]
    verdicts: list[Verdict] = field(default_factory=list)
    rewards: torch.Tensor | None = None   # [N] float: verdict score (+ shaping)
    valid: torch.Tensor | None = None     # [N] bool: counted in baselines and losses
    group_size: int = 1

    def __len__(self) -> int:
        return len(self.completions)

    @property
    def num_groups(self) -> int:
        return len(self) // self.group_size

    def select_groups(self, groups: list[int]) -> "Rollout":
        rows = [g * self.group_size + j for g in groups for j in range(self.group_size)]
        pick = lambda xs: [xs[r] for r in rows]
        return Rollout(pick(self.tasks), pick(self.prompt_ids), pick(self.completion_ids),
                       pick(self.completions), pick(self.verdicts),
                       None if self.rewards is None else self.rewards[rows],
                       None if self.valid is None else self.valid[rows], self.group_size)

    @staticmethod
    def concat(parts: list["Rollout"]) -> "Rollout":
        first = parts[0]
        cat = lambda name: [x for p in parts for x in getattr(p, name)]
        return Rollout(cat("tasks"), cat("prompt_ids"), cat("completion_ids"),
                       cat("completions"), cat("verdicts"),
                       torch.cat([p.rewards for p in parts]), torch.cat([p.valid for p in parts]),
                       first.group_size)


def _eos_ids(model, tokenizer) -> set[int]:
    ids = {tokenizer.eos_token_id}
    gen_eos = getattr(model.generation_config, "eos_token_id", None)
    ids |= set(gen_eos if isinstance(gen_eos, list) else [gen_eos])
    return {i for i in ids if i is not None}


@torch.no_grad()
def generate(model, tokenizer, tasks: list[Task], group_size: int, max_new_tokens: int,
             temperature: float = 1.0, top_p: float = 1.0, greedy: bool = False,
             batch_size: int = 0) -> Rollout:
    """Sample `group_size` completions per task with Hugging Face `generate`.

    Completions are cut after their first EOS (kept: the model must learn to stop) and
    marked `stop`; those that reach `max_new_tokens` are marked `length`. No top-k and no
    repetition penalty: the samples must come from pi itself, or the ratio to pi_old is wrong.
    """
    from transformers import GenerationConfig
    device = next(model.parameters()).device
    eos = _eos_ids(model, tokenizer)
    gen_cfg = GenerationConfig(
        do_sample=not greedy, temperature=None if greedy else temperature,
        top_p=None if greedy else top_p, top_k=None if greedy else 0, max_new_tokens=max_new_tokens,
        num_return_sequences=group_size, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=sorted(eos), repetition_penalty=1.0)
    prompts = [encode_prompt(tokenizer, t.prompt) for t in tasks]
    per_call = max(1, (batch_size or len(tasks) * group_size) // group_size)
    out = Rollout([], [], [], [], group_size=group_size)
    for start in range(0, len(tasks), per_call):
        chunk = prompts[start:start + per_call]
        width = max(map(len, chunk))
        ids = torch.full((len(chunk), width), tokenizer.pad_token_id, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for i, p in enumerate(chunk):
            ids[i, width - len(p):] = torch.tensor(p)
            attn[i, width - len(p):] = 1
        seqs = model.generate(input_ids=ids.to(device), attention_mask=attn.to(device),
                              generation_config=gen_cfg)[:, width:].tolist()
        for k, seq in enumerate(seqs):
            g = start + k // group_size
            stop = next((i for i, tok in enumerate(seq) if tok in eos), None)
            ids_k = seq[:stop + 1] if stop is not None else seq[:max_new_tokens]
            text = tokenizer.decode(ids_k[:-1] if stop is not None else ids_k,
                                    skip_special_tokens=True)
            out.tasks.append(tasks[g])
            out.prompt_ids.append(prompts[g])
            out.completion_ids.append(ids_k)
            out.completions.append(Completion(text, ids_k, "stop" if stop is not None else "length"))
    return out


def score(env, rollout: Rollout, drop_failed: bool = True) -> Rollout:
    """Verdicts from the environment's reward; rewards = scores, valid = verdict not failed."""
    rollout.verdicts = env.reward.score_batch(rollout.tasks, rollout.completions)
    rollout.rewards = torch.tensor([v.score for v in rollout.verdicts], dtype=torch.float32)
    rollout.valid = torch.tensor([not (drop_failed and v.failed) for v in rollout.verdicts])
    return rollout
