"""Holes a searching policy could reach in the math verifier, each closed and held shut here.

Each case names what it guards: a hedge read as one value, a truncated completion rewarded
for the last number it wrote, a relation that lost its left side, reading that stalls before
the deadline, a sympy failure scored as "not equal", a line break that joins a mixed number,
and right answers refused. All comparisons run inline (sympy in this process).
"""
from __future__ import annotations

import time

import pytest
import sympy

from rlvr import Completion, Task, load_env
from rlvr.verifiers.math import MathReward

REWARD = MathReward(symbolic="inline")


def score(gold: str, completion, reward: MathReward = REWARD):
    v = reward.score(Task("t", answer=gold), completion)
    return v.score, v.status, v.reason


# --------------------------------------------------------------------------- hedges

HEDGES = [                                        # (completion, its values)
    ("Thus $x = 5$ or $x = 7$.", ("5", "7")),
    ("We get $x=5$, or else $x=7$.", ("5", "7")),
    ("the answer is 12 — though it could be 13", ("12", "13")),
    ("The answer is 12, or possibly 13.", ("12", "13")),
    ("So the answer is $12$. Or maybe $13$.", ("12", "13")),
    ("The answer is 12; it could also be 13.", ("12", "13")),
    ("The answer is 12 (or possibly 13).", ("12", "13")),
    ("The answer is 12. Though 13 is also plausible.", ("12", "13")),
    ("I think it's 12, but it might be 13.", ("12", "13")),
    ("It's either 3 or 4", ("3", "4")),
    ("We find 5. Or perhaps 7.", ("5", "7")),
]


@pytest.mark.parametrize("completion,values", HEDGES, ids=[h[0][:30] for h in HEDGES])
def test_a_hedge_across_spans_is_wrong_whichever_value_the_gold_is(completion, values):
    for gold in values:
        s, status, reason = score(gold, completion)
        assert (s, status) == (0.0, "ok") and "hedged" in reason, (gold, reason)
    # ... and right when the gold has exactly those values
    assert score(", ".join(values), completion)[0] == 1.0


@pytest.mark.parametrize("completion", [
    "The solutions are $x=2$ and also $x=3$.",
    "Thus the solutions are x = 2 and x = 3.",
    "Therefore $x=2$ and $x=3$ are the solutions.",
    "The roots are 2 and 3.",
    "The values are $3$, $2$.",
])
def test_a_multi_solution_answer_in_prose_keeps_every_value(completion):
    assert score("2, 3", completion)[0] == 1.0
    assert score("3", completion)[0] == 0.0


@pytest.mark.parametrize("completion", [
    "The answer is 12, which is 3 times 4.",
    "The answer is 12 since 5 or 7 don't work.",
    "There are 12 apples, or a dozen.",
    "Thus she has 12 apples and 4 oranges.",
    "The number of cookies left is 12, since 20 - 8 = 12.",
    "So 3 * 4 = 12 apples.",
    "He has 5 apples, so 5 + 7 = 12 apples in total.",
    "After she has eaten 3, 12 remain.",
    "Let's say 5 apples and 3 oranges, total 12.",
    "Janet's ducks lay 16 eggs per day; she sells the rest for 12 dollars.",
    "The total is 12, compared to 10 yesterday.",
])
def test_one_stated_value_is_not_a_hedge(completion):
    assert score("12", completion)[0] == 1.0


def test_an_answer_sentence_states_its_first_value_not_the_units_count():
    assert score("17", "So she has 17 apples in 4 baskets.")[0] == 1.0
    assert score("4", "So she has 17 apples in 4 baskets.")[0] == 0.0
    assert score("40", "Step 1: 20+22 = 42. Step 2: subtract the 2 broken ones, 40 remain.")[0] \
        == 1.0


# --------------------------------------------------------------------------- truncation

RAMBLE = "Let me add these up: 12 + 30 = 42, and then I still need to carry the"


def test_a_truncated_completion_gets_no_last_value_fallback():
    cut = Completion(RAMBLE + " 42", finish_reason="length")
    s, status, reason = score("42", cut)
    assert (s, status) == (0.0, "unparsed") and "length limit" in reason
    assert score("42", Completion(RAMBLE + " 42", finish_reason="stop"))[0] == 1.0
    # an answer stated before the cut still counts
    stated = Completion("The answer is 42. Let me double-check by adding 12 and", "length")
    assert score("42", stated)[0] == 1.0
    assert score("42", cut, MathReward(symbolic="inline", last_value_if_truncated=True))[0] \
        == 1.0


