r"""Which stated answer stands: the words around an answer and after it.

An answer is what the completion last commits to. Three things undo a commitment:

- a negation or a question around it: "the answer is not 12", "\boxed{12} is wrong", "is the
  answer 12? No." -- a value stated so is not an answer (`negated`);
- what the text says after it (`after`): a correction with a new value replaces it ("...
  \boxed{12}. Wait, that's off by one: it's 13." reads 13), a retraction or doubt with no new
  value leaves no answer ("\boxed{12}. Hmm, that's wrong."), a re-check that ends by confirming
  it keeps it ("Let me check: 3 * 4 = 12. Yes.");
- an alternative offered right after it ("\boxed{B}, maybe C"): a hedge.

Sentences are classified by the evaluation words they hold; a question is no evaluation. Pure
regular expressions over bounded windows, so reading stays linear in the text.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from .hedges import ALT_START, ALT_WORD, HARD_END

__all__ = ["negated", "denials", "after", "After", "rejection_removed", "stated_value",
           "as_written"]

_NEGATION = r"(?:\bnot|n't|\bnever|\bno\s+longer|\bcannot\s+be|\bcan\s*not\s+be)"
# words that name a value by excluding it: "anything but 12", "something other than 12"
_EXCLUDING = (r"(?:\b(?:any|some|every|no)(?:thing|\s+value|\s+number|one)\s+"
              r"(?:but|except|besides|save)|\bother\s+than|\brather\s+than|\binstead\s+of|"
              r"\bapart\s+from|\bexcept(?:\s+for)?|\bexcluding)")
# a negation right before the value: "is not 12", "isn't $12$", "can't be \boxed{12}"
_NEG_BEFORE = re.compile(rf"(?:{_NEGATION}|{_EXCLUDING})\s+(?:(?:think|believe|say|guess|that|it's|"
                         rf"it|is|be|the|answer|equal|to|simply|just|exactly|actually|really|"
                         rf"quite)\s+){{0,4}}(?:\$+\s*|\\\(\s*|\(\s*)?$", re.I)
# an evaluation right after it: "\boxed{12} is wrong", "12 isn't the answer"
_NEG_AFTER = re.compile(
    r"^[\s)\]]*\$*\s*(?:,\s*)?(?:(?:which|that)\s+)?"
    r"(?:(?:is|was|would\s+be|seems|looks|appears)\s+(?:to\s+be\s+)?"
    r"(?:wrong|incorrect|false|invalid|impossible|a\s+mistake|an\s+error|not\b|off\b)"
    r"|(?:isn't|wasn't|is\s+not|can't\s+be|cannot\s+be|doesn't|does\s+not)\b"
    r"|(?:fails|violates|breaks)\b|(?:is|was|should\s+be|must\s+be)\s+(?:ruled\s+out|rejected|"
    r"excluded|discarded|dropped|extraneous)\b"
    r"|[(\[—–-]\s*(?:wrong|incorrect|false|invalid|rejected|ruled\s+out)\b)", re.I)
_REPLY_NO = re.compile(r"^\s*(?:\*\*)?(?:no\b|nope\b|not\b|wrong\b|incorrect\b|that's\s+wrong)",
                       re.I)
_REPLY_YES = re.compile(r"^\s*(?:\*\*)?(?:yes|yep|yeah|correct|right|indeed|exactly|confirmed)\b",
                        re.I)

# words that take back what came before (strong) or that only pause on it (weak)
_STRONG = re.compile(
    r"\b(?:wrong|incorrect|mistake[ns]?|errors?|erred|oops|typo|miscount\w*|miscalculat\w*|"
    r"misread\w*|misadd\w*|mis-?(?:computed|counted|took)|off\s+by|"
    r"not\s+(?:be\s+)?(?:right|correct|quite|sure|certain|it|the\s+answer|valid)|second-guess\w*|"
    r"(?:isn't|wasn't|can't\s+be|cannot\s+be)\s+(?:right|correct|it|the\s+answer)|"
    r"(?:doesn't|does\s+not|don't|do\s+not)\s+(?:work|match|add\s+up|make\s+sense|seem\s+right|"
    r"check\s+out|satisfy|hold|fit)|contradict\w*|inconsisten\w*|impossible|"
    r"(?:something|that|this|it)(?:'s|\s+is)\s+off\b|"
    r"should\s+have\s+been|correction|scratch\s+that|on\s+second\s+thought|rethink\w*|"
    r"reconsider\w*|doubt\w*|unsure|uncertain|not\s+confident|no,|slip\w*|blunder\w*|"
    r"retract\w*|revis\w*|never\s*mind|ignore\s+(?:that|this|the|my)|disregard|fails?\b|"
    r"should\s+(?:be|read)\b(?!\s+(?:excluded|rejected|discarded|dropped))|(?:right|correct|actual|true)\s+(?:answer|value|total|"
    r"result|number|count|sum)\b)"
    r"|不对|错了|有误", re.I)
_WEAK = re.compile(r"\b(?:wait|hmm+|hm+|actually|hold\s+on|等等|其实)\b", re.I)
# "wait, let me check" is a re-check, not a retraction (matched at a position: no `^`, which
# `Pattern.match(text, pos)` would take for the text's own start)
_RECHECK = re.compile(r"[\s,.:;!—–-]*(?:(?:let\s+me|let's|I'll|I\s+will|I\s+should)\s+"
                      r"(?:\w+\s+)?"
                      r"(?:double[- ]?|re-?)?(?:check|verify|confirm|make\s+sure|compute|calculate|"
                      r"do|derive|work)|(?:double[- ]?|re-?)check\w*|verify\w*|re-?comput\w*|"
                      r"re-?calculat\w*|re-?do\w*|re-?deriv\w*|checking)", re.I)
_POSITIVE = re.compile(r"\b(?:yes|yep|correct|right|confirm\w*|checks?\s+out|verified|"
                       r"consistent|holds|indeed|matches|agrees?|makes\s+sense|valid|good|"
                       r"fine|as\s+expected|stands)\b|✓|✔", re.I)
# a later answer line ("**Answer:** 13", "#### 13", "the answer is 13"): what it states is the
# answer stated last
_MARKER = re.compile(r"(?:####|\banswer\s*\**\s*[:：]|\banswer\s+(?:is|would\s+be|should\s+be)\b|"
                     r"\bfinal\s+answer\b)"
                     r"(?!\s*\**\s*(?:not\b|never\b|in\w*correct|wrong|right|correct|valid|"
                     r"invalid|confirmed|verified|as\s+(?:above|stated|given)|the\s+same|unchanged|"
                     r"above|unknown|unclear))", re.I)
_NEGATED_WORD = re.compile(rf"(?:{_NEGATION}|\bno|\bnothing|\bwithout|\bany)\s+(?:\w+\s+)?$",
                           re.I)


def negated(text: str, start: int, end: int) -> bool:
    """Is the value written at text[start:end] denied -- negated, called wrong, or asked about
    and answered "no" (or left as an open question)?"""
    before = text[max(0, start - 40):start]
    if _MAY_NEGATE.search(before) and _NEG_BEFORE.search(before):
        return True
    rest = text[end:end + 300]
    if _NEG_AFTER.match(rest):
        return True
    asked = _ASKED.match(rest)
    if asked:
        reply = rest[asked.end():]
        if _REPLY_NO.match(reply):
            return True
        return not _REPLY_YES.match(reply) and _verdict(reply) != "positive"
    return False


def denials(text: str):
    """`negated` for many values of one text: a function of (start, end) that runs the full
    test only where a word that may deny is near (one scan of the text for all of them)."""
    cues = [m.start() for m in _ANY_CUE.finditer(text)]

    def denied(start: int, end: int) -> bool:
        k = bisect.bisect_left(cues, start - 40)
        return k < len(cues) and cues[k] < end + 300 and negated(text, start, end)
    return denied


_ANY_CUE = re.compile(r"not|n't|never|longer|but|except|besides|save|than|instead|apart|exclud|"
                      r"\?|wrong|incorrect|false|invalid|impossible|mistake|fail|violat|break|"
                      r"ruled|reject|"
                      r"error|off\b|isn|can|does", re.I)
_MAY_NEGATE = re.compile(r"not|n't|never|longer|but|except|besides|save|than|instead|"
                         r"apart|excluding", re.I)      # a cheap test before the full one
_ASKED = re.compile(r"[\s$*.)]*\?+(?=\s|$)")


@dataclass(frozen=True)
class After:
    """What the text after an answer does to it: 'keep', 'retract', 'replace' (by `value`) or
    'hedge' (adds `value`)."""
    action: str
    value: str = ""
    reason: str = ""


def after(tail: str, read_value, same) -> After:
    """What `tail` (the text after the last answer) does to the answer. `read_value(text)` is
    the value a stretch of text concludes with (or None); `same(value)` tells whether it is the
    answer's value."""
    lead = re.match(r"[\s,;:.()*—–-]*", tail).end()
    if ALT_START.match(tail, lead):
        sentence = tail[:_sentence_end(tail, lead)]
        value = read_value(sentence)
        if value and not same(value):
            return After("hedge", value)
    skip = 0
    if _REASON.match(tail):                       # "B because C is not valid": about C
        skip = _sentence_end(tail, 0)
    cue = _first_cue(tail[skip:])
    if cue is None:
        return After("keep")
    seg = tail[skip + _sentence_start(tail[skip:], cue):]    # the cue's whole sentence
    other = _rejects_other(read_value, same)
    strong = any(not _denied(seg, m.start()) and not other(seg, m.start())
                 for m in _STRONG.finditer(seg))
    verdict = _verdict(seg, other)
    value = read = read_value(seg)
    if value and _value_denied(seg, value):
        value = None                              # "Hmm, no -- 12 is wrong": no new value
    if value and not same(value):
        if not strong and not _MARKER.search(seg) \
                and _verdict(_masked(seg, value), other) == "positive":
            return After("keep")                  # "Hmm, is that right? 12/4 = 3. Yes."
        if ALT_WORD.search(seg):
            return After("hedge", value)          # "Wait, maybe it's 13"
        return After("replace", value)
    if value or verdict == "positive":
        return After("keep")                      # re-checked and confirmed
    if not strong and verdict != "negative" and (
            _only_rechecks(seg, read) or not _WEAK.search(seg) and not _MARKER.match(seg)):
        return After("keep")                      # "Wait, let me verify that."; "13 fails."
    return After("retract", reason="the answer is taken back or doubted after it is given "
                                   "(no new value)")


