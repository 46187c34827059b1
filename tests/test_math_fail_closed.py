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


@pytest.mark.parametrize("prompt", ["Let $x > 0$. Simplify $\\sqrt{x^2}$.",
                                    "For positive real numbers $x$, simplify $\\sqrt{x^2}$.",
                                    "Suppose $x$ is positive. What is $\\sqrt{x^2}$?",
                                    "Given $0 < x$, simplify $\\sqrt{x^2}$."])
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
