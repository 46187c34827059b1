"""OpenEnv environments as rlvr environments: `openenv:<url>` or `openenv:<module>:<class>`.

An OpenEnv environment is played by `reset` and `step`. Here its task `i` is the observation of
`reset(seed=i)` (the test split's seeds start at `TEST_SEED`), shown to the policy as the prompt
(the observation's `prompt_field`, or the first of `prompt`, `messages`, `question`, `text`);
a completion is scored by replaying it: a fresh session, the same `reset`, one `step` with the
completion as the action's `action_field`, and the step's reward. The environment must be
deterministic given the seed -- what OpenEnv's seeds are for.

    rlvr score --env openenv:http://127.0.0.1:8000 completions.jsonl -o scored.jsonl
    rlvr train env=openenv:my_package.server:MyEnvironment ...

`<url>` is a running OpenEnv server (spoken to over its WebSocket sessions); `<module>:<class>`
an installed OpenEnv `Environment` class (or factory), run in this process. Failures keep their
owner: the environment raising is `error`, an answer past `timeout_s` is `timeout`, a server
that is down, full or drops the connection is `infra_error`, a finished step without a reward
is `error` -- never a 0.0 a policy would be trained on.

Not covered: episodes of more than one step (a completion is one action).
"""
from __future__ import annotations

import importlib
from typing import Any

from rlvr.core import ERROR, INFRA_ERROR, TIMEOUT, BaseReward, Completion, Task, Verdict

from .base import Environment, RowSource
from .registry import register_env_prefix

__all__ = ["OpenEnvReward", "load_openenv_env", "TEST_SEED"]

TEST_SEED = 1_000_000
"""The test split's first seed: train tasks are seeds 0, 1, ..., test tasks TEST_SEED, ..."""
PROMPT_FIELDS = ("prompt", "messages", "question", "text")
_INFRA_CODES = ("CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR")


class _Remote:
    """Sessions on an OpenEnv server (OpenEnv's own client)."""

    def __init__(self, url: str, timeout_s: float):
        self.url, self.timeout_s = url, timeout_s

    def play(self, reset: dict, action: dict | None) -> tuple[dict, dict]:
        """(reset result, step result or {}) as OpenEnv's wire dicts."""
        from openenv import GenericEnvClient
        client = GenericEnvClient(base_url=self.url, message_timeout_s=self.timeout_s).sync()
        with client:
            first = client.reset(**reset)
            last = client.step(action) if action is not None else None
        return _wire(first), _wire(last) if last is not None else {}


class _Local:
    """An OpenEnv Environment class run in this process, one instance per episode."""

    def __init__(self, factory):
        self.factory = factory

    def play(self, reset: dict, action: dict | None) -> tuple[dict, dict]:
        from openenv.core.env_server import deserialize_action, serialize_observation
        env = self.factory()
        try:
            first = serialize_observation(env.reset(**reset))
            if action is None:
                return first, {}
            action_cls = _action_class(env)
            return first, serialize_observation(env.step(deserialize_action(action, action_cls)))
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
            _, last = backend.play(task.metadata["reset"], {self.action_field: completion.text})
        except Exception as exc:       # typed by owner; anything else is the boundary's error
            verdict = _failure(exc)
            if verdict is None:
                raise
            return verdict
        if last.get("reward") is None:
            return Verdict(0.0, ERROR, reason="the environment's step gave no reward")
        why = "" if last.get("done") else "the episode was not over after one step"
        return Verdict(float(last["reward"]), extracted=completion.text[-200:], reason=why)


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
        observation = backend.play(reset, None)[0]["observation"]
        tasks.append(Task(f"{name}/{split}/{i}", _prompt(observation, prompt_field), None,
                          {"reset": reset}))
    return tasks


@register_env_prefix("openenv")
def load_openenv_env(target: str, tasks: int = 16, test_tasks: int = 8,
                     action_field: str = "message", prompt_field: str | None = None,
                     timeout_s: float = 30.0) -> Environment:
    """The OpenEnv environment at `target` (a server URL, or `module:Class`) as an rlvr
    Environment: `tasks` train and `test_tasks` test tasks, each a seeded reset; completions go
    into the action's `action_field`; `timeout_s` bounds each message to the environment."""
    backend = _backend(target, timeout_s)
    name = f"openenv:{target}"
    try:
        splits = {"train": _tasks(backend, name, "train", 0, tasks, prompt_field),
                  "test": _tasks(backend, name, "test", TEST_SEED, test_tasks, prompt_field)}
    except (ConnectionError, OSError) as exc:
        raise ValueError(f"{name}: cannot reach the environment ({exc}); is its server "
                         "running?") from None
    return Environment(name=name, source=RowSource(splits),
                       rewards=[(OpenEnvReward(target, action_field, timeout_s), 1.0)],
                       gold=None, description=f"OpenEnv environment {target}")
