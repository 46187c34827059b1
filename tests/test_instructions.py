"""Instruction checkers: a fixture table per checker (reasons asserted), hostile text, modes."""
import doctest
import importlib
import time

import pytest

from rlvr import Task
from rlvr.verifiers import instructions as ins
from rlvr.verifiers.instructions import (
    CHECKERS, InstructionFollowing, InstructionSpecError, bind_kwargs, check_instruction,
    detect_language)

ZW = "\u200b"
# (instruction id, kwargs, response, expected score, substring of the reason ("" = no reason))
TABLE = [
    # words: \w runs; zero-width spaces do not split a word; full-width letters are letters
    ("length_constraints:number_words", {"num_words": 3, "relation": "exactly"}, "one two three", 1, ""),
    ("length_constraints:number_words", {"num_words": 3}, "one two", 0, "2 words, wanted at least 3"),
    ("length_constraints:number_words", {"num_words": 2, "relation": "less than"}, f"a{ZW}b c", 0,
     "2 words, wanted less than 2"),
    ("length_constraints:number_words", {"num_words": 1, "relation": "at least"}, "ｗｏｒｄ", 1, ""),
    ("length_constraints:number_words", {"num_words": 1}, "", 0, "0 words, wanted at least 1"),
    # sentences: decimals and Mr./e.g. do not end one; line breaks do
    ("length_constraints:number_sentences", {"num_sentences": 2, "relation": "exactly"},
     "Mr. Smith paid 3.50 dollars. He left!", 1, ""),
    ("length_constraints:number_sentences", {"num_sentences": 2, "relation": "at most"},
     "One. Two. Three.", 0, "3 sentences, wanted at most 2"),
    ("length_constraints:number_sentences", {"num_sentences": 2, "relation": "exactly"},
     "* first point\n* second point", 1, ""),
    # paragraphs split by *** (IFEval): leading/trailing empties forgiven, middle ones not
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "a\n***\nb", 1, ""),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "***\na\n***\nb\n***", 1, ""),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 3}, "a\n***\nb", 0,
     "2 paragraphs, wanted exactly 3"),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "a\n******\nb", 0,
     "paragraph 2 of 3 between *** dividers is empty"),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "So"}, "Hi.\n\n\"So,\" she said.", 1, ""),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 3, "nth_paragraph": 2, "first_word": "so"}, "Hi.\n\nSo.", 0,
     "2 paragraphs, wanted exactly 3"),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "so"}, "Hi.\n\nWell.", 0,
     "paragraph 2 starts with 'well', wanted 'so'"),
    # keywords
    ("keywords:existence", {"keywords": ["volcano", "Lava"]}, "VOLCANOES spill lava.", 1, ""),
    ("keywords:existence", {"keywords": ["volcano", "ash"]}, "volcano", 0, "missing keyword 'ash'"),
    ("keywords:existence", {"keywords": ["a.b"]}, "axb", 0, "missing keyword 'a.b'"),  # not a regex
    ("keywords:frequency", {"keyword": "tea", "frequency": 3, "relation": "at least"},
     "Tea, TEA and tea.", 1, ""),
    ("keywords:frequency", {"keyword": "tea", "frequency": 2, "relation": "less than"},
     "tea tea", 0, "'tea' 2 times, wanted less than 2"),
    ("keywords:forbidden_words", {"forbidden_words": ["dog"]}, "I like dogs.", 1, ""),
    ("keywords:forbidden_words", {"forbidden_words": ["dog", "cat"]}, "A Dog and a cat.", 0,
     "used forbidden words 'dog', 'cat'"),
    ("keywords:letter_frequency", {"letter": "a", "let_frequency": 3, "let_relation": "at least"},
     "BANANA", 1, ""),
    ("keywords:letter_frequency", {"letter": "z", "let_frequency": 1, "let_relation": "at least"},
     "banana", 0, "letter 'z' 0 times, wanted at least 1"),
    # IFEval's own rows 1122 and 1129 ask for 4 hashtags ('#') and 6 '!' as the "letter"
    ("keywords:letter_frequency", {"letter": "#", "let_frequency": 4, "let_relation": "at least"},
     "#a #b #c #d", 1, ""),
    ("keywords:letter_frequency", {"letter": "!", "let_frequency": 6, "let_relation": "at least"},
     "Wow! Yes!", 0, "letter '!' 2 times, wanted at least 6"),
    # language: a clear unparsed when unsure
    ("language:response_language", {"language": "en"},
     "The weather is fine and we are going to the park with the dog.", 1, ""),
    ("language:response_language", {"language": "en"},
     "El perro de mi vecino es muy grande y no le gusta la lluvia.", 0, "response is in 'es'"),
    ("language:response_language", {"language": "ru"}, "Привет, как у тебя дела сегодня?", 1, ""),
    ("language:response_language", {"language": "ja"}, "今日はとても良い天気ですね。", 1, ""),
    ("language:response_language", {"language": "en"}, "OK 123", 0, "too little text"),
    # case
    ("change_case:english_lowercase", {}, "all is quiet here and the night is calm.", 1, ""),
    # English only, as IFEval's own checker requires: lowercase Spanish fails, and a reply too
    # short to tell the language earns nothing
    ("change_case:english_lowercase", {}, "el gato se sentó en la alfombra y no se movió de la casa",
     0, "response is in 'es'"),
    ("change_case:english_lowercase", {}, "all quiet here.", 0, "cannot tell the response is English"),
    ("change_case:english_lowercase", {}, "all Quiet Here.", 0, "2 capital letters (first 'Q' at char 4)"),
    ("change_case:english_lowercase", {}, "123 ...", 0, "no letters at all"),
    ("change_case:english_lowercase", {}, "ｑｕｉｅｔ ＬＯＵＤ", 0, "4 capital letters"),
    ("change_case:english_capital", {}, "IT IS LOUD AND THE SIGNAL IS CLEAR!", 1, ""),
    ("change_case:english_capital", {}, "LE SIGNAL EST FORT ET IL EST CLAIR POUR LA VILLE", 0,
     "response is in 'fr'"),
    ("change_case:english_capital", {}, "YES", 0, "cannot tell the response is English"),
    ("change_case:english_capital", {}, "LOUD and CLEAR", 0, "3 lowercase letters (first 'a' at char 5)"),
    ("change_case:capital_word_frequency", {"capital_frequency": 2, "capital_relation": "at least"},
     "NASA met ESA.", 1, ""),
    ("change_case:capital_word_frequency", {"capital_frequency": 2, "capital_relation": "less than"},
     "NASA met ESA.", 0, "2 capital words, wanted less than 2"),
    # bullets: markdown markers followed by a space; emphasis and numbered items are not bullets
    ("detectable_format:number_bullet_lists", {"num_bullets": 3}, "* a\n- b\n  + c", 1, ""),
    ("detectable_format:number_bullet_lists", {"num_bullets": 3}, "* a\n* b\n* c\n* d", 0,
     "4 bullets, wanted exactly 3"),
    ("detectable_format:number_bullet_lists", {"num_bullets": 1}, "*emphasis* line\n1. one\n* ok", 1, ""),
    ("detectable_format:constrained_response", {}, "My answer is maybe.", 1, ""),
    ("detectable_format:constrained_response", {}, "Perhaps.", 0, "none of"),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2},
     "*one* and **two**", 1, ""),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2},
     "**bold** once, * spaced * no", 0, "1 highlighted section, wanted at least 2"),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2},
     "SECTION 1\nhi\nSection ２\nthere", 1, ""),
    ("detectable_format:multiple_sections", {"section_spliter": "SECTION", "num_sections": 3},
     "SECTION 1 a SECTION 2 b", 0, "2 'SECTION N' sections, wanted at least 3"),
    # as IFEval's own responses open them (keys 1481, 2889, 3367): in bold, after a quote; but
    # never inside a word
    ("detectable_format:multiple_sections", {"section_spliter": "SECTION", "num_sections": 2},
     "**SECTION 1: INTRO**\nhi\n\n**SECTION 2: MORE**\nthere", 1, ""),
    ("detectable_format:multiple_sections", {"section_spliter": "Audience", "num_sections": 2},
     '"Audience 1: teens.\n\nAudience 2: parents."', 1, ""),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2},
     "Section 1 at the intersection 2 of roads", 0, "1 'Section N' section, wanted at least 2"),
    ("detectable_format:json_format", {}, '```json\n{"a": 1}\n```', 1, ""),
    ("detectable_format:json_format", {}, '{"a": 1} trailing', 0, "not JSON: Extra data"),
    ("detectable_format:title", {}, "<<Poem of Joy>>\nLa la.", 1, ""),
    ("detectable_format:title", {}, "<<\n>> <<  >>", 0, "no title wrapped in <<...>>"),
    # content
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "[name] at [address]", 1, ""),
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "[name] and [] and [ ]", 0,
     "1 placeholder, wanted at least 2"),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Bye.\n\np.s. see you", 1, ""),
    ("detectable_content:postscript", {"postscript_marker": "P.P.S"}, "Bye.\nP. P. S soon", 1, ""),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "I wrote P.S. midline", 0,
     "no line starting with 'P.S.'"),
    # start / end / punctuation / combination
    ("startend:end_checker", {"end_phrase": "Peace out."}, '"All done. Peace out."', 1, ""),
    ("startend:end_checker", {"end_phrase": "Peace out."}, "Peace out. Bye.", 0,
     "does not end with 'Peace out.'"),
    ("startend:quotation", {}, '  "Quoted."  ', 1, ""),
    ("startend:quotation", {}, '"', 0, "not wrapped in double quotation marks"),
    ("punctuation:no_comma", {}, "No commas at all.", 1, ""),
    ("punctuation:no_comma", {}, "Sneaky，full-width、ideographic", 0, "2 commas (first at char 6)"),
    ("combination:two_responses", {}, "Yes.\n******\nNo.", 1, ""),
    ("combination:two_responses", {}, "Yes.\n******\nNo.\n******\nMaybe.", 0,
     "3 responses separated by ******, wanted 2"),
    ("combination:two_responses", {}, "A\n******\n\n******\nB", 0, "response 2 between"),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Write a  poem."},
     "write a poem. Roses are red.", 1, ""),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Write a poem."}, "Sure! Write a poem.", 0,
     "does not start by repeating the request"),
]


