"""Verifiable instructions (IFEval-style): is the response shaped the way the prompt asked?

Each checker is a small pure function `check(text, **kwargs) -> Verdict` whose parameters carry
IFEval's argument names, so a row in the IFEval format (`instruction_id_list` + `kwargs`) is
checked by looking the id up in `CHECKERS` and passing its kwargs. A failed check says what it
measured ("4 bullets, wanted exactly 3"), so a low follow rate is explainable.

Hostile text never crashes a checker: every one first runs `clean` (NFKC, so full-width digits
and commas count as the ASCII ones; zero-width characters dropped, so they cannot split or hide
words), and every pattern is linear-time (no nested quantifiers, no `.*?` between delimiters that
may never come), so megabytes of `[[[[` or `<<<<` cost one pass.

Where we depart from IFEval's reference code (each to measure what the instruction says):
bullets need a space after the marker (`*emphasis*` opening a line is not a bullet); a highlight
is markdown emphasis (`*x*`, `**x**`, no space inside the stars), counted once; the postscript
marker must open a line; section markers match case-insensitively; the language detector is a
small script + stop-word one (`detect_language`) that answers `unparsed` when unsure instead of
guessing; the two case checkers check case only.

Modes: `strict` checks the response as written; `loose` passes an instruction if any of IFEval's
eight loose variants passes (markdown `*` removed, first and/or last line dropped).
"""
from __future__ import annotations

import bisect
import functools
import json
import operator
import re
import unicodedata
from collections import Counter
from typing import Callable, Iterator, Sequence

from rlvr.core import GOLD_UNPARSEABLE, OK, UNPARSED, BaseReward, Verdict

from .parser import ThinkParser
from .structured import parse_json

__all__ = [
    "CHECKERS", "RELATIONS", "InstructionFollowing", "InstructionSpecError", "check_instruction",
    "clean", "count_words", "count_sentences", "count_bullets", "count_highlights",
    "count_placeholders", "count_sections", "count_capital_words", "split_paragraphs",
    "detect_language", "loose_variants", "bind_kwargs", "instruction_spec",
]

# --------------------------------------------------------------------------- text basics

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


RELATIONS: dict[str, Callable[[int, int], bool]] = {
    "at least": operator.ge, "at most": operator.le, "exactly": operator.eq,
    "less than": operator.lt, "more than": operator.gt,
}


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _relation(measured: int, relation: str, target: int, noun: str) -> Verdict:
    """Compare a count; the failure reason reads '4 bullets, wanted exactly 3'."""
    if RELATIONS[relation](measured, target):
        return Verdict(1.0, extracted=measured)
    return Verdict(0.0, extracted=measured,
                   reason=f"{_plural(measured, noun)}, wanted {relation} {target}")


def _pass(extracted=None) -> Verdict:
    return Verdict(1.0, extracted=extracted)


def _fail(reason: str, extracted=None) -> Verdict:
    return Verdict(0.0, extracted=extracted, reason=reason)


# --------------------------------------------------------------------------- counting

_WORD = re.compile(r"\w+")
# Words whose dot does not end a sentence (a break after them is merged with what follows).
# Decimals need nothing: a sentence break needs whitespace after the punctuation.
_ABBREVIATIONS = frozenset("mr. mrs. ms. dr. prof. sr. jr. st. vs. e.g. i.e. cf. no.".split())
_SENTENCE_BREAK = re.compile(r"(?<=[.!?。！？])[\"'”’)\]]*\s+|\n+")


def count_words(text: str) -> int:
    r"""Words as IFEval counts them: runs of `\w` ("don't" is two).

    >>> count_words("Hello, big\u200bworld!")
    2
    """
    return len(_WORD.findall(clean(text)))


def count_sentences(text: str) -> int:
    """Sentences: split after . ! ? (not decimals or Mr./e.g.) and at line breaks.

    >>> count_sentences("Dr. Who paid 3.5 pounds. Really? Yes!")
    3
    """
    segments = [seg for seg in _SENTENCE_BREAK.split(clean(text)) if seg and _WORD.search(seg)]
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
    return re.compile(r"(?:^|(?<=\s))" + re.escape(spliter.strip()) + r"[ \t]*\d+",
                      re.IGNORECASE | re.MULTILINE)


def count_sections(text: str, section_spliter: str = "Section") -> int:
    """Section markers such as `SECTION 1` (any case, full-width digits allowed).

    >>> count_sections("SECTION 1 hi\\nSection ２ there", "Section")
    2
    """
    return len(_section_pattern(section_spliter).findall(clean(text)))


