r"""Find the final answer in a completion's answer span.

Order (docs/math.md): `<answer>` tags, then boxes (`parser.boxes`), then explicit answer
statements ("The answer is", "Final Answer:", `####`, "**Answer:**", `\textbf{Answer:}`, "Answer:
X", a JSON object's "answer" field, and their French, Spanish, German, Portuguese, Italian,
Russian, Chinese, Japanese and Korean forms), then -- only when none of those exist -- the last
value written, read as its sentence states it (the first value after the sentence's last verb:
"she has 17 apples in 4 baskets" states 17). When a "Final Answer" heading exists, only what
follows it counts; end-of-turn tokens at the end are ignored. Values joined by a list or an
alternative ("2 and 3", "12 -- though it could be 13") are read together, whatever their order.
Several *different* candidates are all returned (the comparison then treats them as a
multi-part answer, which is a hedge against a single-valued gold) unless a self-correction
("wait", "actually", "but", "I made a mistake" ...) separates them: then the last one counts.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from ..parser import tag_blocks
from .boxes import _boxes, gold_boxes
from .json_answers import json_answers as _json_answers
from .hedges import (ALT_START, ALT_WORD, CORRECTION, DOUBT, HARD_END, HIDING, LIST_LEAD,
                     joins)
from .compare import decide
from .normalize import (MAX_ANSWER_CHARS, Answer, is_label, key, normalize, split_answer,
                        too_big)
from .notation import unicode_math
from .prose_values import FUNC_WORD as _FUNC_WORD, value_spans as _value_spans
from .standing import after, as_written, denials, rejection_removed

__all__ = ["Found", "find_final", "gold_boxes", "MAX_SCAN_CHARS"]

MAX_SCAN_CHARS = 200_000      # only the end of a larger answer span is searched
_FALLBACK_CHARS = 3_000


@dataclass(frozen=True)
class Found:
    """What was read: `parts` (one, or several different candidates) and where from."""
    parts: tuple[str, ...]
    source: str
    refused: str = ""             # why no stated answer stands (parts empty)

    @property
    def text(self) -> str:
        return " | ".join(self.parts)


_EMPTY_TAG = re.compile(r"<answer>\s*</answer>")
_NON_MATH = re.compile(r"[^\x00-\x7Fπ√≤≥≠°²³−×·÷∞€£¥]")
_FINAL_HEADING = re.compile(r"final\s+answer|最终答案|réponse\s+finale|respuesta\s+final|"
                            r"endgültige\s+antwort|resposta\s+final|risposta\s+finale|"
                            r"окончательный\s+ответ", re.I)
# what closes a bold or quoted answer label (`\textbf{Answer:} 17`, `<b>Answer</b>: 17`,
# `__Answer__: 17`), with the colon, before the value
_LABEL_END = re.compile(r"^(?:[\s:=：*_}]|</(?:b|strong)>)+")
# end-of-turn tokens a completion may still carry at its end
_END_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<|end_of_text|>", "<|end|>",
               "<|eom_id|>", "</s>", "<eos>", "<end_of_turn>", "<｜end▁of▁sentence｜>")
_MARKER = re.compile(
    r"(?:\bfinal\s+answer\b|\bthe\s+(?:correct\s+|final\s+)?answer\b|(?<![</])\banswer\b)"
    r"(?:\s+(?:is|would\s+be|should\s+be|will\s+be))?\s*(?:[:=：]|\bis\b)?\s*(?:\*\*)?\s*(?:[:=：])?"
    r"|####|\*\*answer:?\*\*:?"
    r"|\b(?:la\s+)?réponse(?:\s+finale)?(?:\s+est)?\s*:?|\b(?:la\s+)?respuesta(?:\s+final)?(?:\s+es)?\s*:?"
    r"|\b(?:die\s+)?antwort(?:\s+ist|\s+lautet)?\s*:?|\b(?:a\s+)?resposta(?:\s+final)?(?:\s+é)?\s*:?"
    r"|\b(?:la\s+)?risposta(?:\s+finale)?(?:\s+è)?\s*:?|ответ\s*:?|答案\s*(?:是|为|為)?\s*[:：]?"
    r"|答え\s*(?:は)?\s*[:：]?|解答\s*[:：]|정답\s*(?:은|는)?\s*[:：]?|답\s*[:：]"
    r"|الإجابة\s*(?:هي)?\s*[:：]?|الجواب\s*[:：]?", re.I)
_SENTENCE_END = re.compile(r"(?<!\.)\.(?=\s|$)(?!\d)|。|\n|!|\?(?=\s|$)|"
                           r"\s(?:because|since|as|which|so that|"
                           r"for|parce que|porque|weil|因为)\b|,\s+(?:which|so|since|because|"
                           r"it|this|that|as|and\s+(?:it|this|that))\b|;", re.I)
_MATH_SEG = re.compile(r"\$\$((?:[^$\\]|\\.)+?)\$\$|(?<!\\)\$((?:[^$\\]|\\.)+?)\$|\\\((.+?)\\\)"
                       r"|\\\[(.+?)\\\]", re.S)
_OPTION = re.compile(r"(?<![\w\\])\(([A-J])\)\s*")
_LIST_CONT = re.compile(r"^\s*(?:,|/|\bor\b|\band\b|&|\bou\b|\bo\b|\boder\b|или|或)\s*")
_LETTER = re.compile(r"(?<![\w\\])\(?([A-J])\)?(?![\w'])")


def _choose(cands: list[tuple[int, int, str]], text: str) -> list[str]:
    """Several candidates -> the distinct ones that stand, after self-corrections."""
    if not cands:
        return []
    for k in range(len(cands) - 1, 0, -1):
        gap = text[cands[k - 1][1]:cands[k][0]]
        if CORRECTION.search(gap) and not DOUBT.search(gap) \
                and _key(cands[k - 1][2]) != _key(cands[k][2]):
            cands = cands[k:]
            break
    distinct = list(dict.fromkeys(value for _, _, value in cands))   # copies read once
    if sum(map(len, distinct)) > MAX_ANSWER_CHARS:
        return [" | ".join(distinct)]             # together one answer, too large to read
    seen, out = set(), []
    for value in distinct:
        k = _key(value)
        if k and k not in seen:
            seen.add(k)
            out.append(value)
    return out


@functools.lru_cache(maxsize=4096)
def _key(value: str) -> str:
    """What tells candidates apart: the normalised value, or the raw text of one too large to
    normalise (`too_big`: it is refused later, unread); cached, as copies repeat."""
    return key(value) if too_big(value) else key(normalize(value))


def _math_run(rest: str) -> str | None:
    """Consecutive math segments at the start of `rest`, joined by their connectors."""
    pieces, pos = [], 0
    while True:
        m = _MATH_SEG.match(rest, pos)
        if not m:
            break
        pieces.append(next(g for g in m.groups() if g is not None))
        pos = m.end()
        conn = re.match(r"\s*(,|\bor\b|\band\b|\\text\{\s*(?:or|and)\s*\})?\s*(?=\$|\\[(\[])",
                        rest[pos:])
        if not conn:
            break
        if conn.group(1):
            pieces.append(" " + re.sub(r"\\text\{\s*|\s*\}", "", conn.group(1)) + " ")
        pos += conn.end()
    return "".join(pieces).strip() or None if pieces else None


def _clause(rest: str) -> str:
    m = _SENTENCE_END.search(rest)
    return (rest[:m.start()] if m else rest).strip()


def _prose_words(s: str) -> int:
    s = re.sub(r"\\(?:begin|end)\{[^}]*\}|\\[a-zA-Z]+", "", s)
    s = _FUNC_WORD.sub("", s)                      # sqrt(2), pi: maths, not prose
    s = re.sub(r"(?<=[\d)\]}])(?:or|and)(?=[A-Za-z(])", " ", s)    # x=1orx=2: a glued list
    return len(re.findall(r"[^\W\d_]{3,}", s, re.U))


def _leading_values(clause: str, mc: bool) -> str | None:
    """In prose ("Janeth owes 220 $ in 12 months"), the first value and the values listed
    right after it ("3 or 4", "A/B") -- never a later, unrelated number."""
    if not mc:
        return _leading_numbers(clause)
    pattern = _LETTER
    m = pattern.search(clause)
    if not m:
        return None
    values, pos = [m.group(1) if mc else m.group(0)], m.end()
    while True:
        c = _LIST_CONT.match(clause[pos:])
        if not c:
            break
        nxt = pattern.match(clause, pos + c.end())
        if not nxt:
            break
        values.append(nxt.group(1) if mc else nxt.group(0))
        pos = nxt.end()
    return " or ".join(values)


def _leading_numbers(clause: str) -> str | None:
    spans = _value_spans(clause)
    if not spans:
        return None
    values, pos = [clause[spans[0][0]:spans[0][1]].strip()], spans[0][1]
    starts = {a: b for a, b in spans}
    while (c := _LIST_CONT.match(clause[pos:])) and pos + c.end() in starts:
        a = pos + c.end()
        values.append(clause[a:starts[a]].strip())
        pos = starts[a]
    return " or ".join(values)


def _group_close(s: str) -> int:
    """Index of the first `}` that closes a group opened before `s` (len(s) when none does)."""
    if "}" not in s:
        return len(s)
    depth, k = 0, 0
    while k < len(s):
        if s[k] == "\\":
            k += 2
            continue
        depth += {"{": 1, "}": -1}.get(s[k], 0)
        if depth < 0:
            return k
        k += 1
    return len(s)


def _statement_value(rest: str, mc: bool) -> str | None:
    """The value an answer statement states (`rest` follows its marker), with an alternative
    offered in the next sentence ("The answer is 12. Or maybe 13.")."""
    rest = _LABEL_END.sub("", rest[:600])
    rest = rest[:_group_close(rest)]              # `\textbf{Answer: 17}`: the label's group ends
    rest = re.sub(r"^(?:is|es|est|ist|é|è|是|为|は)\s*[:：]?\s*", "", rest, flags=re.I)
    rest = re.sub(r"^(?:for sure|probably|likely|clearly|simply|then|therefore)\s+", "", rest,
                  flags=re.I)
    value = _stated(rest, mc)
    end = _CLAUSE_END.search(rest)
    if value and not mc and end and ALT_START.match(rest, end.end()):
        nxt = _CLAUSE_END.search(rest, end.end())
        sentence = rest[:nxt.start() if nxt else len(rest)]
        cands = [c for c in _candidates(sentence) if c[0] >= end.end()]
        if cands:
            value += " or " + _sentence_values(sentence, end.end(), cands, last=False)
    return value


def _stated(rest: str, mc: bool) -> str | None:
    if _MATH_SEG.match(rest):
        return _stated_values(rest, 0, _candidates(rest))
    clause = _clause(rest)
    clause = re.sub(r"\\\]\s*$|\\\)\s*$|\*\*$", "", clause).strip()
    if not clause or clause.endswith(":"):
        return None                               # "the digits are:" -- the value comes later
    if mc:
        return _leading_values(clause, mc=True) or clause
    options = _option_values(clause)
    if options:
        return options
    if not _NON_MATH.search(clause) and not ALT_WORD.search(clause) \
            and (_prose_words(_strip_units(clause)) <= 1 or len(clause) <= 12):
        return clause
    cands = [c for c in _candidates(rest) if c[0] < len(clause)]
    if cands:
        return _sentence_values(rest, 0, cands, last=False)
    return clause if len(clause) <= 60 else None


def _option_values(clause: str) -> str | None:
    """"(A) 2, (B) 4, (C) 6": values listed under two or more option labels, all of them (a
    hedge between options, scored like `2 or 4 or 6`); None when the clause lists no options."""
    labels = list(_OPTION.finditer(clause))
    if len({m.group(1) for m in labels}) < 2:
        return None
    values = []
    for m, nxt in zip(labels, labels[1:] + [None]):
        v = clause[m.end():nxt.start() if nxt else len(clause)]
        v = re.sub(r"(?:[\s,;]|\b(?:or|and)\b)+$", "", v.strip())
        if v:
            values.append(v)
    return " or ".join(values) if len(values) > 1 else None


def _strip_units(s: str) -> str:
    return re.sub(r"\b(?:percent|percentage|dollars?|cents?|miles?|meters?|hours?|minutes?|"
                  r"days?|years?|units?|degrees?|and|or|pages?)\b", "", s, flags=re.I)


def _statements(text: str, mc: bool) -> list[tuple[int, int, str]]:
    out = _json_answers(text) if '"' in text else []
    inside = [(a, b) for a, b, _ in out]
    for m in _MARKER.finditer(text):
        if any(a <= m.start() < b for a, b in inside):
            continue                              # the key of a JSON answer, read above
        rest = text[m.end():m.end() + 1000]       # a statement reads at most 600 of these
        if _MARKER.match(rest.lstrip(" :*")):
            continue                              # "Answer: Answer: 42": the next one reads it
        value = _statement_value(rest, mc)
        if value and not mc:
            value = rejection_removed(value)
        if value:
            out.append((m.start(), m.end(), value))
    return sorted(out)


# Reading values in prose. A candidate is a math segment or a value written in prose (a
# number, a plain-text expression, a computation chained by operators: "100 - 30 = 70"), with
# the name written before it ("x = 2"). Candidates joined by a list ("2 and 3", "$x=5$, or else
# $x=7$") or by an alternative ("12 -- though it could be 13", "3 or maybe 4") are stated
# together (the joining words: `hedges`), whatever their order: several values for a
# single-valued gold are a hedge.
_MAX_CHAIN = 200                                 # characters one computation may span
_CHAIN_GAP = re.compile(r"\s*(?:[-+*/×÷^=−]|\\times|\\cdot)\s*")
_NAME_BEFORE = re.compile(r"(?:(?<![A-Za-z\\])[A-Za-z](?:_\{?\w{1,3}\}?)?|\|[A-Za-z]\|)\s*=\s*$")
# the verb that states a conclusion: the value after the last one is the answer
_VERB = re.compile(r"(?:\b(?:is|are|was|were|equals?|gives?|gets?|got|has|have|had|makes?|"
                   r"leaves?|totals?|costs?|becomes?|needs?|pays?|earns?|owes?|spends?|"
                   r"takes?|will\s+be|comes?\s+to)|\b(?:it|that|he|she|there|this|what)'s)\b"
                   r"(?!\s+(?:been\s+)?[A-Za-z]+(?:ed|en)\b)", re.I)   # not "has eaten"
# where a sentence's last clause starts: its conclusion ("He has 5, so 5 + 7 = 12 in all")
_CLAUSE_START = re.compile(r"(?:^|,|;|(?<!\d):(?!\d))\s*(?:so|thus|therefore|hence|then|and)\b"
                           r"|;|(?<!\d):(?!\d)|^\s*(?:so|thus|therefore|hence)\b", re.I | re.M)
_CLAUSE_END = re.compile(r"(?<!\.)\.(?=\$*(?:\s|$))(?!\d)|[!?。\n;]")


def _candidates(text: str, right_sides: bool = False) -> list[tuple[int, int, str]]:
    """(start, end, value) of every candidate in `text`, in order. `right_sides`: a math
    segment stands for its right side unless a name is on its left (`$a + b = 10$` is 10)."""
    segs = [(m.start(), m.end(), next(g for g in m.groups() if g is not None).strip())
            for m in _MATH_SEG.finditer(text)]
    if right_sides:
        segs = [(a, b, _seg_value(v)) for a, b, v in segs]
    blanked = _MATH_SEG.sub(lambda m: " " * len(m.group(0)), text)
    chains: list[list[int]] = []
    for a, b in _value_spans(blanked):
        if chains and _CHAIN_GAP.fullmatch(blanked, chains[-1][1], a) \
                and b - chains[-1][0] <= _MAX_CHAIN:
            chains[-1][1] = b                     # 100 - 30 = 70: one computation
        else:
            chains.append([a, b])
    prose = []
    for a, b in chains:
        name = _NAME_BEFORE.search(blanked, max(0, a - 12), a)
        a = name.start() if name else a
        prose.append((a, b, text[a:b].strip()))
    return sorted(segs + prose)


def _seg_value(seg: str) -> str:
    """A math segment as a value: `x = 5` keeps its name; `a + b = 10` is its right side."""
    sides = re.split(r"(?<![<>!\\])=(?!=)", seg)
    if len(sides) > 1 and not is_label(sides[0]):
        return sides[-1].strip() or seg.strip()
    return seg


def _stated_values(text: str, first: int, cands: list) -> str:
    """Candidate `first` and the candidates joined to it after it, as one answer."""
    values, k = [cands[first][2]], first
    while k + 1 < len(cands) and joins(text[cands[k][1]:cands[k + 1][0]]):
        k += 1
        values.append(cands[k][2])
    return " or ".join(values)


def _conclusion(tail: str) -> str | None:
    """The last value written, read as its sentence states it: the first value after the
    sentence's last verb ("So she has 17 apples in 4 baskets" states 17), else the last value;
    with every value joined to it. A sentence opening with "Or"/"Maybe" adds to the one before."""
    cands = _candidates(tail, right_sides=True)
    if not cands:
        return None
    start = _sentence_start(tail, cands[-1][0])
    options = _option_values(_clause(tail[start:]))
    if options:
        return options
    values = _sentence_values(tail, _clause_start(tail, start, cands[-1][0]), cands, last=True)
    if ALT_START.match(tail, start):
        before = [c for c in cands if c[1] <= start]
        if before:
            head = _clause_start(tail, _sentence_start(tail, before[-1][0]), before[-1][0])
            values = _sentence_values(tail, head, before, last=True) + " or " + values
    return values


def _sentence_start(text: str, pos: int) -> int:
    ends = [m.end() for m in HARD_END.finditer(text, 0, pos)]
    return ends[-1] if ends else 0


def _clause_start(text: str, start: int, pos: int) -> int:
    """Where the last clause before `pos` of the sentence from `start` begins."""
    heads = [m.end() for m in _CLAUSE_START.finditer(text, start, pos)]
    return heads[-1] if heads else start


def _sentence_values(text: str, start: int, cands: list, last: bool) -> str:
    """What the sentence from `start` to the last of `cands` states: the first value after
    its last verb; without a verb, its last value (`last`) or its first."""
    mine = [k for k, c in enumerate(cands) if c[0] >= start]
    verbs = [v.end() for v in _VERB.finditer(text, start, cands[-1][0])]
    after = [k for k in mine if verbs and cands[k][0] >= verbs[-1]]
    if after:
        return _stated_values(text, after[0], cands)
    if not last:
        return _stated_values(text, mine[0], cands)
    k = len(cands) - 1                            # the last value, and those joined before it
    while k > mine[0] and _joins_back(text, cands[k - 1], cands[k]):
        k -= 1
    return _stated_values(text, k, cands)


def _joins_back(text: str, before: tuple, value: tuple) -> bool:
    """Is `before` listed with the sentence's last value? A bare comma lists only values of one
    kind -- math spans, or named values ("$2$, $3$", "x = 2, x = 3") -- since in prose it as
    often ends a clause ("After she has eaten 3, 12 remain")."""
    gap = text[before[1]:value[0]]
    if not joins(gap):
        return False
    if gap.strip() != ",":
        return True
    kinds = [("=" in c[2], text[c[0]] in "$\\") for c in (before, value)]
    return kinds[0] == kinds[1] and any(kinds[0])


def _fallback(span: str, mc: bool, text_gold: bool) -> str | None:
    """No box, no statement: a bare short answer, else the last value written."""
    bare = re.sub(r"^\s*\$+|\$+\s*$", "", span.strip()).strip()
    if mc and len(bare) <= 200:
        lead = _leading_values(bare[:3], mc=True) if _LETTER.match(bare) else None
        if lead:
            return _leading_values(bare, mc=True)
    bare = LIST_LEAD.sub("", bare)
    if bare and len(bare) <= 200 and "\n" not in bare:
        hidden = _hidden_values(bare)
        if hidden:
            return hidden
        words = _prose_words(_strip_units(bare))
        if (words == 0 and "?" not in bare) or (text_gold and not re.search(r"\d", bare) and words <= 6):
            return bare
    tail = span[-_FALLBACK_CHARS:]
    if mc:
        letters = [m for m in _LETTER.finditer(tail)
                   if not re.match(r"\s+[a-z]", tail[m.end():m.end() + 2])
                   or m.group(1) not in "AI"]
        return _letters_joined(tail, letters) if letters else None
    return _conclusion(tail)


_LETTER_JOIN = re.compile(r"\s*(?:,|/|&|\bor\b|\band\b|\bmaybe\b|\bperhaps\b|\bpossibly\b|"
                          r"\bprobably\b|\s)*\s*\(?$", re.I)


def _letters_joined(text: str, letters: list) -> str:
    """The last letter written, with the letters listed or offered right before it ("B,
    possibly C" reads B or C: a hedge)."""
    k = len(letters) - 1
    while k and _LETTER_JOIN.fullmatch(text, letters[k - 1].end(), letters[k].start()) \
            and re.search(r"[,/&]|\b(?:or|and|maybe|perhaps|possibly|probably)\b",
                          text[letters[k - 1].end():letters[k].start()], re.I):
        k -= 1
    return " or ".join(m.group(1) for m in letters[k:])


def _hidden_values(bare: str) -> str | None:
    r"""A short answer with a value inside a `\text{}` group or a nested box and another outside
    it ("3\text{ (not 4)}"): every value it writes, read together (a hedge unless they agree)."""
    if not HIDING.search(bare):
        return None
    values = [v for k, v in {_key(c[2]): c[2] for c in _candidates(bare)}.items() if k]
    return " or ".join(values) if len(values) > 1 else None


def find_final(span: str, mc: bool = False, text_gold: bool = False,
               trusted: bool = False) -> Found | None:
    r"""The final answer in an answer span, or None when nothing can be read.

    `mc=True` reads multiple-choice letters from statements and prose; `text_gold=True` accepts
    a short bare phrase as the answer (the gold is a word answer such as "Evelyn"); `trusted`
    (a gold solution) reads the last answer as stated, without weighing the words around it.

    >>> find_final(r"so \boxed{2}. Wait, actually \boxed{3}.").parts
    ('3',)
    >>> find_final(r"It is \boxed{3} or \boxed{4}").parts
    ('3', '4')
    >>> find_final("Réponse : Janeth paiera 220 $ dans 12 mois.").parts
    ('220',)
    """
    text = _EMPTY_TAG.sub(" ", _without_end_tokens(unicode_math(span[-MAX_SCAN_CHARS:])))
    return _find(text, mc, text_gold, trusted)


def _without_end_tokens(text: str) -> str:
    """`text` without the end-of-turn tokens (and the spaces between them) it ends with; one
    pass from the end (a regex anchored at the end would rescan every run of spaces)."""
    end = found = len(text)
    while True:
        while end and text[end - 1].isspace():
            end -= 1
        token = next((t for t in _END_TOKENS if text.endswith(t, 0, end)), None)
        if token is None:
            return text[:end] if found != len(text) else text
        end = found = end - len(token)


def _find(text: str, mc: bool, text_gold: bool, trusted: bool = False) -> Found | None:
    tags = [(a, b, c.strip()) for a, b, c in tag_blocks(text) if c.strip()]
    if tags:
        return _standing(tags, text, mc, text_gold, "answer_tag", trusted)
    heading = None
    for heading in _FINAL_HEADING.finditer(text):
        pass
    regions = [text[heading.start():], text] if heading else [text]
    for region in regions:
        found = _boxes(region)
        if found is None:
            return None                           # the text ends inside a box: truncated
        if found:
            return _standing(found, region, mc, text_gold, "boxed", trusted)
        statements = _statements(region, mc)
        if statements:
            return _standing(statements, region, mc, text_gold, "statement", trusted)
    value = _fallback(text, mc, text_gold)
    if not value:
        return None
    at = text.rfind(value)
    if at >= 0 and denials(text)(at, at + len(value)):
        return Found((), "last_value", "the only answer stated is negated or questioned")
    return Found((value,), "last_value")


# an answer line after a box or tag, in another notation: it is a later statement
_LATER_MARKER = re.compile(r"####|\*\*\s*(?:final\s+)?answer|(?:^|\n)\s*(?:final\s+)?answer\s*[:：]"
                           r"|\b(?:the\s+)?(?:correct\s+|final\s+)answer\b|\bthe\s+answer\s+is\b",
                           re.I)


# "the answer is correct": a verdict on the answer, not another one
_EVALUATION = re.compile(r"(?:correct|right|wrong|incorrect|confirmed|verified|valid|consistent|"
                         r"indeed|reasonable|plausible|the\s+same|unchanged|as\s+above)\b", re.I)


def _standing(cands: list, text: str, mc: bool, text_gold: bool, source: str,
              trusted: bool = False) -> Found:
    """The answer that stands among `cands` (tags, boxes or statements, in order): denied ones
    dropped, later answer lines in another notation added, self-corrections applied, then what
    the text after the last one does to it (`standing.after`)."""
    if trusted:
        return Found(tuple(_values(_choose(cands, text), mc, text_gold, source)), source)
    denied, later = denials(text), False
    kept = [c for c in cands if not _denied(denied, text, c, source)]
    if kept and source != "statement":
        last = kept[-1][1]
        for c in _statements(text[last:], mc):
            c = (c[0] + last, c[1] + last, c[2])
            if _LATER_MARKER.match(text, c[0]) and not _EVALUATION.match(c[2]) \
                    and not _denied(denied, text, c, "statement"):
                kept.append(c)
                later = True
    if not kept:                                  # "Is it \boxed{12}? No, it's 13."
        end = _value_end(text, cands[-1], source)
        stop = HARD_END.search(text, end)         # its own sentence gives its reasons
        value = _read_value(text[stop.end():], mc) if stop else None
        if value:
            return Found((value,), "last_value")
        return Found((), source, "the only answer stated is negated or questioned")
    values = _values(_choose(kept, text), mc, text_gold, source)
    if not values:
        return Found((), source, "empty answer")
    tail = text[_value_end(text, kept[-1], "statement" if later else source):]
    change = after(tail, lambda seg: as_written(seg, _read_value(seg, mc), values),
                   lambda v: _same(values, v, mc))
    if change.action == "retract" and len(values) == 1:
        return Found((), source, change.reason)
    if change.action == "replace":
        return Found((change.value,), source)
    if change.action == "hedge":
        return Found(tuple(values) + (change.value,), source)
    return Found(tuple(values), source)


def _values(chosen: list[str], mc: bool, text_gold: bool, source: str) -> list[str]:
    if source != "answer_tag":
        return [_hidden_values(v) or v for v in chosen] if source == "boxed" else chosen
    parts: list[str] = []
    for content in chosen:
        inner = find_final(content, mc, text_gold)
        parts += list(inner.parts) if inner else [content.strip()]   # unread: not dropped
    return list({_key(p): p for p in reversed(parts)}.values())[::-1]


def _value_end(text: str, cand: tuple, source: str) -> int:
    """Where the stated value ends: a box's or tag's end; for a statement, its value's end
    when written as read, else its clause's end."""
    if source != "statement":
        return cand[1]
    at = text.find(cand[2], cand[1], cand[1] + 600)
    if at >= 0:
        return at + len(cand[2])
    m = _CLAUSE_END.search(text, cand[1], cand[1] + 600)
    return m.start() if m else min(len(text), cand[1] + 600)


def _denied(denied, text: str, cand: tuple, source: str) -> bool:
    end = _value_end(text, cand, source)
    if source == "statement":
        if re.match(r"(?:not|never)\b", cand[2], re.I):
            return True
        at = text.find(cand[2], cand[1], cand[1] + 600)
        return denied(at if at >= 0 else cand[1], end)
    return denied(cand[0], end)


def _read_value(seg: str, mc: bool) -> str | None:
    """The value a stretch of text after an answer concludes with: its last answer statement,
    else its last value (a letter for multiple choice)."""
    seg = seg[-_FALLBACK_CHARS:]
    statements = _statements(seg, mc)
    if statements:
        return statements[-1][2]
    if mc:
        letters = [m for m in _LETTER.finditer(seg)
                   if not re.match(r"\s+[a-z]", seg[m.end():m.end() + 2]) or m.group(1) not in "AI"]
        return letters[-1].group(1) if letters else None
    return _conclusion(seg)


def _same(values: list[str], value: str, mc: bool) -> bool:
    """Does `value` state what `values` state (the fast comparison, no sympy)?"""
    if mc:
        return {m.group(1) for v in values for m in _LETTER.finditer(v)} == \
            {m.group(1) for m in _LETTER.finditer(value)}
    if any(_key(v) == _key(value) for v in values):
        return True
    mine = Answer(tuple(it for v in values for it in split_answer(v).items))
    return decide(mine, split_answer(value)).equal is True