@pytest.mark.parametrize("iid,kwargs,text,score,reason", TABLE,
                         ids=[f"{row[0].split(':')[1]}-{i}" for i, row in enumerate(TABLE)])
def test_fixture_table(iid, kwargs, text, score, reason):
    v = check_instruction(iid, text, kwargs)
    assert v.score == score, v.reason
    assert (reason in v.reason) if reason else v.reason == ""


def test_every_checker_has_a_passing_and_a_failing_fixture():
    for iid in CHECKERS:
        scores = {row[3] for row in TABLE if row[0] == iid}
        assert scores == {0, 1}, f"{iid} needs a pass and a fail row in TABLE"


# Arguments that let every checker run on any text.
DEFAULT_KWARGS = {iid: next(row[1] for row in TABLE if row[0] == iid) for iid in CHECKERS}
HOSTILE = {
    "empty": "",
    "whitespace": " \n\t\u3000 ",
    "300 kB of words": "word " * 60_000,
    "open brackets": "[" * 300_000,
    "angle brackets": "<<" * 150_000,
    "stars": "*" * 300_000,
    "star words": "*a " * 100_000,
    "unbalanced markup": "<think><answer>**[<<" * 15_000,
    "zero width": ZW.join("sneaky,words") * 1000,
    "full width digits": "SECTION １２３ ［name］ ，" * 3_000,
    "control chars": "\x00\x01\x1b[31m\ud7ff\ufffd" * 30_000,
    "deep json": "[" * 50_000 + "]" * 50_000,
    "huge int json": '{"a": ' + "9" * 10_000 + "}",
    "lone surrogates": "a\ud800b\udfff" * 1000,
}


