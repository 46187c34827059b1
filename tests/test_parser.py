"""The think/answer parser on a fixture table, and the format rewards built on it."""
import pytest

from rlvr import Task
from rlvr.verifiers import AnswerTag, BoxedPresent, ThinkFormat, ThinkParser, all_boxed

# text, think, answer, think_closed, well_formed
CASES = [
    ("plain", "<think>2+2 is 4</think> The answer is 4.", "2+2 is 4", "The answer is 4.", True, True),
    ("multi-line", "<think>line one\nline two\n</think>\n\nFinal: 7\n", "line one\nline two",
     "Final: 7", True, True),
    ("prefilled (inferred)", "I add them.</think> 4", "I add them.", "4", True, True),
    ("no think block", "The answer is 4.", None, "The answer is 4.", False, False),
    ("unclosed (truncated)", "<think>still thinking about 4", "still thinking about 4", "", False, False),
    ("repeated blocks", "<think>a</think><think>b 5</think> 6", "a b 5", "6", True, False),
    ("nested tags", "<think>a <think>b</think> c</think> 9", "a b c", "9", True, False),
    ("empty think", "<think></think> 3", "", "3", True, True),
    ("nothing after think", "<think>x</think>   ", "x", "", True, False),
    ("text before think", "Sure! <think>x</think> 3", "x", "3", True, False),
    ("reopened after close", "<think>x</think> 3 <think>more", "x", "3", True, False),
]


@pytest.mark.parametrize("name,text,think,answer,closed,well_formed", CASES, ids=[c[0] for c in CASES])
def test_parser_fixture_table(name, text, think, answer, closed, well_formed):
    p = ThinkParser().parse(text)
    if think is None:
        assert p.think is None and not p.think_present
    else:
        assert " ".join(p.think.split()) == " ".join(think.split())
    assert p.answer == answer
    assert p.think_closed is closed
    assert p.well_formed is well_formed


def test_explicit_prefill_treats_start_as_thinking():
    p = ThinkParser(prefilled=True).parse("reasoning with 12 inside</think> 5")
    assert p.prefilled and p.think == "reasoning with 12 inside" and p.answer == "5"
    assert ThinkParser(prefilled=True).parse("no close yet 12").answer == ""


def test_answer_never_read_from_think():
    p = ThinkParser().parse(r"<think>\boxed{3}</think> \boxed{4}")
    assert all_boxed(p.answer) == ["4"]


def test_boxed_nested_braces_and_fbox():
    assert all_boxed(r"\boxed{\frac{1}{2}} and \fbox{x^{2}} and \boxed 7") == [r"\frac{1}{2}", "x^{2}", "7"]
    assert all_boxed(r"\boxed{unclosed") == []


# text, the closed boxes' contents: what every reader (all_boxed, last_boxed, the math
# verifier) sees, because they share one scanner
BOXES = [
    (r"\framebox{4}", ["4"]),
    (r"\boxed[x]{4}", ["4"]),
    (r"\boxed{\{1, 2\}}", [r"\{1, 2\}"]),
    (r"\boxed{a\}b}", [r"a\}b"]),
    (r"\boxed{1 \\} and more", [r"1 \\"]),          # `\\` is a line break, then the close
    (r"\boxed{3} then \boxed{4", ["3"]),
    (r"\boxed 7.", ["7"]),
    (r"\boxed{\boxed{5}}", [r"\boxed{5}"]),
    (r"\boxedx{4}", []),
]


@pytest.mark.parametrize("text,contents", BOXES, ids=[b[0] for b in BOXES])
def test_one_box_scanner_for_every_reader(text, contents):
    from rlvr.verifiers.math.extract import _boxes
    from rlvr.verifiers.parser import boxes, last_boxed
    assert all_boxed(text) == contents
    assert last_boxed(text) == (contents[-1] if contents else None)
    found = boxes(text)
    if found and not found[-1].closed:
        assert _boxes(text) is None               # the math reader: truncated, no answer
    else:
        assert [c for _, _, c in _boxes(text)] == contents


def test_the_box_scanner_never_raises_on_truncated_text():
    from rlvr.verifiers.math import find_final
    from rlvr.verifiers.parser import boxes
    text = r"so \boxed{\frac{1}{2}} or \framebox[x]{\{3\}} and \fbox{4 \\} then \boxed 5."
    for cut in range(len(text) + 1):
        found = boxes(text[:cut])
        assert all(b.closed for b in found[:-1])
        find_final(text[:cut])                    # no exception, whatever the cut
    assert [(b.content, b.closed) for b in boxes(r"\boxed{4")] == [("4", False)]


FORMAT = [
    (ThinkFormat(), "<think>ok</think> 4", 1.0, ""),
    (ThinkFormat(), "4", 0.0, "no think block"),
    (ThinkFormat(), "<think>ok", 0.0, "think block never closed"),
    (ThinkFormat(), "<think>a</think><think>b</think> 4", 0.0, "2 opening and 2 closing think tags, wanted one block"),
    (ThinkFormat(), "<think>a</think>", 0.0, "nothing after the think block"),
    (AnswerTag(), "<think>x</think><answer>4</answer>", 1.0, ""),
    (AnswerTag(), "<answer>4</answer><think>x", 0.0, "no <answer> block"),  # unclosed think: no answer
    (AnswerTag(), "<think><answer>4</answer></think> 4", 0.0, "no <answer> block"),
    (AnswerTag(), "<answer>3</answer><answer>4</answer>", 0.0, "2 <answer> blocks, wanted 1"),
    (AnswerTag(), "<answer> </answer>", 0.0, "empty <answer> block"),
    (BoxedPresent(), r"so \boxed{4}", 1.0, ""),
    (BoxedPresent(), r"<think>\boxed{4}</think> four", 0.0, "no \\boxed{} in the answer"),
]


@pytest.mark.parametrize("rew,text,score,reason", FORMAT)
def test_format_rewards(rew, text, score, reason):
    v = rew.score(Task("t"), text)
    assert (v.score, v.status, v.reason) == (score, "ok", reason)