def count_capital_words(text: str) -> int:
    """Words written entirely in capitals ("NASA", "I").

    >>> count_capital_words("I love NASA and Nasa")
    2
    """
    return sum(1 for w in _WORD.findall(clean(text)) if w.isupper())


def split_paragraphs(text: str) -> list[str]:
    """Paragraphs separated by blank lines (IFEval's `\\n\\n` rule), empty ones dropped."""
    return [p for p in re.split(r"\n[ \t]*\n", clean(text)) if p.strip()]


# --------------------------------------------------------------------------- length checkers

def number_words(text: str, num_words: int, relation: str = "at least") -> Verdict:
    """Word count.

    >>> number_words("one two three", num_words=3, relation="exactly").score
    1.0
    >>> number_words("one two", num_words=3).reason
    '2 words, wanted at least 3'
    """
    return _relation(count_words(text), relation, num_words, "word")


def number_sentences(text: str, num_sentences: int, relation: str = "at least") -> Verdict:
    """Sentence count (see `count_sentences`).

    >>> number_sentences("One. Two. Three.", num_sentences=2, relation="at most").reason
    '3 sentences, wanted at most 2'
    """
    return _relation(count_sentences(text), relation, num_sentences, "sentence")


_DIVIDER = re.compile(r"\s?\*\*\*\s?")


def number_paragraphs(text: str, num_paragraphs: int, relation: str = "exactly") -> Verdict:
    """Paragraphs separated by the markdown divider `***` (an empty one in the middle fails).

    >>> number_paragraphs("a\\n***\\nb", num_paragraphs=2).score
    1.0
    >>> number_paragraphs("a\\n***\\n\\n***\\nb", num_paragraphs=2).reason
    'paragraph 2 of 3 between *** dividers is empty'
    """
    parts = _DIVIDER.split(clean(text))
    n = len(parts)
    for i, p in enumerate(parts):
        if not p.strip():
            if 0 < i < len(parts) - 1:
                return _fail(f"paragraph {i + 1} of {len(parts)} between *** dividers is empty")
            n -= 1
    return _relation(n, relation, num_paragraphs, "paragraph")


def _first_word(paragraph: str) -> str:
    m = _WORD.search(paragraph)
    return m.group(0).lower() if m else ""


def nth_paragraph_first_word(text: str, num_paragraphs: int, nth_paragraph: int,
                             first_word: str) -> Verdict:
    """Exactly `num_paragraphs` blank-line-separated paragraphs; paragraph `nth_paragraph`
    (1-based) starts with `first_word` (case and punctuation ignored).

    >>> nth_paragraph_first_word("Hi.\\n\\nSo it goes.", 2, 2, "so").score
    1.0
    >>> nth_paragraph_first_word("Hi.\\n\\nWell.", 2, 2, "so").reason
    "paragraph 2 starts with 'well', wanted 'so'"
    """
    paragraphs = split_paragraphs(text)
    if len(paragraphs) != num_paragraphs:
        return _fail(f"{_plural(len(paragraphs), 'paragraph')}, wanted exactly {num_paragraphs}",
                     len(paragraphs))
    if not 1 <= nth_paragraph <= len(paragraphs):
        return _fail(f"no paragraph {nth_paragraph}")
    got, want = _first_word(paragraphs[nth_paragraph - 1]), _first_word(clean(first_word))
    if got != want:
        return _fail(f"paragraph {nth_paragraph} starts with {got!r}, wanted {want!r}", got)
    return _pass(got)


# --------------------------------------------------------------------------- keywords

def keywords_existence(text: str, keywords: Sequence[str]) -> Verdict:
    """Every keyword appears (case-insensitive substring, as IFEval).

    >>> keywords_existence("Volcanoes erupt.", ["volcano", "lava"]).reason
    "missing keyword 'lava'"
    """
    low = clean(text).lower()
    missing = [k for k in keywords if clean(k).lower() not in low]
    if missing:
        return _fail(f"missing keyword{'s' if len(missing) > 1 else ''} "
                     + ", ".join(repr(k) for k in missing), missing)
    return _pass()


