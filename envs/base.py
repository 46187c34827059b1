"""Environment: a task source + a prompt template + a parser + weighted rewards.

An environment is plain data handed to the trainer and to `rlvr score`; it holds no training
state. Procedural sources regenerate any task from its id, so a task id is all a row needs.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence

from rlvr.core import Reward, Task, WeightedSum
from rlvr.verifiers.parser import ThinkParser

__all__ = ["Environment", "TaskSource", "ProceduralSource", "RowSource", "r1_chat_prompt", "r1_base_prompt",
           "think_answer_gold", "rescored"]

R1_SYSTEM = (
    "A conversation between User and Assistant. The user asks a question, and the Assistant "
    "solves it. The assistant first thinks about the reasoning process in the mind and then "
    "provides the user with the answer. The reasoning process and answer are enclosed within "
    "<think> </think> and <answer> </answer> tags, respectively, i.e., "
    "<think> reasoning process here </think> <answer> answer here </answer>.")


def r1_chat_prompt(question: str) -> list[dict]:
    """Chat messages for instruct models: the R1-Zero instruction as the system turn."""
    return [{"role": "system", "content": R1_SYSTEM}, {"role": "user", "content": question}]


def r1_base_prompt(question: str) -> str:
    """R1-Zero's base-model template; the completion continues right after `<think>`."""
    return f"{R1_SYSTEM} User: {question} Assistant: <think>"


def rescored(base: "Environment", reward, weight: float, verifier_weight: float,
             note: str) -> "Environment":
    """`base`'s tasks scored by `reward` (a judge, a learned reward model) at `weight`, with
    base's own rewards kept at `verifier_weight` times their weights (0: logged beside it only),
    so each scored row shows the model-based score and the rule's side by side."""
    rewards = [(reward, weight)] + [(r, w * verifier_weight) for r, w in base.rewards]
    env = Environment(name=f"{base.name}+{reward.name}", source=base.source, rewards=rewards,
                      version=f"{base.version}+{reward.version}", parser=base.parser,
                      description=f"{base.description} {note}")
    env.gold = base.gold
    return env


def think_answer_gold(answer: Any) -> str:
    """A completion in the R1 format whose answer is `answer` (for contract checks)."""
    return f"<think>I work it out step by step.</think> <answer>{answer}</answer>"


class TaskSource(Protocol):
    """Where tasks come from: iterate a split, or fetch one task by id."""
    def iter(self, split: str, seed: int = 0) -> Iterator[Task]: ...
    def get(self, task_id: str) -> Task: ...
    splits: Sequence[str]


class ProceduralSource:
    """A generator that makes task `index` of a split from the seed alone.

    Subclasses set `prefix` and implement `_make(split, seed, index)`; ids read
    `<prefix>/<split>/<seed>/<index>`, so any task can be regenerated from its id (scoring rows
    need only the id) without generating the ones before it.
    """
    prefix: str = "task"
    splits: tuple = ("train", "test")

    def _make(self, split: str, seed: int, index: int) -> Task:
        raise NotImplementedError(f"{type(self).__name__} must implement _make")

    def iter(self, split: str = "train", seed: int = 0) -> Iterator[Task]:
        if split not in self.splits:
            raise KeyError(f"no split {split!r}; have {list(self.splits)}")
        return (self._make(split, seed, index) for index in itertools.count())

    def get(self, task_id: str) -> Task:
        parts = task_id.split("/")
        if len(parts) != 4 or parts[0] != self.prefix or parts[1] not in self.splits \
                or not parts[2].lstrip("-").isdigit() or not parts[3].isdigit():
            raise KeyError(f"bad {self.prefix} task id {task_id!r}; expected "
                           f"'{self.prefix}/<{'|'.join(self.splits)}>/<seed>/<index>'")
        return self._make(parts[1], int(parts[2]), int(parts[3]))


