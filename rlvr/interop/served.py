"""An rlvr environment behind OpenEnv's `Environment` interface: one instance per session.

`reset` starts an episode on a task (by id, by split and index, or the next one) and returns its
prompt as chat messages, with the tool schemas when the environment has tools. `step` takes one
assistant message (OpenAI/TRL form: `content`, optional `tool_calls`; Hermes `<tool_call>` tags
in the content are read too) and returns the environment's answer (tool results, feedback) or,
when the episode is over, the verdict on the whole episode.

**A failed verdict is never a number.** A finished step whose verdict failed (`timeout`,
`error`, `infra_error`, `gold_unparseable`) carries `reward = None` -- OpenEnv's own "no reward"
-- and the status and reason in `metadata`; TRL leaves a `None` reward out of its baselines and
losses, as rlvr's trainer leaves out failed verdicts. A verdict the completion earned (`ok`, or
`unparsed`: no readable answer) carries its score, 0.0 included.
"""
from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Optional

from openenv.core.env_server import Action, Environment, Observation, State
from pydantic import Field

from rlvr.core import Reward, Task, Verdict
from rlvr.envs.multiturn import Episode, episode_limits, respond_batch
from rlvr.verifiers.tools import ToolCall, parse_tool_calls

__all__ = ["RlvrAction", "RlvrObservation", "RlvrState", "Served", "ServedEnvironment",
           "verdict_metadata"]


class RlvrAction(Action):
    """One assistant message: its text, and the tool calls it makes (OpenAI form:
    `{"type": "function", "function": {"name": ..., "arguments": {...}}}`)."""
    content: str = ""
    tool_calls: list[dict] = Field(default_factory=list)


class RlvrObservation(Observation):
    """On reset: the task's prompt (`messages`) and tool schemas (`tools`). On a step that does
    not end the episode: the environment's new messages. On the last step: `reward` and the
    verdict in `metadata` (`verdict_metadata`)."""
    messages: list[dict] = Field(default_factory=list)
    tools: Optional[list[dict]] = None
    task_id: str = ""


class RlvrState(State):
    """Where the session's episode stands."""
    task_id: str = ""
    turns: int = 0
    done: bool = False


@dataclass
class Served:
    """What every session shares: the environment, its (pooled) reward, and the task cursor
    that hands out the next task to a `reset` that names none."""
    env: Any
    reward: Reward
    split: str = "train"
    seed: int = 0
    _next: Any = field(default_factory=itertools.count, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def task(self, task_id: str | None, split: str | None, index: int | None,
             seed: int | None) -> Task:
        """The task a reset asks for: by id; else task `index` of `split` (seed `seed`); else
        the next task of the served split."""
        if task_id:
            return self.env.get_task(str(task_id))
        if index is None:
            with self._lock:
                index = next(self._next)
        split = split or self.split
        seed = self.seed if seed is None else seed
        tasks = self.env.tasks(split, seed)
        for _ in range(int(index)):
            if next(tasks, None) is None:
                break
        task = next(tasks, None)
        if task is None:
            raise IndexError(f"split {split!r} has no task {index}")
        return task


def verdict_metadata(verdict: Verdict, episode: Episode | None = None) -> dict:
    """The verdict as JSON-safe metadata: status, score (None for a failed verdict, as the
    reward), reason, components, extracted, version, solved, and the episode's accounting."""
    score = None if verdict.failed else verdict.score
    out = {"status": verdict.status, "score": score, "reason": verdict.reason,
           "components": verdict.components, "extracted": verdict.extracted,
           "version": verdict.version, "solved": verdict.solved,
           "latency_s": verdict.latency_s}
    if episode is not None:
        out.update(turns=episode.turns, tool_calls=episode.tool_calls,
                   tool_errors=episode.tool_errors, end_reason=episode.end_reason)
    return json.loads(json.dumps(out, default=str))


def _prompt_messages(prompt) -> list[dict]:
    """Chat messages for any prompt: a text prompt (a base model's template) is one user turn."""
    if isinstance(prompt, list):
        return [dict(m) for m in prompt]
    return [{"role": "user", "content": str(prompt)}]


def _calls(action: RlvrAction, has_tools: bool) -> list[ToolCall]:
    """The action's tool calls: its structured `tool_calls`, else Hermes tags in its text."""
    if not has_tools:
        return []
    if not action.tool_calls:
        return parse_tool_calls(action.content)[1]
    out = []
    for c in action.tool_calls:
        fn = c.get("function", c) if isinstance(c, dict) else {}
        args = fn.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError:
                args = None
        raw = json.dumps(c, default=str)
        if not isinstance(fn.get("name"), str) or not isinstance(args, dict):
            out.append(ToolCall(name=str(fn.get("name") or ""), raw=raw,
                                error='a call must be {"name": ..., "arguments": {...}}'))
        else:
            out.append(ToolCall(name=fn["name"], arguments=args, raw=raw, id=str(c.get("id", ""))))
    return out


class ServedEnvironment(Environment):
    """One session's episode on a shared rlvr environment (see the module docstring)."""
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, served: Served):
        super().__init__()
        self.served = served
        self.task: Task | None = None
        self.episode: Episode | None = None
        self.done = False

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              task_id: Optional[str] = None, split: Optional[str] = None,
              index: Optional[int] = None, **kwargs: Any) -> RlvrObservation:
        self.task = self.served.task(task_id, split, index, seed)
        self.episode, self.done = Episode(text="", token_ids=[]), False
        max_turns, _ = episode_limits(self.served.env, 0)
        return RlvrObservation(messages=_prompt_messages(self.task.prompt),
                               tools=getattr(self.served.env, "tool_schemas", None),
                               task_id=self.task.id,
                               metadata={"task_id": self.task.id, "max_turns": max_turns})

    def step(self, action: RlvrAction, timeout_s: Optional[float] = None,
             **kwargs: Any) -> RlvrObservation:
        if self.task is None or self.episode is None:
            raise RuntimeError("no episode: call reset before step")
        if self.done:
            raise RuntimeError("the episode is over: call reset to start another")
        env, episode = self.served.env, self.episode
        tools = getattr(env, "tool_schemas", None)
        episode.add_turn(action.content, _calls(action, bool(tools)), [], "stop")
        reply = respond_batch(env, [self.task], [episode])[0]
        episode.tool_calls += reply.tool_calls
        episode.tool_errors += reply.tool_errors
        max_turns, _ = episode_limits(env, 0)
        if reply.done or episode.turns >= max_turns:
            episode.end_reason = reply.reason if reply.done else "max_turns"
            return self._finish()
        episode.add_environment(reply.messages, [])
        return RlvrObservation(messages=reply.messages, task_id=self.task.id,
                               metadata={"turns": episode.turns})

    def _finish(self) -> RlvrObservation:
        """Score the whole episode; a failed verdict's reward is None (never a learnable 0)."""
        self.done = True
        verdict = self.served.reward.score(self.task, self.episode)
        reward = None if verdict.failed else float(verdict.score)
        return RlvrObservation(done=True, reward=reward, task_id=self.task.id,
                               metadata=verdict_metadata(verdict, self.episode))

    @property
    def state(self) -> RlvrState:
        return RlvrState(task_id=self.task.id if self.task else "",
                         turns=self.episode.turns if self.episode else 0, done=self.done)
