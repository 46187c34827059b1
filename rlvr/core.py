"""The core nouns: Task, Completion, Verdict and the one Reward interface.

Everything that scores a completion -- a rule-based verifier, a sandboxed test run, a learned
reward model, a weighted mix of those -- is a `Reward`, so environments, the trainer and offline
scoring never care which one they hold.
"""
from __future__ import annotations

import inspect
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence, runtime_checkable

__all__ = [
    "STATUSES", "Task", "Completion", "Verdict", "Reward", "BaseReward", "FunctionReward",
    "WeightedSum", "reward", "as_completion",
]

# Status vocabulary (README, "Vocabulary"). `ok` means "scored normally": right or wrong lives in `score`.
OK, UNPARSED, GOLD_UNPARSEABLE, TIMEOUT, ERROR, INFRA_ERROR = (
    "ok", "unparsed", "gold_unparseable", "timeout", "error", "infra_error")
STATUSES = (OK, UNPARSED, GOLD_UNPARSEABLE, TIMEOUT, ERROR, INFRA_ERROR)
# Statuses whose samples carry no trustworthy score: training leaves them out of baselines and
# losses, offline scoring reports them. `unparsed` is *not* here: a model that writes no readable
# answer has earned its 0.
FAILED_STATUSES = frozenset({GOLD_UNPARSEABLE, TIMEOUT, ERROR, INFRA_ERROR})
# When several components disagree, the combined verdict reports the most serious one.
_SEVERITY = {OK: 0, UNPARSED: 1, GOLD_UNPARSEABLE: 2, TIMEOUT: 3, ERROR: 4, INFRA_ERROR: 5}


@dataclass
class Task:
    """One prompt to solve. `answer` is the gold: a string, a test suite, a schema...

    `metadata` holds whatever else a reward needs (tests, entry point, constraints); a reward
    function asks for those fields by parameter name.
    """
    id: str
    prompt: Any = ""
    answer: Any = None
    metadata: dict = field(default_factory=dict)

    def fields(self) -> dict:
        """Every name a reward function may ask for, with its value."""
        return {**self.metadata, "id": self.id, "prompt": self.prompt, "answer": self.answer,
                "task": self}


@dataclass
class Completion:
    """What the policy wrote. `finish_reason` is `stop` (EOS) or `length` (hit the limit)."""
    text: str
    token_ids: list | None = None
    finish_reason: str = "stop"


def as_completion(value: Completion | str) -> Completion:
    """Accept a bare string wherever a Completion is expected."""
    if isinstance(value, Completion):
        return value
    if isinstance(value, str):
        return Completion(value)
    raise TypeError(f"completion must be a str or Completion, got {type(value).__name__}")


@dataclass
class Verdict:
    """The result of one scoring. Knows how to log itself (`to_dict`)."""
    score: float = 0.0
    status: str = OK
    extracted: Any = None
    reason: str = ""
    latency_s: float = 0.0
    components: dict = field(default_factory=dict)
    version: str = ""
    primary: str = ""
    """The component whose score says whether the task is solved (the environment's answer
    reward, set by `combine`); "" for a single reward: its own score says it."""

    def __post_init__(self):
        if self.status not in _SEVERITY:
            raise ValueError(f"unknown status {self.status!r}; expected one of {STATUSES}")

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def solved(self) -> bool:
        """Status ok and the answer reward's score >= 1. Not the weighted total: a format or
        shaping term earns reward, but a well-formed wrong answer has not solved its task."""
        score = self.components.get(self.primary, self.score) if self.primary else self.score
        return self.ok and score is not None and score >= 1.0

    @property
    def failed(self) -> bool:
        """True when the score is not to be trusted (left out of training by default)."""
        return self.status in FAILED_STATUSES

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping) -> "Verdict":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@runtime_checkable
class Reward(Protocol):
    """The one interface. `score` must never raise on bad model output: it returns a Verdict."""
    name: str
    version: str

    def score(self, task: Task, completion: Completion) -> Verdict: ...

    def score_batch(self, tasks: Sequence[Task],
                    completions: Sequence[Completion]) -> list[Verdict]: ...


class BaseReward:
    """Convenience base: implement `_score`; get timing, the error boundary and a batch form.

    The boundary turns an exception into a counted `error` verdict carrying its message -- never
    into a 0.0 score: a failure is counted, never mistaken for a wrong answer.
    """
    name: str = "reward"
    version: str = "1"
    max_verify_s: float = 0.0
    """The longest one verification may legitimately take, in seconds, including the limits of
    any program it runs (a code reward: the sandbox's wall limit times its runs, plus start-up);
    0 for rewards with no limits of their own (a rule-based check of the text).
    Outer deadlines (`rlvr score`, the trainer's pool) are derived from it, so a program that
    stalls is stopped by its own limit and scored 0 before any outer deadline can call it a
    `timeout`."""

    def _score(self, task: Task, completion: Completion) -> Verdict:
        raise NotImplementedError(f"{type(self).__name__} must implement _score")

    def score(self, task: Task, completion: Completion | str) -> Verdict:
        start = time.perf_counter()
        try:
            verdict = self._score(task, as_completion(completion))
            if not isinstance(verdict, Verdict):
                raise TypeError(f"_score returned {type(verdict).__name__}, not a Verdict")
        except Exception as exc:  # the model-output boundary: count it, never score it
            verdict = Verdict(0.0, ERROR, reason=f"{type(exc).__name__}: {exc}")
        verdict.latency_s = time.perf_counter() - start
        verdict.version = verdict.version or f"{self.name}@{self.version}"
        return verdict

    def score_batch(self, tasks: Sequence[Task],
                    completions: Sequence[Completion | str]) -> list[Verdict]:
        if len(tasks) != len(completions):
            raise ValueError(f"{len(tasks)} tasks but {len(completions)} completions")
        return [self.score(t, c) for t, c in zip(tasks, completions)]

    def required_fields(self) -> set[str]:
        """Task fields this reward reads beyond the completion (checked at registration)."""
        return set()

    def __repr__(self):
        return f"{type(self).__name__}(name={self.name!r})"


