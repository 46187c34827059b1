"""The IFEval instruction checkers: one small pure function per instruction id.

Each is `check(text, **kwargs) -> Verdict` with IFEval's argument names, so a row in the IFEval
format (`instruction_id_list` + `kwargs`) is checked by looking the id up in `CHECKERS` and
passing its kwargs. A failed check says what it measured ("4 bullets, wanted exactly 3"), so a
low follow rate is explainable. Hostile text never crashes a checker: the counts they use
(`rlvr.verifiers.text`) normalise first and are linear-time.

Where we depart from IFEval's reference code (each to measure what the instruction says):
bullets need a space after the marker (`*emphasis*` opening a line is not a bullet); a highlight
is markdown emphasis (`*x*`, `**x**`, no space inside the stars), counted once; the postscript
marker must open a line; section markers match case-insensitively; the language detector is a
small script + stop-word one (`rlvr.verifiers.language`) that answers `unparsed` when unsure
instead of guessing; the two case checkers check case only.
"""
from __future__ import annotations

import operator
import re
from typing import Callable, Sequence

from rlvr.core import UNPARSED, Verdict

from .language import detect_language
from .structured import parse_json
from .text import (WORD, clean, count_bullets, count_capital_words, count_highlights,
                   count_placeholders, count_sections, count_sentences, count_words, plural,
                   split_paragraphs)

__all__ = ["CHECKERS", "RELATIONS", "all_lowercase", "all_uppercase", "capital_word_frequency",
           "constrained_response", "end_checker", "english_capital", "english_lowercase", "forbidden_words", "json_format",
           "keyword_frequency", "keywords_existence", "letter_frequency", "multiple_sections",
           "no_comma", "nth_paragraph_first_word", "number_bullet_lists",
           "number_highlighted_sections", "number_paragraphs", "number_placeholders",
           "number_sentences", "number_words", "postscript", "quotation", "repeat_prompt",
           "response_language", "title", "two_responses"]

RELATIONS: dict[str, Callable[[int, int], bool]] = {
    "at least": operator.ge, "at most": operator.le, "exactly": operator.eq,
    "less than": operator.lt, "more than": operator.gt,
}


def _relation(measured: int, relation: str, target: int, noun: str) -> Verdict:
    """Compare a count; the failure reason reads '4 bullets, wanted exactly 3'."""
    if RELATIONS[relation](measured, target):
        return Verdict(1.0, extracted=measured)
    return Verdict(0.0, extracted=measured,
                   reason=f"{plural(measured, noun)}, wanted {relation} {target}")


def _pass(extracted=None) -> Verdict:
    return Verdict(1.0, extracted=extracted)


def _fail(reason: str, extracted=None) -> Verdict:
    return Verdict(0.0, extracted=extracted, reason=reason)


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
    m = WORD.search(paragraph)
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
        return _fail(f"{plural(len(paragraphs), 'paragraph')}, wanted exactly {num_paragraphs}",
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
    """How often one letter (or other character: IFEval asks for '#' and '!') occurs,
    case-insensitive.

    >>> letter_frequency("Banana", letter="a", let_frequency=4, let_relation="less than").score
    1.0
    >>> letter_frequency("#rlvr #rl", letter="#", let_frequency=3).reason
    "letter '#' 2 times, wanted at least 3"
    """
    n = clean(text).lower().count(clean(letter).lower())
    v = _relation(n, let_relation, let_frequency, "time")
    return v if v.score else _fail(f"letter {letter!r} {v.reason}", n)


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
    return _fail(f"{plural(n, what + ' letter')} (first {text[i]!r} at char {i})", n)


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


def _in_english(case: Verdict, text: str) -> Verdict:
    """IFEval's English-only case rules: the case verdict, then the response must be English.
    Unsure (too little text, mixed) is `unparsed`, never a pass (Google's checker passes text
    langdetect cannot read)."""
    if case.score < 1.0:
        return case
    got, why = detect_language(text)
    if got is None:
        return Verdict(0.0, UNPARSED, reason=f"cannot tell the response is English: {why}")
    if got != "en":
        return _fail(f"response is in {got!r} ({why}), wanted English", got)
    return case


def english_lowercase(text: str) -> Verdict:
    """In English, with no capital letters (IFEval's `change_case:english_lowercase`).

    >>> english_lowercase("el gato se sentó en la alfombra y no se movió de la casa").reason
    "response is in 'es' (9 of 14 words are 'es' stop words), wanted English"
    """
    return _in_english(all_lowercase(text), text)


def english_capital(text: str) -> Verdict:
    """In English, in capital letters only (IFEval's `change_case:english_capital`).

    >>> english_capital("THE CAT SAT ON THE MAT AND IT WAS HAPPY.").score
    1.0
    """
    return _in_english(all_uppercase(text), text)


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
    return _fail(f"{plural(n, 'comma')} (first at char {first.start()})", n)


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
        return _fail(f"{plural(len(kept), 'response')} separated by ******, wanted 2", len(kept))
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
    "change_case:english_capital": english_capital,
    "change_case:english_lowercase": english_lowercase,
    "punctuation:no_comma": no_comma,
}