class RowSource:
    """Tasks from in-memory rows (a list, or a `datasets` split per name)."""

    def __init__(self, splits: Mapping[str, Sequence[Task]]):
        self._splits = {k: list(v) for k, v in splits.items()}
        self._by_id = {t.id: t for ts in self._splits.values() for t in ts}
        self.splits = tuple(self._splits)

    def iter(self, split: str, seed: int = 0) -> Iterator[Task]:
        if split not in self._splits:
            raise KeyError(f"no split {split!r}; have {list(self._splits)}")
        return iter(self._splits[split])

    def get(self, task_id: str) -> Task:
        try:
            return self._by_id[task_id]
        except KeyError:
            raise KeyError(f"unknown task id {task_id!r}") from None


@dataclass
class Environment:
    """What the trainer samples from and what `rlvr score` scores against.

    `rewards` are (reward, weight) pairs; a zero weight logs the component without training on
    it. `gold` turns a task's gold answer into a completion that must score 1.0 and `junk` lists
    completions that must score 0.0 (the registry's contract check).
    """
    name: str
    source: TaskSource
    rewards: Sequence[tuple[Reward, float]]
    version: str = "1"
    parser: ThinkParser = field(default_factory=ThinkParser)
    gold: Callable[[Task], str] | None = field(
        default=lambda task: think_answer_gold(task.answer))
    """A completion that must score 1.0; None when tasks carry no reference (the contract check
    then tests junk only)."""
    description: str = ""
    junk: Sequence[str] | None = None
    """Completions that must score 0.0 in the contract check; None = the registry's standard
    set. Narrow it only when some standard junk honestly earns credit (e.g. "I don't know."
    does follow the instruction "use no commas")."""
    teacher: Callable[[Task], str] | None = None
    """A programmatic teacher: writes a correct worked solution of a task in the format the
    rewards accept (a step-by-step trace, then the answer), for building verified training
    data (`rlvr distill-data --teacher program`); None when the environment has no solver."""

    def __post_init__(self):
        self.reward: Reward = WeightedSum(self.rewards, name=self.name)

    def tasks(self, split: str = "train", seed: int = 0) -> Iterator[Task]:
        return self.source.iter(split, seed)

    def sample(self, n: int, split: str = "train", seed: int = 0) -> list[Task]:
        return list(itertools.islice(self.tasks(split, seed), n))

    def get_task(self, task_id: str) -> Task:
        return self.source.get(task_id)

    def task_from_row(self, row: Mapping, id_field: str = "id",
                      answer_field: str = "answer") -> Task:
        """The task a scoring row refers to: its own gold answer if it has one, else its id,
        else (for rewards that need no gold, such as reward models) its own prompt."""
        if answer_field in row and row[answer_field] is not None:
            extra = {k: v for k, v in row.items() if k not in (id_field, answer_field)}
            return Task(id=str(row.get(id_field, "")), prompt=row.get("prompt", ""),
                        answer=row[answer_field], metadata=extra)
        if row.get(id_field) is not None:
            return self.get_task(str(row[id_field]))
        if row.get("prompt") is not None:   # no gold: fine for rewards that need none
            extra = {k: v for k, v in row.items() if k != "prompt"}
            return Task(id="", prompt=row["prompt"], answer=None, metadata=extra)
        raise KeyError(f"row has neither {answer_field!r} (gold answer) nor {id_field!r} "
                       "(task id) nor 'prompt'")

    def summary_counts(self, verdict) -> Mapping[str, tuple[float, float]]:
        """Counts `rlvr score` adds up over the rows of a run and reports as ratios, as
        {name: (hits, out of)} for one verdict; none by default. A benchmark whose headline
        numbers are not the mean score says so here (IFEval: accuracy per instruction)."""
        return {}

    def describe(self) -> dict:
        return {"name": self.name, "version": self.version, "description": self.description,
                "splits": list(self.source.splits),
                "rewards": {r.name: w for r, w in self.rewards},
                "reward_version": self.reward.version}
