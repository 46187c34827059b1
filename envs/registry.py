"""The environment registry: `@register_env("name")`, `load_env(name, **kwargs)`.

Third-party packages add environments without editing rlvr through the `rlvr.envs` entry-point
group: each entry point names a module that registers on import, or a factory registered under
the entry point's name.

Environments written for other libraries load by a prefixed name, `openenv:<name>` or
`verifiers:<name>`: a prefix names a loader (`register_env_prefix`), built in
(`PREFIX_MODULES`) or registered by the user's own module.

Loading runs the contract check (`check_env`): gold answers score 1.0 and junk 0.0 on every
weighted rule-based reward (learned rewards, `learned = True`, need only score both without
failing), and every
task field a reward declares exists in the tasks -- with errors that say what to fix.
"""
from __future__ import annotations

import collections.abc
import difflib
import functools
import importlib
import inspect
import re
import threading
import types
import typing
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Callable

from rlvr.core import FAILED_STATUSES, Task
from rlvr.pool import Factory
from rlvr.pooled_reward import PooledReward
from rlvr.usage import UsageError, coerce

from .base import Environment

__all__ = ["register_env", "register_env_prefix", "PREFIX_MODULES", "load_env", "list_envs", "env_info", "env_module", "build_env",
           "pooled_env_reward", "check_env", "EnvContractError", "EnvArgumentError",
           "UnknownEnvError"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*(/[A-Za-z0-9][A-Za-z0-9_.\-]*)?$")   # family/name
JUNK = ("", "I don't know.", "<think>", "Lorem ipsum dolor sit amet, consectetur adipiscing.")


class EnvContractError(ValueError):
    """An environment broke the registry's contract; the message says what to fix."""


class EnvArgumentError(TypeError, UsageError):
    """A missing, unknown or mistyped argument for an environment factory; the message names
    the argument and what it takes. A UsageError too, so every command reports it in one line."""


class UnknownEnvError(KeyError, UsageError):
    """A name nothing registered; the message suggests the closest registered names."""

    def __str__(self):
        return str(self.args[0])


@dataclass(frozen=True)
class _Entry:
    name: str
    factory: Callable
    module: str


_registry: dict[str, _Entry] = {}
_lock = threading.Lock()
_discovered = False

# prefix -> the module whose import registers its loader (imported on the first such name)
PREFIX_MODULES = {"openenv": "rlvr.envs.from_openenv", "verifiers": "rlvr.envs.from_verifiers"}
_prefixes: dict[str, Callable] = {}


def register_env_prefix(prefix: str) -> Callable[[Callable], Callable]:
    """Register `loader(name, **kwargs) -> Environment` for every environment name
    `prefix:<name>` (the loader is returned unchanged)."""
    def wrap(loader: Callable) -> Callable:
        _prefixes[prefix] = loader
        return loader
    return wrap


def _prefixed_entry(name: str) -> _Entry | None:
    """The entry of a `prefix:<rest>` name: its loader bound to `rest`; None for other names."""
    prefix, sep, rest = name.partition(":")
    if not sep:
        return None
    if prefix not in _prefixes and prefix in PREFIX_MODULES:
        importlib.import_module(PREFIX_MODULES[prefix])
    if prefix not in _prefixes:
        raise UnknownEnvError(f"unknown environment prefix {prefix!r} in {name!r}; loaders "
                              f"exist for {sorted(set(_prefixes) | set(PREFIX_MODULES))}")
    loader = _prefixes[prefix]
    bound = functools.partial(loader, rest)
    bound.__doc__ = loader.__doc__                 # what `rlvr envs show` prints
    return _Entry(name, bound, loader.__module__)


def register_env(name: str, *, replace: bool = False) -> Callable[[Callable], Callable]:
    """Register an environment factory under `name` (the factory is returned unchanged).

    >>> @register_env("doc-echo", replace=True)
    ... def echo():
    ...     ...
    >>> "doc-echo" in list_envs()
    True
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"environment name must be letters, digits, '-', '_' or '.' (one '/' "
                         f"may join a family and a member), got {name!r}")

    def wrap(factory: Callable) -> Callable:
        if not callable(factory):
            raise TypeError(f"register_env({name!r}) needs a callable factory, got {factory!r}")
        with _lock:
            old = _registry.get(name)
            if old and not replace and old.factory is not factory \
                    and _qualname(old.factory) != _qualname(factory):
                raise ValueError(f"environment {name!r} is already registered by {old.module}; "
                                 "pass replace=True to override it")
            _registry[name] = _Entry(name, factory, factory.__module__)
        return factory
    return wrap


def _qualname(f) -> str:
    return f"{getattr(f, '__module__', '')}.{getattr(f, '__qualname__', repr(f))}"


def _discover() -> None:
    """Import rlvr's built-in environments and every `rlvr.envs` entry point, once."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    from rlvr.envs import register_builtins
    register_builtins()
    from importlib.metadata import entry_points    # here: a pool worker rarely needs it
    for ep in entry_points(group="rlvr.envs"):
        obj = ep.load()
        if callable(obj) and not inspect.ismodule(obj) and ep.name not in _registry:
            register_env(ep.name)(obj)


def list_envs() -> list[str]:
    _discover()
    return sorted(_registry)


def _entry(name: str) -> _Entry:
    if (prefixed := _prefixed_entry(name)) is not None:
        return prefixed
    if name not in _registry:    # registered already (its module was imported): no discovery
        _discover()
    if name not in _registry:
        raise UnknownEnvError(_unknown_message(name, sorted(_registry)))
    return _registry[name]


def _unknown_message(name: str, names: list[str]) -> str:
    """The closest registered names (not all of them: there are over a hundred), where to see
    the rest, and how a module of the user's own gets its environments registered."""
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    quoted = list(map(repr, close))
    hint = f"did you mean {' or '.join(filter(None, [', '.join(quoted[:-1]), quoted[-1]]))}? " \
        if close else ""
    return (f"unknown environment {name!r}; {hint}`rlvr envs list` shows all {len(names)}; "
            "environments of your own register when their module is imported "
            "(`--import MODULE` on the command line)")


def load_env(name: str, *, check: bool = True, **kwargs: Any):
    """Build the environment registered as `name` with `kwargs`, contract-checked."""
    entry = _entry(name)
    env = entry.factory(**_checked_arguments(name, entry.factory, kwargs))
    if not isinstance(env, Environment):
        raise EnvContractError(f"environment {name!r}: factory {_qualname(entry.factory)} "
                               f"returned {type(env).__name__}, not an rlvr Environment")
    if check:
        check_env(env)
    return env


def _checked_arguments(name: str, factory: Callable, kwargs: dict) -> dict:
    """`kwargs` checked against the factory's signature and annotated types before the call,
    so a mistake is one EnvArgumentError naming the argument, the type it expects and the
    values it accepts -- not a TypeError from deep inside the environment. An int given where
    only a string fits becomes that string (`--env-arg split=2024`); unannotated parameters
    and types other than the JSON-like ones are left to the factory."""
    signature = inspect.signature(factory)
    try:
        signature.bind(**kwargs)
    except TypeError as exc:
        params = ", ".join(signature.parameters)
        raise EnvArgumentError(f"environment {name!r}: {exc}; its factory takes ({params})") \
            from None
    hints = _type_hints(factory)
    out = dict(kwargs)
    for key, value in kwargs.items():
        hint = hints.get(key)
        if hint is None or _fits(value, hint):
            continue
        if type(value) is int and _fits(str(value), hint):
            out[key] = str(value)
            continue
        if isinstance(value, str) and (typed := _from_text(key, value, hint)) is not None:
            out[key] = typed            # 'False' for a bool, '3' for an int (the CLI's coercion)
            continue
        default = signature.parameters[key].default
        shown = "" if default is inspect.Parameter.empty else f"; its default is {default!r}"
        raise EnvArgumentError(f"environment {name!r}: argument {key} expects {_accepted(hint)}"
                               f", got {value!r} ({type(value).__name__}){shown}")
    return out


def _from_text(key: str, value: str, hint):
    """A command-line string read as the bool / int / float the annotation asks for
    (`rlvr.usage.coerce`), or None when it does not read as one."""
    for typ in (bool, int, float):
        if _fits(typ(1), hint) and not _fits(value, hint):
            try:
                typed = coerce(key, value, typ)
            except ValueError:
                continue
            if _fits(typed, hint):
                return typed
    return None


def _type_hints(factory: Callable) -> dict:
    """The factory's resolved annotations; none when they cannot be resolved."""
    try:
        return typing.get_type_hints(factory)
    except Exception:     # a forward reference the factory's module cannot resolve at runtime
        return {}


def _alternatives(hint) -> tuple | None:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return None


def _fits(value, hint) -> bool:
    """Whether `value` fits annotation `hint`; True for types this check does not know."""
    if (options := _alternatives(hint)) is not None:
        return any(_fits(value, h) for h in options)
    if typing.get_origin(hint) is typing.Literal:
        return value in typing.get_args(hint)
    base = typing.get_origin(hint) or hint
    if hint is type(None):
        return value is None
    if base is bool:
        return isinstance(value, bool)
    if base is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if base is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if base is str:
        return isinstance(value, str)
    if base in (dict, collections.abc.Mapping):
        return isinstance(value, dict)
    if base in (list, tuple):
        return isinstance(value, (list, tuple))
    if isinstance(base, type) and issubclass(base, PurePath):
        return isinstance(value, (str, PurePath))
    return True


def _accepted(hint) -> str:
    """What an annotation accepts, in words: 'int (an integer)', "one of 'chat', 'base'"."""
    if (options := _alternatives(hint)) is not None:
        return " or ".join(_accepted(h) for h in options)
    if typing.get_origin(hint) is typing.Literal:
        return "one of " + ", ".join(map(repr, typing.get_args(hint)))
    words = {bool: "bool (true or false)", int: "int (an integer)", float: "float (a number)",
             str: "str (text)", dict: "dict (a JSON object)", list: "list (a JSON list)",
             tuple: "list (a JSON list)", type(None): "null"}
    base = typing.get_origin(hint) or hint
    return words.get(base, getattr(base, "__name__", str(hint)))


def env_info(name: str) -> dict:
    entry = _entry(name)
    return {"name": name, "module": entry.module,
            "signature": str(inspect.signature(entry.factory)),
            "doc": inspect.getdoc(entry.factory) or ""}


def env_module(name: str) -> str:
    """The module that registered `name`: a fresh worker imports it to rebuild the environment."""
    return _entry(name).module


def build_env(name: str, kwargs: dict | None = None, module: str | None = None):
    """Build an environment inside a worker and return it (used through a pool Factory).

    `module` is imported first so that environments registered by user code (not by an entry
    point) exist in freshly spawned workers too.
    """
    if module and module not in ("__main__", "__mp_main__"):
        importlib.import_module(module)
    return load_env(name, check=False, **(kwargs or {}))


def _env_reward(name: str, env_args: dict, module: str | None):
    return build_env(name, env_args, module).reward


def pooled_env_reward(env, *, deadline_s: float = 10.0, env_args: dict | None = None,
                      pool=None, registered_as: str | None = None) -> PooledReward:
    """The reward of registered environment `env` (an Environment or its name) as a
    PooledReward rebuilt inside each worker by name -- so it works even when the environment
    can't be pickled. `registered_as` is the registry name when it differs from `env.name`."""
    name = registered_as or (env if isinstance(env, str) else env.name)
    factory = Factory(_env_reward, {"name": name, "env_args": env_args or {},
                                    "module": env_module(name)})
    reward = None if isinstance(env, str) else env.reward
    pooled = PooledReward(factory, deadline_s=deadline_s, pool=pool, name=name,
                          version=reward.version if reward else "1",
                          required=reward.required_fields() if reward else set())
    if reward is not None:
        pooled.max_verify_s = getattr(reward, "max_verify_s", pooled.max_verify_s)
    return pooled


def check_env(env, n: int = 4) -> None:
    """The registry's contract: raise EnvContractError saying what to fix, or return None."""
    try:
        tasks = env.sample(n, split=env.source.splits[0])
    except Exception as exc:
        raise EnvContractError(f"environment {env.name!r}: could not sample tasks "
                               f"({type(exc).__name__}: {exc})") from exc
    if not tasks:
        raise EnvContractError(f"environment {env.name!r}: its task source yielded no tasks")
    problems = []
    # Learned rewards (reward models, `learned = True`) give no fixed score to gold or junk:
    # for them the contract is only that they score both without failing.
    weighted = {r.name for r, w in env.rewards if w != 0.0 and not getattr(r, "learned", False)}
    for task in tasks:
        if not isinstance(task, Task):
            raise EnvContractError(f"environment {env.name!r} yielded {type(task).__name__}, "
                                   "not rlvr.Task")
        missing = env.reward.required_fields() - set(task.fields())
        if missing:
            problems.append(f"rewards read task field(s) {sorted(missing)} that task "
                            f"{task.id!r} lacks (it has {sorted(task.fields())}); add them to "
                            "the task's metadata or rename the reward's parameters")
            continue
        if env.gold is not None:
            problems.extend(_gold_problems(env, task, weighted))
        problems.extend(_junk_problems(env, task, weighted))
    if problems:
        raise EnvContractError(f"environment {env.name!r} fails the contract check:\n  - "
                               + "\n  - ".join(dict.fromkeys(problems)))


def _gold_problems(env, task: Task, weighted: set[str]) -> list[str]:
    gold = env.reward.score(task, env.gold(task))
    short = {name: s for name, s in gold.components.items() if name in weighted and s != 1.0}
    if not short and not gold.failed:
        return []
    return [f"gold completion for task {task.id!r} scored {short or gold.score} (status "
            f"{gold.status}: {gold.reason or 'no reason'}); each weighted reward must give the "
            "gold answer 1.0 -- check the env's `gold` and its rewards"]


def _junk_problems(env, task: Task, weighted: set[str]) -> list[str]:
    for junk in JUNK if env.junk is None else env.junk:
        v = env.reward.score(task, junk)
        paid = {name: s for name, s in v.components.items() if name in weighted and s != 0.0}
        if paid or v.status in FAILED_STATUSES:
            return [f"junk completion {junk!r} scored {paid or v.score} (status {v.status}: "
                    f"{v.reason or 'no reason'}); junk must score 0.0 on each weighted "
                    "rule-based reward, without error"]
    return []
