"""Verdicts that fail closed: what the math reader is unsure of earns nothing, and the right
answers it used to refuse earn 1.

Each class below holds general rules with cases of several shapes: the final answer is the one
that stands (corrections, retractions, re-checks), negated and questioned answers, hedges past
any window, identities that hold on one side of zero only, the question written back, set-valued
near misses, and right answers written in forms the reader did not know. Comparisons run inline.
"""
from __future__ import annotations

import pytest

from rlvr import Task
from rlvr.verifiers.math import MathReward

REWARD = MathReward(symbolic="inline")


def score(gold: str, completion: str, prompt: str = ""):
    v = REWARD.score(Task("t", prompt=prompt, answer=gold), completion)
    return v.score, v.status, v.reason


# --------------------------------------------------------------------------- one-sided identities

ONE_SIDED = [                                     # (gold, answer): equal for x > 0 only
    ("x", r"\sqrt{x^2}"),
    ("|x-a|", "a-x"),
    ("|x-a|", "x-a"),
    (r"\max(x, 0)", "x"),
    (r"\min(x, 1)", "1"),
    ("x", r"\frac{x^2}{|x|}"),
    ("1", r"\frac{x}{|x|}"),
    ("x", r"\sqrt[4]{x^4}"),
    ("|x|", "x"),
    ("x^3", r"|x|^3"),
    (r"\ln(x^2)", r"2\ln x"),
    ("x", r"\sqrt{x}^2 \cdot \frac{x}{|x|}"),
    ("2x", r"x + \sqrt{x^2}"),
    (r"\frac{1}{x}", r"\frac{1}{\sqrt{x^2}}"),
    ("x + 1000", r"\sqrt{x^2 + 2000x + 10^6}"),     # equal only for x > -1000
]


@pytest.mark.parametrize("gold,answer", ONE_SIDED, ids=[f"{g} vs {a}" for g, a in ONE_SIDED])
def test_an_identity_that_holds_on_one_side_of_zero_is_refused(gold, answer):
    assert score(gold, rf"\boxed{{{answer}}}")[0] == 0.0


IDENTITIES = [                                    # equal everywhere both sides are defined
    (r"\sqrt{x^2}", "|x|"),
    (r"\sin^2 x + \cos^2 x", "1"),
    ("(x+1)^2", "x^2 + 2x + 1"),
    (r"\frac{x^2-1}{x-1}", "x + 1"),
    (r"e^{\ln x}", "x"),
    (r"\max(x, y)", r"\frac{x + y + |x - y|}{2}"),
    (r"\frac{\sqrt{x}}{x}", r"\frac{1}{\sqrt{x}}"),
]


@pytest.mark.parametrize("gold,answer", IDENTITIES, ids=[f"{g} vs {a}" for g, a in IDENTITIES])
def test_true_identities_stay_right(gold, answer):
    assert score(gold, rf"\boxed{{{answer}}}")[0] == 1.0


@pytest.mark.parametrize("prompt", ["Let $x > 0$. Which number squares to $x^2$?",
                                    "For positive real numbers $x$, solve $t^2 = x^2$ for t > 0.",
                                    "Suppose $x$ is positive. Find the side of a square of area "
                                    "$x^2$.",
                                    "Given $0 < x$, find the side of a square of area $x^2$."])
def test_a_domain_the_task_states_is_used(prompt):
    assert score("x", r"\boxed{\sqrt{x^2}}", prompt)[0] == 1.0
    assert score("x", r"\boxed{-x}", prompt)[0] == 0.0


# --------------------------------------------------------------------------- right answers

