"""Hack detectors: per-sample structural signatures of reward hacking, and how one is registered.

A detector looks at one live completion (`Sample`: the task, the text split into think and
answer spans, the verdict it earned, the task's kind as the audit names it) and returns a short
reason when the completion carries its signature, else None. Detectors are the audit's exploit
strategies turned around: where a strategy *builds* a hedge to see whether a verifier pays for
it, a detector *recognises* one in what the policy wrote, whatever the verifier said.

    from rlvr.monitor import register_detector

    @register_detector("shouting", kinds=("answer",))
    def shouting(sample):
        \"\"\"An answer written in capitals only.\"\"\"
        return "all capitals" if sample.answer.isupper() else None

Third-party packages list modules that register detectors in the `rlvr.monitor_detectors`
entry-point group, as strategies use `rlvr.audit_strategies`.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Iterable

from rlvr.audit.strategy import KINDS, _prompt_text
from rlvr.core import Task, Verdict
from rlvr.plugins import Discovery

__all__ = ["Sample", "Detector", "register_detector", "list_detectors", "get_detector",
           "detectors_for", "UnknownDetectorError", "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "rlvr.monitor_detectors"
BUILTIN_MODULES = ("answers", "code", "text")
"""rlvr's own detectors (each module registers its detectors on import)."""
_discover = Discovery(__package__, BUILTIN_MODULES, ENTRY_POINT_GROUP)
"""The built-in detectors and every `rlvr.monitor_detectors` entry point, once."""


@dataclass(frozen=True)
class Sample:
    """One completion as detectors see it. `think` is None without a think block; `answer` is
    the text after it (the whole text when there is none); `verdict` is what the environment's
    reward said (None offline, before scoring)."""
    task: Task
    text: str
    kind: str
    think: str | None
    answer: str
    verdict: Verdict | None = None
    finish_reason: str = "stop"

    @property
    def question(self) -> str:
        """The prompt's last user message (the audit's reading of a prompt)."""
        return _prompt_text(self.task.prompt)

    @property
    def gold(self) -> str | None:
        """The gold answer when it is a single value (a string or a number), else None."""
        a = self.task.answer
        return str(a).strip() if isinstance(a, (str, int, float)) and not isinstance(a, bool) \
            else None


def make_sample(task: Task, text: str, kind: str, parser, verdict: Verdict | None = None,
                finish_reason: str = "stop") -> Sample:
    """A `Sample` with the spans `parser` (the environment's think parser) reads."""
    parsed = parser.parse(text)
    answer = parsed.answer if parsed.think_present else text
    return Sample(task, text, kind, parsed.think, answer, verdict, finish_reason)


@dataclass(frozen=True)
class Detector:
    """A named signature: `check(sample) -> reason or None`, on tasks of the given kinds."""
    name: str
    check: Callable[[Sample], str | None]
    kinds: tuple[str, ...]
    description: str = ""


class UnknownDetectorError(KeyError):
    def __str__(self):
        return str(self.args[0])


_detectors: dict[str, Detector] = {}
_lock = threading.Lock()


def register_detector(name: str, *, kinds: Iterable[str] = KINDS, replace: bool = False):
    """Register `fn(sample) -> reason | None` as detector `name` (returned unchanged); its
    docstring's first paragraph describes it in `rlvr monitor` and docs."""
    kinds = tuple(kinds)
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise ValueError(f"detector {name!r}: unknown kinds {sorted(unknown)}; use {KINDS}")

    def wrap(fn: Callable) -> Callable:
        doc = (fn.__doc__ or "").strip().split("\n\n")[0]
        with _lock:
            old = _detectors.get(name)
            if old and not replace and old.check.__qualname__ != fn.__qualname__:
                raise ValueError(f"detector {name!r} is already registered by "
                                 f"{old.check.__module__}; pass replace=True to override it")
            _detectors[name] = Detector(name, fn, kinds, " ".join(doc.split()))
        return fn
    return wrap




def list_detectors() -> list[Detector]:
    _discover()
    return sorted(_detectors.values(), key=lambda d: d.name)


def get_detector(name: str) -> Detector:
    _discover()
    if name not in _detectors:
        raise UnknownDetectorError(f"unknown detector {name!r}; registered: "
                                   f"{', '.join(sorted(_detectors))}")
    return _detectors[name]


def detectors_for(kind: str, names: Iterable[str] = ()) -> list[Detector]:
    """The detectors that apply to tasks of `kind`: those named (all when none are)."""
    chosen = [get_detector(n) for n in names] if names else list_detectors()
    return [d for d in chosen if kind in d.kinds]


def detect(sample: Sample, detectors: Iterable[Detector]) -> dict[str, str]:
    """{detector name: reason} for each detector whose signature `sample` carries."""
    found = {}
    for d in detectors:
        reason = d.check(sample)
        if reason:
            found[d.name] = reason
    return found