def keyword_frequency(text: str, keyword: str, frequency: int, relation: str = "at least"
                      ) -> Verdict:
    """How often a keyword occurs (case-insensitive, substring, as IFEval).

    >>> keyword_frequency("Tea, tea and more TEA.", keyword="tea", frequency=2).score
    1.0
    >>> keyword_frequency("tea", keyword="tea", frequency=2).reason
    "'tea' 1 time, wanted at least 2"
    """
    n = clean(text).lower().count(clean(keyword).lower()) if keyword else 0
    v = _relation(n, relation, frequency, "time")
    return v if v.score else _fail(f"{keyword!r} {v.reason}", n)


def forbidden_words(text: str, forbidden_words: Sequence[str]) -> Verdict:
    """None of the words appears as a whole word (case-insensitive).

    >>> forbidden_words("I like dogs", ["dog", "like"]).reason
    "used forbidden word 'like'"
    """
    low = clean(text).lower()
    used = [w for w in forbidden_words
            if re.search(r"(?<!\w)" + re.escape(clean(w).lower()) + r"(?!\w)", low)]
    if used:
        return _fail(f"used forbidden word{'s' if len(used) > 1 else ''} "
                     + ", ".join(repr(w) for w in used), used)
    return _pass()


def letter_frequency(text: str, letter: str, let_frequency: int, let_relation: str = "at least"
                     ) -> Verdict:
    """How often one letter occurs (case-insensitive).

    >>> letter_frequency("Banana", letter="a", let_frequency=4, let_relation="less than").score
    1.0
    """
    n = clean(text).lower().count(clean(letter).lower())
    v = _relation(n, let_relation, let_frequency, "time")
    return v if v.score else _fail(f"letter {letter!r} {v.reason}", n)


# --------------------------------------------------------------------------- language

# Stop words that carry most running text in each Latin-script language we detect.
_STOPWORDS = {
    "en": "the and of to is in that it was for with as on are be this you not have",
    "es": "el la de que y en los las un una es por con para no se del al lo",
    "pt": "o a de que e do da em um uma para com não os as no na se por",
    "fr": "le la les de et des un une est que en du pour dans pas qui sur au",
    "de": "der die das und ist nicht ein eine zu den mit sich von auf für im dem",
    "it": "il la di che e un una per non con del della sono gli le è nel",
    "pl": "i w nie na się z jest że do to jak o co ale po tak są",
    "nl": "de het een en van is dat op te in niet zijn met voor er",
    "fi": "ja on ei se että oli ovat mutta kuin tai myös hän ole niin",
    "sw": "na ya wa ni kwa za katika la hii kuwa cha yake ambayo pia",
    "vi": "và của là có không những được một các trong cho người này với",
    "tr": "ve bir bu da de için ile çok ne gibi daha olan ama",
}
_STOPSETS = {lang: frozenset(words.split()) for lang, words in _STOPWORDS.items()}
# Unicode blocks of scripts that name (nearly) one language: (first, last code point, language).
# Shared scripts (Cyrillic, Arabic, Devanagari, Han) are split further by `_refine_script`.
_SCRIPT_BLOCKS = sorted([
    (0x0370, 0x03FF, "el"), (0x0400, 0x04FF, "ru"), (0x0530, 0x058F, "hy"),
    (0x0590, 0x05FF, "he"), (0x0600, 0x06FF, "ar"), (0x0900, 0x097F, "hi"),
    (0x0980, 0x09FF, "bn"), (0x0A00, 0x0A7F, "pa"), (0x0A80, 0x0AFF, "gu"),
    (0x0B80, 0x0BFF, "ta"), (0x0C00, 0x0C7F, "te"), (0x0C80, 0x0CFF, "kn"),
    (0x0D00, 0x0D7F, "ml"), (0x0E00, 0x0E7F, "th"), (0x10A0, 0x10FF, "ka"),
    (0x1100, 0x11FF, "ko"), (0x3040, 0x30FF, "ja"), (0x4E00, 0x9FFF, "zh"),
    (0xAC00, 0xD7AF, "ko"),
])
_BLOCK_STARTS = [b[0] for b in _SCRIPT_BLOCKS]
_NON_ASCII_LETTER = re.compile(r"[^\W\d_\x00-\x7f]")
_LETTER = re.compile(r"[^\W\d_]")
_SAMPLE_CHARS = 20_000      # language is decided on a prefix: enough, and bounded on megabytes