def _masked(seg: str, value: str) -> str:
    """`seg` with `value` blanked wherever written: a value that is a word ("yes", "Indeed")
    makes no evaluation of the answer."""
    return re.sub(rf"(?<!\w){re.escape(value)}(?!\w)", lambda m: " " * len(m.group(0)), seg)


def _rejects_other(read_value, same):
    """A test of (text, pos): does the sentence around the word at `pos` deny a value other
    than the answer ("x = 13 fails the equation")? Its words are then about that value."""
    def test(text: str, pos: int) -> bool:
        start = _sentence_start(text, pos)
        sentence = text[start:_sentence_end(text, pos)]
        value = read_value(sentence)
        return bool(value) and not same(value) and _value_denied(sentence, value)
    return test


def _sentence_start(text: str, pos: int) -> int:
    ends = [m.end() for m in HARD_END.finditer(text, max(0, pos - 400), pos)]
    return ends[-1] if ends else max(0, pos - 400)


def _value_denied(seg: str, value: str) -> bool:
    """Is the last place `seg` writes `value` a denial of it ("12 is wrong", "not 12")?"""
    at = seg.rfind(value)
    return at >= 0 and negated(seg, at, at + len(value))


def _only_rechecks(seg: str, read: str | None) -> bool:
    """Does every pausing word of `seg` open a re-check, or is `seg` an answer line that
    writes nothing after its marker ("Final answer:" and the line ends)? One that writes what
    the reader cannot read is no confirmation."""
    weak = list(_WEAK.finditer(seg))
    if weak:
        return all(_RECHECK.match(seg, m.end()) for m in weak)
    marker = _MARKER.match(seg)
    return bool(marker) and not read and not re.match(r"[\s*:：.$]*\S", seg[marker.end():]
                                                         .split("\n", 1)[0] or " ")