RIGHT = [
    (r"\frac12", "½"), ("2.5", "2½"), (r"\frac{3}{4}", "¾"), (r"1\frac{3}{4}", "1¾"),
    ("10^{23}", "10²³"), ("x^{-1}", "x⁻¹"), (r"6.02 \times 10^{23}", "6.02×10²³"),
    (r"6.02 \times 10^{23}", r"6.02\times10^{23}"), (r"1.6 \times 10^{-19}", r"1.6e-19 \text{ C}"),
    (r"1.6 \times 10^{-19}", "1.6e-19 C"), ("3e8", r"3 \times 10^{8} \text{ m/s}"),
    ("5", r"\color{red}{5}"), ("5", r"\textcolor{blue}{5}"), ("5", r"{\color{red} 5}"),
    ("5", r"\underline{5}"), ("5", r"\smash{5}"), ("5", r"\smash[b]{5}"), ("5", r"\large 5"),
    ("5", r"\tiny{5}"), (r"\frac12", r"\displaystyle\frac{1}{2}"), ("7", r"\Large\underline{7}"),
    ("-2", r"\sqrt[3]{-8}"), ("-3", r"\sqrt[5]{-243}"), (r"-\sqrt[3]{2}", r"\sqrt[3]{-2}"),
    ("3", "3 = x"), ("0.5", "P(X=3) = 0.5"), (r"\frac{1}{6}", r"P(\text{six}) = \frac16"),
    ("0.25", r"\Pr(A \cap B) = 0.25"), ("1000000", "1\u2009000\u2009000"),
    ("1000000", "1 000 000"), ("12345", "12\u202f345"),
]


@pytest.mark.parametrize("gold,answer", RIGHT, ids=[a for _, a in RIGHT])
def test_right_answers_in_other_notations_are_accepted(gold, answer):
    assert score(gold, rf"\boxed{{{answer}}}")[:2] == (1.0, "ok")
    assert score(gold, f"The answer is {answer}.")[:2] == (1.0, "ok")


@pytest.mark.parametrize("completion", ["**C**", "The answer is **C**.", "Answer: **C**",
                                        "**(C)**", "So the correct choice is **C**."])
def test_a_bold_option_letter_is_read(completion):
    assert score("C", completion)[0] == 1.0
    assert score("B", completion)[0] == 0.0


@pytest.mark.parametrize("gold,answer", [("-2", r"\sqrt[3]{8}"), ("0.5", "P(X=3) = 0.4"),
                                         ("10^{23}", "10²²"), (r"\frac12", "⅓"),
                                         ("5", r"\color{red}{6}")])
def test_their_wrong_neighbours_are_not(gold, answer):
    assert score(gold, rf"\boxed{{{answer}}}")[0] == 0.0


@pytest.mark.parametrize("gold,answer", [("1234", "1.234"), ("1.234", "1,234"),
                                         ("1234", "1.234,0")])
def test_a_locale_ambiguous_number_is_never_read_in_the_other_locale(gold, answer):
    assert score(gold, rf"\boxed{{{answer}}}")[0] == 0.0


# --------------------------------------------------------------------------- the answer that stands

CORRECTED = [                                     # (completion, first value, value that stands)
    (r"So \boxed{12}. Hmm, wait — that's off by one, it's 13.", "12", "13"),
    (r"The sum is \boxed{7}. Actually no, I mis-added: 5 + 3 = 8.", "7", "8"),
    (r"Total: \boxed{12}. Oops, I forgot the last box; the total is 15.", "12", "15"),
    ("<answer>12</answer>\nWait, I made an error. The correct value is 14.", "12", "14"),
    ("The answer is 12.\n\nHmm, that's not right. It should be 21.", "12", "21"),
    ("\\boxed{12}\n\nOn second thought, recounting gives **Answer:** 11", "12", "11"),
    ("Answer: 12\n\nWait, no. Answer: 10", "12", "10"),
    (r"$\boxed{12}$ — scratch that, the answer is $\frac{25}{2}$.", "12", r"\frac{25}{2}"),
    ("\\boxed{12}\n\nActually, I miscounted.\n\n**Answer:** 13", "12", "13"),
    ("#### 12\n\nCorrection: #### 11", "12", "11"),
]


@pytest.mark.parametrize("completion,first,final", CORRECTED, ids=[c[0][:40] for c in CORRECTED])
def test_a_correction_after_the_answer_replaces_it(completion, first, final):
    assert score(first, completion)[0] == 0.0
    assert score(final, completion)[0] == 1.0


