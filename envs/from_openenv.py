"""OpenEnv environments as rlvr environments: `openenv:<url>` or `openenv:<module>:<class>`.

An OpenEnv environment is played by `reset` and `step`. Here its task `i` is the observation of
`reset(seed=i)` (the test split's seeds start at `TEST_SEED`), shown to the policy as the prompt
(the observation's `prompt_field`, or the first of `prompt`, `messages`, `question`, `text`);
a completion is scored by replaying it: a fresh session, the same `reset`, one `step` per policy
turn with the turn's text as the action's `action_field`, and the last step's reward. The
environment must be deterministic given the seed -- what OpenEnv's seeds are for. With
`max_turns` > 1 the policy plays several steps, seeing each step's observation
(`OpenEnvEpisodes`).

    rlvr score --env openenv:http://127.0.0.1:8000 completions.jsonl -o scored.jsonl
    rlvr train env=openenv:my_package.server:MyEnvironment ...

`<url>` is a running OpenEnv server (spoken to over its WebSocket sessions); `<module>:<class>`
an installed OpenEnv `Environment` class (or factory), run in this process. Failures keep their
owner: the environment raising is `error`, an answer past `timeout_s` is `timeout`, a server
that is down, full or drops the connection is `infra_error`, an episode ended without a reward
is `error` -- never a 0.0 a policy would be trained on. An episode the policy left unfinished
(its turns ran out) earns the reward of its last step, 0 when there is none.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Optional

from rlvr.core import ERROR, INFRA_ERROR, TIMEOUT, BaseReward, Completion, Task, Verdict

from .base import Environment, RowSource
from .multiturn import MultiTurnEnvironment, Reply
from .registry import register_env_prefix

__all__ = ["OpenEnvReward", "OpenEnvEpisodes", "load_openenv_env", "TEST_SEED"]

TEST_SEED = 1_000_000
"""The test split's first seed: train tasks are seeds 0, 1, ..., test tasks TEST_SEED, ..."""
PROMPT_FIELDS = ("prompt", "messages", "question", "text")
_INFRA_CODES = ("CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR")


class _Remote:
    """Sessions on an OpenEnv server (OpenEnv's own client)."""

    def __init__(self, url: str, timeout_s: float):
        self.url, self.timeout_s = url, timeout_s

    def play(self, reset: dict, actions: list[dict]) -> tuple[dict, dict]:
        """(reset result, the last step's result or {}) as OpenEnv's wire dicts; the steps
        stop early where the episode ends."""
        from openenv import GenericEnvClient
        client = GenericEnvClient(base_url=self.url, message_timeout_s=self.timeout_s).sync()
        last = {}
        with client:
            first = _wire(client.reset(**reset))
            for action in actions:
                last = _wire(client.step(action))
                if last["done"]:
                    break
        return first, last


class _Local:
    """An OpenEnv Environment class run in this process, one instance per episode."""

    def __init__(self, factory):
        self.factory = factory

    def play(self, reset: dict, actions: list[dict]) -> tuple[dict, dict]:
        from openenv.core.env_server import deserialize_action, serialize_observation
        env = self.factory()
        last = {}
        try:
            first = serialize_observation(env.reset(**reset))
            for action in actions:
                last = serialize_observation(env.step(deserialize_action(action,
                                                                         _action_class(env))))
                if last["done"]:
                    break
            return first, last
        finally:
            env.close()


def _wire(result) -> dict:
    return {"observation": result.observation, "reward": result.reward, "done": result.done,
            "metadata": result.metadata}


def _action_class(env):
    """The Action type an environment's `step` is annotated with."""
    import typing
    hint = typing.get_type_hints(type(env).step).get("action")
    if hint is None:
        raise TypeError(f"{type(env).__name__}.step declares no Action type for its argument")
    return hint


def _backend(target: str, timeout_s: float):
    if "://" in target:
        return _Remote(target, timeout_s)
    module, _, attr = target.partition(":")
    if not attr:
        raise ValueError(f"openenv:{target}: give a server URL (openenv:http://host:port) or "
                         "an Environment class (openenv:package.module:ClassName)")
    return _Local(getattr(importlib.import_module(module), attr))


def _failure(exc: Exception) -> Verdict | None:
    """The verdict for an OpenEnv failure, by whose fault it is; None for other exceptions."""
    import asyncio
    from websockets.exceptions import ConnectionClosed
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return Verdict(0.0, TIMEOUT, reason=f"no answer from the environment in time ({text})")
    if isinstance(exc, (ConnectionError, ConnectionClosed, OSError)):
        return Verdict(0.0, INFRA_ERROR, reason=f"environment unreachable: {text}")
    if isinstance(exc, RuntimeError) and str(exc).startswith("Server error:"):
        infra = any(code in str(exc) for code in _INFRA_CODES)
        return Verdict(0.0, INFRA_ERROR if infra else ERROR, reason=text)
    return None


