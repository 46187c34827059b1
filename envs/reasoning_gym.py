"""reasoning-gym's procedural datasets as rlvr environments: `reasoning-gym/<name>`.

reasoning-gym (Stojanovski et al. 2025, `pip install 'rlvr[reasoning-gym]'`) generates 100+
kinds of verifiable reasoning problems offline (arithmetic, logic, puzzles, games, graphs...),
each with its own `score_answer`. Here each dataset is an environment:

- **Tasks**: item j of `reasoning_gym.create_dataset(name, seed=seed, size=size, **config)`,
  asked with R1's think/answer instruction (`prompt_style="chat"`, or the base template). Ids
  read `reasoning-gym/<name>/<split>/<seed>/<j>`, so any task is regenerated from its id alone
  (what `rlvr score` rows and pool workers need).
- **Splits** like rlvr's own generators (`rlvr.splits.hash_split`): an item is `test` when a
  hash of its question falls in `test_fraction`, else `train`; the same question can never be
  in both, whatever the seed.
- **Reward**: the `<answer>` span goes to the dataset's own `score_answer(answer, entry)`.
  Statuses are typed: no `<answer>` tag is `unparsed` (score 0, the model's doing), and so is a
  `ValueError` from the scorer (its parse of the answer failing); any other exception inside
  reasoning-gym's scorer, or a score that is not a number in [0, 1] (beyond float rounding,
  which is clamped), is a counted `error` naming the dataset -- never a silent 0. Several
  different `<answer>` blocks are a hedge: `ok`, 0, and so is a block the text after it corrects
  or offers an alternative to; one it negates or retracts is `unparsed` (the math reader's rules
  of the answer that stands). Partial credit goes only to an answer that
  is one plain number (numeric golds) or does not contain the gold: reasoning-gym's scorers pay
  overlap with the gold, hedges and padded golds included. Math delimiters around the whole
  answer (`$-14$`) and a closing full stop the gold lacks are removed before the scorer sees it,
  and a number equal to a numeric gold (`1,234`, `1234.0`) reaches it in the gold's spelling.

`reasoning-gym` (any dataset by `dataset=NAME`) is registered too. The names below are those of
reasoning-gym 0.1.25 (`reasoning_gym.factory.DATASETS`), listed here so that `rlvr envs list`
and the registry's discovery do not import the library (~1.5 s); a newer dataset is reachable
through `reasoning-gym --env-arg dataset=NAME`, and tests/test_reasoning_gym.py says when the
list is behind the installed version.
"""
from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

from rlvr.core import ERROR, OK, UNPARSED, BaseReward, Completion, Task, Verdict
from rlvr.envs.registry import register_env
from rlvr.splits import hash_split
from rlvr.usage import require_extra
from rlvr.verifiers.math.standing import after, negated, stated_value
from rlvr.verifiers.numeric import numbers_in, parse_number
from rlvr.verifiers.parser import ThinkParser, answer_tag, tag_blocks

from .base import Environment, r1_base_prompt, r1_chat_prompt
from .countdown_search import countdown_teacher
from .reasoning_gym_names import DATASETS, ENV_NAMES, PREFIX

__all__ = ["DATASETS", "ENV_NAMES", "ReasoningGymSource", "ReasoningGymReward",
           "reasoning_gym_env"]



def _require():
    return require_extra("reasoning_gym", "reasoning-gym", "reasoning-gym environments")


@lru_cache(maxsize=32)
def _dataset(name: str, seed: int, size: int, config: str):
    """One generator per (dataset, seed, size, config), shared by the source and the reward."""
    rg = _require()
    from reasoning_gym.factory import DATASETS as installed
    if name not in installed:
        close = difflib.get_close_matches(name, list(installed), n=3)
        raise ValueError(f"reasoning-gym has no dataset {name!r}; "
                         + (f"did you mean {', '.join(map(repr, close))}? " if close else "")
                         + f"it has {len(installed)} (`rlvr envs list` names them)")
    return rg.create_dataset(name, seed=seed, size=size, **json.loads(config))


