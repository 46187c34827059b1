"""Episode rollouts: the policy writes a turn, the environment answers, until the episode ends.

There is one rollout path for every environment. Turn 1 is the engine's ordinary `generate`
(G samples per task, the same call, seeds and tokens a single-turn run has always used), and a
plain `Environment` ends every episode there: its rollout is exactly the single-turn one. A
`MultiTurnEnvironment` then answers each unfinished episode; its answer is rendered through the
chat template and appended as token ids (never re-tokenising what the policy wrote, so the
context the update sees is the one the policy sampled from), and the episode continues from
there with one sample, until the environment ends it or `max_turns` / the token budget does.

A row of the resulting Rollout is one episode: `completion_ids` are all tokens after the prompt
and `completions[i].token_mask` says which of them the policy wrote. Environment and tool
tokens stay in the context but `policy_tokens` leaves them out of every loss.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace

import torch

from rlvr.core import Completion, Task
from rlvr.envs.multiturn import Episode, episode_limits, is_multiturn, respond_batch
from rlvr.verifiers.tools import ToolCall, parse_tool_calls

from rlvr.trainer.sampling.prompts import tool_prompt
from rlvr.trainer.sampling.rollout import Rollout, eos_ids

__all__ = ["run_episodes", "EpisodeEngine", "episode_engine", "policy_tokens", "overlong_lengths",
           "episode_metrics", "tool_prompt", "env_token_ids", "parse_turn", "episode_sample"]

_SENTINEL = "\x00rlvr-turn-end\x00"
# Tool instructions for chat templates that do not render `tools` themselves: the Hermes
# format Qwen2.5's template writes (the same <tools>/<tool_call> tags our parser reads).
def env_token_ids(tokenizer, prompt, messages: list[dict], tools: list[dict] | None,
                  ended_with_eos: bool) -> list[int]:
    """Tokens that follow a policy turn: the template's end of that turn (less the EOS the
    policy already wrote), the environment's `messages`, and the next assistant header.

    Read as a difference of two renderings, so any prefix-preserving chat template works; one
    that rewrites earlier turns is refused with a clear error."""
    prompt, kw = tool_prompt(tokenizer, prompt, tools)
    if isinstance(prompt, str):       # base-model prompts: plain text turns
        text = "".join(f"\n{m['role'].capitalize()}: {m.get('content') or ''}" for m in messages)
        return tokenizer(text + "\nAssistant:", add_special_tokens=False).input_ids
    base = [*prompt, {"role": "assistant", "content": _SENTINEL}]
    before = tokenizer.apply_chat_template(base, tokenize=False, **kw)
    after = tokenizer.apply_chat_template(base + list(messages), tokenize=False,
                                          add_generation_prompt=True, **kw)
    if not after.startswith(before) or _SENTINEL not in before:
        raise ValueError("this chat template is not prefix-preserving (rendering a later turn "
                         "changes earlier text), so multi-turn contexts cannot be extended "
                         "token by token; use a template that renders history unchanged")
    closing = before[before.rindex(_SENTINEL) + len(_SENTINEL):]
    eos = tokenizer.eos_token or ""
    if ended_with_eos and eos and closing.startswith(eos):
        closing = closing[len(eos):]
    return tokenizer(closing + after[len(before):], add_special_tokens=False).input_ids


def parse_turn(tokenizer, text: str, ids: list[int], context: list[int],
               tools: list[dict] | None) -> list[ToolCall]:
    """The tool calls of one turn: the tokenizer's own response parser when it declares one
    (`response_template`), else the Hermes `<tool_call>` format."""
    if not tools:
        return []
    if getattr(tokenizer, "response_template", None) is not None:
        try:
            msg = tokenizer.parse_response(ids, prefix=context, tools=tools)
            return [ToolCall(name=c["function"]["name"], arguments=c["function"].get("arguments")
                             or {}, raw=json.dumps(c)) for c in msg.get("tool_calls") or []]
        except Exception:      # an unparseable turn: let the Hermes reader name what is wrong
            pass
    return parse_tool_calls(text)[1]


def _turn(tokenizer, ids: list[int], eos: set[int], limit: int) -> tuple[list[int], str, str]:
    """(ids cut after the first EOS, text, finish reason) of one sampled turn."""
    stop = next((i for i, t in enumerate(ids) if t in eos), None)
    if stop is not None and stop < limit:
        ids = ids[:stop + 1]
        return ids, tokenizer.decode(ids[:-1], skip_special_tokens=True), "stop"
    ids = ids[:limit]
    return ids, tokenizer.decode(ids, skip_special_tokens=True), "length"


@dataclass(frozen=True)
class Continuation:
    """One sampled turn: its token ids (uncut) and, when the engine reports them, the sampler's
    log-prob of each (a server's; an engine's `generate_ids` may return these or plain id
    lists)."""
    ids: list[int]
    logprobs: list[float] | None = None


def _sample(engine, contexts: list[list[int]], max_new: int, seeds, temperature, top_p,
            greedy) -> list[Continuation]:
    """One continuation per context from the engine's policy."""
    if not hasattr(engine, "generate_ids"):
        raise TypeError(f"{type(engine).__name__} cannot continue episodes: give it a "
                        "generate_ids(contexts, max_new, ...) method")
    out = engine.generate_ids(contexts, max_new, temperature=temperature, top_p=top_p,
                              greedy=greedy, seeds=seeds)
    return [c if isinstance(c, Continuation) else Continuation(list(c)) for c in out]


