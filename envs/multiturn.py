"""Multi-turn environments: the policy writes, the environment answers or ends the episode.

An episode starts from a task's prompt. Each turn the policy writes one assistant message; the
environment then either answers (tool results, test feedback, a user turn) or says the episode is
over. `max_turns` (assistant turns) and `max_tokens` (every token after the prompt, the policy's
and the environment's) bound every episode, so a policy that never stops calling tools ends with
a reason, not a hang. A plain `Environment` is the one-turn case: it never answers.

The reward judges the whole episode. An `Episode` *is* a `Completion` whose `text` is the final
assistant message, so every existing reward (math, code, format) scores the final answer of an
episode unchanged, and episode-aware rewards read `messages`, `turns`, `tool_calls`.
Transcripts are OpenAI/TRL chat messages (tool calls as `tool_calls`), so an episode written by
the trainer and a `messages` row scored by `rlvr score` are the same object (`episode_from_row`).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from rlvr.core import BaseReward, Completion, Task
from rlvr.verifiers.tools import ToolCall, Toolbox, parse_tool_calls, strip_calls

from .base import Environment

__all__ = ["Episode", "Reply", "MultiTurnEnvironment", "ToolEnvironment", "FinalAttempt",
           "is_multiturn", "respond_batch", "episode_limits", "episode_from_row",
           "episode_from_messages", "check_messages", "TranscriptError", "assistant_message", "ROLES"]

ROLES = ("system", "user", "assistant", "tool")


@dataclass
class Episode(Completion):
    """One episode: what happened after the prompt, as chat messages, plus its accounting.

    `text` is the last assistant message's content (what single-answer rewards read);
    `token_ids` every token after the prompt; `token_mask` marks the policy's own tokens (1)
    against the environment's (0) -- only the former are ever trained on."""
    messages: list = field(default_factory=list)
    token_mask: list | None = None
    turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    env_tokens: int = 0
    end_reason: str = ""
    """stop (the policy answered / the environment closed it), max_turns, max_tokens, or length
    (a turn hit the per-turn token cap)."""
    pending_calls: list = field(default_factory=list, repr=False)
    """The last turn's parsed calls, malformed ones included (what a ToolEnvironment runs)."""
    state: dict = field(default_factory=dict)
    """Per-episode scratch space for `respond` (a game board, a counter); picklable. It is not
    part of the transcript, so a reward that reads it cannot be recomputed by `rlvr score`."""

    def add_turn(self, text: str, calls: list[ToolCall], ids: list[int], finish: str) -> None:
        """Append one policy turn (its text with the calls taken out, and its tokens)."""
        self.messages.append(assistant_message(text, calls))
        self.pending_calls = calls
        self.token_ids = (self.token_ids or []) + list(ids)
        self.token_mask = (self.token_mask or []) + [1] * len(ids)
        self.turns += 1
        self.text = self.messages[-1]["content"]
        self.finish_reason = finish

    def add_environment(self, messages: list[dict], ids: list[int]) -> None:
        self.messages.extend(messages)
        self.token_ids = (self.token_ids or []) + list(ids)
        self.token_mask = (self.token_mask or []) + [0] * len(ids)
        self.env_tokens += len(ids)


def assistant_message(text: str, calls: Sequence[ToolCall] = ()) -> dict:
    """The OpenAI/TRL message for a turn: content outside the calls, well-formed calls as
    `tool_calls` (a malformed call stays in the content, as the policy wrote it)."""
    good = [c for c in calls if not c.error]
    msg = {"role": "assistant", "content": strip_calls(text, good) if good else text}
    if good:
        msg["tool_calls"] = [c.to_message() for c in good]
    return msg


@dataclass
class Reply:
    """The environment's answer to a turn: messages to append, or `done` (with a reason)."""
    messages: list = field(default_factory=list)
    done: bool = False
    reason: str = "stop"
    tool_calls: int = 0
    tool_errors: int = 0


