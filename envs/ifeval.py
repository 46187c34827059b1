"""`ifeval-style`: verifiable instruction following with IFEval's instruction set.

Tasks are procedural (`rlvr.envs.ifeval_generator`: a base request plus sampled instructions,
gold first), or IFEval-format rows (`instruction_id_list` + `kwargs`) from a file, a saved
`datasets` directory or a hub id such as `google/IFEval`.
"""
from __future__ import annotations

import json
from typing import Mapping

from rlvr.core import Task
from rlvr.envs.registry import register_env
from rlvr.verifiers.instructions import InstructionFollowing
from rlvr.verifiers.parser import ThinkParser

from .base import Environment, RowSource
from .common import user_turn
from .ifeval_generator import IFEvalSource

__all__ = ["IFEvalSource", "IFEvalEnvironment", "ifeval_style", "ifeval_tasks"]

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
    from pathlib import Path
    path = Path(data)
    if path.is_file():
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    import datasets
    if path.is_dir():
        ds = datasets.load_from_disk(data)
        return list(ds[split] if isinstance(ds, datasets.DatasetDict) else ds)
    return list(datasets.load_dataset(data, split=split))   # a hub id, e.g. google/IFEval


class IFEvalEnvironment(Environment):
    """An Environment whose scoring rows may carry their own instructions.

    A row with `instruction_id_list` (+ `kwargs`), at top level or as a dict in the answer
    field, is scored against those instructions; any other row is looked up by its task id.
    """

    def task_from_row(self, row: Mapping, id_field: str = "id",
                      answer_field: str = "answer") -> Task:
        spec = _row_spec(row, answer_field)
        if spec is None:
            if row.get(id_field) is None:
                raise KeyError(f"row has neither instruction_id_list (the IFEval format) nor a "
                               f"task id {id_field!r}")
            return self.get_task(str(row[id_field]))
        prompt = row.get("prompt", "")
        rid = row.get(id_field, row.get("key", ""))
        return Task(id=str(rid), prompt=prompt, answer=spec,
                    metadata={**spec, "instruction": prompt})


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
    the contract check tests only that empty answers score 0). The reward is `mode` ('strict' or 'loose') prompt-level
    accuracy, or the fraction of instructions followed with `partial=True`; the other mode is
    logged at weight 0 unless `log_other_mode=False` (it costs about half of the scoring
    time, see benchmarks/README.md).

    >>> env = ifeval_style()
    >>> task = env.sample(1)[0]
    >>> env.reward.score(task, env.gold(task)).score
    1.0
    """
    if mode not in ("strict", "loose"):
        raise ValueError(f"mode must be 'strict' or 'loose', got {mode!r}")
    source = (RowSource({"train": ifeval_tasks(_load_rows(data, data_split))}) if data else
              IFEvalSource(min_constraints, max_constraints, test_fraction))
    other = "loose" if mode == "strict" else "strict"
    parser = ThinkParser()
    # IFEval rows carry no reference response, and of the standard junk only the empty answer
    # is sure to fail every instruction ("I don't know." does use no commas).
    return IFEvalEnvironment(
        name="ifeval-style", source=source, version="1", parser=parser,
        gold=None if data else _reference, junk=("", "<think>") if data else None,
        rewards=[(InstructionFollowing(mode, partial, parser), 1.0)]
        + ([(InstructionFollowing(other, partial, parser), 0.0)] if log_other_mode else []),
        description="Verifiable instructions (IFEval ids): word/sentence counts, keywords, "
                    "case, bullets, sections, title, postscript...; all must hold.")