def detect_language(text: str) -> tuple[str | None, str]:
    """(ISO 639-1 code or None, why). A script + stop-word detector, written here because it is
    deterministic, dependency-free and fast; it says None ("unsure") rather than guess.

    >>> detect_language("The cat sat on the mat and it was happy.")[0]
    'en'
    >>> detect_language("ok")
    (None, 'too little text to tell the language (1 word)')
    """
    sample = clean(text[:_SAMPLE_CHARS])
    if not sample.isascii():
        letters = len(_LETTER.findall(sample))
        script, share = _main_script(sample, letters) if letters >= 8 else (None, 0.0)
        if script:
            return _refine_script(script, sample), f"{share:.0%} of letters in its script"
    words = Counter(w.lower() for w in _WORD.findall(sample) if not w.isdigit())
    n_words = sum(words.values())
    if n_words < 4:
        return None, f"too little text to tell the language ({_plural(n_words, 'word')})"
    hits = sorted(((sum(words[w] for w in words.keys() & stop), lang)
                   for lang, stop in _STOPSETS.items()), reverse=True)
    (best, lang), (second, _) = hits[0], hits[1]
    if best < 2 or best / n_words < 0.1 or best < 1.5 * second:
        return None, f"unsure: {best} stop words of {lang!r} vs {second} of the runner-up"
    return lang, f"{best} of {n_words} words are {lang!r} stop words"


def _main_script(sample: str, letters: int) -> tuple[str | None, float]:
    """The non-Latin script holding at least half the letters, if any (one pass, by block)."""
    others = _NON_ASCII_LETTER.findall(sample)
    if len(others) < letters / 2:
        return None, 0.0
    counts = Counter()
    for c in others:
        k = bisect.bisect_right(_BLOCK_STARTS, ord(c)) - 1
        if k >= 0 and ord(c) <= _SCRIPT_BLOCKS[k][1]:
            counts[_SCRIPT_BLOCKS[k][2]] += 1
    if not counts:
        return None, 0.0
    script, n = counts.most_common(1)[0]
    if script == "zh" and counts["ja"]:        # kana among the kanji: Japanese
        script, n = "ja", n + counts["ja"]
    return (script, n / letters) if n >= letters / 2 else (None, 0.0)


def _refine_script(lang: str, sample: str) -> str:
    """Split scripts shared by several languages with their distinctive letters or words."""
    if lang == "ru":
        if re.search(r"[іїєґ]", sample, re.IGNORECASE):
            return "uk"
        return "bg" if "ъ" in sample and not re.search("[ыэ]", sample) else "ru"
    if lang == "ar":
        if re.search("[ٹڈڑںے]", sample):
            return "ur"
        return "fa" if re.search("[پچژگی]", sample) else "ar"
    if lang == "hi":
        words = set(sample.split())
        if words & {"आहे", "आणि", "होते"}:
            return "mr"
        if words & {"छ", "छन्", "हो", "गर्न"}:
            return "ne"
    return lang


def response_language(text: str, language: str) -> Verdict:
    """The response is in `language` (ISO code); `unparsed` when the detector is unsure.

    >>> response_language("Le chat est sur la table et il dort.", "fr").score
    1.0
    >>> response_language("Hi", "en").status
    'unparsed'
    """
    got, why = detect_language(text)
    if got is None:
        return Verdict(0.0, UNPARSED, reason=why)
    if got != language.lower():
        return _fail(f"response is in {got!r} ({why}), wanted {language!r}", got)
    return _pass(got)


# --------------------------------------------------------------------------- case

def _first_offender(text: str, bad: Callable[[str], bool], what: str) -> Verdict:
    n = sum(map(bad, text))
    i = next(i for i, c in enumerate(text) if bad(c))
    return _fail(f"{_plural(n, what + ' letter')} (first {text[i]!r} at char {i})", n)


def all_lowercase(text: str) -> Verdict:
    """No capital letters (and at least one letter).

    >>> all_lowercase("hello World").reason
    "1 capital letter (first 'W' at char 6)"
    """
    text = clean(text)
    if text.islower():
        return _pass()
    if not any(c.isalpha() for c in text):
        return _fail("no letters at all")
    return _first_offender(text, str.isupper, "capital")


def all_uppercase(text: str) -> Verdict:
    """No lowercase letters (and at least one letter).

    >>> all_uppercase("HELLO world").reason
    "5 lowercase letters (first 'w' at char 6)"
    """
    text = clean(text)
    if text.isupper():
        return _pass()
    if not any(c.isalpha() for c in text):
        return _fail("no letters at all")
    return _first_offender(text, str.islower, "lowercase")