@dataclass
class MultiTurnEnvironment(Environment):
    """An Environment that may answer the policy. Subclasses implement `respond`.

    `tools`, when set, are shown to the model through the chat template (`apply_chat_template(
    ..., tools=schemas)`)."""
    max_turns: int = 4
    max_tokens: int = 1024
    toolbox: Toolbox | None = None

    def __post_init__(self):
        super().__post_init__()
        if self.max_turns < 1 or self.max_tokens < 1:
            raise ValueError("max_turns and max_tokens must be >= 1")

    @property
    def tool_schemas(self) -> list[dict] | None:
        return self.toolbox.schemas if self.toolbox else None

    def respond(self, task: Task, episode: Episode) -> Reply:
        """The answer to the episode's last turn (default: the episode is over)."""
        return Reply(done=True)

    def respond_batch(self, tasks: Sequence[Task], episodes: Sequence[Episode]) -> list[Reply]:
        return [self.respond(t, e) for t, e in zip(tasks, episodes)]

    def describe(self) -> dict:
        return {**super().describe(), "max_turns": self.max_turns, "max_tokens": self.max_tokens,
                "tools": [s["function"]["name"] for s in self.tool_schemas or []]}


def is_multiturn(env) -> bool:
    return isinstance(env, MultiTurnEnvironment)


def episode_limits(env, per_turn: int) -> tuple[int, int]:
    """(max_turns, token budget after the prompt) for any environment: a plain Environment is
    one turn of at most `per_turn` tokens."""
    if is_multiturn(env):
        return env.max_turns, env.max_tokens
    return 1, per_turn


def respond_batch(env, tasks: Sequence[Task], episodes: Sequence[Episode]) -> list[Reply]:
    """Every environment's answer; a plain Environment ends each episode after one turn."""
    if not is_multiturn(env):
        return [Reply(done=True) for _ in episodes]
    replies = env.respond_batch(tasks, episodes)
    if len(replies) != len(episodes):
        raise ValueError(f"{type(env).__name__}.respond_batch returned {len(replies)} replies "
                         f"for {len(episodes)} episodes")
    return replies


@dataclass
class ToolEnvironment(MultiTurnEnvironment):
    """The policy calls tools until it answers: each turn's calls run (all episodes' calls in one
    pooled batch), their results come back as tool messages; a turn without calls ends the
    episode. Every failure of a call is a tool message and counts in `tool_errors`."""

    def respond_batch(self, tasks, episodes):
        calls = [c for e in episodes if e.turns < self.max_turns for c in e.pending_calls]
        results = iter(self.toolbox.run(calls) if calls else [])
        replies = []
        for e in episodes:
            if not e.pending_calls:         # the policy answered: the episode is over
                replies.append(Reply(done=True))
                continue
            if e.turns >= self.max_turns:   # no turn left to read the results in
                replies.append(Reply(done=True, reason="max_turns"))
                continue
            mine = [next(results) for _ in e.pending_calls]
            msgs = [r.to_message(c.id) for r, c in zip(mine, e.pending_calls)]
            replies.append(Reply(msgs, tool_calls=len(mine),
                                 tool_errors=sum(r.error for r in mine)))
        return replies


class FinalAttempt(BaseReward):
    """An inner reward on the final answer, less `cost` per extra turn (never below 0).

    The cost makes a first-try solution worth more than a fixed-up one; 0 scores only the final
    attempt."""

    def __init__(self, inner, cost: float = 0.0):
        self.inner, self.cost = inner, float(cost)
        self.name, self.version = inner.name, f"{inner.version}-cost{self.cost:g}"
        self.max_verify_s = getattr(inner, "max_verify_s", BaseReward.max_verify_s)

    def required_fields(self):
        return self.inner.required_fields() if hasattr(self.inner, "required_fields") else set()

    def score_batch(self, tasks, completions):
        verdicts = self.inner.score_batch(tasks, completions)
        for c, v in zip(completions, verdicts):
            turns = getattr(c, "turns", 1) or 1
            if self.cost and turns > 1 and not v.failed:
                v.score = max(0.0, v.score - self.cost * (turns - 1))
                v.reason = (v.reason + f"; {turns} attempts").lstrip("; ")
            v.version = f"{self.name}@{self.version}"
        return verdicts

    def _score(self, task, completion):
        return self.score_batch([task], [completion])[0]


# --------------------------------------------------------------------------- transcripts

class TranscriptError(ValueError):
    """A `messages` field that is not a chat transcript; the message says what is wrong."""


def _check_message(i: int, m: Any) -> None:
    if not isinstance(m, Mapping):
        raise TranscriptError(f"messages[{i}] is {type(m).__name__}, not an object")
    if m.get("role") not in ROLES:
        raise TranscriptError(f"messages[{i}] has role {m.get('role')!r}; expected one of {ROLES}")
    content = m.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise TranscriptError(f"messages[{i}].content is {type(content).__name__}, "
                              "not a string")
    calls = m.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list) or not all(
                isinstance(c, Mapping) and isinstance(c.get("function", c), Mapping)
                and isinstance(c.get("function", c).get("name"), str) for c in calls):
            raise TranscriptError(f"messages[{i}].tool_calls must be a list of "
                                  '{"type": "function", "function": {"name": ..., '
                                  '"arguments": ...}}')


