"""The procedural `ifeval-style` tasks: a base request plus sampled IFEval instructions.

A base request (write about a topic, summarise a shipped paragraph...) plus 1-3 verifiable
instructions (`rlvr.verifiers.instructions`), procedural and seeded. Gold is built *first* and
the instructions' numbers are read off it ("at least 40 words" for a 47-word gold), then every
instruction is checked against the gold; a draw that fails (two instructions that cannot hold
together) is redrawn. So a generated task's gold scores 1.0 by construction, and the test split
never shares a base request with the train split.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Callable

from rlvr.core import Task
from rlvr.verifiers.instructions import (
    CHECKERS, count_bullets, count_capital_words, count_highlights, count_placeholders,
    count_sections, count_sentences, count_words, number_paragraphs, split_paragraphs)

from .base import ProceduralSource
from .common import SPLITS, split_of, user_turn

__all__ = ["IFEvalSource", "KINDS", "Kind", "Draft", "render"]

TOPICS = [
    "volcanoes", "tea", "bicycles", "honey bees", "the moon", "chess", "coral reefs", "jazz",
    "lighthouses", "origami", "rainforests", "sourdough bread", "glaciers", "kites", "owls",
    "the printing press", "desert plants", "trains", "octopuses", "public libraries",
    "solar power", "board games", "whales", "mountain hiking", "pottery", "comets",
    "street food", "penguins", "old maps", "wind turbines", "mushrooms", "the violin",
]
BASES = [
    "Write a short blog post about {topic}.",
    "Write a letter to a friend about {topic}.",
    "Write a short story about {topic}.",
    "Explain {topic} to a ten year old.",
    "Write a pitch for a startup working on {topic}.",
    "Describe a day spent learning about {topic}.",
]
# Shipped paragraphs to summarise (comma-free, so "repeat the request" composes with "no commas").
PARAGRAPHS = {
    "lighthouse": "Lighthouses once guided ships past rocks at night. Keepers lived in them and "
                  "kept the lamps burning through storms. Today most lights run on their own "
                  "and the old towers draw tourists instead of sailors.",
    "bee": "A honey bee visits hundreds of flowers in a single trip. It carries nectar home "
           "where the hive turns it into honey. Without bees many crops would give far less "
           "fruit.",
    "glacier": "Glaciers are rivers of ice that move a few metres each year. They carve "
               "valleys and leave lakes behind when they melt. Many of them are shrinking "
               "fast as the climate warms.",
    "library": "Public libraries lend books for free to anyone with a card. Many also offer "
               "classes and quiet rooms and internet access. For some people the library is "
               "the only warm public place to spend a winter afternoon.",
}
SENTENCES = [
    "{K} is a topic that many people find fascinating.",
    "There is always more to learn about {k}.",
    "Experts have studied {k} for a very long time.",
    "Many stories and songs mention {k}.",
    "Learning about {k} can change the way you see the world.",
    "Some people first hear about {k} at school.",
    "The history of {k} is full of surprises.",
    "Anyone can enjoy {k} with a little curiosity.",
    "Scientists still ask new questions about {k}.",
    "A good book about {k} makes a fine gift.",
    "My neighbour talks about {k} every single week.",
    "Nobody forgets the first time they really notice {k}.",
]
EXTRA_WORDS = ["adventure", "patience", "morning", "garden", "river", "friendship", "window",
               "journey", "harmony", "lantern", "compass", "meadow"]
FREQ_WORDS = ["wonder", "hope", "calm", "delight", "curiosity"]
FORBIDDEN = ["boring", "basically", "literally", "obviously", "honestly", "awesome", "stuff"]
CAPS = ["EXCITING", "IMPORTANT", "SPECIAL"]
PLACEHOLDERS = ["[name]", "[address]", "[date]", "[city]", "[phone number]", "[email]"]
END_PHRASES = ["Is there anything else I can help with?", "Any other questions?",
               "Let me know if you have additional questions.", "Peace out."]
SPLITERS = ["Section", "SECTION", "PARAGRAPH", "Part"]
ORDINAL = {1: "1st", 2: "2nd", 3: "3rd"}


@dataclass
class Draft:
    """The shape of a gold response, set by the sampled instructions before it is written."""
    keyword: str
    base: str
    body: list[str]
    n_paragraphs: int = 1
    per_paragraph: int = 2
    divider: bool = False
    spliter: str | None = None
    bullets: int = 0
    highlights: int = 0
    placeholders: int = 0
    capitals: int = 0
    title: bool = False
    repeat: bool = False
    postscript: str | None = None
    end_phrase: str | None = None
    quote: bool = False
    case: str | None = None
    no_comma: bool = False
    two: bool = False
    extra_keywords: list = field(default_factory=list)
    repeats: tuple | None = None
    choice: dict = field(default_factory=dict)     # relation chosen per instruction


def _paragraphs(d: Draft, offset: int) -> list[str]:
    pool, out, k = d.body, [], offset
    highlights = d.highlights
    for _ in range(d.n_paragraphs):
        sents = []
        for _ in range(d.per_paragraph):
            s = pool[k % len(pool)]
            k += 1
            if highlights:
                s, highlights = f"*{s[:-1]}*.", highlights - 1
            sents.append(s)
        out.append(" ".join(sents))
    extras = []
    if d.extra_keywords:
        extras.append("This also brings to mind " + " and ".join(d.extra_keywords) + ".")
    if d.repeats:
        word, n = d.repeats
        extras.append(" ".join([f"It fills me with {word}."] * n))
    if d.capitals:
        extras.append("I find it " + " and ".join(CAPS[:d.capitals]) + ".")
    if d.placeholders:
        extras.append("Write to me at " + " or ".join(PLACEHOLDERS[:d.placeholders]) + ".")
    if extras:
        out[-1] += " " + " ".join(extras)
    if d.bullets:
        out.insert(1, "\n".join(f"* {pool[(k + i) % len(pool)]}" for i in range(d.bullets)))
    if d.spliter:
        out = [f"{d.spliter} {i}\n{p}" for i, p in enumerate(out, 1)]
    return out


def render(d: Draft) -> str:
    """Write the gold response a Draft describes."""
    def one(offset: int, first: bool, last: bool) -> str:
        blocks = [d.base] if d.repeat and first else []
        if d.title and first:
            blocks.append(f"<<{d.keyword.title()} Notes>>")
        paragraphs = _paragraphs(d, offset)
        blocks.append(("\n***\n" if d.divider else "\n\n").join(paragraphs))
        if d.postscript and last:
            blocks.append(f"{d.postscript} I hope you enjoyed reading this.")
        if d.end_phrase and last:
            blocks.append(d.end_phrase)
        return "\n\n".join(blocks)

    text = (one(0, True, False) + "\n******\n" + one(5, False, True)) if d.two \
        else one(0, True, True)
    if d.no_comma:
        text = text.replace(",", "")
    if d.case:
        text = text.lower() if d.case == "lower" else text.upper()
    return f'"{text}"' if d.quote else text


@dataclass(frozen=True)
class Kind:
    """One sampleable instruction: how it shapes the draft, how its arguments are read off the
    gold, how the prompt states it, and which other instructions it cannot share a task with."""
    plan: Callable[[Draft, random.Random], None]
    derive: Callable[[str, Draft, random.Random], dict]
    describe: Callable[[dict], str]
    conflicts: frozenset = frozenset()


def _n(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _nothing(*_):
    return {}


def _set(**values) -> Callable:
    def plan(d, rng):
        for k, v in values.items():
            setattr(d, k, v(rng) if callable(v) else v)
    return plan


def _relation_plan(name: str, relations: tuple) -> Callable:
    def plan(d, rng):
        d.choice[name] = rng.choice(relations)
    return plan


def _bound(n: int, relation: str, rng: random.Random, round_to: int = 1) -> int:
    """A target that `n` satisfies under `relation` (rounded to look like a human's number)."""
    if relation == "at least":
        return max(1, (n - rng.randint(0, max(0, n // 5))) // round_to * round_to)
    if relation == "less than":
        return (n // round_to + 1) * round_to + rng.randint(0, 2) * round_to
    if relation == "at most":
        return -(-n // round_to) * round_to
    return n


def _words(text, d, rng):
    rel = d.choice["words"]
    return {"relation": rel, "num_words": _bound(count_words(text), rel, rng, 10)}


def _sentences(text, d, rng):
    rel = d.choice["sentences"]
    return {"relation": rel, "num_sentences": _bound(count_sentences(text), rel, rng)}


def _letter(text, d, rng):
    letter, rel = rng.choice("aeinorst"), d.choice["letter"]
    return {"letter": letter, "let_relation": rel,
            "let_frequency": _bound(text.lower().count(letter), rel, rng)}


def _capital_words(text, d, rng):
    n = count_capital_words(text)
    rel = d.choice["capitals"] if n else "less than"
    return {"capital_relation": rel, "capital_frequency": _bound(n, rel, rng)}


def _frequency(text, d, rng):
    word, rel = d.repeats[0], d.choice["frequency"]
    return {"keyword": word, "relation": rel,
            "frequency": _bound(text.lower().count(word), rel, rng)}


def _forbidden(text, d, rng):
    low = text.lower()
    return {"forbidden_words": rng.sample([w for w in FORBIDDEN if w not in low], 2)}


def _nth_paragraph(text, d, rng):
    paragraphs = split_paragraphs(text)
    nth = rng.randint(1, len(paragraphs))
    word = re.search(r"\w+", paragraphs[nth - 1])
    first = word.group(0).lower() if word else ""
    return {"num_paragraphs": len(paragraphs), "nth_paragraph": nth, "first_word": first}


def _nth_text(k):
    nth = ORDINAL.get(k["nth_paragraph"], f"{k['nth_paragraph']}th")
    return (f"There should be {k['num_paragraphs']} paragraphs. Paragraphs and only paragraphs "
            f"are separated with each other by two new lines. The {nth} paragraph must start "
            f"with the word {k['first_word']}.")


_EXCLUSIVE = frozenset({"combination:two_responses"})
KINDS: dict[str, Kind] = {
    "length_constraints:number_words": Kind(
        _relation_plan("words", ("at least", "less than", "at most")), _words,
        lambda k: f"Answer with {k['relation']} {_n(k['num_words'], 'word')}."),
    "length_constraints:number_sentences": Kind(
        _relation_plan("sentences", ("at least", "at most", "exactly")), _sentences,
        lambda k: f"Your response should contain {k['relation']} "
                  f"{_n(k['num_sentences'], 'sentence')}."),
    "length_constraints:number_paragraphs": Kind(
        _set(divider=True, n_paragraphs=lambda r: r.randint(2, 4)),
        lambda t, d, r: {"num_paragraphs": number_paragraphs(t, 0, "at least").extracted},
        lambda k: f"There should be exactly {k['num_paragraphs']} paragraphs. Paragraphs are "
                  "separated with the markdown divider: ***",
        frozenset({"length_constraints:nth_paragraph_first_word"}) | _EXCLUSIVE),
    "length_constraints:nth_paragraph_first_word": Kind(
        _set(n_paragraphs=lambda r: r.randint(2, 4)), _nth_paragraph, _nth_text, _EXCLUSIVE),
    "keywords:existence": Kind(
        _set(extra_keywords=lambda r: r.sample(EXTRA_WORDS, 2)),
        lambda t, d, r: {"keywords": list(d.extra_keywords)},
        lambda k: f"Include the keywords {' and '.join(k['keywords'])} in the response."),
    "keywords:frequency": Kind(
        lambda d, r: (setattr(d, "repeats", (r.choice(FREQ_WORDS), r.randint(2, 4))),
                      _relation_plan("frequency", ("at least", "less than"))(d, r)),
        _frequency,
        lambda k: f"In your response the word {k['keyword']} should appear {k['relation']} "
                  f"{_n(k['frequency'], 'time')}."),
    "keywords:forbidden_words": Kind(
        _nothing, _forbidden,
        lambda k: "Do not include the keywords " + " or ".join(k["forbidden_words"])
                  + " in the response."),
    "keywords:letter_frequency": Kind(
        _relation_plan("letter", ("at least", "less than")), _letter,
        lambda k: f"In your response the letter {k['letter']} should appear "
                  f"{k['let_relation']} {_n(k['let_frequency'], 'time')}."),
    "language:response_language": Kind(
        _nothing, lambda t, d, r: {"language": "en"},
        lambda k: "Your entire response should be in English and no other language."),
    "change_case:english_lowercase": Kind(
        _set(case="lower"), _nothing,
        lambda k: "Your entire response should be in English and in all lowercase letters. "
                  "No capital letters are allowed.",
        frozenset({"change_case:english_capital", "change_case:capital_word_frequency"})),
    "change_case:english_capital": Kind(
        _set(case="upper"), _nothing,
        lambda k: "Your entire response should be in English and in all capital letters.",
        frozenset({"change_case:english_lowercase"})),
    "change_case:capital_word_frequency": Kind(
        lambda d, r: (setattr(d, "capitals", r.randint(1, 3)),
                      _relation_plan("capitals", ("at least", "less than"))(d, r)),
        _capital_words,
        lambda k: "In your response words with all capital letters should appear "
                  f"{k['capital_relation']} {_n(k['capital_frequency'], 'time')}.",
        frozenset({"change_case:english_lowercase"})),
    "detectable_format:number_bullet_lists": Kind(
        _set(bullets=lambda r: r.randint(2, 5), n_paragraphs=2),
        lambda t, d, r: {"num_bullets": count_bullets(t)},
        lambda k: f"Your answer must contain exactly {_n(k['num_bullets'], 'bullet point')}. Use "
                  "markdown bullet points such as:\n* This is point 1.\n* This is point 2"),
    "detectable_format:number_highlighted_sections": Kind(
        _set(highlights=lambda r: r.randint(1, 3)),
        lambda t, d, r: {"num_highlights": r.randint(1, count_highlights(t))},
        lambda k: f"Highlight at least {_n(k['num_highlights'], 'section')} in your answer with "
                  "markdown, i.e. *highlighted section*."),
    "detectable_format:multiple_sections": Kind(
        _set(spliter=lambda r: r.choice(SPLITERS), n_paragraphs=lambda r: r.randint(2, 4)),
        lambda t, d, r: {"section_spliter": d.spliter,
                         "num_sections": count_sections(t, d.spliter)},
        lambda k: f"Your response must have {k['num_sections']} sections. Mark the beginning of "
                  f"each section with {k['section_spliter']} X, such as:\n"
                  f"{k['section_spliter']} 1\n[content of section 1]\n"
                  f"{k['section_spliter']} 2\n[content of section 2]",
        _EXCLUSIVE),
    "detectable_format:title": Kind(
        _set(title=True), _nothing,
        lambda k: "Your answer must contain a title wrapped in double angular brackets, such "
                  "as <<poem of joy>>."),
    "detectable_content:number_placeholders": Kind(
        _set(placeholders=lambda r: r.randint(1, 3)),
        lambda t, d, r: {"num_placeholders": r.randint(1, count_placeholders(t))},
        lambda k: f"The response must contain at least {_n(k['num_placeholders'], 'placeholder')} "
                  "represented by square brackets, such as [address]."),
    "detectable_content:postscript": Kind(
        _set(postscript=lambda r: r.choice(["P.S.", "P.P.S"])),
        lambda t, d, r: {"postscript_marker": d.postscript},
        lambda k: "At the end of your response please explicitly add a postscript starting "
                  f"with {k['postscript_marker']}"),
    "startend:end_checker": Kind(
        _set(end_phrase=lambda r: r.choice(END_PHRASES)),
        lambda t, d, r: {"end_phrase": d.end_phrase},
        lambda k: f"Finish your response with this exact phrase: {k['end_phrase']} No other "
                  "words should follow this phrase."),
    "startend:quotation": Kind(
        _set(quote=True), _nothing,
        lambda k: "Wrap your entire response with double quotation marks.",
        frozenset({"combination:repeat_prompt"})),
    "punctuation:no_comma": Kind(
        _set(no_comma=True), _nothing,
        lambda k: "In your entire response refrain from the use of any commas."),
    "combination:two_responses": Kind(
        _set(two=True), _nothing,
        lambda k: "Give two different responses. Responses and only responses should be "
                  "separated by 6 asterisk symbols: ******.",
        frozenset({"length_constraints:number_paragraphs", "detectable_format:multiple_sections",
                   "length_constraints:nth_paragraph_first_word"})),
    "combination:repeat_prompt": Kind(
        _set(repeat=True), lambda t, d, r: {"prompt_to_repeat": d.base},
        lambda k: f"First repeat the request \"{k['prompt_to_repeat']}\" word for word "
                  "without change and then give your answer (say nothing before it).",
        frozenset({"startend:quotation"})),
}


@dataclass(frozen=True)
class IFEvalSource(ProceduralSource):
    """Procedural instruction-following tasks: a base request + `min_constraints` to
    `max_constraints` sampled instructions (plus the topic keyword, which keeps empty or
    off-topic answers from satisfying a lone "no commas")."""
    prefix = "ifeval-style"
    min_constraints: int = 1
    max_constraints: int = 3
    test_fraction: float = 0.2
    splits: tuple = SPLITS

    def __post_init__(self):
        if not 1 <= self.min_constraints <= self.max_constraints <= 5:
            raise ValueError("need 1 <= min_constraints <= max_constraints <= 5")
        if not 0.0 < self.test_fraction < 1.0:
            raise ValueError("test_fraction must be strictly between 0 and 1")

    def _base(self, rng: random.Random, split: str) -> tuple[str, str, list[str]]:
        """(request, topic keyword, sentences a gold answer may use) in `split`."""
        while True:
            if rng.random() < 0.2:
                keyword = rng.choice(sorted(PARAGRAPHS))
                paragraph = PARAGRAPHS[keyword]
                request = f"Summarize the following paragraph in your own words.\n\n{paragraph}"
                body = [s.strip() + "." for s in paragraph.split(".") if s.strip()]
            else:
                topic = rng.choice(TOPICS)
                keyword = topic.split()[-1]
                request = rng.choice(BASES).format(topic=topic)
                body = [s.format(k=topic, K=topic[0].upper() + topic[1:]) for s in SENTENCES]
                rng.shuffle(body)
            if split_of(request, self.test_fraction) == split:
                return request, keyword, body

    def _draw(self, rng: random.Random, exclude: frozenset) -> list[str]:
        k = rng.randint(self.min_constraints, self.max_constraints)
        chosen: list[str] = []
        for iid in rng.sample(sorted(KINDS), len(KINDS)):
            if iid not in exclude and not KINDS[iid].conflicts & set(chosen) \
                    and not any(iid in KINDS[c].conflicts for c in chosen):
                chosen.append(iid)
            if len(chosen) == k:
                break
        return chosen

    def _make(self, split: str, seed: int, index: int) -> Task:
        rng = random.Random(f"ifeval/{seed}/{split}/{index}")
        request, keyword, body = self._base(rng, split)
        for _ in range(100):
            # A multi-line request (a paragraph to summarise) is not one to make a model repeat.
            ids = self._draw(rng, frozenset({"combination:repeat_prompt"} if "\n" in request
                                            else ()))
            draft = Draft(keyword=keyword, base=request, body=body)
            for iid in ids:
                KINDS[iid].plan(draft, rng)
            gold = render(draft)
            kwargs = [KINDS[iid].derive(gold, draft, rng) for iid in ids]
            ids, kwargs = ["keywords:existence", *ids], [{"keywords": [keyword]}, *kwargs]
            if all(CHECKERS[i](gold, **k).score == 1.0 for i, k in zip(ids, kwargs)):
                break
        else:   # pragma: no cover - the kinds are chosen so that this never happens
            raise RuntimeError(f"no consistent instruction set for ifeval task {index}")
        prompt = request + ("\n\n" if "\n" in request else " ")
        prompt += f"Use the word {keyword} at least once."
        for iid, k in zip(ids[1:], kwargs[1:]):
            line = KINDS[iid].describe(k)     # after a multi-line example, start a new line
            prompt += ("\n" if "\n" in prompt.rsplit(".", 1)[-1] else " ") + line
        spec = {"instruction_id_list": ids, "kwargs": kwargs}
        return Task(id=f"ifeval-style/{split}/{seed}/{index}", prompt=user_turn(prompt.strip()),
                    answer=spec, metadata={**spec, "instruction": prompt.strip(),
                                           "reference": gold, "gate_instructions": 1})