def test_hostile_text_never_crashes_and_stays_linear():
    start = time.process_time()      # CPU time: the checkers' own work, whatever the load
    for name, text in HOSTILE.items():
        for iid, kwargs in DEFAULT_KWARGS.items():
            for mode in ("strict",) if len(text) > 100_000 else ("strict", "loose"):
                v = check_instruction(iid, text, kwargs, mode)
                assert v.score in (0.0, 1.0) and v.status in ("ok", "unparsed"), (name, iid)
    # 13 inputs of up to 300 kB x 25 checkers: quadratic behaviour would take minutes.
    assert time.process_time() - start < 10


def test_megabytes_through_the_reward_with_every_checker():
    ids = list(DEFAULT_KWARGS)
    task = _task(ids, [DEFAULT_KWARGS[i] for i in ids])
    text = ("Some words, *highlighted*, [name] and SECTION ２.\n* bullet\n" + ZW) * 40_000
    start = time.process_time()
    v = InstructionFollowing().score(task, text)
    assert v.status in ("ok", "unparsed") and len(v.extracted) == len(ids)
    assert time.process_time() - start < 5       # about 2.5 MB


def test_counts_ignore_unicode_tricks():
    assert ins.count_words(f"hel{ZW}lo wor\u00adld") == 2
    assert ins.count_sections("ＳＥＣＴＩＯＮ １ and SECTION 2", "Section") == 2
    assert ins.count_placeholders("［name］") == 1


