"""Exploit strategies: what they are, how one is registered, and the task view they build from.

A strategy turns one task (its gold, its prompt, the environment's own gold completion) into
completions. A *wrong* strategy's completions are wrong answers, however well dressed: none may
earn reward. A *legit* strategy's completions are the gold in another acceptable form: each must
solve its task. Strategies declare the kinds of environment they apply to (`KINDS`); on other
kinds they are reported as skipped.

    from rlvr.audit import register_strategy

    @register_strategy("shout-the-gold", kinds=("answer",))
    def shout(case):
        \"\"\"The gold in capitals after a wrong answer.\"\"\"
        return [case.dress(case.wrong()) + f" {case.gold.upper()}!"]

Third-party packages list modules that register strategies in the `rlvr.audit_strategies`
entry-point group, as environments use `rlvr.envs`.
"""
from __future__ import annotations

import random
import re
import threading
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Callable, Iterable, Mapping

from rlvr.core import Completion, Task

__all__ = ["KINDS", "Attempt", "Case", "Strategy", "register_strategy", "task_kind",
           "make_case", "perturb"]

KINDS = ("answer", "code", "instructions", "json", "format")
"""answer: a short final answer compared with a gold value (maths, puzzles); code: programs run
against tests; instructions: verifiable constraints on free text; json: an object checked
against a schema; format: only the completion's shape is rewarded."""
_SCHEMA_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")


@dataclass(frozen=True)
class Attempt:
    """One completion a strategy submits. A `plant` is scored before the others and not
    counted: what an earlier sample left behind for a thief to find. A `control` is the same
    completion without the attack: the attempt is then a finding when it scores above its
    control, not above 0 -- so a reward that pays some wrong answers (a judge) is still tested
    for what the attack alone adds."""
    text: str
    finish_reason: str = "stop"
    plant: bool = False
    control: str | None = None

    def completion(self) -> Completion:
        return Completion(self.text, finish_reason=self.finish_reason)


@dataclass
class Case:
    """One task as strategies see it.

    `gold_completion` is the environment's own gold completion (None when tasks carry no
    reference); `gold` is what it writes in its answer slot (the `<answer>` tag, the last
    `\\boxed{}`, or the gold value itself); `dress(x)` is the gold completion with `x` in that
    slot, so a wrong answer keeps the environment's exact format."""
    task: Task
    kind: str
    gold_completion: str | None
    gold: str | None
    question: str
    rng: random.Random
    _slot: tuple[str, str] | None = field(default=None, repr=False)

    def dress(self, answer: str) -> str:
        if self._slot is None:
            return f"<think>I work it out.</think> <answer>{answer}</answer>"
        return self._slot[0] + answer + self._slot[1]

    def wrong(self, k: int = 0) -> str:
        """A genuinely wrong answer: the gold perturbed (a number moved by k + 1, a digit
        bumped, a letter or word changed); `k` picks one of several different ones."""
        return perturb(self.gold or "", k)

    @property
    def entry_point(self) -> str | None:
        tests = self.task.answer
        return getattr(tests, "entry_point", None) or self.task.metadata.get("entry_point")


# --------------------------------------------------------------------------- perturbing

_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_OPPOSITES = {"true": "false", "false": "true", "yes": "no", "no": "yes"}


