"""How the instruction checkers measure text: normalisation and the counts IFEval's
instructions are about (words, sentences, bullets, highlights, placeholders, sections, capital
words, paragraphs).

Every count first runs `clean` (NFKC, so full-width digits and commas count as the ASCII ones;
zero-width characters dropped, so they cannot split or hide words), and every pattern is
linear-time (no nested quantifiers, no `.*?` between delimiters that may never come), so megabytes
of `[[[[` or `<<<<` cost one pass. The procedural `ifeval-style` generator reads its gold's numbers
with the same functions the checkers use.
"""
from __future__ import annotations

import functools
import re
import unicodedata

__all__ = ["clean", "plural", "WORD", "count_words", "count_sentences", "count_bullets",
           "count_highlights", "count_placeholders", "count_sections", "count_capital_words",
           "split_paragraphs"]

# Invisible characters a model (or an attacker) can use to split or hide words.
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e"), None)


def clean(text: str) -> str:
    """NFKC-normalise and drop zero-width characters (ASCII text is returned as is).

    >>> clean("ｎｏ\u200b commas，here")
    'no commas,here'
    """
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", text.translate(_INVISIBLE))


def plural(n: int, noun: str) -> str:
    """'1 word', '2 words'."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


WORD = re.compile(r"\w+")
# Words whose dot does not end a sentence (a break after them is merged with what follows).
# Decimals need nothing: a sentence break needs whitespace after the punctuation.
_ABBREVIATIONS = frozenset("mr. mrs. ms. dr. prof. sr. jr. st. vs. e.g. i.e. cf. no.".split())
_SENTENCE_BREAK = re.compile(r"(?<=[.!?。！？])[\"'”’)\]]*\s+|\n+")


def count_words(text: str) -> int:
    r"""Words as IFEval counts them: runs of `\w` ("don't" is two).

    >>> count_words("Hello, big\u200bworld!")
    2
    """
    return len(WORD.findall(clean(text)))


def count_sentences(text: str) -> int:
    """Sentences: split after . ! ? (not decimals or Mr./e.g.) and at line breaks.

    >>> count_sentences("Dr. Who paid 3.5 pounds. Really? Yes!")
    3
    """
    segments = [seg for seg in _SENTENCE_BREAK.split(clean(text)) if seg and WORD.search(seg)]
    return sum(1 for seg in segments[:-1]
               if seg.rsplit(None, 1)[-1].lower() not in _ABBREVIATIONS) + bool(segments)


_MARKDOWN_BULLET = re.compile(r"^[ \t]*[*+\-•][ \t]+\S", re.MULTILINE)


def count_bullets(text: str) -> int:
    """Markdown bullet lines (`* x`, `- x`, `+ x`, `• x`); numbered items do not count.

    >>> count_bullets("* one\\n- two\\n*not a bullet*\\n1. numbered")
    2
    """
    return len(_MARKDOWN_BULLET.findall(clean(text)))


# Emphasis: no whitespace just inside the stars, one line at most (linear: [^\n*] cannot overlap).
_BOLD = re.compile(r"\*\*(?=[^\s*])[^\n*]*(?<=[^\s*])\*\*")
_ITALIC = re.compile(r"\*(?=[^\s*])[^\n*]*(?<=[^\s*])\*")


def count_highlights(text: str) -> int:
    """Markdown-highlighted spans: `*x*` or `**x**`, each counted once.

    >>> count_highlights("*one* and **two** but * not this *")
    2
    """
    text = clean(text)
    if "*" not in text:
        return 0
    bold = len(_BOLD.findall(text))
    return bold + len(_ITALIC.findall(_BOLD.sub(" ", text) if bold else text))


_PLACEHOLDER = re.compile(r"\[[^\[\]\n]*\w[^\[\]\n]*\]")


def count_placeholders(text: str) -> int:
    """Square-bracket placeholders with a word inside: `[name]`, `[your address]`.

    >>> count_placeholders("Dear [name], see [ ] and [[x]]")
    2
    """
    return len(_PLACEHOLDER.findall(clean(text)))


@functools.lru_cache(maxsize=256)
def _section_pattern(spliter: str) -> re.Pattern:
    # Not inside a word ("INTERSECTION 1"), but markdown or a quote may open it: "**SECTION 1**"
    # and '"SECTION 1:' are how IFEval's own responses write them.
    return re.compile(r"(?<!\w)" + re.escape(spliter.strip()) + r"[ \t]*\d+", re.IGNORECASE)


def count_sections(text: str, section_spliter: str = "Section") -> int:
    """Section markers such as `SECTION 1` (any case, full-width digits allowed).

    >>> count_sections("SECTION 1 hi\\nSection ２ there", "Section")
    2
    >>> count_sections('"**Section 1:** hi. Intersection 2', "Section")
    1
    """
    return len(_section_pattern(section_spliter).findall(clean(text)))


def count_capital_words(text: str) -> int:
    """Words written entirely in capitals ("NASA", "I").

    >>> count_capital_words("I love NASA and Nasa")
    2
    """
    return sum(1 for w in WORD.findall(clean(text)) if w.isupper())


def split_paragraphs(text: str) -> list[str]:
    """Paragraphs separated by blank lines (IFEval's `\\n\\n` rule), empty ones dropped."""
    return [p for p in re.split(r"\n[ \t]*\n", clean(text)) if p.strip()]