def capital_word_frequency(text: str, capital_frequency: int, capital_relation: str = "at least"
                           ) -> Verdict:
    """How many words are written in capitals.

    >>> capital_word_frequency("NASA and ESA", capital_frequency=3).reason
    '2 capital words, wanted at least 3'
    """
    return _relation(count_capital_words(text), capital_relation, capital_frequency,
                     "capital word")


# --------------------------------------------------------------------------- format

def number_bullet_lists(text: str, num_bullets: int, relation: str = "exactly") -> Verdict:
    """Markdown bullet points (see `count_bullets`).

    >>> number_bullet_lists("* a\\n* b\\n* c\\n* d", num_bullets=3).reason
    '4 bullets, wanted exactly 3'
    """
    return _relation(count_bullets(text), relation, num_bullets, "bullet")


_OPTIONS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")


def constrained_response(text: str, options: Sequence[str] = _OPTIONS) -> Verdict:
    """The response contains one of the fixed answers.

    >>> constrained_response("My answer is no.").score
    1.0
    """
    text = clean(text).strip()
    found = [o for o in options if o in text]
    return _pass(found[0]) if found else _fail(f"none of {list(options)} in the response")


def number_highlighted_sections(text: str, num_highlights: int, relation: str = "at least"
                                ) -> Verdict:
    """Markdown-highlighted spans (see `count_highlights`).

    >>> number_highlighted_sections("*one* only", num_highlights=2).reason
    '1 highlighted section, wanted at least 2'
    """
    return _relation(count_highlights(text), relation, num_highlights, "highlighted section")


def multiple_sections(text: str, num_sections: int, section_spliter: str = "Section",
                      relation: str = "at least") -> Verdict:
    """Sections marked `<spliter> <number>` (see `count_sections`).

    >>> multiple_sections("SECTION 1\\nhi", num_sections=2, section_spliter="SECTION").reason
    "1 'SECTION N' section, wanted at least 2"
    """
    if not section_spliter.strip():
        raise ValueError("section_spliter must not be empty")
    v = _relation(count_sections(text, section_spliter), relation, num_sections,
                  f"{section_spliter.strip()!r} section")
    return v if v.score else _fail(v.reason.replace(f"{section_spliter.strip()!r} section",
                                                    f"'{section_spliter.strip()} N' section"),
                                   v.extracted)


def json_format(text: str) -> Verdict:
    """The whole response is JSON (a ```json fence around it is allowed).

    >>> json_format('```json\\n{"a": 1}\\n```').score
    1.0
    """
    value, problem = parse_json(text)
    return _fail(problem) if problem else _pass(value)


_TITLE = re.compile(r"<<([^\n<>]+)>>")


def title(text: str) -> Verdict:
    """A title wrapped in double angular brackets, `<<like this>>`.

    >>> title("<<My Day>> It was fine.").extracted
    'My Day'
    >>> title("<< >> nothing").reason
    'no title wrapped in <<...>>'
    """
    for m in _TITLE.finditer(clean(text)):
        if m.group(1).strip():
            return _pass(m.group(1).strip())
    return _fail("no title wrapped in <<...>>")


def number_placeholders(text: str, num_placeholders: int, relation: str = "at least") -> Verdict:
    """Square-bracket placeholders (see `count_placeholders`).

    >>> number_placeholders("[name] lives at [address]", num_placeholders=3).reason
    '2 placeholders, wanted at least 3'
    """
    return _relation(count_placeholders(text), relation, num_placeholders, "placeholder")


def postscript(text: str, postscript_marker: str = "P.S.") -> Verdict:
    """A line starting with the postscript marker (`P.S.`, `P.P.S`; spaces in it optional).

    >>> postscript("Bye.\\nP.S. I miss you.").score
    1.0
    >>> postscript("no ps here", "P.S.").reason
    "no line starting with 'P.S.'"
    """
    marker = clean(postscript_marker).strip()
    if not marker:
        raise ValueError("postscript_marker must not be empty")
    body = r"\s?".join(re.escape(c) for c in marker.replace(" ", ""))
    if re.search(r"^[ \t>*_]*" + body, clean(text), re.IGNORECASE | re.MULTILINE):
        return _pass()
    return _fail(f"no line starting with {marker!r}")


