"""Verifiable instructions (IFEval-style): is the response shaped the way the prompt asked?

The checkers (`rlvr.verifiers.instruction_checkers`, one per IFEval instruction id, in
`CHECKERS`) measure text with `rlvr.verifiers.text` and the language detector
(`rlvr.verifiers.language`); this module validates a row's instructions and arguments and holds
the reward, `InstructionFollowing`. The names a user needs are all importable from here.

Modes: `strict` checks the response as written; `loose` passes an instruction if any of IFEval's
eight loose variants passes (markdown `*` removed, first and/or last line dropped).
"""
from __future__ import annotations

import json
from typing import Callable, Iterator

from rlvr.core import GOLD_UNPARSEABLE, OK, UNPARSED, BaseReward, Verdict

from . import instruction_checkers
from .instruction_checkers import *  # noqa: F401,F403 - every checker stays importable from here
from .instruction_checkers import CHECKERS, RELATIONS
from .language import detect_language
from .parser import ThinkParser
from .text import (clean, count_bullets, count_capital_words, count_highlights,
                   count_placeholders, count_sections, count_sentences, count_words,
                   split_paragraphs)

__all__ = [
    "InstructionFollowing", "InstructionSpecError", "check_instruction",
    "clean", "count_words", "count_sentences", "count_bullets", "count_highlights",
    "count_placeholders", "count_sections", "count_capital_words", "split_paragraphs",
    "detect_language", "loose_variants", "bind_kwargs", "instruction_spec",
    *instruction_checkers.__all__,
]

# Argument kinds by IFEval name: how a row's kwargs are validated before a checker sees them.
_INT_ARGS = {"num_sentences", "num_paragraphs", "num_words", "nth_paragraph", "frequency",
             "let_frequency", "capital_frequency", "num_bullets", "num_highlights",
             "num_sections", "num_placeholders"}
_RELATION_ARGS = {"relation", "let_relation", "capital_relation"}
_LIST_ARGS = {"keywords", "forbidden_words", "options"}


def _params(fn: Callable) -> tuple[set, set]:
    code = fn.__code__
    names = code.co_varnames[1:code.co_argcount]          # skip `text`
    n_required = len(names) - len(fn.__defaults__ or ())
    return set(names), set(names[:n_required])


_SIGNATURES = {iid: _params(fn) for iid, fn in CHECKERS.items()}


class InstructionSpecError(ValueError):
    """An instruction id or its arguments cannot be used (the *gold* is bad, not the response)."""


def bind_kwargs(instruction_id: str, kwargs: dict | None) -> dict:
    """Validate a row's kwargs for one instruction: None values dropped (the Hugging Face copy
    of IFEval fills every unused argument with null), types checked, required ones present."""
    if instruction_id not in CHECKERS:
        raise InstructionSpecError(f"unknown instruction id {instruction_id!r}; known: "
                                   + ", ".join(sorted(CHECKERS)))
    names, required = _SIGNATURES[instruction_id]
    given = {k: v for k, v in (kwargs or {}).items() if v is not None}
    extra = set(given) - names
    if extra:
        raise InstructionSpecError(f"{instruction_id}: unexpected argument(s) {sorted(extra)}; "
                                   f"it takes {sorted(names)}")
    missing = required - set(given)
    if missing:
        raise InstructionSpecError(f"{instruction_id}: missing argument(s) {sorted(missing)}")
    for k, v in given.items():
        _check_arg(instruction_id, k, v)
    return given


def _check_arg(iid: str, name: str, value) -> None:
    if name in _INT_ARGS:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    elif name in _RELATION_ARGS:
        ok = value in RELATIONS
    elif name in _LIST_ARGS:       # an empty keyword would be found in any response
        ok = isinstance(value, (list, tuple)) and all(isinstance(x, str) and x.strip()
                                                      for x in value)
    elif name == "letter":     # one character; IFEval itself asks for '#' and '!' (keys 1122, 1129)
        ok = isinstance(value, str) and len(value) == 1 and not value.isspace()
    else:
        ok = isinstance(value, str) and bool(value.strip())
    if not ok:
        want = ("a non-negative integer" if name in _INT_ARGS else
                f"one of {sorted(RELATIONS)}" if name in _RELATION_ARGS else
                "a list of non-empty strings" if name in _LIST_ARGS else
                "a single character" if name == "letter" else "a non-empty string")
        raise InstructionSpecError(f"{iid}: argument {name}={value!r} must be {want}")


def loose_variants(text: str) -> Iterator[str]:
    """IFEval's loose forms: as written, `*` removed, first / last / both lines dropped.

    Duplicates are skipped (no `*` to remove, a one-line answer): same verdicts, less work.
    """
    seen = set()
    for base in ((text, text.replace("*", "")) if "*" in text else (text,)):
        lines = base.split("\n")
        variants = (base,) if len(lines) == 1 else (
            base, "\n".join(lines[1:]).strip(), "\n".join(lines[:-1]).strip(),
            "\n".join(lines[1:-1]).strip())
        for variant in variants:
            if variant.strip() and variant not in seen:
                seen.add(variant)
                yield variant


