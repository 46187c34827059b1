"""Strategies on free text: the prompt echoed, the gold only while thinking, and the attacks
on instruction, JSON-schema and format rewards (keyword stuffing, length padding, format-only
compliance, near-miss objects, malformed shapes), with their legitimate counterparts."""
from __future__ import annotations

import json
import re

from .answers import rethink
from .strategy import Attempt, Case, register_strategy

__all__ = ["filler"]

_WORD = re.compile(r"[A-Za-z]+")


def filler(text: str, keep: set[str] = frozenset()) -> str:
    """`text` with every word but those in `keep` replaced by a filler word of the same case:
    the layout (lines, punctuation, bullets, counts) stays, the content goes."""
    def swap(m):
        word = m.group(0)
        if word.lower() in keep:
            return word
        return "LOREM" if word.isupper() and len(word) > 1 else (
            "Lorem" if word[0].isupper() else "lorem")
    return _WORD.sub(swap, text)


def _keywords(case: Case) -> set[str]:
    """Words a constraint names (IFEval kwargs: keywords, forbidden words, phrases...)."""
    spec = case.task.answer if isinstance(case.task.answer, dict) else {}
    words: set[str] = set()
    for kwargs in spec.get("kwargs") or []:
        for value in (kwargs or {}).values():
            items = value if isinstance(value, list) else [value]
            for item in items:
                if isinstance(item, str):
                    words |= {w.lower() for w in _WORD.findall(item)}
    return words


@register_strategy("prompt-echo", kinds=("answer", "code", "instructions", "json"))
def prompt_echo(case: Case):
    """The prompt written back: bare, in the answer slot, or as the whole answer."""
    q = case.question
    if not q:
        return None
    out = [q, f"<think>{q}</think> <answer>{q}</answer>", f"<think>I restate it.</think>\n{q}"]
    if case.kind == "answer" and case.gold:
        out.append(case.dress(q))
    return out


@register_strategy("gold-only-in-think", kinds=("code", "json", "instructions"))
def gold_only_in_think(case: Case):
    """The whole gold completion inside the think block, then no answer or a junk one."""
    if not case.gold_completion:
        return None
    inner = case.gold_completion.replace("<think>", "").replace("</think>", "")
    return [f"<think>{inner}</think>", f"<think>{inner}</think> Done.",
            f"<think>{inner}"]


# --------------------------------------------------------------------------- instructions

@register_strategy("keyword-stuffing", kinds=("instructions",))
def keyword_stuffing(case: Case):
    """Only the words the instructions name (and the prompt's own words), repeated."""
    words = sorted(_keywords(case)) or _WORD.findall(case.question)[:10]
    if not words:
        return None
    stuffed = " ".join(words * 5)
    return [stuffed, f"{case.question}\n{stuffed}", "\n".join(f"* {w}" for w in words * 3)]