class OpenEnvReward(BaseReward):
    """The reward an OpenEnv environment gives a completion, by replaying it (module docstring)."""

    def __init__(self, target: str, action_field: str, timeout_s: float):
        self.target, self.action_field, self.timeout_s = target, action_field, float(timeout_s)
        self.name, self.version = "openenv", "1"
        self.max_verify_s = self.timeout_s

    def _score(self, task: Task, completion: Completion) -> Verdict:
        backend = _backend(self.target, self.timeout_s)
        try:
            _, last = backend.play(task.metadata["reset"], _actions(completion, self.action_field))
        except Exception as exc:       # typed by owner; anything else is the boundary's error
            verdict = _failure(exc)
            if verdict is None:
                raise
            return verdict
        if not last.get("done"):     # the policy's turns ran out first: what it earned so far
            return Verdict(float(last.get("reward") or 0.0), extracted=completion.text[-200:],
                           reason="the episode was not over after the last turn")
        if last.get("reward") is None:
            return Verdict(0.0, ERROR, reason="the environment ended the episode without a reward")
        return Verdict(float(last["reward"]), extracted=completion.text[-200:])


def _actions(completion: Completion, field: str) -> list[dict]:
    """The actions a completion took: one per assistant message of an episode, else its text."""
    messages = getattr(completion, "messages", None)
    texts = [m.get("content") or "" for m in messages or [] if m.get("role") == "assistant"]
    return [{field: t} for t in texts or [completion.text]]


@dataclass
class OpenEnvEpisodes(MultiTurnEnvironment):
    """An OpenEnv environment played for several turns. Each answer replays the episode so far
    from its seeded reset in a fresh session (rlvr's environments keep no live state between
    calls) and shows the policy the last observation; the episode ends where the OpenEnv
    episode does. Replaying costs turns * (turns + 1) / 2 steps per episode."""
    backend: Any = None
    action_field: str = "message"
    prompt_field: Optional[str] = None

    def respond(self, task: Task, episode) -> Reply:
        try:
            _, last = self.backend.play(task.metadata["reset"],
                                        _actions(episode, self.action_field))
        except Exception as exc:        # ended here; the reward's replay types the failure
            if _failure(exc) is None:
                raise
            return Reply(done=True, reason="environment failed")
        if last.get("done"):
            return Reply(done=True)
        return Reply(_prompt(last.get("observation") or {}, self.prompt_field)[-1:])


def _prompt(observation: dict, field: str | None) -> Any:
    names = (field,) if field else PROMPT_FIELDS
    for name in names:
        value = observation.get(name)
        if value:
            return value if isinstance(value, list) else [{"role": "user", "content": str(value)}]
    raise KeyError(f"the reset observation has none of the fields {list(names)} (it has "
                   f"{sorted(observation)}); pass prompt_field=NAME")


def _tasks(backend, name: str, split: str, first_seed: int, n: int,
           prompt_field: str | None) -> list[Task]:
    tasks = []
    for i in range(n):
        reset = {"seed": first_seed + i}
        observation = backend.play(reset, [])[0]["observation"]
        tasks.append(Task(f"{name}/{split}/{i}", _prompt(observation, prompt_field), None,
                          {"reset": reset}))
    return tasks


@register_env_prefix("openenv")
def load_openenv_env(target: str, tasks: int = 16, test_tasks: int = 8,
                     action_field: str = "message", prompt_field: str | None = None,
                     timeout_s: float = 30.0, max_turns: int = 1,
                     max_tokens: int = 1024) -> Environment:
    """The OpenEnv environment at `target` (a server URL, or `module:Class`) as an rlvr
    Environment: `tasks` train and `test_tasks` test tasks, each a seeded reset; each policy
    turn goes into the action's `action_field`; `timeout_s` bounds each message to the
    environment; `max_turns` > 1 plays episodes of up to that many steps (`OpenEnvEpisodes`)
    within `max_tokens`."""
    backend = _backend(target, timeout_s)
    name = f"openenv:{target}"
    try:
        splits = {"train": _tasks(backend, name, "train", 0, tasks, prompt_field),
                  "test": _tasks(backend, name, "test", TEST_SEED, test_tasks, prompt_field)}
    except (ConnectionError, OSError) as exc:
        raise ValueError(f"{name}: cannot reach the environment ({exc}); is its server "
                         "running?") from None
    common = dict(name=name, source=RowSource(splits),
                  rewards=[(OpenEnvReward(target, action_field, timeout_s), 1.0)], gold=None,
                  description=f"OpenEnv environment {target}")
    if max_turns <= 1:
        return Environment(**common)
    return OpenEnvEpisodes(**common, max_turns=max_turns, max_tokens=max_tokens,
                           backend=backend, action_field=action_field, prompt_field=prompt_field)
