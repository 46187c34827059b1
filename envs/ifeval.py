"""`ifeval-style`: verifiable instruction following with IFEval's instruction set.

Tasks are procedural (`rlvr.envs.ifeval_generator`: a base request plus sampled instructions,
gold first), or IFEval-format rows (`instruction_id_list` + `kwargs`) from a file, a saved
`datasets` directory or a hub id such as `google/IFEval` (Zhou et al. 2023, "Instruction-Following
Evaluation for Large Language Models", arXiv:2311.07911).

On IFEval's own rows a response is found the way IFEval's files are written: by its task id
(`ifeval/1000` or IFEval's bare `key`, 1000) or, in Google's response files that carry only
`prompt` and `response`, by its prompt. `summary_counts` gives `rlvr score` IFEval's four numbers
(section 3 of the paper): prompt-level and instruction-level accuracy, strict and loose.
"""
from __future__ import annotations

import json
from typing import Mapping

from rlvr.core import Task, Verdict
from rlvr.envs.registry import register_env
from rlvr.rows import BadRow, iter_rows
from rlvr.verifiers.instructions import InstructionFollowing
from rlvr.verifiers.parser import ThinkParser

from .base import Environment, RowSource
from .common import user_turn
from .ifeval_generator import IFEvalSource

__all__ = ["IFEvalSource", "IFEvalRows", "IFEvalEnvironment", "ifeval_style", "ifeval_tasks"]


def _row_spec(row: Mapping, answer_field: str) -> dict | None:
    """IFEval constraints carried by a row (top-level fields, or a dict in the answer field)."""
    for holder in (row, row.get(answer_field)):
        if isinstance(holder, str) and "instruction_id_list" in holder:
            try:
                holder = json.loads(holder)
            except json.JSONDecodeError:
                continue
        if isinstance(holder, Mapping) and "instruction_id_list" in holder:
            return {"instruction_id_list": holder["instruction_id_list"],
                    "kwargs": holder.get("kwargs")}
    return None


def ifeval_tasks(rows, prefix: str = "ifeval") -> list[Task]:
    """IFEval-format rows (`key` or `id`, `prompt`, `instruction_id_list`, `kwargs`) -> Tasks."""
    out = []
    for i, row in enumerate(rows):
        spec = _row_spec(row, "answer")
        if spec is None:
            raise ValueError(f"row {i} has no instruction_id_list (not in the IFEval format)")
        rid = row.get("id", row.get("key", i))
        prompt = row.get("prompt", "")
        out.append(Task(id=f"{prefix}/{rid}", prompt=user_turn(prompt), answer=spec,
                        metadata={**spec, "instruction": prompt}))
    return out


def _load_rows(data: str, split: str) -> list[dict]:
    rows = []
    for line, row in iter_rows(data, split):
        if isinstance(row, BadRow):
            raise ValueError(f"{data}, line {line}: {row.reason}")
        rows.append(row)
    return rows


class IFEvalRows(RowSource):
    """IFEval-format tasks, found by id or by prompt.

    Ids are `<prefix>/<key>`; IFEval's own files name a row by its bare `key` (an integer), so
    `get("1000")` finds `ifeval/1000` too. Google's response files carry no key at all (its
    evaluation joins responses to inputs by prompt text), so `by_prompt` finds a task by its
    exact prompt; a prompt shared by several rows finds none (the key must say which).
    """

    def __init__(self, tasks: list[Task], prefix: str = "ifeval"):
        super().__init__({"train": tasks})
        self.prefix = prefix
        self._by_prompt: dict[str, Task | None] = {}
        for task in tasks:
            prompt = task.metadata.get("instruction")
            self._by_prompt[prompt] = None if prompt in self._by_prompt else task

    def get(self, task_id: str) -> Task:
        task = self._by_id.get(task_id) or self._by_id.get(f"{self.prefix}/{task_id}")
        if task is None:
            raise KeyError(f"unknown task id {task_id!r}: no IFEval row has that key (ids read "
                           f"'{self.prefix}/<key>' or just '<key>'; {len(self._by_id)} rows)")
        return task

    def by_prompt(self, prompt) -> Task | None:
        return self._by_prompt.get(prompt) if isinstance(prompt, str) else None


