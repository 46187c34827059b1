"""Core nouns: the Reward boundary, function rewards, weighted sums, every status."""
import pytest

from rlvr import Completion, FunctionReward, Task, Verdict, WeightedSum, reward
from rlvr.core import STATUSES
from rlvr.verifiers import NumericMatch, ThinkFormat
from rewards_for_tests import Raises


def test_reward_that_raises_is_an_error_never_a_score():
    v = Raises().score(Task("t"), "x")
    assert v.status == "error" and v.score == 0.0
    assert "RuntimeError: verifier exploded on 'x'" in v.reason
    assert v.failed


def test_unknown_status_rejected():
    with pytest.raises(ValueError, match="unknown status"):
        Verdict(1.0, "fine")


def test_function_reward_fills_declared_arguments():
    @reward("has_keyword")
    def has_keyword(text, keyword, answer):
        return keyword in text and answer == "yes"

    task = Task("t", answer="yes", metadata={"keyword": "banana"})
    assert has_keyword.score(task, "a banana").score == 1.0
    assert has_keyword.score(task, "an apple").score == 0.0
    assert has_keyword.required_fields() == {"keyword", "answer"}


def test_function_reward_missing_field_is_error_with_fix():
    r = FunctionReward(lambda text, tests: 1.0, name="needs_tests")
    v = r.score(Task("t1"), "x")
    assert v.status == "error" and "needs task field 'tests'" in v.reason


def test_function_reward_bad_return_type():
    v = FunctionReward(lambda text: "yes", name="str_out").score(Task("t"), "x")
    assert v.status == "error" and "returned str" in v.reason


def test_weighted_sum_keeps_components_and_zero_weight_is_logged_only():
    total = WeightedSum([(NumericMatch(), 1.0), (ThinkFormat(), 0.0)])
    task = Task("t", answer="4")
    right_no_think = total.score(task, "<answer>4</answer>")
    assert right_no_think.score == 1.0
    assert right_no_think.components == {"numeric_match": 1.0, "think_format": 0.0}
    wrong_with_think = total.score(task, "<think>x</think><answer>5</answer>")
    assert wrong_with_think.score == 0.0
    assert wrong_with_think.components == {"numeric_match": 0.0, "think_format": 1.0}


def test_weighted_sum_arithmetic_and_failure_propagation():
    total = WeightedSum([(NumericMatch(), 0.8), (ThinkFormat(), 0.2)])
    v = total.score(Task("t", answer="4"), "<think>x</think><answer>4</answer>")
    assert v.score == pytest.approx(1.0)
    v = total.score(Task("t", answer="4"), "<think>x</think><answer>9</answer>")
    assert v.score == pytest.approx(0.2)       # 0.8*0 + 0.2*1
    # a failing weighted component fails the whole verdict (score 0, left out of training)
    failing = WeightedSum([(Raises(), 1.0), (ThinkFormat(), 0.5)])
    v = failing.score(Task("t"), "<think>x</think> 4")
    assert v.status == "error" and v.score == 0.0 and v.components["think_format"] == 1.0
    # ...but a failing zero-weight component is only logged
    logged = WeightedSum([(ThinkFormat(), 1.0), (Raises(), 0.0)])
    v = logged.score(Task("t"), "<think>x</think> 4")
    assert v.status == "ok" and v.score == 1.0


def test_batch_equals_single():
    total = WeightedSum([(NumericMatch(), 1.0), (ThinkFormat(), 0.1)])
    tasks = [Task(str(i), answer=str(i)) for i in range(6)]
    comps = [f"<think>t</think><answer>{i if i % 2 else i + 1}</answer>" for i in range(6)]
    batch = total.score_batch(tasks, comps)
    single = [total.score(t, c) for t, c in zip(tasks, comps)]
    assert [(v.score, v.status, v.components) for v in batch] == \
           [(v.score, v.status, v.components) for v in single]