# the answer's own sentence going on with its reasons: what it evaluates is something else
_REASON = re.compile(r"[\s,;:(—–-]*(?:because|since|as|given|while|whereas|for|where|unlike)\b",
                     re.I)


def _first_cue(tail: str) -> int | None:
    """Where the first word taking the answer back, pausing on it or stating a later answer
    starts; None if none."""
    best = None
    for pattern in (_STRONG, _WEAK, _MARKER):
        for m in pattern.finditer(tail):
            if pattern is _STRONG and _denied(tail, m.start()):
                continue                          # "no mistake"; but "no, wait" still pauses
            best = m.start() if best is None else min(best, m.start())
            break
    return best


def _denied(text: str, pos: int) -> bool:
    """"no mistake", "not wrong", "nothing wrong", "without error": the word is denied."""
    return bool(_NEGATED_WORD.search(text[max(0, pos - 30):pos]))


def _verdict(text: str, other=None) -> str:
    """The last evaluation `text` makes: 'positive', 'negative' or '' (questions make none);
    `other(sentence, pos)` tells a negative word about another value, which is none."""
    last, pos = "", 0
    for end in [m for m in HARD_END.finditer(text)] + [None]:
        stop = end.start() if end else len(text)
        sentence = text[pos:stop]
        if not (end and end.group(0) == "?") and sentence.strip():
            neg = any(not _denied(sentence, m.start())
                      and not (other and other(sentence, m.start()))
                      for m in _STRONG.finditer(sentence))
            pos_ = any(not _denied(sentence, m.start()) for m in _POSITIVE.finditer(sentence))
            if neg:
                last = "negative"
            elif pos_:
                last = "positive"
        if end is None:
            break
        pos = end.end()
    return last


