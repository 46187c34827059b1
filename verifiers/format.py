"""Format rewards built on the parser: is the completion shaped the way the template asks?

Each is a `Reward` whose verdict says *what* was wrong, so a low format rate is explainable.
They never return `unparsed`: a malformed completion is exactly what they measure, so it is a
normal `ok` verdict with score 0.
"""
from __future__ import annotations

from rlvr.core import BaseReward, Verdict

from .parser import ThinkParser, all_boxed, answer_tag

__all__ = ["ThinkFormat", "AnswerTag", "BoxedPresent"]


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
