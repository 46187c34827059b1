"""Split a completion into its think span and its answer span.

Verifiers read answers only from the answer span: whatever a model wrote while thinking never
counts. The parser knows the shapes completions take in practice:

- `<think>...</think> answer`                        the R1 format
- `...reasoning</think> answer`                       the chat template prefilled `<think>`
- `answer`                                            no think block at all
- `<think>...` (no close)                             truncated mid-thought: no answer
- `<think>a</think><think>b</think> answer`           repeated blocks: answer after the last
- `<think>a <think>b</think> c</think> answer`        nested tags: answer after the last close
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Parsed", "ThinkParser", "parse", "Box", "boxes", "last_boxed", "all_boxed",
           "answer_tag", "tag_blocks"]


@dataclass(frozen=True)
class Parsed:
    """The parts of one completion.

    `think` is None when there is no think block; `answer` is the text after the last closing
    tag ("" when the think block never closed). `well_formed` is the strict R1 shape: exactly
    one think block, opened (or prefilled) at the very start, closed, and followed by an answer.
    """
    think: str | None
    answer: str
    think_present: bool
    think_closed: bool
    n_open: int
    n_close: int
    prefilled: bool
    well_formed: bool


class ThinkParser:
    """Parse completions that may carry a `<think>` block.

    `prefilled=True` says the prompt already ends in `<think>` (many reasoning chat templates do
    that), so the completion starts inside the think block. With `prefilled=None` (the default)
    the parser infers it: a `</think>` with no `<think>` before it means the open was prefilled.

    >>> p = ThinkParser().parse("<think>2+2 is 4</think> The answer is 4.")
    >>> p.think, p.answer, p.well_formed
    ('2+2 is 4', 'The answer is 4.', True)
    >>> ThinkParser().parse("<think>still going").answer
    ''
    """

    def __init__(self, tag: str = "think", prefilled: bool | None = None):
        self.open, self.close = f"<{tag}>", f"</{tag}>"
        self.prefilled = prefilled
        self._recent: dict[str, Parsed] = {}

    def __getstate__(self):
        return {**self.__dict__, "_recent": {}}

    def __call__(self, text: str) -> Parsed:
        return self.parse(text)

    def parse(self, text: str) -> Parsed:
        """Parse `text`; an environment's rewards share one parser, so each completion is
        parsed once however many rewards read it (a small cache of recent texts)."""
        hit = self._recent.get(text)
        if hit is None:
            if len(self._recent) >= 64:
                self._recent.clear()
            hit = self._recent[text] = self._parse(text)
        return hit

    def _parse(self, text: str) -> Parsed:
        n_open, n_close = text.count(self.open), text.count(self.close)
        first_open, first_close = text.find(self.open), text.find(self.close)
        prefilled = self.prefilled
        if prefilled is None:
            prefilled = first_close != -1 and (first_open == -1 or first_close < first_open)
        if n_close:
            last_close = text.rfind(self.close)
            body_start = 0 if prefilled else first_open + len(self.open)
            if not prefilled and (first_open == -1 or first_open > last_close):
                body_start = 0            # a stray close with an open only after it
            think = text[body_start:last_close]
            answer = text[last_close + len(self.close):]
            answer = answer[:answer.find(self.open)] if self.open in answer else answer
            answer, closed = answer.strip(), True   # a re-opened block after it never counts
        elif n_open or prefilled:
            body_start = first_open + len(self.open) if n_open else 0
            think, answer, closed = text[body_start:], "", False
        else:
            think, answer, closed = None, text.strip(), False
        think = _strip_tags(think, self.open, self.close) if think is not None else None
        starts_right = prefilled or text.lstrip().startswith(self.open)
        blocks_ok = (n_open, n_close) == ((0, 1) if prefilled else (1, 1))
        well_formed = bool(closed and starts_right and blocks_ok and answer)
        return Parsed(think=think, answer=answer, think_present=think is not None,
                      think_closed=closed, n_open=n_open, n_close=n_close,
                      prefilled=prefilled, well_formed=well_formed)


def _strip_tags(s: str, open_: str, close: str) -> str:
    return s.replace(open_, "\n").replace(close, "\n").strip()


_default = ThinkParser()


def parse(text: str) -> Parsed:
    """Parse with the default `<think>` parser (prefill inferred)."""
    return _default.parse(text)


@dataclass(frozen=True)
class Box:
    """One `\\boxed{...}` in a text: where it is and what it holds. `closed` is False for a box
    the text ends inside (a truncated completion); its `content` is then the rest of the text."""
    start: int
    end: int
    content: str
    closed: bool = True


# `\boxed`, `\fbox`, `\framebox`, each with an optional `[...]` argument (`\boxed[x]{4}`)
_BOX = re.compile(r"\\(boxed|fbox|framebox)(?![a-zA-Z])\s*(?:\[[^\]{}]{0,100}\]\s*)?")
_BARE = re.compile(r"[^\s$.,;]+")                  # `\boxed 5`: the token after it


def boxes(text: str) -> list[Box]:
    r"""Every box in `text`, in order, with nested braces matched; the one scanner behind
    `all_boxed`, `last_boxed` and the math verifier's answer reader.

    A backslash escapes the character after it, so `\{` and `\}` never open or close a group
    (and `\\{` is a line break, then a brace). `\boxed 5` (no braces) boxes its next token. A box
    that never closes ends the list, marked `closed=False`; nothing raises, whatever the text.
    One pass over the text: boxes never overlap, and a box inside a box is part of its content.

    >>> [(b.content, b.closed) for b in boxes(r"\boxed{\frac{1}{2}}, \fbox{3}, \boxed{4")]
    [('\\frac{1}{2}', True), ('3', True), ('4', False)]
    """
    out, i = [], 0
    while (m := _BOX.search(text, i)) is not None:
        j = m.end()
        if text.startswith("{", j):
            close = _group_end(text, j)
            if close < 0:
                out.append(Box(m.start(), len(text), text[j + 1:].strip(), closed=False))
                return out
            out.append(Box(m.start(), close + 1, text[j + 1:close].strip()))
            i = close + 1
            continue
        tok = _BARE.match(text, j) if m.group(1) == "boxed" else None
        if tok:
            out.append(Box(m.start(), tok.end(), tok.group(0)))
            i = tok.end()
        else:
            i = m.end()
    return out


def _group_end(text: str, start: int) -> int:
    """Index of the `}` closing the group opened at text[start], or -1 when it never closes."""
    depth, k = 0, start
    while k < len(text):
        c = text[k]
        if c == "\\":
            k += 2                               # an escaped character never counts
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return k
        k += 1
    return -1


def all_boxed(text: str) -> list[str]:
    r"""Contents of every closed `\boxed{...}` / `\fbox{...}` / `\framebox{...}`, in order.

    >>> all_boxed(r"so \boxed{\frac{1}{2}} or \fbox{3}")
    ['\\frac{1}{2}', '3']
    """
    return [b.content for b in boxes(text) if b.closed]


def last_boxed(text: str) -> str | None:
    """The last boxed value, or None."""
    found = all_boxed(text)
    return found[-1] if found else None


def tag_blocks(text: str, tag: str = "answer") -> list[tuple[int, int, str]]:
    """(start, end, content) of every `<tag>...</tag>` block, in order; each block ends at the
    first close after its open. One pass over the text (a lazy regex would rescan the rest of
    the text from every open that never closes)."""
    open_, close = f"<{tag}>", f"</{tag}>"
    out, i = [], 0
    while (a := text.find(open_, i)) >= 0:
        b = text.find(close, a + len(open_))
        if b < 0:
            break
        out.append((a, b + len(close), text[a + len(open_):b]))
        i = b + len(close)
    return out


def answer_tag(text: str) -> list[str]:
    """Contents of every `<answer>...</answer>` block, stripped."""
    return [content.strip() for _, _, content in tag_blocks(text)]