@dataclass(frozen=True)
class ReasoningGymSource:
    """Items of one reasoning-gym dataset, split by a hash of the question."""
    dataset: str
    config: str = "{}"          # JSON of the dataset's config keywords (hashable, picklable)
    test_fraction: float = 0.2
    size: int = 100_000
    prompt_style: str = "chat"
    splits: tuple = ("train", "test")

    @property
    def prefix(self) -> str:
        return f"{PREFIX}/{self.dataset}"

    def _task(self, split: str, seed: int, index: int) -> Task | None:
        """Item `index` as a task, or None when it belongs to the other split."""
        entry = _dataset(self.dataset, seed, self.size, self.config)[index]
        question = str(entry["question"])
        if hash_split(question, self.test_fraction) != split:
            return None
        prompt = r1_base_prompt(question) if self.prompt_style == "base" else r1_chat_prompt(question)
        return Task(id=f"{self.prefix}/{split}/{seed}/{index}", prompt=prompt,
                    answer=entry.get("answer"),
                    metadata={"question": question, "rg_dataset": self.dataset, "rg_seed": seed,
                              "rg_index": index, "rg_config": self.config, "rg_size": self.size,
                              "rg_metadata": entry.get("metadata", {})})

    def iter(self, split: str = "train", seed: int = 0) -> Iterator[Task]:
        if split not in self.splits:
            raise KeyError(f"no split {split!r}; have {list(self.splits)}")
        for index in range(self.size):
            task = self._task(split, seed, index)
            if task is not None:
                yield task

    def get(self, task_id: str) -> Task:
        head, _, rest = task_id.rpartition("/")
        parts = head.rsplit("/", 2)
        if len(parts) != 3 or parts[0] != self.prefix or parts[1] not in self.splits \
                or not parts[2].lstrip("-").isdigit() or not rest.isdigit():
            raise KeyError(f"bad task id {task_id!r}; expected "
                           f"'{self.prefix}/<train|test>/<seed>/<index>'")
        task = self._task(parts[1], int(parts[2]), int(rest))
        if task is None:
            raise KeyError(f"task id {task_id!r}: item {rest} is not in the {parts[1]} split")
        return task


# a scorer's sum of float parts may land this far outside [0, 1] (1.0000000000000002): rounding,
# clamped; anything further out is the scorer's bug, a counted error
_ROUNDING = 1e-9
# a whole answer in math delimiters (`$-14$`, `\(3\)`): the value inside is the answer
_MATH_WRAP = re.compile(r"^\$+\s*(.*?)\s*\$+$|^\\\(\s*(.*?)\s*\\\)$", re.S)


# a number written one way only (no leading zeros, no trailing decimal zeros, no separators)
_CANONICAL_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d*[1-9])?")


def _unwrapped(answer: str, gold: str) -> str:
    """`answer` without math delimiters around all of it and without a closing full stop the
    gold does not have, and a number equal to a numeric gold in the gold's own spelling (the
    scorers compare plain text: `$-14$`, `139.`, `1,234` and `1234.0` are the value)."""
    m = _MATH_WRAP.match(answer)
    answer = next((g for g in m.groups() if g is not None), answer) if m else answer
    if answer.endswith(".") and not answer.endswith("..") and not gold.endswith("."):
        answer = answer[:-1].rstrip()
    if _CANONICAL_NUMBER.fullmatch(gold) and answer != gold \
            and parse_number(answer) == parse_number(gold):
        return gold                              # 1,234 / 1234.0 for 1234: the scorers compare text
    return answer


def _no_partial_credit(answer: str, gold) -> str:
    """Why `answer` earns no partial credit, or ''. reasoning-gym's scorers pay overlap with
    the gold (`len(gold) / len(answer)` for any text containing it, a share per matching
    letter), so a hedge (`2 or 3` for 3), a struck-out gold (`x \\neq 3`) or the gold with more
    appended would be paid: partial credit is kept for an answer that is one plain number
    (numeric golds) or that does not contain the gold. Full credit stands: it is the scorer's
    judgment of the whole text."""
    gold = str(gold).strip() if gold is not None else ""
    if not gold:
        return ""
    if len(numbers_in(gold)) == 1 and parse_number(gold) is not None:
        stated = numbers_in(answer)
        if len(stated) > 1:
            return f"a hedge: {len(stated)} different numbers for a one-number gold"
        if parse_number(answer) is None:
            return "not a plain number (partial credit is for a number near the gold)"
        return ""
    if gold.casefold() in answer.casefold():
        return "the gold with more around it: a hedge or padding, not a near answer"
    return ""


def _undone(span: str, answer: str) -> Verdict | None:
    """A verdict of 0 when what the text says around or after the last `<answer>` block undoes
    it (a negation, a retraction, a correction or an alternative after it: the answer the
    completion ends on is not the tagged one); None when the tagged answer stands."""
    start, end, _ = tag_blocks(span)[-1]
    if negated(span, start, end):
        return Verdict(0.0, UNPARSED, extracted=answer,
                       reason="the answer is negated or questioned")

    def same(value: str) -> bool:
        value = _unwrapped(value.strip(), answer)
        number = parse_number(value)
        return value.casefold() == answer.casefold() or (
            number is not None and number == parse_number(answer))

    change = after(span[end:], stated_value, same)
    if change.action == "retract":
        return Verdict(0.0, UNPARSED, extracted=answer, reason=change.reason)
    if change.action in ("replace", "hedge"):
        return Verdict(0.0, OK, extracted=f"{answer} | {change.value}"[:200],
                       reason=f"after the <answer> block the text "
                              f"{'corrects it to' if change.action == 'replace' else 'offers'} "
                              f"{change.value[:60]!r}: the tagged answer does not stand")
    return None


