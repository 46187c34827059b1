"""Math environments: dataset-backed `math`, `math-arithmetic`, `countdown`, and `rlvr score`."""
from __future__ import annotations

import json
from fractions import Fraction

import pytest

from rlvr import Task, load_env
from rlvr.cli import main as rlvr_main
from rlvr.envs import math as math_envs
from rlvr.verifiers.math.countdown import CountdownReward, ExpressionError, parse_expression

GSM8K_ROWS = [
    {"question": "Tom has 3 bags of 4 apples. How many apples?",
     "answer": "3 bags * 4 = 12 apples\n#### 12"},
    {"question": "A pen costs $1,250 cents... how many dollars?", "answer": "#### 1,250"},
]
MATH_ROWS = [
    {"problem": "Compute $\\frac{6}{8}$ in lowest terms.",
     "solution": "Divide by 2: $\\boxed{\\frac{3}{4}}$.", "level": "Level 1"},
    {"problem": "Solve $x^2 = 4$.", "solution": "So $x = \\boxed{\\pm 2}$."},
]


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.mark.parametrize("name", ["math", "math-arithmetic", "countdown"])
def test_registered_and_contract_checked(name):
    env = load_env(name)           # runs the registry's contract check (gold 1.0, junk 0.0)
    assert env.name == name
    task = env.sample(1)[0]
    assert env.reward.score(task, env.gold(task)).score == 1.0


def test_math_env_reads_jsonl_through_datasets(tmp_path):
    path = _write_jsonl(tmp_path / "gsm8k.jsonl", GSM8K_ROWS)
    env = load_env("math", data=path, cache_dir=str(tmp_path / "cache"))
    tasks = env.sample(5)
    assert [t.answer for t in tasks] == ["12", "1,250"]
    assert tasks[0].metadata["solution"].endswith("#### 12")
    assert env.reward.score(tasks[1], r"<think>..</think> \boxed{1250}").score == 1.0
    assert env.reward.score(tasks[0], "<think>..</think> The answer is 13.").score == 0.0


def test_math_env_reads_parquet_and_saved_datasets(tmp_path):
    import datasets
    ds = datasets.Dataset.from_list(MATH_ROWS)
    ds.to_parquet(str(tmp_path / "math.parquet"))
    ds.save_to_disk(str(tmp_path / "saved"))
    for data in (str(tmp_path / "math.parquet"), str(tmp_path / "saved")):
        env = load_env("math", data=data, cache_dir=str(tmp_path / "cache"),
                       prompt_style="boxed")
        tasks = env.sample(5)
        assert [t.answer for t in tasks] == ["\\frac{3}{4}", "\\pm 2"]
        assert "\\boxed{}" in tasks[0].prompt[0]["content"]
        assert tasks[0].metadata["level"] == "Level 1"
        assert env.reward.score(tasks[0], r"\boxed{0.75}").score == 1.0
        assert env.reward.score(tasks[1], r"\boxed{-2, 2}").score == 1.0
        assert env.reward.score(tasks[1], r"\boxed{2}").score == 0.0


def test_math_env_hub_ids_go_to_load_dataset(monkeypatch):
    import datasets
    seen = {}

    def fake_load_dataset(path, name=None, split=None, cache_dir=None, **kw):
        seen.update(path=path, name=name, split=split)
        return datasets.Dataset.from_list(GSM8K_ROWS)
    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    env = load_env("math", data="openai/gsm8k", config="main", split="test")
    assert seen == {"path": "openai/gsm8k", "name": "main", "split": "test"}
    assert env.sample(1, split="test")[0].answer == "12"


def test_math_env_field_errors_are_clear(tmp_path):
    path = _write_jsonl(tmp_path / "bad.jsonl", [{"q": "1+1?", "a": "2"}])
    with pytest.raises(KeyError, match="question fields"):
        load_env("math", data=path, cache_dir=str(tmp_path / "cache"))
    env = load_env("math", data=path, question_field="q", answer_field="a",
                   cache_dir=str(tmp_path / "cache"))
    assert env.sample(1)[0].answer == "2"
    with pytest.raises(ValueError, match="prompt_style"):
        load_env("math", prompt_style="fancy")


def test_math_arithmetic_accepts_any_answer_form():
    env = load_env("math-arithmetic", n_terms=2, max_value=9)
    task = env.get_task("arithmetic/train/0/3")
    assert task.id == "arithmetic/train/0/3"
    value = task.answer
    for form in (f"\\boxed{{{value}}}", f"The answer is {value}.", f"<answer>{value}.0</answer>",
                 f"<answer>x = {value}</answer>"):
        assert env.reward.score(task, "<think>ok</think> " + form).score == 1.0, form
    assert env.reward.score(task, f"<answer>{int(value) + 1}</answer>").score == 0.0


def test_countdown_parser_is_safe():
    nums, value = parse_expression("(25 - 5) * 3 / 4")
    # (25 - 5) = 20; 20 * 3 = 60; 60 / 4 = 15
    assert nums == [25, 5, 3, 4] and value() == Fraction(15)
    for bad, why in [("2 ** 3", "exponentiation"), ("2 ^ 3", "exponentiation"),
                     ("__import__('os')", "unexpected"), ("-3 + 5", "unary"),
                     ("(1 + 2", "unbalanced"), ("1.5 * 2", "unexpected"),
                     ("(" * 40 + "1" + ")" * 40, "nested"), ("1+" * 150 + "1", "tokens")]:
        with pytest.raises(ExpressionError, match=why):
            parse_expression(bad)