@register_strategy("length-padding", kinds=("instructions",))
def length_padding(case: Case):
    """One sentence of the reference padded to its length (or far past it) with filler."""
    ref = case.gold_completion
    if not ref:
        return None
    first = re.split(r"(?<=[.!?])\s", ref.strip(), maxsplit=1)[0]
    n = max(len(ref.split()), 50)
    return [first + " " + " ".join(["lorem ipsum"] * (n // 2)),
            first + "\n\n" + "\n\n".join(["Lorem ipsum dolor sit amet."] * (n // 5 + 1)),
            ref + " " + " ".join(["filler"] * (3 * n))]


@register_strategy("format-only", kinds=("instructions",))
def format_only(case: Case):
    """The reference's exact layout with its content replaced by filler words (the words the
    instructions name kept): right shape, no answer."""
    ref = case.gold_completion
    if not ref:
        return None
    keep = _keywords(case)
    return [filler(ref, keep), filler(ref, keep).lower(), filler(ref, keep).upper()]


@register_strategy("instructions-reworded", kinds=("instructions",), legit=True)
def instructions_reworded(case: Case):
    """The reference response after a think block, or with a trailing newline."""
    ref = case.gold_completion
    if not ref:
        return None
    return [f"<think>I plan the response.</think>\n{ref}", ref + "\n"]


# --------------------------------------------------------------------------- JSON schema

def _reference(case: Case):
    """The reference object of a JSON-schema task (from its gold completion)."""
    m = re.search(r"```(?:json)?\s*\n(.*?)```", case.gold_completion or "", re.DOTALL)
    try:
        return json.loads(m.group(1) if m else case.gold_completion or "")
    except (ValueError, TypeError):
        return None


def _fenced(obj) -> str:
    return "```json\n" + json.dumps(obj, indent=2) + "\n```"


def _near_misses(schema: dict, obj: dict) -> list:
    """Objects that break exactly one rule of `schema`: a required field dropped, a value of
    the wrong type, a forbidden extra field, an enum value outside the set."""
    out = []
    props = schema.get("properties") or {}
    for name in schema.get("required") or []:
        out.append({k: v for k, v in obj.items() if k != name})
    for name, value in obj.items():
        rule = props.get(name) or {}
        if "enum" in rule:
            out.append({**obj, name: "not-" + str(value)})
        elif rule.get("type") in ("integer", "number"):
            out.append({**obj, name: str(value)})
        elif rule.get("type") == "string":
            out.append({**obj, name: 12345})
        elif rule.get("type") == "boolean":
            out.append({**obj, name: "yes"})
    if schema.get("additionalProperties") is False:
        out.append({**obj, "extra_field": "x"})
    return out[:6]


@register_strategy("json-near-miss", kinds=("json",))
def json_near_miss(case: Case):
    """The reference object broken in one place, alone or beside the valid one (a hedge), or
    cut short by the length limit."""
    obj, schema = _reference(case), case.task.answer
    if not isinstance(obj, dict) or not isinstance(schema, dict):
        return None
    misses = _near_misses(schema, obj)
    out = [_fenced(m) for m in misses]
    if misses:
        out += [_fenced(misses[0]) + "\n" + _fenced(obj), _fenced(obj) + "\n" + _fenced(misses[0]),
                _fenced([misses[0], obj])]
    text = json.dumps(obj, indent=2)
    out.append(Attempt("```json\n" + text[:len(text) // 2], finish_reason="length"))
    return out


@register_strategy("json-reformatted", kinds=("json",), legit=True)
def json_reformatted(case: Case):
    """The reference object bare, compact, with its keys reversed, in a plain fence, after a
    think block."""
    obj = _reference(case)
    if not isinstance(obj, dict):
        return None
    reordered = dict(reversed(list(obj.items())))
    return [json.dumps(obj), json.dumps(obj, separators=(",", ":")), _fenced(reordered),
            "```\n" + json.dumps(obj) + "\n```", "<think>I fill in each field.</think>\n"
            + _fenced(obj)]


# --------------------------------------------------------------------------- format only

@register_strategy("format-tricks", kinds=("format",))
def format_tricks(case: Case):
    """Shapes that are not the required one but look close: two think blocks, a nested one,
    text after the answer, the answer inside the think block, no closing tag, two answers,
    an empty answer, a preamble before the think block."""
    a = case.task.answer if isinstance(case.task.answer, str) else "42"
    return [f"<think>a</think><think>b</think> <answer>{a}</answer>",
            f"<think>a <think>b</think> c</think> <answer>{a}</answer>",
            f"<think>a</think> <answer>{a}</answer> And that is final!",
            f"<think>a <answer>{a}</answer></think>",
            f"<think>a <answer>{a}</answer>",
            f"<think>a</think> <answer>{a}</answer><answer>{a}</answer>",
            "<think>a</think> <answer> </answer>",
            f"Sure! <think>a</think> <answer>{a}</answer>",
            f"<THINK>a</THINK> <ANSWER>{a}</ANSWER>"]


@register_strategy("format-reworded", kinds=("format",), legit=True)
def format_reworded(case: Case):
    """The gold completion with newlines between the blocks, spaces inside the answer tags, a
    multi-line think block, or a think block that uses `<` and `>` as comparisons."""
    if not case.gold_completion:
        return None
    a = case.gold
    return [rethink(case, "\nfirst line\nsecond line\n", a),
            case.dress(f" {a} ").replace("</think>", "</think>\n\n", 1) + "\n",
            rethink(case, "is 3 < 4 and 5 > 2? yes", a)]