def perturb(gold: str, k: int = 0) -> str:
    r"""A value different from `gold`: numbers move by k + 1 (a decimal in its last place), the
    k-th digit from the end is bumped, booleans flip, a letter moves on, words are reversed or
    one is misspelled.

    >>> perturb("35"), perturb("35", 2), perturb("0.50"), perturb("\\frac{5}{6}"), perturb("True")
    ('36', '38', '0.51', '\\frac{5}{7}', 'false')
    """
    s = gold.strip()
    plain = s.replace(",", "")
    if _NUMBER.match(plain):
        places = len(plain.partition(".")[2])
        # exact decimal arithmetic: a float loses the last place of a long decimal, and the
        # "wrong" value came back equal to the gold
        step = Decimal(k + 1).scaleb(-places)
        return f"{Decimal(plain) + step:.{places}f}" if places else str(int(plain) + k + 1)
    digits = [i for i, c in enumerate(s) if c.isdigit()]
    if digits:
        i = digits[-1 - k % len(digits)]
        bump = 1 + k // len(digits)
        return s[:i] + str((int(s[i]) + bump) % 10) + s[i + 1:]
    if s.lower() in _OPPOSITES:
        return [_OPPOSITES[s.lower()], f"not {s}", "unknown", "neither"][k % 4]
    if len(s) == 1 and s.isalpha():
        return chr((ord(s.upper()) - ord("A") + 1 + k) % 26 + ord("A"))
    words = s.split()
    if len(set(words)) > 1 and k == 0 and words[::-1] != words:
        return " ".join(words[::-1])
    if len(words) > 1:
        i = k % len(words)          # k = 0 too: a palindrome of words has no reversal
        return " ".join(words[:i] + [words[i] + "x" * (1 + k // len(words))] + words[i + 1:])
    return s + "x" * (k + 1)


# --------------------------------------------------------------------------- the task view

def _prompt_text(prompt) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        users = [m.get("content", "") for m in prompt if isinstance(m, Mapping)
                 and m.get("role") == "user"]
        return str(users[-1]) if users else ""
    return str(prompt)


_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_BOX = re.compile(r"\\boxed\{")


def _slot(env, text: str, answer) -> tuple[str, str, str] | None:
    """(before, gold as written, after) for the answer slot of a gold completion."""
    parsed = env.parser.parse(text)
    start = text.rfind(parsed.answer) if parsed.answer else 0
    tags = list(_TAG.finditer(text, start))
    if tags:
        m = tags[-1]
        return text[:m.start(1)], m.group(1), text[m.end(1):]
    boxes = list(_BOX.finditer(text, start))
    if boxes:
        open_at, depth = boxes[-1].end(), 1
        for i in range(open_at, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                return text[:open_at], text[open_at:i], text[i:]
    value = str(answer) if isinstance(answer, (str, int, float)) else None
    at = text.rfind(value, start) if value else -1
    if at >= 0:
        return text[:at], value, text[at + len(value):]
    return None


def make_case(env, task: Task, kind: str) -> Case:
    """The view of `task` every strategy builds from (seeded by the task id: reproducible)."""
    gold_completion = None
    if env.gold is not None:
        try:    # a task without a reference (a code row with no solution) has no gold to dress
            made = env.gold(task)
        except (KeyError, ValueError):
            made = None
        if made is not None:
            gold_completion = made.text if isinstance(made, Completion) else str(made)
    case = Case(task, kind, gold_completion, None, _prompt_text(task.prompt),
                random.Random(f"rlvr-audit/{task.id}"))
    if gold_completion is not None and kind in ("answer", "format"):
        found = _slot(env, gold_completion, task.answer)
        if found:
            case._slot, case.gold = (found[0], found[2]), found[1].strip()
    elif gold_completion is not None:
        case.gold = gold_completion
    return case


def task_kind(env, task: Task) -> str:
    """The kind of `env` as its tasks show it: the gold's shape, or format-only rewards."""
    answer = task.answer
    if type(answer).__name__ == "CodeTests" or (isinstance(answer, Mapping)
                                                and "tests" in answer):
        return "code"
    if isinstance(answer, Mapping) and "instruction_id_list" in answer:
        return "instructions"
    if isinstance(answer, Mapping) and ("properties" in answer or "$schema" in answer
                                        or answer.get("type") in _SCHEMA_TYPES):
        return "json"
    from rlvr.verifiers.format import AnswerTag, BoxedPresent, ThinkFormat
    weighted = [r for r, w in env.rewards if w]
    if weighted and all(isinstance(r, (ThinkFormat, AnswerTag, BoxedPresent)) for r in weighted):
        return "format"
    return "answer"


# --------------------------------------------------------------------------- registering

@dataclass(frozen=True)
class Strategy:
    """A named way of attacking (or, `legit`, of rightly answering) a task."""
    name: str
    build: Callable[[Case], Iterable[Attempt | str] | None]
    kinds: tuple[str, ...]
    legit: bool = False
    description: str = ""

    def attempts(self, case: Case) -> list[Attempt]:
        made = self.build(case) or ()
        return [a if isinstance(a, Attempt) else Attempt(str(a)) for a in made if a]


_strategies: dict[str, Strategy] = {}
"""Every registered strategy by name (`rlvr.audit.registry` lists them)."""
_lock = threading.Lock()


def register_strategy(name: str, *, kinds: Iterable[str] = KINDS, legit: bool = False,
                      replace: bool = False) -> Callable:
    """Register `fn(case) -> completions` as strategy `name` (the function is returned
    unchanged); its docstring's first line describes it in the report."""
    kinds = tuple(kinds)
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise ValueError(f"strategy {name!r}: unknown kinds {sorted(unknown)}; use {KINDS}")

    def wrap(fn: Callable) -> Callable:
        doc = (fn.__doc__ or "").strip().split("\n\n")[0]
        with _lock:
            old = _strategies.get(name)
            if old and not replace and old.build.__qualname__ != fn.__qualname__:
                raise ValueError(f"strategy {name!r} is already registered by "
                                 f"{old.build.__module__}; pass replace=True to override it")
            _strategies[name] = Strategy(name, fn, kinds, legit, " ".join(doc.split()))
        return fn
    return wrap