def check_instruction(instruction_id: str, text: str, kwargs: dict | None = None,
                      mode: str = "strict") -> Verdict:
    """Check one instruction; raises InstructionSpecError when the instruction itself is bad.

    >>> check_instruction("punctuation:no_comma", "**Note**\\nno commas here, sorry").reason
    '1 comma (first at char 23)'
    >>> check_instruction("detectable_format:title", "Sure!\\n<<Hi>>", {}, mode="loose").score
    1.0
    """
    fn = CHECKERS.get(instruction_id)
    args = bind_kwargs(instruction_id, kwargs)
    if mode == "strict":
        return fn(text, **args)
    if mode != "loose":
        raise ValueError(f"mode must be 'strict' or 'loose', got {mode!r}")
    return _loose(fn, text, args)


def _loose(fn: Callable[..., Verdict], text: str, args: dict) -> Verdict:
    """The first passing loose variant's verdict, else the verdict on the text as written."""
    first = None
    for variant in loose_variants(text):
        v = fn(variant, **args)
        if v.score == 1.0:
            return v
        first = first or v
    return first or fn(text, **args)


# --------------------------------------------------------------------------- the reward

class InstructionFollowing(BaseReward):
    """All of a task's instructions followed (IFEval prompt-level accuracy) -> 1.0.

    The task carries `instruction_id_list` and `kwargs` (IFEval's row format) in its metadata;
    the response is read from the parser's answer span (a reasoning model's thinking never
    counts). `partial=True` scores the fraction followed (instruction-level accuracy) instead of
    all-or-nothing; a task may set metadata `gate_instructions: k` so that no credit is given
    unless its first k instructions hold (the generated tasks gate on the topic keyword, so an
    off-topic "I don't know." earns nothing for being short). `extracted` is IFEval's
    `follow_instruction_list`.

    >>> from rlvr import Task
    >>> task = Task("t", metadata={"instruction_id_list": ["punctuation:no_comma"],
    ...                            "kwargs": [{}]})
    >>> InstructionFollowing().score(task, "No commas here.").score
    1.0
    >>> InstructionFollowing().score(task, "Well, no.").reason
    'punctuation:no_comma: 1 comma (first at char 4)'
    """
    version = "1"

    def __init__(self, mode: str = "strict", partial: bool = False,
                 parser: ThinkParser | None = None, name: str | None = None):
        if mode not in ("strict", "loose"):
            raise ValueError(f"mode must be 'strict' or 'loose', got {mode!r}")
        self.mode, self.partial = mode, partial
        self.parser = parser or ThinkParser()
        self.name = name or f"instructions_{mode}"

    def required_fields(self) -> set[str]:
        return {"instruction_id_list", "kwargs"}

    def _score(self, task, completion):
        try:
            spec = instruction_spec(task.metadata)
        except InstructionSpecError as exc:
            return Verdict(0.0, GOLD_UNPARSEABLE, reason=str(exc))
        answer = clean(self.parser.parse(completion.text).answer)
        if not answer.strip():      # nothing to check: an empty reply follows "no commas" vacuously
            why = " (think block never closed?)" if "<think>" in completion.text else ""
            return Verdict(0.0, UNPARSED, extracted=[False] * len(spec),
                           reason=f"empty response{why}")
        followed, reasons, status = [], [], OK
        strict = self.mode == "strict"
        for iid, args in spec:
            v = CHECKERS[iid](answer, **args) if strict else _loose(CHECKERS[iid], answer, args)
            followed.append(v.score == 1.0)
            if v.score != 1.0:
                reasons.append(f"{iid}: {v.reason}")
                status = UNPARSED if v.status == UNPARSED else status
        gate = int(task.metadata.get("gate_instructions") or 0)
        if self.partial and all(followed[:gate]):
            score = sum(followed) / len(followed)
        else:
            score = float(all(followed))
        return Verdict(score, status if score < 1.0 else OK, extracted=followed,
                       reason="; ".join(reasons))


def instruction_spec(metadata: dict) -> list[tuple[str, dict]]:
    """[(instruction id, validated kwargs)] from IFEval-format fields (kwargs may be JSON text)."""
    ids, kwargs = metadata.get("instruction_id_list"), metadata.get("kwargs")
    if isinstance(kwargs, str):
        try:
            kwargs = json.loads(kwargs)
        except json.JSONDecodeError as exc:
            raise InstructionSpecError(f"kwargs is not valid JSON: {exc}") from None
    if kwargs is None:
        kwargs = [{}] * len(ids or [])
    if not isinstance(ids, (list, tuple)) or not ids:
        raise InstructionSpecError("instruction_id_list must be a non-empty list of ids")
    if not isinstance(kwargs, (list, tuple)) or len(kwargs) != len(ids):
        raise InstructionSpecError(f"kwargs must be a list of {len(ids)} dicts (one per "
                                   f"instruction), got {kwargs!r:.200}")
    if not all(isinstance(k, dict) or k is None for k in kwargs):
        raise InstructionSpecError("each kwargs entry must be a dict")
    return [(iid, bind_kwargs(iid, k)) for iid, k in zip(ids, kwargs)]