def test_the_math_environment_reads_the_finish_reason_and_its_option():
    for option, expected in ((False, 0.0), (True, 1.0)):
        env = load_env("math", last_value_if_truncated=option)
        task = env.get_task("builtin/0")
        [v] = env.reward.score_batch([task], [Completion("<think>48+24</think> so far 72",
                                                  finish_reason="length")])
        assert v.components["math"] == expected


def test_rlvr_score_reads_a_rows_finish_reason(tmp_path):
    import json
    from rlvr.scoring import ScoreConfig, score_file
    rows = [{"id": "cut", "answer": "42", "completion": RAMBLE + " 42", "finish_reason": "length"},
            {"id": "done", "answer": "42", "completion": RAMBLE + " 42"}]
    src, out = tmp_path / "rows.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    score_file(ScoreConfig(env="math", input=str(src), output=str(out), workers=0,
                           progress=False))
    scored = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert scored["cut"]["status"] == "unparsed" and scored["cut"]["score"] == 0.0
    assert scored["done"]["score"] == 1.0


# --------------------------------------------------------------------------- relations

@pytest.mark.parametrize("gold,completion,expected", [
    ("b = 4", r"\boxed{a = 4}", 0.0),
    ("x = 4", r"\boxed{|x| = 4}", 0.0),
    ("x = 4", r"\boxed{f(x) = 4}", 0.0),
    ("x = 4", r"\boxed{x^2 = 16}", 0.0),
    ("x=1, y=2", r"\boxed{a=1, b=2}", 0.0),
    (r"\theta = 30", r"\boxed{\alpha = 30}", 0.0),
    ("x = 4", r"\boxed{x = 4}", 1.0),
    ("4", r"\boxed{x = 4}", 1.0),
    ("x=1, y=2", r"\boxed{y=2, x=1}", 1.0),
    ("a_3 = 5", r"\boxed{a_{3} = 5}", 1.0),
    ("f(x) = 2x+1", r"\boxed{y = 2x+1}", 1.0),
    ("AB = 5", r"\boxed{|AB| = 5}", 1.0),
])
def test_a_relation_keeps_its_left_side(gold, completion, expected):
    assert score(gold, completion)[0] == expected


# --------------------------------------------------------------------------- stalls

PATHOLOGICAL = {
    "20 KB of nested braces": "\\boxed{" + "{" * 10_000 + "1" + "}" * 10_000 + "}",
    "nested 600 deep": "\\boxed{" + "(" * 600 + "1" + ")" * 600 + "}",
    "unclosed answer tags": "<answer>" * 25_000,
    "many answer tags": "<answer>1</answer>" * 11_000,
    "many different boxes": "".join(f"\\boxed{{{i}}}" for i in range(16_000)),
    "nested text commands": "\\boxed{" + "\\text{" * 499 + "1" * 6000 + "}" * 499 + "}",
    "end tokens then a value": "<|im_end|> " * 20_000 + "7",
    "a run of line breaks": "1" + " \n" * 100_000 + "x",
}


@pytest.mark.parametrize("name", PATHOLOGICAL)
def test_pathological_answers_are_refused_quickly_as_the_policys_doing(name):
    reward = MathReward(symbolic="inline", deadline_s=30)
    reward.score(Task("warm", answer="1"), r"\boxed{\sqrt{2}}")
    # CPU time, not wall time: the bound is about the reader's own work (a quadratic reading
    # of these takes minutes), which other processes on a busy machine do not inflate.
    t0 = time.process_time()
    v = reward.score(Task("t", answer="5"), PATHOLOGICAL[name])
    cpu = time.process_time() - t0
    assert v.score == 0.0 and v.status in ("ok", "unparsed"), v
    assert cpu < 1.0, f"{name}: {cpu:.2f}s of CPU"


def test_an_oversized_answer_is_ok_zero_too_large_or_deep():
    assert score("1", PATHOLOGICAL["20 KB of nested braces"])[1:] == (
        "ok", "answer too large: 20001 characters (limit 10000)")
    s, status, reason = score("1", PATHOLOGICAL["nested 600 deep"])
    assert (s, status) == (0.0, "ok") and reason.startswith("answer too deep")


