"""Formatting environments: rewards for *form*, not content.

- `ifeval-style`: a base request (write about a topic, summarise a shipped paragraph...) plus 1-3
  verifiable instructions (`rlvr.verifiers.instructions`), procedural and seeded; or rows in the
  IFEval format (`instruction_id_list` + `kwargs`) from a file or a `datasets` id.
- `json-schema`: describe an entity as a JSON object matching a generated (or row-supplied) schema.
- `think-format`: the R1-Zero format itself, alone or added at a low weight to another
  environment (`base=arithmetic`).

Procedural gold is built *first* and the instructions' numbers are read off it ("at least 40
words" for a 47-word gold), then every instruction is checked against the gold; a draw that fails
(two instructions that cannot hold together) is redrawn. So a generated task's gold scores 1.0 by
construction, and the test split never shares a base request with the train split.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from rlvr.core import Task, Verdict
from rlvr.registry import load_env, register_env
from rlvr.verifiers.format import ThinkFormat
from rlvr.verifiers.instructions import (
    CHECKERS, InstructionFollowing, count_bullets, count_capital_words, count_highlights,
    count_placeholders, count_sections, number_paragraphs, count_sentences, count_words,
    split_paragraphs)
from rlvr.verifiers.parser import ThinkParser, answer_tag
from rlvr.verifiers.structured import JsonSchemaMatch, JsonValid

from .base import (Environment, ProceduralSource, RowSource, r1_base_prompt, r1_chat_prompt,
                   think_answer_gold)

__all__ = ["IFEvalSource", "IFEvalEnvironment", "ifeval_style", "ifeval_tasks",
           "SchemaSource", "json_schema", "R1Format", "QuestionSource", "think_format",
           "with_format_reward"]

SPLITS = ("train", "test")


def _split_of(key: str, test_fraction: float) -> str:
    bucket = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")
    return "test" if bucket / 2**64 < test_fraction else "train"


def _user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


# =========================================================================== ifeval-style

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
            if _split_of(request, self.test_fraction) == split:
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
        return Task(id=f"ifeval-style/{split}/{seed}/{index}", prompt=_user(prompt.strip()),
                    answer=spec, metadata={**spec, "instruction": prompt.strip(),
                                           "reference": gold, "gate_instructions": 1})


def _row_spec(row: Mapping, answer_field: str) -> dict | None:
    """IFEval constraints carried by a row (top-level fields, or a dict in the answer field)."""
    for holder in (row, row.get(answer_field)):
        if isinstance(holder, str) and "instruction_id_list" in holder:
            try:
                holder = json.loads(holder)
            except json.JSONDecodeError:
                continue
        if isinstance(holder, Mapping) and "instruction_id_list" in holder:
            return {"instruction_id_list": holder["instruction_id_list"],
                    "kwargs": holder.get("kwargs")}
    return None


def ifeval_tasks(rows, prefix: str = "ifeval") -> list[Task]:
    """IFEval-format rows (`key` or `id`, `prompt`, `instruction_id_list`, `kwargs`) -> Tasks."""
    out = []
    for i, row in enumerate(rows):
        spec = _row_spec(row, "answer")
        if spec is None:
            raise ValueError(f"row {i} has no instruction_id_list (not in the IFEval format)")
        rid = row.get("id", row.get("key", i))
        prompt = row.get("prompt", "")
        out.append(Task(id=f"{prefix}/{rid}", prompt=_user(prompt), answer=spec,
                        metadata={**spec, "instruction": prompt}))
    return out


def _load_rows(data: str, split: str) -> list[dict]:
    from pathlib import Path
    path = Path(data)
    if path.is_file():
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    import datasets
    if path.is_dir():
        ds = datasets.load_from_disk(data)
        return list(ds[split] if isinstance(ds, datasets.DatasetDict) else ds)
    return list(datasets.load_dataset(data, split=split))   # a hub id, e.g. google/IFEval


class IFEvalEnvironment(Environment):
    """An Environment whose scoring rows may carry their own instructions.

    A row with `instruction_id_list` (+ `kwargs`), at top level or as a dict in the answer
    field, is scored against those instructions; any other row is looked up by its task id.
    """

    def task_from_row(self, row: Mapping, id_field: str = "id",
                      answer_field: str = "answer") -> Task:
        spec = _row_spec(row, answer_field)
        if spec is None:
            if row.get(id_field) is None:
                raise KeyError(f"row has neither instruction_id_list (the IFEval format) nor a "
                               f"task id {id_field!r}")
            return self.get_task(str(row[id_field]))
        prompt = row.get("prompt", "")
        rid = row.get(id_field, row.get("key", ""))
        return Task(id=str(rid), prompt=prompt, answer=spec,
                    metadata={**spec, "instruction": prompt})


def _reference(task: Task) -> str:
    if "reference" not in task.metadata:
        raise ValueError(f"task {task.id!r} has no reference response: IFEval rows carry none, "
                         "and the contract's junk test cannot hold for them (\"I don't know.\" "
                         "does follow \"use no commas\"); load this environment with check=False")
    return task.metadata["reference"]


@register_env("ifeval-style")
def ifeval_style(min_constraints: int = 1, max_constraints: int = 3, test_fraction: float = 0.2,
                 mode: str = "strict", partial: bool = False, data: str | None = None,
                 data_split: str = "train", log_other_mode: bool = True) -> Environment:
    """Verifiable instruction following (IFEval's instruction set).

    Procedural by default; `data` (a JSONL file, a saved `datasets` directory or a hub id such
    as `google/IFEval`) uses IFEval-format rows instead (they carry no reference answers, so
    the contract check tests only that empty answers score 0). The reward is `mode` ('strict' or 'loose') prompt-level
    accuracy, or the fraction of instructions followed with `partial=True`; the other mode is
    logged at weight 0 unless `log_other_mode=False` (it costs about half of the scoring
    time, see benchmarks/README.md).

    >>> env = ifeval_style()
    >>> task = env.sample(1)[0]
    >>> env.reward.score(task, env.gold(task)).score
    1.0
    """
    if mode not in ("strict", "loose"):
        raise ValueError(f"mode must be 'strict' or 'loose', got {mode!r}")
    source = (RowSource({"train": ifeval_tasks(_load_rows(data, data_split))}) if data else
              IFEvalSource(min_constraints, max_constraints, test_fraction))
    other = "loose" if mode == "strict" else "strict"
    parser = ThinkParser()
    # IFEval rows carry no reference response, and of the standard junk only the empty answer
    # is sure to fail every instruction ("I don't know." does use no commas).
    return IFEvalEnvironment(
        name="ifeval-style", source=source, version="1", parser=parser,
        gold=None if data else _reference, junk=("", "<think>") if data else None,
        rewards=[(InstructionFollowing(mode, partial, parser), 1.0)]
        + ([(InstructionFollowing(other, partial, parser), 0.0)] if log_other_mode else []),
        description="Verifiable instructions (IFEval ids): word/sentence counts, keywords, "
                    "case, bullets, sections, title, postscript...; all must hold.")


# =========================================================================== json-schema

ENTITIES: dict[str, list[tuple[str, str]]] = {
    "person": [("name", "string"), ("age", "integer"), ("email", "string"),
               ("is_member", "boolean"), ("hobbies", "string[]"), ("height_m", "number"),
               ("status", "enum:active|inactive|banned"), ("address", "object:street,city")],
    "book": [("title", "string"), ("author", "string"), ("year", "integer"),
             ("pages", "integer"), ("genres", "string[]"), ("in_print", "boolean"),
             ("rating", "number"), ("format", "enum:hardcover|paperback|ebook")],
    "product": [("name", "string"), ("price", "number"), ("currency", "enum:USD|EUR|GBP"),
                ("in_stock", "boolean"), ("tags", "string[]"), ("sku", "string"),
                ("quantity", "integer"), ("dimensions", "object:width,height")],
    "event": [("title", "string"), ("date", "string"), ("attendees", "integer"),
              ("online", "boolean"), ("speakers", "string[]"), ("venue", "object:name,city"),
              ("kind", "enum:talk|workshop|party"), ("ticket_price", "number")],
    "city": [("name", "string"), ("country", "string"), ("population", "integer"),
             ("area_km2", "number"), ("is_capital", "boolean"), ("landmarks", "string[]"),
             ("climate", "enum:tropical|dry|temperate|cold")],
    "recipe": [("name", "string"), ("servings", "integer"), ("ingredients", "string[]"),
               ("vegetarian", "boolean"), ("minutes", "integer"), ("calories", "number"),
               ("difficulty", "enum:easy|medium|hard")],
}
WORDS = ["Nova", "Atlas", "Maple", "Juniper", "Orion", "Willow", "Cobalt", "Saffron", "Ember"]


def _field_schema(kind: str) -> dict:
    if kind.startswith("enum:"):
        return {"enum": kind[5:].split("|")}
    if kind.startswith("object:"):
        keys = kind[7:].split(",")
        return {"type": "object", "properties": {k: {"type": "string", "minLength": 1}
                                                 for k in keys},
                "required": keys, "additionalProperties": False}
    if kind == "string[]":
        return {"type": "array", "items": {"type": "string"}, "minItems": 1}
    extra = {"string": {"minLength": 1}, "integer": {"minimum": 0}}.get(kind, {})
    return {"type": kind, **extra}


def _field_value(kind: str, rng: random.Random) -> Any:
    if kind.startswith("enum:"):
        return rng.choice(kind[5:].split("|"))
    if kind.startswith("object:"):
        return {k: rng.choice(WORDS) for k in kind[7:].split(",")}
    return {"string": lambda: f"{rng.choice(WORDS)} {rng.choice(WORDS)}",
            "integer": lambda: rng.randint(1, 500), "number": lambda: round(rng.uniform(1, 99), 2),
            "boolean": lambda: rng.random() < 0.5,
            "string[]": lambda: rng.sample(WORDS, rng.randint(1, 3))}[kind]()


@dataclass(frozen=True)
class SchemaSource(ProceduralSource):
    """An entity, 3-6 of its fields, some required, extra keys sometimes forbidden."""
    prefix = "json-schema"
    test_fraction: float = 0.2
    splits: tuple = SPLITS

    def _make(self, split: str, seed: int, index: int) -> Task:
        rng = random.Random(f"json-schema/{seed}/{split}/{index}")
        while True:
            entity = rng.choice(sorted(ENTITIES))
            fields = rng.sample(ENTITIES[entity], rng.randint(3, min(6, len(ENTITIES[entity]))))
            required = [f for f, _ in fields if rng.random() < 0.7] or [fields[0][0]]
            schema = {"type": "object",
                      "properties": {f: _field_schema(k) for f, k in fields},
                      "required": required}
            if rng.random() < 0.5:
                schema["additionalProperties"] = False
            if _split_of(json.dumps(schema, sort_keys=True), self.test_fraction) == split:
                break
        gold = {f: _field_value(k, rng) for f, k in fields}
        question = (f"Describe a fictional {entity} as a JSON object that matches this JSON "
                    f"Schema:\n{json.dumps(schema, indent=2)}\nReply with the JSON object only.")
        return Task(id=f"json-schema/{split}/{seed}/{index}", prompt=_user(question),
                    answer=schema, metadata={"entity": entity, "reference": gold})


class SchemaEnvironment(Environment):
    """Scoring rows may bring their own schema (`schema`: an object or JSON text)."""

    def task_from_row(self, row: Mapping, id_field: str = "id",
                      answer_field: str = "answer") -> Task:
        if row.get("schema") is not None:
            schema = row["schema"]
            return Task(id=str(row.get(id_field, "")), prompt=row.get("prompt", ""),
                        answer=json.loads(schema) if isinstance(schema, str) else schema)
        return super().task_from_row(row, id_field, answer_field)


@register_env("json-schema")
def json_schema(test_fraction: float = 0.2, partial: bool = False) -> Environment:
    """A JSON object that validates against a JSON Schema (the `jsonschema` package).

    The answer may be bare JSON or one ```json fenced block; `partial=True` gives the fraction
    of the schema's constraints met. Validity alone is logged at weight 0.

    >>> env = json_schema()
    >>> task = env.sample(1)[0]
    >>> env.reward.score(task, env.gold(task)).score
    1.0
    """
    parser = ThinkParser()

    def gold(task: Task) -> str:
        return "```json\n" + json.dumps(task.metadata["reference"], indent=2) + "\n```"
    return SchemaEnvironment(
        name="json-schema", source=SchemaSource(test_fraction), version="1", parser=parser,
        gold=gold, rewards=[(JsonSchemaMatch(parser, partial=partial), 1.0),
                            (JsonValid(parser), 0.0)],
        description="Describe an entity as JSON matching a JSON Schema.")


# =========================================================================== think-format

class R1Format(ThinkFormat):
    """The strict R1-Zero shape: `<think>...</think>` then exactly one non-empty
    `<answer>...</answer>` and nothing after it (whitespace aside).

    >>> from rlvr import Task
    >>> R1Format().score(Task("t"), "<think>2+2</think> <answer>4</answer>").score
    1.0
    >>> R1Format().score(Task("t"), "<think>2+2</think> <answer>4</answer> Done!").reason
    'text after </answer>'
    """
    name, version = "r1_format", "1"

    def _score(self, task, completion):
        v = super()._score(task, completion)
        if v.score != 1.0:
            return v
        span = v.extracted
        tags = answer_tag(span)
        if span.count("<answer>") != 1 or span.count("</answer>") != 1 or len(tags) != 1:
            return Verdict(0.0, extracted=span, reason=(
                "no <answer> block after </think>" if "<answer>" not in span else
                f"{span.count('<answer>')} <answer> and {span.count('</answer>')} </answer> "
                "tags, wanted one block"))
        if not span.startswith("<answer>"):
            return Verdict(0.0, extracted=tags[0], reason="text between </think> and <answer>")
        if not span.endswith("</answer>"):
            return Verdict(0.0, extracted=tags[0], reason="text after </answer>")
        if not tags[0]:
            return Verdict(0.0, extracted="", reason="empty <answer> block")
        return Verdict(1.0, extracted=tags[0])


NAMES = ["river", "planet", "garden", "silver", "window", "orange", "thunder", "pencil"]


@dataclass(frozen=True)
class QuestionSource(ProceduralSource):
    """Short questions with known answers; only the format is scored."""
    prefix = "think-format"
    prompt_style: str = "chat"
    test_fraction: float = 0.2
    splits: tuple = SPLITS

    def _make(self, split: str, seed: int, index: int) -> Task:
        rng = random.Random(f"think-format/{seed}/{split}/{index}")
        while True:
            a, b, word = rng.randint(2, 99), rng.randint(2, 99), rng.choice(NAMES)
            question, answer = rng.choice([
                (f"What is {a} + {b}?", a + b),
                (f"Spell the word '{word}' backwards.", word[::-1]),
                (f"How many letters are in the word '{word}'?", len(word)),
                (f"Which is larger: {a} or {b}?", max(a, b))])
            if _split_of(question, self.test_fraction) == split:
                break
        prompt = r1_chat_prompt(question) if self.prompt_style == "chat" \
            else r1_base_prompt(question)
        return Task(id=f"think-format/{split}/{seed}/{index}", prompt=prompt,
                    answer=str(answer), metadata={"question": question})


class FormatOnlyEnvironment(Environment):
    """Format needs no gold: a row whose id is not a generated task is scored as it stands."""

    def task_from_row(self, row: Mapping, id_field: str = "id",
                      answer_field: str = "answer") -> Task:
        try:
            return super().task_from_row(row, id_field, answer_field)
        except KeyError:
            return Task(id=str(row.get(id_field, "")), prompt=row.get("prompt", ""))


def with_format_reward(env: Environment, weight: float = 0.2, rescale: bool = True,
                       reward=None) -> Environment:
    """`env` plus the R1 format reward at `weight` (0 = logged only). With `rescale` the
    existing weights are multiplied by 1 - weight, so a perfect answer still scores 1.0."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight must be in [0, 1], got {weight}")
    scale = 1.0 - weight if rescale else 1.0
    fmt = reward or R1Format(env.parser)
    if fmt.name in {r.name for r, _ in env.rewards}:
        raise ValueError(f"environment {env.name!r} already has a {fmt.name!r} reward")
    rewards = [(r, w * scale) for r, w in env.rewards] + [(fmt, weight)]
    return type(env)(name=env.name, source=env.source, rewards=rewards,
                     version=f"{env.version}+{fmt.name}@{weight:g}", parser=env.parser,
                     gold=env.gold, description=f"{env.description} (+ {fmt.name} x{weight:g})")


@register_env("think-format")
def think_format(base: str | None = None, weight: float = 0.2, base_args: dict | None = None,
                 prompt_style: str = "chat", test_fraction: float = 0.2) -> Environment:
    """The R1-Zero format as a reward: alone (short questions, only the format scored), or with
    `base=<env name>` added to that environment at `weight` (its own weights scaled by
    1 - weight).

    >>> env = think_format()
    >>> task = env.sample(1)[0]
    >>> env.reward.score(task, env.gold(task)).score
    1.0
    >>> think_format(base="arithmetic", weight=0.2).describe()["rewards"]
    {'numeric_match': 0.8, 'think_format': 0.0, 'r1_format': 0.2}
    """
    if base is not None:
        return with_format_reward(load_env(base, check=False, **(base_args or {})), weight)
    if prompt_style not in ("chat", "base"):
        raise ValueError("prompt_style must be 'chat' or 'base'")
    parser = ThinkParser(prefilled=True if prompt_style == "base" else None)
    env = FormatOnlyEnvironment(
        name="think-format", source=QuestionSource(prompt_style, test_fraction), version="1",
        parser=parser, rewards=[(R1Format(parser), 1.0)],
        description="<think>...</think><answer>...</answer>, answer non-empty, nothing after.")
    if prompt_style == "base":
        env.gold = lambda t: f" I think it over.</think> <answer>{t.answer}</answer>"
    else:
        env.gold = lambda t: think_answer_gold(t.answer)
    return env