RETRACTED = [
    r"So \boxed{12}. Wait, that's wrong.",
    r"\boxed{12} Hmm, I'm not sure that's right.",
    "The answer is 12. Actually, I made a mistake somewhere.",
    "<answer>12</answer> Hmm, that can't be right.",
    "**Answer:** 12\n\nBut this contradicts the constraint, so something is off.",
    r"\boxed{12}. I doubt this is correct.",
    "#### 12\nOops, that doesn't add up.",
]


@pytest.mark.parametrize("completion", RETRACTED, ids=[c[:40] for c in RETRACTED])
def test_a_retraction_with_no_new_value_leaves_no_answer(completion):
    s, status, reason = score("12", completion)
    assert (s, status) == (0.0, "unparsed") and reason, reason


CONFIRMED = [
    r"So \boxed{12}. Let me double-check: 3*4 = 12. Yes, the answer is 12.",
    r"So \boxed{12}. Wait, let me verify: 3 \times 4 = 12. Correct.",
    r"So \boxed{12}. Hmm, is that right? 12 / 4 = 3 per box, and 3 \times 4 = 12. Yes.",
    r"\boxed{12}. Let me re-check: 20 - 8 = 12. Confirmed.",
    r"\boxed{12}. Wait, is that right? Yes, 12.",
    r"\boxed{12}. There is no mistake in this computation.",
    "\\boxed{12}\n\nI double-checked: 8 + 4 = 12 ✓",
    "The answer is 12. Actually, that matches the earlier estimate.",
    "Answer: 12\n\nWait, let me recheck the count... yes, 12 is right.",
]


@pytest.mark.parametrize("completion", CONFIRMED, ids=[c[:40] for c in CONFIRMED])
def test_a_re_check_that_confirms_keeps_the_answer(completion):
    assert score("12", completion)[:2] == (1.0, "ok")


@pytest.mark.parametrize("completion,first,final", [
    ("Answer: B. Wait, no, that's not right; it's C.", "B", "C"),
    ("**Answer: (A)**\n\nHmm, actually (A) fails the second condition. The answer is D.", "A", "D"),
])
def test_a_corrected_option_letter_is_the_new_letter(completion, first, final):
    assert score(first, completion)[0] == 0.0
    assert score(final, completion)[0] == 1.0


def test_a_later_answer_line_in_another_notation_is_a_later_statement():
    for completion in ["The answer is 12.\n\n#### 13", "\\boxed{12}\n\n**Answer:** 13",
                       "\\boxed{12}\n\n#### 13", "<answer>12</answer>\nFinal answer: 13"]:
        assert score("12", completion)[0] == 0.0, completion   # two values, no correction
    assert score("12", "\\boxed{12}\n\n**Answer:** 12")[0] == 1.0


# --------------------------------------------------------------------------- negated, questioned

NEGATED = [
    ("12", "The answer is not 12."),
    ("12", "Is the answer \\boxed{12}? No."),
    ("12", "\\boxed{12} is wrong."),
    ("12", "It can't be $\\boxed{12}$ because 12 is even."),
    ("12", "Is it 12? No, it is 13."),
    ("12", "Could the answer be \\boxed{12}? Let me check... no, it fails."),
    ("12", "12 is not the answer; the answer is 13."),
    ("12", "\\boxed{12}, which is incorrect."),
    ("B", "The answer isn't B."),
    ("B", "Is the answer (B)? No."),
    ("12", "Answer: 12? No."),
]


@pytest.mark.parametrize("gold,completion", NEGATED, ids=[c for _, c in NEGATED])
def test_a_negated_or_questioned_answer_is_not_an_answer(gold, completion):
    assert score(gold, completion)[0] == 0.0


@pytest.mark.parametrize("gold,completion", [
    ("13", "Is it 12? No, it is 13."),
    ("13", "The answer is \\boxed{13}. Is it \\boxed{12}? No."),
    ("12", "Could the answer be \\boxed{12}? Let me check: 3*4 = 12. Yes."),
    ("12", "Is the answer \\boxed{12}? Yes."),
    ("12", "The answer is 12, not 13."),
])
def test_the_answer_beside_a_denied_one_stands(gold, completion):
    assert score(gold, completion)[0] == 1.0


# --------------------------------------------------------------------------- hedges