def _text(content) -> str:
    if isinstance(content, list):     # OpenAI content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return content or ""


def check_messages(messages: Any) -> None:
    """Raise TranscriptError saying what is malformed in a `messages` field."""
    if not isinstance(messages, list) or not messages:
        raise TranscriptError(f"'messages' must be a non-empty list of chat messages, got "
                              f"{type(messages).__name__}")
    for i, m in enumerate(messages):
        _check_message(i, m)
    if not any(m["role"] == "assistant" for m in messages):
        raise TranscriptError("'messages' holds no assistant message: nothing to score")


def episode_from_messages(messages: Any, start: int | None = None) -> tuple[list[dict], Episode]:
    """(the prompt messages, the Episode) of a whole chat transcript. The episode starts at
    message `start` (by default the first assistant message; a prompt holding worked examples
    passes its own length). Raises TranscriptError saying what is malformed."""
    check_messages(messages)
    if start is None:
        start = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    if not any(m["role"] == "assistant" for m in messages[start:]):
        raise TranscriptError("'messages' holds no assistant message after the task's prompt: "
                              "nothing to score")
    prompt = [dict(m) for m in messages[:start]]
    after = [{**m, "content": _text(m.get("content"))} for m in messages[start:]]
    episode = Episode(text="", messages=after)
    for m in after:
        if m["role"] == "assistant":
            episode.turns += 1
            episode.text = m["content"]
            structured = m.get("tool_calls") or []
            episode.tool_calls += len(structured) or len(parse_tool_calls(m["content"])[1])
        elif m["role"] == "tool" and m["content"].startswith("Error:"):
            episode.tool_errors += 1
    last = after[-1]["role"]
    episode.end_reason = "stop" if last == "assistant" else f"ended on a {last} message"
    return prompt, episode


def episode_from_row(env, row: Mapping, line: int | None = None, id_field: str = "id",
                     answer_field: str = "answer") -> tuple[Task, Episode]:
    """The (task, episode) a scoring row with `messages` stands for -- what `rlvr score`
    judges with `env.reward`, the same call the trainer makes on the episodes it ran.

    The task comes from the row like any scoring row (`id_field`, or its own `answer_field` /
    tests); with
    neither, from its prompt messages (for rewards that need no gold). A malformed `messages`
    field raises TranscriptError naming `line`."""
    where = f"line {line}: " if line is not None else ""
    messages = row.get("messages")
    try:
        check_messages(messages)
    except TranscriptError as exc:
        raise TranscriptError(f"{where}{exc}") from None
    rest = {k: v for k, v in row.items() if k != "messages"}
    if not any(k in rest for k in (id_field, answer_field, "tests", "input_output", "test_list")):
        first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
        rest["prompt"] = [dict(m) for m in messages[:first]]
    task = env.task_from_row(rest, id_field, answer_field)
    own = task.prompt if isinstance(task.prompt, list) else _prompt_of(env, rest.get(id_field))
    start = len(own) if own and [dict(m) for m in messages[:len(own)]] == own else None
    try:
        prompt, episode = episode_from_messages(messages, start)
    except TranscriptError as exc:
        raise TranscriptError(f"{where}{exc}") from None
    if task.prompt in ("", None):
        task = replace(task, prompt=prompt)
    return task, episode


def _prompt_of(env, task_id) -> list | None:
    """The chat prompt of the environment's task `task_id`, or None. A row scored by its own
    gold (the trainer's samples.jsonl rows) carries no prompt, yet its transcript begins with the
    task's: knowing where it ends keeps a prompt's worked example out of the episode."""
    if task_id is None:
        return None
    try:
        prompt = env.get_task(str(task_id)).prompt
    except (KeyError, ValueError, IndexError):   # an id this environment does not know
        return None
    return prompt if isinstance(prompt, list) else None


def transcript(task: Task, episode: Episode) -> list[dict]:
    """The whole conversation (prompt + episode) as one `messages` list, as `rlvr score` reads
    it back."""
    prompt = task.prompt if isinstance(task.prompt, list) else [
        {"role": "user", "content": str(task.prompt)}]
    return [dict(m) for m in prompt] + [dict(m) for m in episode.messages]
