"""Which language a response is written in, for IFEval's `language:response_language`.

A script + stop-word detector, written here rather than taken from a library (IFEval's reference
code uses `langdetect`) because it is deterministic (`langdetect` is randomised unless seeded),
dependency-free and fast, and because it says None ("unsure") on short or mixed text instead of
guessing: an instruction checker that guesses hands out rewards at random. About 35 languages: one
script per language (Greek, Armenian, Hebrew, Thai, Korean, ...; Cyrillic, Arabic and Devanagari
split by their distinctive letters or words) plus stop words for twelve Latin-script languages.
"""
from __future__ import annotations

import bisect
import re
from collections import Counter

from .text import WORD, clean, plural

__all__ = ["detect_language"]

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
    words = Counter(w.lower() for w in WORD.findall(sample) if not w.isdigit())
    n_words = sum(words.values())
    if n_words < 4:
        return None, f"too little text to tell the language ({plural(n_words, 'word')})"
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
        return _devanagari_language(sample)
    return lang


# Words (and word endings) that mark Hindi, Marathi or Nepali among Devanagari texts. Marathi
# also writes the letter ळ, which Hindi and Nepali do not use.
_DEVANAGARI_WORDS = {
    "hi": frozenset("है हैं था थे थी में और का की के नहीं यह से लिए भी".split()),
    "mr": frozenset("आहे आहेत आणि होते नाही आम्ही तुम्ही".split()),
    "ne": frozenset("छ छन् छु छौं थियो पनि र मा यो गर्न".split()),
}
_DEVANAGARI_ENDINGS = {"mr": ("च्या",), "ne": ("हरू", "नुहोस्")}


def _devanagari_language(sample: str) -> str:
    """Hindi, Marathi or Nepali, by their marker words and endings (Hindi when none decides).

    >>> _devanagari_language("कामाला धावतो, वेळ नाही थांबायला")
    'mr'
    >>> _devanagari_language("बिहान शहर दर्शन गर्नुहोस्। पुस्तकालय हेर्नुहोस्।")
    'ne'
    >>> _devanagari_language("यह निबंध पर्यावरण के बारे में है और यह हो सकता है")
    'hi'
    """
    words = [w.strip(".,;:!?।॥\"'()-") for w in sample.split()]
    score = Counter()
    for w in words:
        for lang, markers in _DEVANAGARI_WORDS.items():
            score[lang] += w in markers
        for lang, endings in _DEVANAGARI_ENDINGS.items():
            score[lang] += w.endswith(endings)
    score["mr"] += 2 * ("ळ" in sample)
    return max(("hi", "mr", "ne"), key=score.__getitem__)     # ties go to Hindi (first)

