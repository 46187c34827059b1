"""The words between two values that make them one statement -- a list ("2 and 3"), an
alternative ("12 or 13", "12 -- though it could be 13"), a condition keeping the other in play
("12, unless I erred, in which case 13") -- or that make the later one replace the earlier (a
self-correction: "wait", "actually"), and the marks that hide a second value in an answer.
The extraction (`extract`) reads values together by these: several values for a
single-valued gold are a hedge."""
from __future__ import annotations

import re

__all__ = ["ALT_START", "ALT_WORD", "CORRECTION", "DOUBT", "HARD_END", "HIDING", "LIST_LEAD",
           "joins"]

# Words that say "what came before was wrong": between two different candidates they make the
# later one the answer instead of a hedge.
CORRECTION = re.compile(
    r"\b(?:wait|actually|oops|hmm+|no,|correction|mistake|wrong|incorrect|re-?check\w*|"
    r"reconsider\w*|re-?evaluat\w*|on second thought|however|but|instead|rather|rule[sd]? (?:it|this|that|them) out|"
    r"let me (?:check|verify|redo|recompute|re-?calculate)|not correct|error|scratch that|"
    r"off by one|miscount\w*|miscalculat\w*|mis-?add\w*|typo)\b"
    r"|等等|不对|错了|其实|attendez|en fait|espera|eigentlich", re.I)
HARD_END = re.compile(r"(?<!\.)\.(?=\$*(?:\s|$))(?!\d)|[!?。\n]")
_GAP_WORD = re.compile(r"[^\W\d_]+|[—–]|-{2,}|[,;/&()]|\\text\{\s*(?:or|and)\s*\}", re.U)
_LIST_WORDS = {"and", "or", "ou", "o", "oder", "или", "或", "和", "et", "und", "y", "either",
               "also", "else", "even", ",", "/", "&", "(", ")"}
_ALT_WORDS = {"or", "maybe", "perhaps", "possibly", "alternatively", "otherwise", "though",
              "although", "could", "might", "ou", "oder", "или", "或"}
_FILLER = _LIST_WORDS | _ALT_WORDS | {"it", "this", "that", "be", "is", "may", "would", "the",
                                      "answer", "but", "just", "well", "as", "—", "–", "--"}
ALT_START = re.compile(r"\s*(?:or|maybe|perhaps|possibly|alternatively|otherwise|(?:al)?though|"
                       r"(?:but\s+)?(?:it|this|that)\s+(?:could|might|may)(?:\s+also)?\s+be)\b",
                      re.I)
ALT_WORD = re.compile(r"\b(?:maybe|perhaps|possibly|could|might|alternatively|otherwise)\b",
                      re.I)
# a condition that keeps the other value in play ("12, unless I erred, in which case 13"): a
# hedge, never a self-correction
DOUBT = re.compile(r"\b(?:unless|in which case|if not|if I(?:'m| am) wrong|or else)\b", re.I)
# a lead saying the values after it are options ("one of 2, 3, 4"), not a sentence
LIST_LEAD = re.compile(r"^\s*(?:one of|any of|among)\s+(?=\S)", re.I)
# a `\text{}` group holding a value ("3\text{ (not 4)}"), or a box inside a box
# (`\boxed{\boxed{3} 4}`): a value hidden in words or behind another
HIDING = re.compile(r"\\(?:text|mbox|textrm|textnormal)\s*\{[^{}]*\d[^{}]*\}|\\(?:boxed|fbox)\s*\{")


def joins(gap: str) -> bool:
    """Does `gap` join two values into one statement: a list, or an alternative?"""
    if len(gap) > 60 or HARD_END.search(gap):
        return False
    if DOUBT.search(gap):
        return True
    words = [w.casefold() for w in _GAP_WORD.findall(gap)]
    if not words:
        return False
    if words[0] not in _FILLER:                   # a unit after the value: "17 apples or 18"
        words = words[1:]
        return bool(words) and all(w in _FILLER for w in words) \
            and any(w in _ALT_WORDS for w in words)
    return all(w in _FILLER for w in words) and any(w in _LIST_WORDS | _ALT_WORDS
                                                    for w in words)
