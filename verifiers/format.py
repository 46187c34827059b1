"""Format rewards built on the parser: is the completion shaped the way the template asks?

Each is a `Reward` whose verdict says *what* was wrong, so a low format rate is explainable.
They never return `unparsed`: a malformed completion is exactly what they measure, so it is a
normal `ok` verdict with score 0.
"""
from __future__ import annotations

from rlvr.core import BaseReward, Verdict

from .parser import ThinkParser, all_boxed, answer_tag

__all__ = ["ThinkFormat", "R1Format", "AnswerTag", "BoxedPresent"]


class ThinkFormat(BaseReward):
    """1.0 for exactly one closed `<think>` block at the start followed by a non-empty answer.

    >>> from rlvr import Task
    >>> ThinkFormat().score(Task("t"), "<think>hmm</think> 4").score
    1.0
    >>> ThinkFormat().score(Task("t"), "<think>hmm").reason
    'think block never closed'
    """
    name, version = "think_format", "1"

    def __init__(self, parser: ThinkParser | None = None):
        self.parser = parser or ThinkParser()

    def _score(self, task, completion):
        p = self.parser.parse(completion.text)
        if p.well_formed:
            return Verdict(1.0, extracted=p.answer)
        if not p.think_present:
            why = "no think block"
        elif not p.think_closed:
            why = "think block never closed"
        elif (p.n_open, p.n_close) not in ((1, 1), (0, 1)):
            why = f"{p.n_open} opening and {p.n_close} closing think tags, wanted one block"
        elif not p.answer:
            why = "nothing after the think block"
        else:
            why = "text before the think block"
        return Verdict(0.0, extracted=p.answer, reason=why)


class R1Format(ThinkFormat):
    """The strict R1-Zero shape: `<think>...</think>` then exactly one non-empty
    `<answer>...</answer>` and nothing after it (whitespace aside).

    >>> from rlvr import Task
    >>> R1Format().score(Task("t"), "<think>2+2</think> <answer>4</answer>").score
    1.0
    >>> R1Format().score(Task("t"), "<think>2+2</think> <answer>4</answer> Done!").reason
    'text after </answer>'
    """
    name, version = "r1_format", "1"

    def _score(self, task, completion):
        v = super()._score(task, completion)
        if v.score != 1.0:
            return v
        span = v.extracted
        tags = answer_tag(span)
        if span.count("<answer>") != 1 or span.count("</answer>") != 1 or len(tags) != 1:
            return Verdict(0.0, extracted=span, reason=(
                "no <answer> block after </think>" if "<answer>" not in span else
                f"{span.count('<answer>')} <answer> and {span.count('</answer>')} </answer> "
                "tags, wanted one block"))
        if not span.startswith("<answer>"):
            return Verdict(0.0, extracted=tags[0], reason="text between </think> and <answer>")
        if not span.endswith("</answer>"):
            return Verdict(0.0, extracted=tags[0], reason="text after </answer>")
        if not tags[0]:
            return Verdict(0.0, extracted="", reason="empty <answer> block")
        return Verdict(1.0, extracted=tags[0])

class AnswerTag(BaseReward):
    """1.0 when the answer span holds exactly one non-empty `<answer>...</answer>` block.

    >>> from rlvr import Task
    >>> AnswerTag().score(Task("t"), "<think>x</think><answer>4</answer>").score
    1.0
    """
    name, version = "answer_tag", "1"

    def __init__(self, parser: ThinkParser | None = None):
        self.parser = parser or ThinkParser()

    def _score(self, task, completion):
        tags = answer_tag(self.parser.parse(completion.text).answer)
        if len(tags) == 1 and tags[0]:
            return Verdict(1.0, extracted=tags[0])
        why = "no <answer> block" if not tags else (
            "empty <answer> block" if len(tags) == 1 else f"{len(tags)} <answer> blocks, wanted 1")
        return Verdict(0.0, extracted=tags or None, reason=why)


class BoxedPresent(BaseReward):
    r"""1.0 when the answer span contains a `\boxed{...}` (thinking does not count).

    >>> from rlvr import Task
    >>> BoxedPresent().score(Task("t"), r"so \boxed{4}").score
    1.0
    """
    name, version = "boxed", "1"

    def __init__(self, parser: ThinkParser | None = None):
        self.parser = parser or ThinkParser()

    def _score(self, task, completion):
        boxes = all_boxed(self.parser.parse(completion.text).answer)
        if boxes:
            return Verdict(1.0, extracted=boxes[-1])
        return Verdict(0.0, reason="no \\boxed{} in the answer")