class IFEvalEnvironment(Environment):
    """An Environment whose scoring rows may carry their own instructions.

    A row with `instruction_id_list` (+ `kwargs`), at top level or as a dict in the answer
    field, is scored against those instructions; any other row is looked up by its task id, or,
    on IFEval rows, by its prompt when it has no id.
    """

    def task_from_row(self, row: Mapping, id_field: str = "id",
                      answer_field: str = "answer") -> Task:
        spec = _row_spec(row, answer_field)
        if spec is not None:
            prompt = row.get("prompt", "")
            rid = row.get(id_field, row.get("key", ""))
            return Task(id=str(rid), prompt=prompt, answer=spec,
                        metadata={**spec, "instruction": prompt})
        if row.get(id_field) is not None:
            return self.get_task(str(row[id_field]))
        by_prompt = getattr(self.source, "by_prompt", None)
        task = by_prompt(row.get("prompt")) if by_prompt else None
        if task is None:
            raise KeyError(f"row has neither instruction_id_list (the IFEval format) nor a task id "
                           f"{id_field!r}" + (" nor a prompt found in the IFEval rows (it must "
                                              "match one exactly)" if by_prompt else ""))
        return task

    def summary_counts(self, verdict: Verdict) -> dict[str, tuple[float, float]]:
        """IFEval's accuracies for one response: prompt level (all of a prompt's instructions
        followed) and instruction level (each instruction on its own), strict and loose.

        The weighted reward's follow list is the verdict's `extracted`; a mode logged at weight
        0 gives its prompt-level result, and its instruction level when it is logged as the
        fraction followed (`instruction_level_<mode>`, on IFEval rows, which have no gate).
        """
        followed = verdict.extracted
        if not isinstance(followed, list) or not followed:
            return {}          # not scored against instructions (a bad row or a bad spec)
        n, prompt, instruction = len(followed), {}, {}
        for reward, weight in self.rewards:
            if not isinstance(reward, InstructionFollowing):
                continue
            share = verdict.components.get(reward.name)
            if weight:                          # the trained mode: its follow list
                hits = sum(map(bool, followed))
            elif share is not None and reward.name.startswith("instruction_level_"):
                hits = round(share * n)         # logged as a fraction of the n instructions
            else:                               # logged all-or-nothing: prompt level only
                if share is not None:
                    prompt[reward.mode] = (float(share == 1.0), 1)
                continue
            prompt[reward.mode] = (float(hits == n), 1)
            instruction[reward.mode] = (hits, n)
        modes = ("strict", "loose")
        return {**{f"prompt-level {m}": prompt[m] for m in modes if m in prompt},
                **{f"instruction-level {m}": instruction[m] for m in modes if m in instruction}}


def _reference(task: Task) -> str:
    if "reference" not in task.metadata:
        raise ValueError(f"task {task.id!r} has no reference response: IFEval rows carry none, "
                         "and the contract's junk test cannot hold for them (\"I don't know.\" "
                         "does follow \"use no commas\"); load this environment with check=False")
    return task.metadata["reference"]


@register_env("ifeval-style")
def ifeval_style(min_constraints: int = 1, max_constraints: int = 3, test_fraction: float = 0.2,
                 mode: str = "strict", partial: bool = False, data: str | None = None,
                 data_split: str = "train", log_other_mode: bool = True) -> Environment:
    """Verifiable instruction following (IFEval's instruction set).

    Procedural by default; `data` (a JSONL file, a saved `datasets` directory or a hub id such
    as `google/IFEval`) uses IFEval-format rows instead (they carry no reference answers, so
    the contract check tests only that empty answers score 0). The reward is `mode` ('strict'
    or 'loose') prompt-level accuracy, or the fraction of instructions followed with
    `partial=True`; the other mode is logged at weight 0 unless `log_other_mode=False` (it costs
    about half of the scoring time, see benchmarks/README.md), on IFEval rows as the fraction
    followed (`instruction_level_<mode>`).

    >>> env = ifeval_style()
    >>> task = env.sample(1)[0]
    >>> env.reward.score(task, env.gold(task)).score
    1.0
    """
    if mode not in ("strict", "loose"):
        raise ValueError(f"mode must be 'strict' or 'loose', got {mode!r}")
    source = (IFEvalRows(ifeval_tasks(_load_rows(data, data_split))) if data else
              IFEvalSource(min_constraints, max_constraints, test_fraction))
    other = "loose" if mode == "strict" else "strict"
    parser = ThinkParser()
    # On IFEval rows the other mode is logged as the fraction of instructions followed: that
    # still says whether all were (prompt level) and also gives IFEval's instruction level.
    logged = (InstructionFollowing(other, True, parser, name=f"instruction_level_{other}")
              if data else InstructionFollowing(other, partial, parser))
    # IFEval rows carry no reference response, and of the standard junk only the empty answer
    # is sure to fail every instruction ("I don't know." does use no commas).
    return IFEvalEnvironment(
        name="ifeval-style", source=source, version="1", parser=parser,
        gold=None if data else _reference, junk=("", "<think>") if data else None,
        rewards=[(InstructionFollowing(mode, partial, parser), 1.0)]
        + ([(logged, 0.0)] if log_other_mode else []),
        description="Verifiable instructions (IFEval ids): word/sentence counts, keywords, "
                    "case, bullets, sections, title, postscript...; all must hold.")