class ReasoningGymReward(BaseReward):
    """The dataset's own `score_answer` on the `<answer>` span, with typed statuses. Several
    different `<answer>` blocks are a hedge (0, whatever the scorer would say of the last), and a
    block the text around or after it undoes earns 0."""
    name = "reasoning_gym"
    version = "3"

    def __init__(self, parser: ThinkParser | None = None):
        self.parser = parser or ThinkParser()

    def _score(self, task: Task, completion: Completion) -> Verdict:
        span = self.parser.parse(completion.text).answer
        tags = answer_tag(span) if span else []
        if not tags:
            return Verdict(0.0, UNPARSED, reason="no <answer>...</answer> in the answer span")
        blocks = list(dict.fromkeys(t.strip() for t in tags))
        if len(blocks) > 1:
            return Verdict(0.0, OK, extracted=" | ".join(blocks)[:200],
                           reason=f"{len(blocks)} different <answer> blocks: a hedge")
        answer = _unwrapped(blocks[0], str(task.answer))
        undone = _undone(span, answer)
        if undone is not None:
            return undone
        md = task.metadata
        entry = {"question": md["question"], "answer": task.answer, "metadata": md["rg_metadata"]}
        ds = None
        try:
            ds = _dataset(md["rg_dataset"], md["rg_seed"], md["rg_size"], md["rg_config"])
            score = ds.score_answer(answer, entry)
        except Exception as exc:     # reasoning-gym's bug, not the policy's: counted, not a 0
            if isinstance(exc, ValueError) and ds is not None:   # its parse of the answer
                return Verdict(0.0, UNPARSED, extracted=answer,  # failed (`int('139 or 7')`)
                               reason=f"reasoning-gym {md['rg_dataset']} scorer could not read "
                                      f"the answer: ValueError: {exc}")
            return Verdict(0.0, ERROR, extracted=answer,
                           reason=f"reasoning-gym {md['rg_dataset']} scorer raised "
                                  f"{type(exc).__name__}: {exc}")
        withheld = _no_partial_credit(answer, task.answer)
        if withheld and isinstance(score, (int, float)) and score != 1.0:
            return Verdict(0.0, OK, extracted=answer, reason=withheld)
        if isinstance(score, bool) or not isinstance(score, (int, float)) \
                or not math.isfinite(score) or not -_ROUNDING <= score <= 1.0 + _ROUNDING:
            return Verdict(0.0, ERROR, extracted=answer,
                           reason=f"reasoning-gym {md['rg_dataset']} scorer returned {score!r}, "
                                  "not a number in [0, 1]")
        return Verdict(min(max(float(score), 0.0), 1.0), OK, extracted=answer)

    def required_fields(self) -> set[str]:
        return {"question", "rg_dataset", "rg_seed", "rg_size", "rg_config", "rg_metadata"}


def reasoning_gym_env(dataset: str, config: dict | None = None, test_fraction: float = 0.2,
                      size: int = 100_000, prompt_style: str = "chat",
                      name: str | None = None) -> Environment:
    """One reasoning-gym dataset as an Environment (see the module docstring)."""
    if prompt_style not in ("chat", "base"):
        raise ValueError(f"prompt_style must be 'chat' or 'base', got {prompt_style!r}")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError("test_fraction must be strictly between 0 and 1")
    cfg = json.dumps(config or {}, sort_keys=True)
    _dataset(dataset, 0, size, cfg)            # unknown names and bad configs fail here
    parser = ThinkParser(prefilled=True if prompt_style == "base" else None)
    env = Environment(
        name=name or f"{PREFIX}/{dataset}", version="1", parser=parser,
        source=ReasoningGymSource(dataset, cfg, test_fraction, size, prompt_style),
        rewards=[(ReasoningGymReward(parser), 1.0)],
        description=f"reasoning-gym's {dataset} generator, scored by its own score_answer.")
    if prompt_style == "base":
        env.gold = lambda t: f" I work it out.</think> <answer>{t.answer}</answer>"
    else:
        env.gold = lambda t: f"<think>I work it out.</think> <answer>{t.answer}</answer>"
    if dataset == "countdown":     # its scorer asks for every number
        env.teacher = countdown_teacher(True, lambda t: (
            t.metadata["rg_metadata"]["numbers"], t.metadata["rg_metadata"]["target"]))
    return env


@register_env(PREFIX)
def reasoning_gym(dataset: str = "chain_sum", config: dict | None = None,
                  test_fraction: float = 0.2, size: int = 100_000,
                  prompt_style: str = "chat") -> Environment:
    """Any reasoning-gym dataset by name (`--env-arg dataset=leg_counting`); `config` holds the
    dataset's own keywords (e.g. {"min_terms": 2})."""
    return reasoning_gym_env(dataset, config, test_fraction, size, prompt_style, name=PREFIX)


def _register(dataset: str) -> None:
    def factory(config: dict | None = None, test_fraction: float = 0.2, size: int = 100_000,
                prompt_style: str = "chat") -> Environment:
        return reasoning_gym_env(dataset, config, test_fraction, size, prompt_style)
    factory.__name__ = factory.__qualname__ = f"reasoning_gym_{dataset}"
    factory.__doc__ = f"reasoning-gym's `{dataset}` dataset, scored by its own score_answer."
    register_env(f"{PREFIX}/{dataset}")(factory)


for _name in DATASETS:
    _register(_name)