def end_checker(text: str, end_phrase: str) -> Verdict:
    """The response ends with the exact phrase (case-insensitive; outer quotes ignored).

    >>> end_checker("Done. Any other questions?", "Any other questions?").score
    1.0
    """
    got = clean(text).strip().strip('"').strip().lower()
    want = clean(end_phrase).strip().lower()
    if want and got.endswith(want):
        return _pass()
    return _fail(f"does not end with {end_phrase!r} (ends with {got[-len(want) - 10:]!r})")


def quotation(text: str) -> Verdict:
    """The whole response is wrapped in double quotes.

    >>> quotation('"Hello there."').score
    1.0
    """
    s = clean(text).strip()
    if len(s) > 1 and (s[0], s[-1]) in (('"', '"'), ("“", "”")):
        return _pass()
    return _fail("not wrapped in double quotation marks")


_COMMAS = re.compile("[,،、‚⸴⹁ꓹ]")


def no_comma(text: str) -> Verdict:
    """No commas, full-width, Arabic and ideographic ones included.

    >>> no_comma("a，b").reason
    '1 comma (first at char 1)'
    """
    text = clean(text)
    first = _COMMAS.search(text)
    if not first:
        return _pass()
    n = len(_COMMAS.findall(text))
    return _fail(f"{_plural(n, 'comma')} (first at char {first.start()})", n)


_TWO_SEP = "******"


def two_responses(text: str) -> Verdict:
    """Exactly two different responses separated by six asterisks.

    >>> two_responses("Yes.\\n******\\nNo.").score
    1.0
    >>> two_responses("Same\\n******\\nSame").reason
    'the two responses are identical'
    """
    parts = clean(text).split(_TWO_SEP)
    kept = []
    for i, p in enumerate(parts):
        if p.strip():
            kept.append(p.strip())
        elif 0 < i < len(parts) - 1:
            return _fail(f"response {i + 1} between ****** separators is empty")
    if len(kept) != 2:
        return _fail(f"{_plural(len(kept), 'response')} separated by ******, wanted 2", len(kept))
    if kept[0] == kept[1]:
        return _fail("the two responses are identical")
    return _pass()


def _squash(s: str) -> str:
    return " ".join(clean(s).split()).lower()


def repeat_prompt(text: str, prompt_to_repeat: str) -> Verdict:
    """The response opens by repeating the request word for word (case and spacing ignored).

    >>> repeat_prompt("Write a poem. Roses are red.", "Write a poem.").score
    1.0
    """
    want = _squash(prompt_to_repeat)
    if want and _squash(text[:len(prompt_to_repeat) * 4 + 64]).startswith(want):
        return _pass()
    return _fail("does not start by repeating the request")


# --------------------------------------------------------------------------- the table

CHECKERS: dict[str, Callable[..., Verdict]] = {
    "keywords:existence": keywords_existence,
    "keywords:frequency": keyword_frequency,
    "keywords:forbidden_words": forbidden_words,
    "keywords:letter_frequency": letter_frequency,
    "language:response_language": response_language,
    "length_constraints:number_sentences": number_sentences,
    "length_constraints:number_paragraphs": number_paragraphs,
    "length_constraints:number_words": number_words,
    "length_constraints:nth_paragraph_first_word": nth_paragraph_first_word,
    "detectable_content:number_placeholders": number_placeholders,
    "detectable_content:postscript": postscript,
    "detectable_format:number_bullet_lists": number_bullet_lists,
    "detectable_format:constrained_response": constrained_response,
    "detectable_format:number_highlighted_sections": number_highlighted_sections,
    "detectable_format:multiple_sections": multiple_sections,
    "detectable_format:json_format": json_format,
    "detectable_format:title": title,
    "combination:two_responses": two_responses,
    "combination:repeat_prompt": repeat_prompt,
    "startend:end_checker": end_checker,
    "startend:quotation": quotation,
    "change_case:capital_word_frequency": capital_word_frequency,
    "change_case:english_capital": all_uppercase,
    "change_case:english_lowercase": all_lowercase,
    "punctuation:no_comma": no_comma,
}

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
    elif name == "letter":
        ok = isinstance(value, str) and len(value) == 1 and value.isalpha()
    else:
        ok = isinstance(value, str) and bool(value.strip())
    if not ok:
        want = ("a non-negative integer" if name in _INT_ARGS else
                f"one of {sorted(RELATIONS)}" if name in _RELATION_ARGS else
                "a list of non-empty strings" if name in _LIST_ARGS else
                "a single letter" if name == "letter" else "a non-empty string")
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