def test_every_box_and_statement_is_read_whatever_their_number():
    for wrong, right in [(70, 64), (200, 300), (1, 500)]:
        boxes = "\\boxed{12} " * wrong + "\\boxed{13} " * right
        assert score("13", boxes)[0] == 0.0
        lines = "The answer is 12. " * wrong + "The answer is 13. " * right
        assert score("13", lines)[0] == 0.0
    assert score("13", "\\boxed{13} " * 500)[0] == 1.0


def test_many_different_values_are_too_large_not_read_one_by_one():
    many = "".join(f"\\boxed{{{i}}} " for i in range(3000))
    s, status, reason = score("5", many)
    assert (s, status) == (0.0, "ok") and "too large" in reason


@pytest.mark.parametrize("completion", [
    "The answer is B or C.", "The answer is B, maybe C.", "\\boxed{B}, or maybe C.",
    "Answer: B. Maybe C.", "Answer: B (or perhaps D)", "Answer: B/D", "I'd say B, possibly C.",
])
def test_option_letters_joined_by_or_or_maybe_are_a_hedge(completion):
    for gold in "BCD":
        assert score(gold, completion)[0] == 0.0, gold


@pytest.mark.parametrize("completion", ["The answer is 12, not 13.", "\\boxed{12}, not 13",
                                        "So it's 12 (not 13).", "The answer is 12 and not 13.",
                                        "The answer is 12 -- not 13."])
def test_a_rejected_value_is_not_a_hedge(completion):
    assert score("12", completion)[0] == 1.0
    assert score("13", completion)[0] == 0.0


# --------------------------------------------------------------------------- question written back

ECHOES = [                                        # (question, gold, the question's expression)
    (r"Compute $\binom{9}{4}$.", "126", r"\binom{9}{4}"),
    (r"Compute $\dbinom{9}{4}$.", "126", r"{9 \choose 4}"),
    (r"Simplify $\sqrt{8}$.", r"2\sqrt{2}", r"\sqrt{8}"),
    ("Compute 17 * 23.", "391", "17 * 23"),
    (r"What is $17 \times 23$?", "391", r"17 \times 23"),
    (r"What is $\frac{1}{2} + \frac{1}{3}$?", r"\frac{5}{6}", r"\frac12+\frac13"),
    (r"Expand $(x+1)^2$.", "x^2+2x+1", "(x+1)^2"),
    (r"Find $x$ if $x = 3^4 - 2$.", "79", "3^4-2"),
    (r"Evaluate $\log_2 64$.", "6", r"\log_{2} 64"),
]


@pytest.mark.parametrize("question,gold,echo", ECHOES, ids=[e for _, _, e in ECHOES])
def test_the_questions_expression_written_back_is_not_an_answer(question, gold, echo):
    s, status, reason = score(gold, rf"\boxed{{{echo}}}", prompt=question)
    assert (s, status, reason) == (0.0, "ok", "the question's expression written back")
    assert score(gold, rf"\boxed{{{gold}}}", prompt=question)[0] == 1.0


@pytest.mark.parametrize("question,gold,answer", [
    (r"Simplify $\sqrt{8}$.", r"2\sqrt{2}", r"2\sqrt{2}"),
    (r"Simplify $\sqrt{50}$.", r"5\sqrt{2}", r"\sqrt{2} \cdot 5"),
    (r"Which is larger, $2^{10}$ or $10^3$?", "2^{10}", "2^{10}"),
    (r"If $x + 3 = 15$, find $x$.", "12", "12"),
    ("Compute 2 + 3.", "5", "5"),
    (r"What is $\frac{1}{2} + \frac{1}{3}$?", r"\frac{5}{6}", r"\frac{3}{6} + \frac{2}{6}"),
])
def test_a_worked_answer_not_in_the_question_stays_right(question, gold, answer):
    assert score(gold, rf"\boxed{{{answer}}}", prompt=question)[0] == 1.0


def test_the_math_environment_gives_the_verifier_its_question():
    from rlvr import load_env
    env = load_env("math")
    task = env.get_task("builtin/4")                  # Simplify $\sqrt{50}$.
    assert env.reward.score(task, r"<think>.</think><answer>\sqrt{50}</answer>").score == 0.0
    assert env.reward.score(task, r"<think>.</think><answer>5\sqrt{2}</answer>").score == 1.0