def _turn_seed(seed: int | None, row: int, turn: int) -> int | None:
    return None if seed is None else (seed * 1_000_003 + row * 7_919 + turn) % 2**62


def run_episodes(engine, env, tokenizer, tasks: list[Task], group_size: int,
                 max_new_tokens: int, *, temperature: float = 1.0, top_p: float = 1.0,
                 greedy: bool = False, seeds: list[int] | None = None) -> Rollout:
    """G episodes per task (unscored): rows g*G .. g*G+G-1 belong to task g.

    `max_new_tokens` caps each policy turn; the environment's `max_turns` and `max_tokens` cap
    the episode (a plain Environment: one turn). Turn k > 1 of row i samples with a seed derived
    from its group's seed, the row and k, so episodes are reproducible (and resumable)."""
    max_turns, budget = episode_limits(env, max_new_tokens)
    tools = getattr(env, "tool_schemas", None)
    shown = [replace(t, metadata={**t.metadata, "tools": tools}) for t in tasks] if tools else tasks
    rollout = engine.generate(shown, group_size, min(max_new_tokens, budget),
                              temperature=temperature, top_p=top_p, greedy=greedy, seeds=seeds)
    rollout.tasks = [tasks[i // group_size] for i in range(len(rollout))]
    if not is_multiturn(env):
        return rollout
    eos = eos_ids(tokenizer, getattr(engine, "policy", None))
    sampler = SamplerLogprobs(rollout.sampler_logp)
    episodes = []
    for i, c in enumerate(rollout.completions):
        e = Episode(text="", token_ids=[])
        calls = parse_turn(tokenizer, c.text, c.token_ids, rollout.prompt_ids[i], tools)
        e.add_turn(c.text, calls, c.token_ids, c.finish_reason)
        episodes.append(e)
    row_seeds = [None if seeds is None or greedy else seeds[i // group_size]
                 for i in range(len(episodes))]
    active = [i for i, e in enumerate(episodes) if not _ended(e, budget)]
    while active:
        replies = respond_batch(env, [rollout.tasks[i] for i in active],
                                [episodes[i] for i in active])
        go, contexts, caps = [], [], []
        for i, reply in zip(active, replies):
            e = episodes[i]
            e.tool_calls, e.tool_errors = e.tool_calls + reply.tool_calls, \
                e.tool_errors + reply.tool_errors
            if reply.done or e.turns >= max_turns:
                e.end_reason = reply.reason if reply.done else "max_turns"
                continue
            ids = env_token_ids(tokenizer, rollout.tasks[i].prompt, reply.messages, tools,
                                bool(e.token_ids) and e.token_ids[-1] in eos)
            left = budget - len(e.token_ids) - len(ids)
            if left <= 0:
                e.end_reason = "max_tokens"
                continue
            e.add_environment(reply.messages, ids)
            sampler.environment(i, len(ids))
            go.append(i)
            contexts.append(rollout.prompt_ids[i] + e.token_ids)
            caps.append(min(max_new_tokens, left))
        if not go:
            break
        seeds_k = None if row_seeds[0] is None else \
            [_turn_seed(row_seeds[i], i, episodes[i].turns + 1) for i in go]
        sampled = _sample(engine, contexts, max(caps), seeds_k, temperature, top_p, greedy)
        for i, ctx, cap, raw in zip(go, contexts, caps, sampled):
            ids, text, finish = _turn(tokenizer, raw.ids, eos, cap)
            sampler.turn(i, raw, len(ids))
            episodes[i].add_turn(text, parse_turn(tokenizer, text, ids, ctx, tools), ids, finish)
        active = [i for i in go if not _ended(episodes[i], budget)]
    for i, e in enumerate(episodes):
        e.end_reason = e.end_reason or "stop"
        rollout.completion_ids[i] = e.token_ids
        rollout.completions[i] = e
    rollout.token_entropy = None        # measured on turn 1 only: the update measures episodes
    rollout.sampler_logp = sampler.rows()
    return rollout


class SamplerLogprobs:
    """The sampler's log-prob of every episode token, when the engine reports them (a server's
    turn 1 in `Rollout.sampler_logp`, later turns as the `Continuation.logprobs` of what
    `generate_ids` returned): environment tokens get 0 (they carry no loss). `rows()` is None
    as soon as one turn came without them, and the update then leaves the episodes uncorrected."""

    def __init__(self, first_turns: list[list[float]] | None):
        self.logps = None if first_turns is None else [list(lp) for lp in first_turns]

    def environment(self, row: int, n: int) -> None:
        if self.logps is not None:
            self.logps[row] += [0.0] * n

    def turn(self, row: int, sampled: Continuation, n: int) -> None:
        """A later turn of `row`: `sampled` as the engine returned it, its first n tokens kept."""
        lp = sampled.logprobs
        if lp is None:
            self.logps = None
        elif self.logps is not None:
            self.logps[row] += list(lp[:n])

    def rows(self) -> list[list[float]] | None:
        return self.logps


class EpisodeEngine:
    """A rollout engine whose `generate` runs whole episodes of a multi-turn environment, so the
    trainer's collect and eval paths run episodes without knowing it (same interface)."""

    def __init__(self, engine, env, tokenizer):
        self.engine, self.env, self.tokenizer = engine, env, tokenizer

    def generate(self, tasks, group_size, max_new_tokens, *, temperature=1.0, top_p=1.0,
                 greedy=False, seeds=None) -> Rollout:
        return run_episodes(self.engine, self.env, self.tokenizer, tasks, group_size,
                            max_new_tokens, temperature=temperature, top_p=top_p, greedy=greedy,
                            seeds=seeds)

    def sync_weights(self, policy) -> None:
        self.engine.sync_weights(policy)

    def __getattr__(self, name):             # policy, batch_size... of the wrapped engine
        return getattr(self.engine, name)


def episode_engine(engine, env, tokenizer) -> EpisodeEngine:
    """The trainer's engine for `env`: episodes for every environment (for a single-turn one,
    exactly the wrapped engine's rollout)."""
    return EpisodeEngine(engine, env, tokenizer)


def _ended(e: Episode, budget: int) -> bool:
    """An episode whose tokens fill the budget ends here. A turn cut by the per-turn cap does
    not end it: the environment sees the cut turn (a tool call cut short is a malformed call,
    reported to the policy) and the budget still bounds the episode."""
    if len(e.token_ids) >= budget:
        e.end_reason = "max_tokens"
        return True
    return False


def policy_tokens(rollout: Rollout, mb) -> torch.Tensor:
    """[m, C] bool: the completion tokens of a micro-batch the policy wrote (all real tokens of a
    single-turn completion; an episode's `token_mask` ones). Nothing else is trained on."""
    masks = [getattr(rollout.completions[r], "token_mask", None) for r in mb.rows]
    if all(m is None for m in masks):
        return mb.mask
    own = torch.zeros_like(mb.mask)
    for k, (r, m) in enumerate(zip(mb.rows, masks)):
        if m is None:
            own[k, :len(rollout.completion_ids[r])] = True
        else:
            own[k, :len(m)] = torch.tensor(m, dtype=torch.bool)
    return own & mb.mask


def overlong_lengths(rollout: Rollout, env, max_completion_length: int) -> tuple[torch.Tensor, int]:
    """(lengths, limit) for DAPO's overlong shaping: a completion's tokens against the per-turn
    cap; an episode's tokens against its environment's budget (`max_tokens`), the limit that
    cuts an episode short."""
    lengths = torch.tensor([len(c) for c in rollout.completion_ids])
    if any(isinstance(c, Episode) for c in rollout.completions):
        return lengths, episode_limits(env, max_completion_length)[1]
    return lengths, max_completion_length


def episode_metrics(rollout: Rollout) -> dict:
    """turns/mean, tool_calls/mean, tool_calls/error_rate, episode/env_token_share, the share of
    each end reason (and policy tokens per episode) -- for rollouts of episodes; {} otherwise."""
    eps = [c for c in rollout.completions if isinstance(c, Episode)]
    if not eps:
        return {}
    n, calls = len(eps), sum(e.tool_calls for e in eps)
    tokens = sum(len(e.token_ids or []) for e in eps)
    out = {"turns/mean": sum(e.turns for e in eps) / n, "tool_calls/mean": calls / n,
           "tool_calls/error_rate": sum(e.tool_errors for e in eps) / calls if calls else 0.0,
           "episode/env_token_share": sum(e.env_tokens for e in eps) / max(tokens, 1),
           "episode/policy_tokens_mean": (tokens - sum(e.env_tokens for e in eps)) / n}
    for reason in sorted({e.end_reason for e in eps}):
        out[f"episode/end/{reason}_rate"] = sum(e.end_reason == reason for e in eps) / n
    return out


def episode_sample(task: Task, completion: Completion) -> dict:
    """Extra fields of a samples.jsonl row for an episode (its transcript and accounting)."""
    if not isinstance(completion, Episode):
        return {}
    from rlvr.envs.multiturn import transcript
    return {"messages": transcript(task, completion), "turns": completion.turns,
            "tool_calls": completion.tool_calls, "tool_errors": completion.tool_errors,
            "end_reason": completion.end_reason}