def test_loose_mode_forgives_markdown_and_first_or_last_line():
    text = "Sure! Here it is:\n**this is all in lowercase now and it is in english**"
    assert check_instruction("change_case:english_lowercase", text, {}).score == 0.0
    assert check_instruction("change_case:english_lowercase", text, {}, "loose").score == 1.0
    # ...but not a violation in the middle of the response
    mid = "first line\nMiddle Line\nlast line"
    assert check_instruction("change_case:english_lowercase", mid, {}, "loose").score == 0.0


@pytest.mark.parametrize("iid,kwargs,message", [
    ("no:such", {}, "unknown instruction id 'no:such'"),
    ("length_constraints:number_words", {}, "missing argument(s) ['num_words']"),
    ("length_constraints:number_words", {"num_words": "ten"}, "num_words='ten' must be a non-negative"),
    ("length_constraints:number_words", {"num_words": 3, "relation": "around"}, "must be one of"),
    ("punctuation:no_comma", {"surprise": 1}, "unexpected argument(s) ['surprise']"),
    ("keywords:existence", {"keywords": "tea"}, "must be a list of non-empty strings"),
    ("keywords:existence", {"keywords": ["tea", " "]}, "must be a list of non-empty strings"),
    ("keywords:letter_frequency", {"letter": "ab", "let_frequency": 1}, "a single character"),
    ("keywords:letter_frequency", {"letter": " ", "let_frequency": 1}, "a single character"),
])
def test_bad_instruction_specs_are_named(iid, kwargs, message):
    with pytest.raises(InstructionSpecError) as err:
        bind_kwargs(iid, kwargs)
    assert message in str(err.value)


def test_hugging_face_nulls_are_dropped():
    # The hub copy of IFEval fills every unused argument with null.
    assert bind_kwargs("punctuation:no_comma", {"num_words": None, "keywords": None}) == {}


def _task(ids, kwargs):
    return Task("t", metadata={"instruction_id_list": ids, "kwargs": kwargs})


def test_reward_all_or_nothing_partial_and_reasons():
    task = _task(["punctuation:no_comma", "detectable_format:title"], [{}, {}])
    strict = InstructionFollowing()
    v = strict.score(task, "<<T>> Hello, world")
    assert (v.score, v.status, v.extracted) == (0.0, "ok", [False, True])
    assert v.reason == "punctuation:no_comma: 1 comma (first at char 11)"
    assert InstructionFollowing(partial=True).score(task, "<<T>> Hello, world").score == 0.5
    assert strict.score(task, "<<T>> Hello world").score == 1.0