# --------------------------------------------------------------------------- set-valued near misses

@pytest.mark.parametrize("gold,answer", [
    (r"\emptyset", r"\{\emptyset\}"), (r"\{\emptyset\}", r"\emptyset"), ("3", r"\{3\}"),
    (r"\{3\}", "3"), (r"\frac12", r"\{\frac12\}"), ("(1, 2)", r"\{(1, 2)\}"),
])
def test_a_set_is_not_its_element(gold, answer):
    assert score(gold, rf"\boxed{{{answer}}}")[0] == 0.0


@pytest.mark.parametrize("gold,answer,question", [
    (r"\emptyset", r"\varnothing", ""), (r"\emptyset", r"\{\}", ""), (r"\{3\}", r"\{3\}", ""),
    ("1, 2", r"\{1, 2\}", ""), ("3", r"x \in \{3\}", ""),
    ("3", r"\{3\}", "Find all real solutions of $x + 1 = 4$."),
    ("3", r"\{3\}", "Enter all the solutions, separated by commas."),
])
def test_a_set_equal_to_the_gold_or_asked_for_stays_right(gold, answer, question):
    assert score(gold, rf"\boxed{{{answer}}}", prompt=question)[0] == 1.0


def test_the_set_of_the_empty_set_is_never_the_solutions_listed():
    assert score(r"\emptyset", r"\boxed{\{\emptyset\}}", "Find all solutions.")[0] == 0.0


# --------------------------------------------------------------------------- exact numeric match

@pytest.mark.parametrize("gold,completion,expected", [
    ("12", "<answer>12</answer> Wait, that is wrong, it is 13.", 0.0),
    ("13", "<answer>12</answer> Wait, that is wrong, it is 13.", 1.0),
    ("12", "<answer>12</answer> Hmm, that can't be right.", 0.0),
    ("12", r"\boxed{12} is wrong.", 0.0),
    ("12", r"Is it \boxed{12}? No.", 0.0),
    ("12", "<answer>12</answer> Let me verify: 3*4 = 12. Yes.", 1.0),
    ("12", "<answer>12</answer>", 1.0),
])
def test_the_arithmetic_reader_keeps_only_the_answer_that_stands(gold, completion, expected):
    from rlvr.verifiers.numeric import NumericMatch
    assert NumericMatch().score(Task("t", answer=gold), completion).score == expected


@pytest.mark.parametrize("gold,completion,expected", [
    ("21", r"\boxed{12}. No wait, it's 21.", 1.0),
    ("12", r"\boxed{12}. No wait, it's 21.", 0.0),
    ("8", "\\boxed{12}\n\nWait — I misread the question. It asks for the difference, which is 8.",
     1.0),
    ("11", "\\boxed{12}\n\nI realize I made an error: the answer should be 11.", 1.0),
    ("12", "\\boxed{12}\n\nHmm, that doesn't seem right, but I'll leave it.", 0.0),
    ("12", "\\boxed{12}\n\nLet me check: 12 - 5 = 7 ✓. The answer is correct.", 1.0),
    ("12", "\\boxed{12} (since 13 would be wrong)", 1.0),
    ("12", "I don't think it's 12.", 0.0),
    ("12", "Is it 12? No.", 0.0),
    ("12", "This is not hard: 12.", 1.0),
    ("12", "\\boxed{12}\n\nAlternatively, the answer could be 13.", 0.0),
    ("B", "Answer: (B) — though (C) is also possible.", 0.0),
    (r"1.6 \times 10^{-19}", "The charge is 1.6×10⁻¹⁹ C.", 1.0),
])
def test_more_shapes_of_the_same_classes(gold, completion, expected):
    assert score(gold, completion)[0] == expected