def test_reading_runs_under_the_rewards_deadline(monkeypatch):
    """A reading stage that stalls (simulated) ends at `deadline_s` as a wrong answer, not a
    row an outer deadline would call a `timeout`."""
    from rlvr.verifiers.math import reward as reward_module

    def stall(*args, **kwargs):
        time.sleep(5)
    monkeypatch.setattr(reward_module, "find_final", stall)
    reward = MathReward(symbolic="inline", deadline_s=0.5)
    t0 = time.monotonic()
    v = reward.score(Task("t", answer="1"), "anything")
    assert time.monotonic() - t0 < 4.0          # well before the 5 s stall ends, on a busy machine
    assert (v.score, v.status) == (0.0, "ok") and "too costly to read" in v.reason
    assert reward.max_verify_s == reward.deadline_s         # reading and comparing share it


def test_reading_and_comparing_share_one_deadline(monkeypatch):
    from rlvr.verifiers.math import reward as reward_module
    original = reward_module.find_final

    def slow_reader(*args, **kwargs):
        time.sleep(0.7)
        return original(*args, **kwargs)
    reward = MathReward(symbolic="inline", deadline_s=1.0)
    reward.score(Task("warm", answer="1"), r"\boxed{\sqrt{2}}")
    monkeypatch.setattr(reward_module, "find_final", slow_reader)
    given = []          # the seconds each stage was given: comparing gets what reading left
    original_deadline = reward_module._inline_deadline

    def recording(seconds):
        given.append(seconds)
        return original_deadline(seconds)
    monkeypatch.setattr(reward_module, "_inline_deadline", recording)
    slow = r"\boxed{\prod_{k=1}^{20000} \left(1+\frac{1}{k^2}\right)}"    # sympy: minutes
    t0 = time.monotonic()
    v = reward.score(Task("t", answer="5"), slow)
    assert (v.score, v.status) == (0.0, "ok") and "too costly" in v.reason
    assert given[0] == 1.0 and given[-1] <= 1.0 - 0.7      # at most the 0.3 s reading left
    assert time.monotonic() - t0 < 1.7 + 3.0    # never the full second again (plus a busy margin)


# --------------------------------------------------------------------------- silent zeros

def _no_samples(*args, **kwargs):
    return []


def _crash(*args, **kwargs):
    raise RuntimeError("sympy fell over")


@pytest.mark.parametrize("target", ["simplify", "doit"])
def test_a_symbolic_crash_is_a_counted_error_naming_it(monkeypatch, target):
    from rlvr.verifiers.math import symbolic
    monkeypatch.setattr(symbolic, "_points", _no_samples)    # force the simplify fallback
    if target == "simplify":
        monkeypatch.setattr(sympy, "simplify", _crash)
    else:
        monkeypatch.setattr(sympy.core.operations.AssocOp, "doit", _crash)
    s, status, reason = score("x^2 - 1", r"\boxed{(x-1)(x+1)}")
    assert (s, status) == (0.0, "error") and "RuntimeError: sympy fell over" in reason


def test_math_verify_errors_are_raised_not_swallowed(monkeypatch):
    from math_verify import grader
    from rlvr.verifiers.math.symbolic import _math_verify_equal
    monkeypatch.setattr(grader, "sympy_expr_eq", _crash)
    with pytest.raises(RuntimeError):
        _math_verify_equal(sympy.Symbol("x") > 1, sympy.Symbol("y") > 1)


# --------------------------------------------------------------------------- mixed numbers

def test_a_line_break_never_joins_a_mixed_number():
    assert score("71/6", "The cake weighs\n11\n5/6")[0] == 0.0      # 11, then 5/6
    assert score("5/6", "The cake weighs\n11\n5/6")[0] == 1.0
    assert score("71/6", "The cake weighs 11 5/6")[0] == 1.0


# --------------------------------------------------------------------------- refused