def _sentence_end(text: str, start: int) -> int:
    m = HARD_END.search(text, start)
    return m.start() if m else len(text)


_REJECTION = re.compile(r"^(?P<keep>.*?\S)(?:\s*(?:,|;|—|–|\s-{1,2}|\()\s*|\s+)(?:and\s+|but\s+)?"
                        r"(?:not|never)\s+(?P<other>(?:[^()]|\([^()]*\)){1,80}?)\)?\s*$", re.I)


def rejection_removed(value: str) -> str:
    """"12, not 13" -> "12": a value followed by the one it rejects states the first only."""
    m = _REJECTION.match(value)
    return m.group("keep") if m and re.search(r"\d|\\", m.group("keep")) else value


_LINE_END = re.compile(r"\n|\.(?=\s|$)")


def stated_value(seg: str) -> str | None:
    """The value the last answer line of `seg` states ("the answer is 13, not 12." -> "13"),
    for readers with no notation of their own; None when `seg` has no such line."""
    last = None
    for last in _MARKER.finditer(seg):
        pass
    if last is None:
        return None
    stop = _LINE_END.search(seg, last.end())     # free text: "?" and "!" may be in the value
    value = seg[last.end():stop.start() if stop else len(seg)].strip(" \t*:：$")
    m = _REJECTION.match(value)                  # "noremopyhx, not noremopyh": the first
    return (m.group("keep") if m else value) or None


def as_written(seg: str, value: str | None, answers: list[str]) -> str | None:
    r"""`value`, read from `seg` by a reader, or the answer it lies inside when `seg` writes
    that answer again as it was: a prose reader sees 14 in `\frac{14}{3}`, 3 in `|x-3|`."""
    for written in answers if value else ():
        start = seg.rfind(written)
        if start >= 0 and all(start <= seg.rfind(p) <= start + len(written) - len(p)
                              for p in value.split(" or ")):
            return written
    return value