# Arguments a reward function can ask for that are not task fields.
_COMPLETION_ARGS = {"completion", "text", "finish_reason", "parsed"}


class FunctionReward(BaseReward):
    """A reward from a plain function that declares only the arguments it uses.

    Parameters are filled by name from the completion (`completion` / `text`: the text,
    `finish_reason`, `parsed`: the environment parser's output) and from the task (`answer`,
    `prompt`, `id`, `task`, or any metadata key). The function returns a number, a bool, or a
    Verdict.

    >>> r = FunctionReward(lambda text, answer: float(text.strip() == answer), name="exact")
    >>> r.score(Task("t", answer="4"), Completion("4")).score
    1.0
    """

    def __init__(self, fn: Callable, name: str | None = None, version: str = "1",
                 parser: Callable | None = None):
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "reward")
        self.version = version
        self.parser = parser
        self._params = [p.name for p in inspect.signature(fn).parameters.values()
                        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]

    def required_fields(self) -> set[str]:
        return set(self._params) - _COMPLETION_ARGS

    def _score(self, task, completion):
        available = task.fields()
        kwargs = {}
        for p in self._params:
            if p in ("completion", "text"):
                kwargs[p] = completion.text
            elif p == "finish_reason":
                kwargs[p] = completion.finish_reason
            elif p == "parsed":
                if self.parser is None:
                    raise TypeError(f"reward {self.name!r} asks for 'parsed' but has no parser")
                kwargs[p] = self.parser(completion.text)
            elif p in available:
                kwargs[p] = available[p]
            else:
                raise KeyError(f"reward {self.name!r} needs task field {p!r}; task {task.id!r} "
                               f"has {sorted(k for k in available if k != 'task')}")
        out = self.fn(**kwargs)
        if isinstance(out, Verdict):
            return out
        if isinstance(out, (bool, int, float)):
            return Verdict(float(out))
        raise TypeError(f"reward {self.name!r} returned {type(out).__name__}; "
                        "return a float, a bool or a Verdict")


def reward(name: str | None = None, version: str = "1") -> Callable[[Callable], FunctionReward]:
    """Decorator form of FunctionReward.

    >>> @reward("shouts")
    ... def shouts(text):
    ...     return text.isupper()
    >>> shouts.score(Task("t"), Completion("HI")).score
    1.0
    """
    def wrap(fn):
        return FunctionReward(fn, name=name, version=version)
    return wrap


class WeightedSum(BaseReward):
    """score = sum_i w_i * score_i. A zero weight means "log it, don't train on it".

    Every component's score is kept in `components` by name. The combined status is the most
    serious status among components with a non-zero weight; when that is a failure (timeout,
    error...) the combined score is 0.0 and the sample is left out of training anyway.
    """

    def __init__(self, parts: Iterable[tuple[Reward, float]], name: str = "total"):
        self.parts = [(r, float(w)) for r, w in parts]
        if not self.parts:
            raise ValueError("WeightedSum needs at least one (reward, weight) pair")
        names = [r.name for r, _ in self.parts]
        if len(set(names)) != len(names):
            raise ValueError(f"component names must be unique, got {names}")
        self.name = name
        self.version = "+".join(f"{r.name}@{r.version}" for r, _ in self.parts)
        # the parts run one after another
        self.max_verify_s = sum(getattr(r, "max_verify_s", BaseReward.max_verify_s)
                                for r, _ in self.parts)

    def required_fields(self) -> set[str]:
        out = set()
        for r, _ in self.parts:
            out |= getattr(r, "required_fields", lambda: set())()
        return out

    def _score(self, task, completion):
        verdict = combine([(r.name, r.score(task, completion), w) for r, w in self.parts])
        verdict.version = self.version
        return verdict

    def score_batch(self, tasks, completions):
        per_part = [r.score_batch(tasks, completions) for r, _ in self.parts]
        out = []
        for i in range(len(tasks)):
            v = combine([(r.name, per_part[k][i], w) for k, (r, w) in enumerate(self.parts)])
            v.latency_s = sum(per_part[k][i].latency_s for k in range(len(self.parts)))
            v.version = self.version
            out.append(v)
        return out


def combine(named: list[tuple[str, Verdict, float]]) -> Verdict:
    """Fold component verdicts (name, verdict, weight) into one weighted verdict."""
    weighted = [(n, v, w) for n, v, w in named if w != 0.0]
    worst = max((v.status for _, v, _ in weighted), key=_SEVERITY.__getitem__, default=OK)
    components = {n: v.score for n, v, _ in named}
    score = 0.0 if worst in FAILED_STATUSES else sum(w * v.score for _, v, w in weighted)
    name, primary = (weighted or named)[0][:2]       # the first reward is the answer reward
    reasons = "; ".join(f"{n}: {v.reason}" for n, v, _ in named if v.reason)
    return Verdict(score, worst, primary.extracted, reasons, components=components, primary=name)