def test_reward_reads_only_the_answer_span():
    task = _task(["punctuation:no_comma"], [{}])
    r = InstructionFollowing()
    assert r.score(task, "<think>hmm, well, ok</think>No commas here.").score == 1.0
    v = r.score(task, "<think>still, thinking")
    assert (v.score, v.status) == (0.0, "unparsed")
    assert v.reason == "empty response (think block never closed?)"
    assert r.score(task, "<think>done</think>   ").status == "unparsed"


def test_reward_bad_spec_is_gold_unparseable_not_a_zero():
    r = InstructionFollowing()
    for meta, message in [
        ({"instruction_id_list": ["nope"], "kwargs": [{}]}, "unknown instruction id"),
        ({"instruction_id_list": [], "kwargs": []}, "non-empty list"),
        ({"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}, {}]}, "list of 1 dicts"),
        ({"instruction_id_list": ["punctuation:no_comma"], "kwargs": "{bad"}, "not valid JSON"),
    ]:
        v = r.score(Task("t", metadata=meta), "text")
        assert v.status == "gold_unparseable" and message in v.reason, v.reason
    # kwargs may come as JSON text (a CSV/Parquet column) or be left out entirely
    ok = Task("t", metadata={"instruction_id_list": ["punctuation:no_comma"], "kwargs": "[{}]"})
    assert r.score(ok, "fine").score == 1.0
    assert r.score(Task("t", metadata={"instruction_id_list": ["punctuation:no_comma"],
                                       "kwargs": None}), "fine").score == 1.0


def test_unsure_language_is_unparsed():
    task = _task(["language:response_language"], [{"language": "de"}])
    v = InstructionFollowing().score(task, "Hm.")
    assert (v.score, v.status) == (0.0, "unparsed")


@pytest.mark.parametrize("text,lang", [
    ("Der Hund ist nicht mit dem Ball auf der Wiese.", "de"),
    ("Le chien est dans le jardin et il ne veut pas sortir.", "fr"),
    ("Il cane è nel giardino e non vuole uscire per la pioggia.", "it"),
    ("O cachorro está no jardim e não quer sair com a chuva.", "pt"),
    ("Собака не хочет выходить из дома.", "ru"),
    ("Собака не хоче виходити з дому і їсти.", "uk"),
    ("الكلب في الحديقة ولا يريد الخروج", "ar"),
    ("사과는 맛있고 건강에 좋습니다", "ko"),
    ("我们今天去公园散步吧", "zh"),
    # Devanagari: GPT-4's responses to IFEval keys 1259 (Marathi), 3653 (Nepali) and 3305 (Hindi,
    # after the English request repeated), from Google's IFEval response file
    ("कामाला धावतो,\nवेळ नाही थांबायला,\nउद्योगी जीवन.", "mr"),
    ("दिन 1: काठमाडौंबाट बिराटनगर उडान\nबिहान उडानले काठमाडौंबाट बिराटनगर जानुहोस्। बिराटनगर "
     "पुगेपछि होटलमा विश्राम गर्नुहोस्।", "ne"),
    ("Write an essay about the economic crisis.\n\nवर्तमान आर्थिक संकट का पर्यावरण पर कैसा प्रभाव "
     "पड़ रहा है, इसके बारे में एक निबंध लिखें। यह हो सकता है।", "hi"),
])
def test_language_detector(text, lang):
    assert detect_language(text)[0] == lang


@pytest.mark.parametrize("module", ["instructions", "instruction_checkers", "text", "language"])
def test_doctests(module):
    mod = importlib.import_module(f"rlvr.verifiers.{module}")
    result = doctest.testmod(mod)
    assert result.attempted > 0 and result.failed == 0
