"""Environments of the `verifiers` library as rlvr environments: `verifiers:<env_id>`.

`verifiers.load_environment(env_id, **kwargs)` imports the installed module named `env_id` and
calls its `load_environment`; its dataset rows become rlvr tasks (`train` from its dataset,
`test` from its eval dataset when it has one) and each reward function of its rubric becomes
one rlvr reward with the rubric's weight (a zero weight stays a logged metric).

rlvr calls each reward function itself, with the arguments the rubric would give it (its
`score_objects`), rather than through `Rubric.score_rollout`, which turns an exception into a
0.0 score. Here a reward function that raises is a counted `error` verdict naming the exception,
one that times out (`TimeoutError`, or past `timeout_s` for async functions) is `timeout`, and
one that cannot be reached at all (a connection refused) is `infra_error` -- never a 0.0 a
policy would be trained on.

    rlvr score --env verifiers:my-env completions.jsonl -o scored.jsonl

Not covered: group reward functions (they score all G completions of a prompt together, which
a per-completion Reward cannot), and multi-turn `env_response` (the episode is one turn).
"""
from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

from rlvr.core import ERROR, INFRA_ERROR, TIMEOUT, BaseReward, Completion, Task, Verdict
from rlvr.shadowing import import_installed

from .base import Environment, RowSource
from .registry import EnvContractError, register_env_prefix

__all__ = ["VerifiersReward", "load_verifiers_env"]


def _verifiers():
    """The verifiers library, never this checkout's own `verifiers/` folder (the source of
    rlvr.verifiers), which shadows it where the checkout's root is on sys.path
    (rlvr.shadowing)."""
    from rlvr import verifiers as ours
    try:
        return import_installed("verifiers", Path(ours.__file__).resolve().parent)
    except ImportError:
        raise ImportError("verifiers:<name> environments need the verifiers library: "
                          "pip install 'rlvr[verifiers]'") from None


class VerifiersReward(BaseReward):
    """One reward function of a verifiers Rubric, called with the rubric's own arguments
    (prompt, completion, answer, info, parser, ... as the function names them)."""

    def __init__(self, rubric, func, name: str, timeout_s: float = 60.0):
        self.rubric, self.func, self.name, self.timeout_s = rubric, func, name, float(timeout_s)
        self.version = f"verifiers-{_verifiers().__version__}"
        self.max_verify_s = self.timeout_s

    def _score(self, task: Task, completion: Completion) -> Verdict:
        objects = self.rubric.score_objects(_state(task, completion))
        params = inspect.signature(self.func).parameters
        if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
            objects = {k: v for k, v in objects.items() if k in params}
        try:
            value = self.func(**objects)
            if inspect.isawaitable(value):
                value = asyncio.run(_within(value, self.timeout_s))
        except (TimeoutError, asyncio.TimeoutError) as exc:
            return Verdict(0.0, TIMEOUT, reason=f"no score within {self.timeout_s:g}s "
                                                f"({type(exc).__name__})")
        except ConnectionError as exc:       # a service the reward calls is down
            return Verdict(0.0, INFRA_ERROR, reason=f"{type(exc).__name__}: {exc}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return Verdict(0.0, ERROR, reason=f"returned {value!r}, not a number")
        return Verdict(float(value))


async def _within(awaitable, timeout_s: float):
    return await asyncio.wait_for(awaitable, timeout_s)


def _messages(value) -> Any:
    """verifiers' typed messages for a chat transcript (what its rollouts hand reward
    functions); text stays text."""
    from verifiers.legacy.utils.message_utils import normalize_messages
    return normalize_messages(value) if isinstance(value, list) else value


def _state(task: Task, completion: Completion) -> dict:
    """The rollout state a rubric scores: the prompt, the completion as chat messages (an
    episode's own transcript), the gold answer and the row's info."""
    messages = getattr(completion, "messages", None) or \
        [{"role": "assistant", "content": completion.text}]
    row = task.metadata.get("row", {})
    turns = sum(m.get("role") == "assistant" for m in messages)
    return {"prompt": _messages(task.prompt), "completion": _messages(messages),
            "answer": task.answer if task.answer is not None else "",
            "info": task.metadata.get("info") or {}, "input": row,
            "trajectory": [{} for _ in range(turns)]}    # one step per model turn (num_turns)


def _owned(rubric) -> list[tuple[Any, Any, float]]:
    """(owning rubric, function, weight) for every reward function, a RubricGroup's members
    each with their own rubric (whose parser and objects the function is called with)."""
    if hasattr(rubric, "rubrics"):
        return [t for member in rubric.rubrics for t in _owned(member)]
    return [(rubric, f, w) for f, w in zip(rubric.funcs, rubric.weights)]


def _rewards(vf_env, timeout_s: float) -> list[tuple[VerifiersReward, float]]:
    owned = _owned(vf_env.rubric)
    group = [getattr(f, "__name__", repr(f)) for r, f, _ in owned if r._is_group_func(f)]
    if group:
        raise EnvContractError(f"verifiers environment {vf_env.env_id!r}: group reward "
                               f"functions {group} score all completions of a prompt together; "
                               "rlvr scores each completion on its own")
    out, seen = [], set()
    for rubric, func, weight in owned:
        name = getattr(func, "__name__", "reward")
        while name in seen:
            name += "_"
        seen.add(name)
        out.append((VerifiersReward(rubric, func, name, timeout_s), float(weight)))
    return out


def _tasks(env_name: str, split: str, dataset) -> list[Task]:
    tasks = []
    for i, row in enumerate(dataset):
        key = row.get("example_id", i)
        tasks.append(Task(f"{env_name}/{split}/{key}", row["prompt"], row.get("answer"),
                          {"info": row.get("info") or {}, "row": dict(row)}))
    return tasks


@register_env_prefix("verifiers")
def load_verifiers_env(env_id: str, limit: int | None = None, timeout_s: float = 60.0,
                       **env_args) -> Environment:
    """The verifiers environment `env_id` (an installed module with `load_environment`) as an
    rlvr Environment; `env_args` go to its `load_environment`; `limit` caps each split's rows;
    `timeout_s` bounds one reward function call."""
    vf = _verifiers()
    vf_env = vf.load_environment(env_id, **env_args)
    name = f"verifiers:{env_id}"
    splits = {"train": vf_env.get_dataset(n=limit or -1)} if vf_env.dataset_source else {}
    if vf_env.eval_dataset_source is not None:
        splits["test"] = vf_env.get_eval_dataset(n=limit or -1)
    return Environment(name=name, source=RowSource({k: _tasks(name, k, d)
                                                    for k, d in splits.items()}),
                       rewards=_rewards(vf_env, timeout_s), version=vf.__version__, gold=None,
                       description=f"verifiers environment {env_id}")
