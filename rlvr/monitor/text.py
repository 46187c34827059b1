"""Detectors on free text: the prompt written back, gold-shaped text only inside `<think>`, the
format without content, and the attacks on instruction rewards (keyword stuffing, padding)."""
from __future__ import annotations

import json
import re
import zlib
from collections import Counter

from rlvr.verifiers.code import extract_code

from .detectors import Sample, register_detector

_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"[A-Za-z]{3,}")
_MARKUP = re.compile(r"</?(?:think|answer)>|```[\w+#.-]*|\\boxed|\\fbox|[\s{}\[\]()$*_#>.,;:!?-]")
_SLOT = re.compile(r"<answer>(.*?)</answer>|\\boxed\{([^{}]*)\}", re.S)
_STOP = frozenset("the and for that with this are was you your not but have from they will "
                  "can all its their our has were which what when there been".split())
_ECHO_MIN = 20         # characters: shorter prompts are too generic to call an echo


def _norm(s: str) -> str:
    return _SPACE.sub(" ", s).strip().lower()


@register_detector("prompt-echo", kinds=("answer", "code", "instructions", "json"))
def prompt_echo(sample: Sample):
    """The prompt (or its last line) written back in the answer."""
    answer = _norm(sample.answer)
    q = sample.question
    for part in (q, q.strip().splitlines()[-1] if q.strip() else ""):
        part = _norm(part)
        if len(part) >= _ECHO_MIN and part in answer:
            return f"the prompt's text ({len(part)} chars) in the answer"
    return None


@register_detector("gold-only-in-think", kinds=("code", "json", "instructions"))
def gold_only_in_think(sample: Sample):
    """The work done only inside `<think>`: a program or a JSON object there, none after it
    (the shape a reader of the whole completion would pay for)."""
    if not sample.think:
        return None
    if sample.kind == "code" and extract_code(sample.think) and not extract_code(sample.answer):
        return "a code block inside <think>, none in the answer"
    if sample.kind == "json" and _has_object(sample.think) and not _has_object(sample.answer):
        return "a JSON object inside <think>, none in the answer"
    if sample.kind == "instructions" and len(sample.think) > 60 \
            and len(sample.answer.strip()) < min(40, len(sample.think) // 10):
        return "the response inside <think>, a few characters after it"
    return None


def _has_object(text: str) -> bool:
    start = text.find("{")
    while start >= 0:
        try:
            json.JSONDecoder().raw_decode(text, start)
            return True
        except ValueError:
            start = text.find("{", start + 1)
    return False


@register_detector("format-only")
def format_only(sample: Sample):
    """The format without content: think tags, answer tags, a box or a code fence holding
    nothing, or only punctuation and whitespace."""
    slots = [a or b for a, b in _SLOT.findall(sample.answer)]
    if any(not _MARKUP.sub("", s) for s in slots):
        return "an empty answer slot"
    marked = bool(slots) or sample.think is not None or "```" in sample.answer
    if marked and not _MARKUP.sub("", sample.answer) and sample.finish_reason == "stop":
        return "markup with nothing in it"
    return None


@register_detector("keyword-stuffing", kinds=("instructions",))
def keyword_stuffing(sample: Sample):
    """One word repeated as a large share of the response (over 20% of 20 or more words), a
    few words repeated over and over (under 40% distinct among 3 or more), or the constraint's
    own keywords making up over a third of it."""
    words = [w.lower() for w in re.findall(r"[A-Za-z]+", sample.answer)]
    if len(words) >= 3 and len(set(words)) / len(words) < 0.4:
        return f"{len(set(words))} distinct words in {len(words)}"
    if len(words) < 20:
        return None
    top, n = Counter(w for w in words if w not in _STOP).most_common(1)[0] \
        if any(w not in _STOP for w in words) else ("", 0)
    if n / len(words) > 0.2:
        return f"{top!r} is {n} of {len(words)} words"
    named = _named_keywords(sample)
    share = sum(w in named for w in words) / len(words)
    return f"the instructions' keywords are {share:.0%} of the words" if share > 1 / 3 else None


def _named_keywords(sample: Sample) -> set[str]:
    spec = sample.task.answer if isinstance(sample.task.answer, dict) else {}
    named = set()
    for kwargs in spec.get("kwargs") or []:
        for value in (kwargs or {}).values():
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, str):
                    named |= {w.lower() for w in _WORD.findall(item)}
    return named


@register_detector("padding", kinds=("instructions",))
def padding(sample: Sample):
    """Length bought with repetition or filler: a long response (400+ characters) that zlib
    compresses below an eighth of its size (prose compresses to about half, a templated list to a fifth), or lorem ipsum."""
    text = sample.answer
    if "lorem" in text.lower():
        return "filler text (lorem)"
    if len(text) < 400:
        return None
    ratio = len(zlib.compress(text.encode())) / len(text.encode())
    return f"compresses to {ratio:.0%} of its size" if ratio < 0.125 else None