@pytest.mark.parametrize("gold,completion,expected", [
    ("13", "The answer is 12... or is it? Let me recount. 13.", 1.0),
    ("12", "The answer is 12... or is it? Let me recount. 13.", 0.0),
    ("13", "Is the answer \\boxed{12}? No, it's 13.", 1.0),
    ("12", "It can't be $\\boxed{12}$ because 12 is even.", 0.0),
    ("12", "<answer>12</answer>\n\nI'm second-guessing this. It might not be right.", 0.0),
    ("16", "Final answer: 12\n\nUpon reflection, this is incorrect; the correct answer is 16.", 1.0),
    ("12", "\\boxed{12}\n\nTo verify, plug back in: 2(12) - 4 = 20 ✓.", 1.0),
])
def test_what_follows_a_denied_or_doubted_answer(gold, completion, expected):
    assert score(gold, completion)[0] == expected


@pytest.mark.parametrize("gold,answer", [
    (r"\sqrt{x}\sqrt{y}", r"\sqrt{xy}"),          # differ where both are negative
    (r"\ln x + \ln y", r"\ln(xy)"),
    ("|x||y|", "xy"),
])
def test_two_variables_are_sampled_with_every_sign_pattern(gold, answer):
    assert score(gold, rf"\boxed{{{answer}}}")[0] == 0.0
    assert score(gold, rf"\boxed{{{gold}}}")[0] == 1.0


def test_countdown_reads_the_answer_that_stands():
    from rlvr.verifiers.math.countdown import CountdownReward
    task = Task("c", answer="24", metadata={"numbers": [4, 6, 1, 2]})
    r = CountdownReward()
    retracted = r.score(task, "<think>t</think> <answer>4 * 6</answer> Hmm, that's wrong.")
    assert (retracted.score, retracted.status) == (0.0, "unparsed") and retracted.reason
    assert r.score(task, "<think>t</think> <answer>4 * 6</answer>").score == 1.0


def test_a_gold_solution_is_read_as_stated():
    """Golds are trusted: the words after a gold's box never change or void it."""
    from rlvr.verifiers.math import parse_gold
    for solution in [r"Thus $\boxed{5}$. Actually, we can also check that 6 fails.",
                     r"So the answer is $\boxed{5}$; note that 5 is not even.",
                     r"$\boxed{5}$ is the answer. Is 4 possible? No."]:
        assert parse_gold(solution).text == "5", solution


# ------------------------------------------------------------- the answer that stands, more shapes

@pytest.mark.parametrize("completion", [
    "<answer>204</answer>\nHmm, no -- 204 is wrong. I would need to start over.",
    "<answer>204</answer>\nNope: 204 isn't it. Back to the drawing board.",
    "\\boxed{204}\n\nUgh, 204 is incorrect; I have to redo the whole thing.",
    "The answer is 204.\n\nOn second thought 204 can't be right, and I don't know the fix.",
])
def test_a_retraction_that_names_the_answer_it_denies_leaves_no_answer(completion):
    assert score("204", completion)[0] == 0.0


@pytest.mark.parametrize("completion", [
    "<answer>anything but 204</answer>", "<answer>something other than 204</answer>",
    r"\boxed{\text{any value except } 204}", "The answer is anything but 204.",
    "<answer>(not 204)</answer>", "I'd pick 205 rather than 204.",
])
def test_a_value_named_only_to_exclude_it_is_not_an_answer(completion):
    assert score("204", completion)[0] == 0.0


@pytest.mark.parametrize("gold,completion,expected", [
    (r"\frac{14}{3}", "<answer>\\frac{14}{3}</answer>\nRecomputing gives \\frac{14}{3} again.",
     1.0),
    ("|x-3|", "<answer>|x-3|</answer>\nHmm, redoing it I get |x-3| once more.", 1.0),
    ("|a|", "<answer>|a|</answer>\nWait, let me double-check that.", 1.0),
    (r"\frac{14}{3}", "<answer>\\frac{14}{3}</answer>\nWait, let me re-check: it's 5.", 0.0),
    ("5", "<answer>\\frac{14}{3}</answer>\nWait, let me re-check: it's 5.", 1.0),
    ("204", "<answer>204</answer>\nWait, let me verify. 204 is wrong.", 0.0),
])
def test_a_re_check_keeps_the_answer_it_writes_again_and_only_that(gold, completion, expected):
    assert score(gold, completion)[0] == expected