def test_countdown_reward_rules():
    task = Task("c", answer="24", metadata={"numbers": [4, 6, 1, 2]})
    r = CountdownReward()

    def score(answer, reward=r):
        v = reward.score(task, f"<think>try</think> <answer>{answer}</answer>")
        return v.score, v.status
    assert score("4 * 6") == (1.0, "ok")                       # subsets are fine
    assert score("4 \\times 6 \\times 1 = 24") == (1.0, "ok")  # LaTeX operators, "= target"
    assert score("(6 - 2) * (4 + 1 + 1)") == (0.0, "ok")        # 1 used twice
    assert score("4 * 6 * 1 / 2 * 2") == (0.0, "ok")            # 2 used twice
    assert score("24") == (0.0, "ok")                           # 24 is not a given number
    assert score("4 / (1 - 1)") == (0.0, "ok")                  # 1 twice (checked first)
    assert score("6 / (2 - 2)") == (0.0, "ok")
    assert score("4 ** 2") == (0.0, "unparsed")
    assert score("4 * 6", CountdownReward(use_all=True)) == (0.0, "ok")
    assert score("(4 * 6 * 1) * (2 / 2)", CountdownReward(use_all=True))[0] == 0.0
    assert score("4 * 6 * (2 - 1)", CountdownReward(use_all=True)) == (1.0, "ok")
    assert r.score(task, "<answer>4*6</answer> <answer>6*4*1</answer>").score == 0.0
    assert r.score(task, "").status == "unparsed"


def test_countdown_source_is_seeded_and_split():
    env = load_env("countdown", n_numbers=3)
    train, test = env.sample(20), env.sample(20, split="test")
    assert env.get_task(train[5].id) == train[5]
    keys = lambda ts: {(tuple(sorted(t.metadata["numbers"])), t.answer) for t in ts}
    assert not keys(train) & keys(test)
    for t in train:
        assert len(t.metadata["numbers"]) == 3 and 10 <= int(t.answer) <= 100
    with pytest.raises(KeyError, match="countdown task id"):
        env.get_task("countdown/nope")


def test_rlvr_score_with_the_math_env(tmp_path, capsys):
    rows = [{"id": "a", "completion": r"so \boxed{\frac{1}{2}}", "answer": "0.5"},
            {"id": "b", "completion": "The answer is 3 or 4.", "answer": "3"},
            {"id": "c", "completion": r"\boxed{2\sqrt{2}}", "answer": "\\sqrt{8}"},
            {"id": "d", "completion": "Final Answer: 72", "answer": "blah #### 72"},
            {"id": "e", "completion": "no idea", "answer": "7"}]
    inp = _write_jsonl(tmp_path / "rows.jsonl", rows)
    out = tmp_path / "out.jsonl"
    code = rlvr_main(["score", inp, "-o", str(out), "--env", "math", "--workers", "1",
                      "--no-progress"])
    assert code == 0
    got = {r["id"]: (r["score"], r["status"]) for r in map(json.loads, out.read_text().splitlines())}
    assert got == {"a": (1.0, "ok"), "b": (0.0, "ok"), "c": (1.0, "ok"), "d": (1.0, "ok"),
                   "e": (0.0, "unparsed")}


def test_docstring_examples():
    import doctest
    assert doctest.testmod(math_envs).failed == 0


def test_builtin_rows_cover_both_dataset_styles():
    fields = [set(r) for r in math_envs.BUILTIN_ROWS]
    assert any("question" in f for f in fields) and any("problem" in f for f in fields)


COUNTDOWN = Task("c", answer=58, metadata={"numbers": [3, 9, 31, 30]})


@pytest.mark.parametrize("answer", [
    "(3 * 9 + 30), unless I made a mistake, in which case (3 * 9 + 31)",
    r"(3 * 9 + 30)\text{ (not (3 * 9 + 31))}",
    "(3 * 9 + 31) or (3 * 9 + 30)",
])
def test_countdown_a_hedge_between_expressions_scores_zero(answer):
    v = CountdownReward().score(COUNTDOWN, f"<think>try</think> <answer>{answer}</answer>")
    assert (v.score, v.status) == (0.0, "ok") and "several" in v.reason, v.reason
    assert CountdownReward().score(COUNTDOWN, "<answer>(3 * 9 + 31)</answer>").score == 1.0


def test_countdown_a_truncated_ramble_gets_no_last_value_fallback():
    from rlvr import Completion
    ramble = "Let me try (3 * 9 + 30). No, wait, maybe (3 * 9 + 31). Let me double-check the sum of"
    v = CountdownReward().score(COUNTDOWN, Completion(ramble, finish_reason="length"))
    assert (v.score, v.status) == (0.0, "unparsed") and "length limit" in v.reason
    assert CountdownReward().score(COUNTDOWN, Completion(ramble, finish_reason="stop")).score == 1.0
    stated = Completion("<answer>(3 * 9 + 31)</answer> Let me double-check", finish_reason="length")
    assert CountdownReward().score(COUNTDOWN, stated).score == 1.0