NUMERIC = [
    ("42", "<think>6*7</think> <answer>42</answer>", 1.0, "ok"),
    ("42", "<answer>42.0</answer>", 1.0, "ok"),
    ("1000", "The answer is 1,000.", 1.0, "ok"),
    ("-3", r"<think>x</think> \boxed{-3}", 1.0, "ok"),
    ("42", "<think>the answer is 42</think> <answer>41</answer>", 0.0, "ok"),
    ("42", "<answer>41</answer> <answer>42</answer>", 0.0, "ok"),          # hedging
    ("42", r"\boxed{41} \boxed{42}", 0.0, "ok"),                            # hedging
    ("42", "The answer is 41 or 42", 0.0, "ok"),                            # hedging
    ("42", "<think>42", 0.0, "unparsed"),                                   # truncated
    ("42", "", 0.0, "unparsed"),
    ("42", "<answer>forty-two</answer>", 0.0, "unparsed"),
    ("x+1", "<answer>3</answer>", 0.0, "gold_unparseable"),
    ("35", r"<answer>\text{36 or } 35</answer>", 0.0, "ok"),               # value in \text
    ("35", r"<answer>36\text{ (not 35)}</answer>", 0.0, "ok"),
    ("35", r"<answer>35\text{ apples}</answer>", 1.0, "ok"),
    ("35", "Answer: 36\nAnswer: 35", 0.0, "ok"),                            # two statements
    ("35", "Answer: 35\nAnswer: 35.", 1.0, "ok"),
    ("35", "<answer>35</answer> <answer>35.0</answer>", 1.0, "ok"),         # one value twice
]


@pytest.mark.parametrize("gold,text,score,status", NUMERIC)
def test_numeric_match_fixture_table(gold, text, score, status):
    v = NumericMatch().score(Task("t", answer=gold), Completion(text))
    assert (v.score, v.status) == (score, status), v.reason


def test_numeric_match_reads_no_short_span_of_a_truncated_completion():
    task = Task("t", answer="35")
    v = NumericMatch().score(task, Completion("35", finish_reason="length"))
    assert (v.score, v.status) == (0.0, "unparsed") and "length limit" in v.reason
    assert NumericMatch().score(task, Completion("35", finish_reason="stop")).score == 1.0
    cut = Completion("<answer>35</answer> and then", finish_reason="length")
    assert NumericMatch().score(task, cut).score == 1.0


def test_every_status_is_reachable():
    """ok/unparsed/gold_unparseable/error here; timeout and infra_error in test_pool.py."""
    seen = {NumericMatch().score(Task("t", answer=g), t).status for g, t, _, _ in NUMERIC}
    seen.add(Raises().score(Task("t"), "x").status)
    assert seen == set(STATUSES) - {"timeout", "infra_error"}


def test_a_well_formed_wrong_answer_earns_format_reward_but_does_not_solve_the_task():
    # R1-Zero's pair at equal weights: format alone reaches the score of a right answer
    total = WeightedSum([(NumericMatch(), 1.0), (ThinkFormat(), 1.0)])
    task = Task("t", answer="4")
    wrong = total.score(task, "<think>x</think><answer>5</answer>")
    assert wrong.score == 1.0 and not wrong.solved
    right_unformatted = total.score(task, "<answer>4</answer>")
    assert right_unformatted.score == 1.0 and right_unformatted.solved
    assert total.score(task, "<think>x</think><answer>4</answer>").solved
    # the answer reward decides even when weighted below 1 (0.8 * 1 + 0.2 * 0 = 0.8)
    assert WeightedSum([(NumericMatch(), 0.8), (ThinkFormat(), 0.2)]).score(task, "<answer>4</answer>").solved
    assert NumericMatch().score(task, "4").solved and not NumericMatch().score(task, "5").solved
    failing = WeightedSum([(Raises(), 1.0), (ThinkFormat(), 0.5)]).score(Task("t"), "4")
    assert not failing.solved
    # a verdict written to JSON and read back keeps the rule
    assert not Verdict.from_dict(wrong.to_dict()).solved