@pytest.mark.parametrize("completion,expected", [
    ("<answer>(3 * 9 + 30)</answer>", 1.0),
    ("<answer>not (3 * 9 + 30)</answer>", 0.0),
    ("<answer>(3 * 9 + 30) is wrong</answer>", 0.0),
    ("<answer>anything but (3 * 9 + 30)</answer>", 0.0),
    ("<answer>(3 * 9 + 30)</answer>\nCorrection: the answer is (3 * 9 + 31), not (3 * 9 + 30).",
     0.0),
    ("<answer>(3 * 9 + 30)</answer>\nHmm, no: (3 * 9 + 30) is wrong. I give up.", 0.0),
    ("<answer>((9 * 3) + 30)</answer>\nLet me recompute: ((9 * 3) + 30) again, so it holds.", 1.0),
])
def test_countdown_reads_a_bracketed_expression_that_stands(completion, expected):
    from rlvr.verifiers.math.countdown import CountdownReward
    task = Task("c", answer="57", metadata={"numbers": [3, 9, 30, 42]})
    assert CountdownReward().score(task, "<think>t</think> " + completion).score == expected


@pytest.mark.parametrize("gold,completion,expected", [
    ("35", "<answer>35</answer>\nCorrection: the answer is 36, not 35.", 0.0),
    ("36", "<answer>35</answer>\nCorrection: the answer is 36, not 35.", 1.0),
    ("35", "<answer>35</answer>\n**Answer:** 36", 0.0),
    ("35", "<answer>35</answer>\n#### 36", 0.0),
    ("35", "\\boxed{35}\n\nFinal answer: 36", 0.0),
    ("35", "<answer>35</answer>\nThe answer is correct.", 1.0),
    ("35", "<answer>35</answer>\n#### 35", 1.0),
    ("35", "<answer>35</answer>\nNo, 35 is wrong. I'll start over.", 0.0),
    ("35", "<answer>35</answer>\nWait, let me re-check that.", 1.0),
])
def test_the_arithmetic_reader_reads_a_later_answer_line_and_what_it_rejects(gold, completion,
                                                                             expected):
    from rlvr.verifiers.numeric import NumericMatch
    assert NumericMatch().score(Task("t", answer=gold), completion).score == expected


@pytest.mark.parametrize("completion", [
    "<answer>204</answer>\nSmall slip above: the right total is 205.",
    "<answer>204</answer>\nI think it should be 205 instead.",
    "<answer>204</answer>\nUpdate: final answer 205.",
    "<answer>204</answer>\nActually, 204 fails the second condition, so I have no answer.",
    "<answer>204</answer>\nNever mind, ignore that answer.",
    "<answer>204</answer>\nI retract this answer.",
    "<answer>204 (incorrect)</answer>",
    "<answer>204 — ruled out</answer>",
])
def test_words_that_undo_an_answer_without_the_usual_cues(completion):
    from rlvr.verifiers.numeric import NumericMatch
    assert score("204", completion)[0] == 0.0
    assert NumericMatch().score(Task("t", answer="204"), completion).score == 0.0


@pytest.mark.parametrize("completion", [
    "\\boxed{12}\n\nNote that x = 13 fails the original equation, so it is extraneous.",
    "\\boxed{12}. We take the positive root instead of the negative one.",
    "\\boxed{12}\n\n(The value 13 should be excluded.)",
    "The answer is 12. Note: 11 is wrong because it is odd.",
])
def test_words_about_another_value_leave_the_answer_standing(completion):
    assert score("12", completion)[0] == 1.0


@pytest.mark.parametrize("gold,completion,expected", [
    ("no", "<answer>no</answer>\n**Answer:** yes", 0.0),
    ("no", "<answer>no</answer>\nActually no: recomputing gives yes, so the answer is yes.", 0.0),
    ("yes", "<answer>no</answer>\nActually no: recomputing gives yes, so the answer is yes.", 1.0),
])
def test_a_new_value_that_is_a_word_of_assent_is_no_confirmation(gold, completion, expected):
    assert score(gold, completion, "Answer yes or no.")[0] == expected