RIGHT = [
    (r"\frac{2}{3}", r"\boxed{0.\overline{6}}"),
    (r"\frac{7}{12}", r"\boxed{0.58\overline{3}}"),
    (r"\frac{2}{3}", r"\boxed{0.\dot{6}}"),
    (r"\frac{2}{3}", r"\boxed{0.666\ldots}"),
    (r"\frac{2}{3}", "The answer is 0.666..."),
    (r"\frac{1}{7}", r"\boxed{0.142857142857\ldots}"),
    (r"\frac{1}{2}", r"\boxed{\cos 60^\circ}"),
    (r"\frac{\sqrt{3}}{2}", r"\boxed{\sin 60^{\circ}}"),
    ("1", r"\boxed{\tan(45^\circ)}"),
    ("17", r"\textbf{Answer:} 17"),
    ("17", r"\textbf{Final Answer} 17"),
    ("17", r"\textbf{Answer: 17}"),
    ("17", "<b>Answer:</b> 17"),
    ("17", '{"answer": 17}'),
    ("17", '```json\n{"reasoning": "add", "answer": "17"}\n```'),
    (r"\frac{1}{2}", '{"final_answer": "\\\\frac{1}{2}"}'),
    ("17", "The answer is 17<|im_end|>"),
    ("17", "The answer is 17.<|eot_id|>"),
    ("17", "17</s>"),
    ("10", r"\boxed{{5 \choose 2}}"),
    ("5", r"\boxed{101_2}"),
    ("101_2", r"\boxed{5}"),
    ("101_2", r"\boxed{101}"),
    ("26", r"\boxed{1A_{16}}"),
    ("P(6, 2), i.e. 30", r"\boxed{30}"),
    ("30 (i.e. P(6, 2))", r"\boxed{30}"),
    ("17", "So she has 17 apples in 4 baskets."),
]


@pytest.mark.parametrize("gold,completion", RIGHT, ids=[c for _, c in RIGHT])
def test_right_answers_are_accepted(gold, completion):
    assert score(gold, completion)[:2] == (1.0, "ok")


@pytest.mark.parametrize("gold,completion", [
    (r"\frac{2}{3}", r"\boxed{0.666}"),                  # no repetition stated
    (r"\frac{2}{3}", r"\boxed{0.\overline{7}}"),
    (r"\frac{1}{2}", r"\boxed{\cos 60}"),                # radians
    ("5", r"\boxed{101}"),                               # no base: one hundred and one
    ("5", r"\boxed{129_8}"),                             # 9 is no octal digit
    ("P(6, 2), i.e. 30", r"\boxed{31}"),
    ("9", r"\boxed{{5 \choose 2}}"),
])
def test_their_wrong_neighbours_are_not(gold, completion):
    assert score(gold, completion)[0] == 0.0


# --------------------------------------------------------------------------- hidden hedges

HIDDEN_HEDGES = [                                 # (answer, its values): each a hedge
    ("73, unless I made a mistake, in which case 72", ("73", "72")),
    (r"\boxed{73}, unless I made a mistake, in which case \boxed{72}", ("73", "72")),
    ("one of 73, 74, 75, 76, 72", ("73", "74", "75", "76", "72")),
    (r"73\text{ (not 72)}", ("73", "72")),
    (r"\text{73 or } 72", ("73", "72")),
    (r"\boxed{\boxed{73} 72}", ("73", "72")),
    (r"x = \frac{5}{7} \text{ or } x = \frac{5}{6}", (r"\frac{5}{7}", r"\frac{5}{6}")),
    (r"x = \left( 3, \frac{\pi}{3} \right) \text{ or } x = \left( 3, \frac{\pi}{2} \right)",
     (r"\left( 3, \frac{\pi}{3} \right)", r"\left( 3, \frac{\pi}{2} \right)")),
]


@pytest.mark.parametrize("answer,values", HIDDEN_HEDGES, ids=[h[0][:30] for h in HIDDEN_HEDGES])
def test_a_value_hidden_in_a_clause_list_text_or_box_is_a_hedge(answer, values):
    completion = f"<think>I work it out.</think> <answer>{answer}</answer>"
    for gold in values:
        s, status, reason = score(gold, completion)
        assert (s, status) == (0.0, "ok") and "hedged" in reason, (gold, reason)


def test_an_invisible_phantom_value_is_not_part_of_the_answer():
    assert score("72", r"<answer>73\phantom{72}</answer>")[0] == 0.0
    assert score("72", r"<answer>\phantom{72}73</answer>")[0] == 0.0
    assert score("73", r"<answer>73\phantom{72}</answer>")[0] == 1.0


@pytest.mark.parametrize("answer", [r"5 \text{ apples}", r"\boxed{\boxed{5}}", r"\text{5}",
                                    "5, unless rounding is wanted"])
def test_one_value_with_text_or_a_doubled_box_is_not_a_hedge(answer):
    assert score("5", f"<answer>{answer}</answer>")[0] == 1.0
