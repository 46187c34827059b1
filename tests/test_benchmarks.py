"""Standard benchmarks (envs/benchmarks.py) on small fixture files in each benchmark's published
schema: fields read, golds extracted, and the registry's contract (gold 1, junk 0) passed."""
import json
from pathlib import Path

import pytest

import rlvr
from rlvr.envs.benchmarks import BENCHMARKS, aime_rows, gsm8k_gold, last_boxed, mbpp_rows

FIX = Path(__file__).parent / "fixtures" / "benchmarks"


def test_gsm8k_reads_the_number_after_the_hashes():
    env = rlvr.load_env("gsm8k", data=str(FIX / "gsm8k.jsonl"))      # contract-checked
    tasks = env.sample(10, split="test")
    assert [t.answer for t in tasks] == ["18", "3", "70000"]
    assert tasks[0].id == "gsm8k/test/0" and "Janet" in tasks[0].metadata["question"]
    assert env.reward.score(tasks[2], "<think>...</think> <answer>70,000</answer>").score == 1.0
    assert env.reward.score(tasks[2], "<think>...</think> <answer>130000</answer>").score == 0.0
    with pytest.raises(ValueError, match="####"):
        gsm8k_gold("no final line")


def test_math500_uses_the_answer_field_else_the_boxed_solution():
    env = rlvr.load_env("math500", data=str(FIX / "math500.jsonl"))
    tasks = {t.id: t for t in env.sample(10, split="test")}
    assert tasks["math500/test/precalculus/807.json"].answer == "\\left( 3, \\frac{\\pi}{2} \\right)"
    assert tasks["math500/test/number_theory/572.json"].answer == "9"     # empty answer field
    task = tasks["math500/test/algebra/2584.json"]
    assert task.metadata["subject"] == "Algebra" and task.metadata["level"] == 3
    assert env.reward.score(task, "<think>.</think> <answer>14/3</answer>").score == 1.0


def test_hendrycks_math_takes_the_last_boxed_with_nested_braces():
    env = rlvr.load_env("hendrycks-math", data=str(FIX / "hendrycks_math.jsonl"))
    assert [t.answer for t in env.sample(10, split="test")] == ["0", "12", "\\frac{8-7x}{6}"]
    assert last_boxed("\\fbox{1} then \\boxed{\\frac{a}{b}}") == "\\frac{a}{b}"
    assert last_boxed("no box") is None and last_boxed("\\boxed{unclosed") is None
    boxed = rlvr.load_env("hendrycks-math", data=str(FIX / "hendrycks_math.jsonl"),
                          prompt_style="boxed")
    task = boxed.sample(1, split="test")[0]
    assert "\\boxed{}" in task.prompt[-1]["content"]
    assert boxed.reward.score(task, "so a+b = \\boxed{0}").score == 1.0


@pytest.mark.parametrize("fixture,ids", [
    ("aime_aimo.jsonl", ["aime/0", "aime/1"]),            # AI-MO/aimo-validation-aime layout
    ("aime_2024.jsonl", ["aime/2024-I-2", "aime/2024-I-3"]),   # Maxwell-Jia/AIME_2024 layout
])
def test_aime_reads_either_layout_as_integers(fixture, ids):
    env = rlvr.load_env("aime", data=str(FIX / fixture), split="train")
    tasks = env.sample(10, split="train")
    assert [t.id for t in tasks] == ids
    assert tasks[1 if "aimo" in fixture else 0].answer == "25"      # "025" and 25 alike
    assert env.reward.score(tasks[0], f"<think>.</think> <answer>{tasks[0].answer}</answer>").score == 1.0


def test_aime_refuses_answers_that_are_not_aime_answers():
    with pytest.raises(ValueError, match="outside 0..999"):
        aime_rows([{"problem": "p", "answer": "1000"}])
    with pytest.raises(ValueError, match="not an integer"):
        aime_rows([{"problem": "p", "answer": "3/4"}])
    with pytest.raises(KeyError, match="problem"):
        aime_rows([{"answer": "7"}])


def test_mbpp_rows_become_sandboxed_code_tasks():
    rows = [json.loads(x) for x in (FIX / "mbpp.jsonl").read_text().splitlines()]
    converted = mbpp_rows(rows)
    assert converted[0]["id"] == "mbpp/11"
    assert "remove first and last occurrence" in converted[0]["question"]
    assert 'assert remove_Occ("hello","l") == "heo"' in converted[0]["question"]   # MBPP's prompt
    sanitized = mbpp_rows([{"task_id": 2, "prompt": "Write f.", "code": "def f(): return 1",
                            "test_list": ["assert f() == 1"], "test_imports": ["import math"]}])
    assert sanitized[0]["test_setup_code"] == "import math"
    with pytest.raises(KeyError, match="test_list"):
        mbpp_rows([{"task_id": 1, "text": "no tests"}])


@pytest.mark.timeout(600)
def test_mbpp_environment_scores_gold_code_and_wrong_code(tmp_path):
    env = rlvr.load_env("mbpp", data=str(FIX / "mbpp.jsonl"), pooled=False)   # contract-checked
    task = env.get_task("mbpp/14")
    assert task.metadata["entry_point"] == "find_Volume" and task.metadata["n_tests"] == 3
    right = env.reward.score(task, env.gold(task))
    wrong = env.reward.score(task, "<think>.</think>\n```python\ndef find_Volume(l,b,h):\n"
                                   "    return l * b * h\n```")
    assert (right.score, right.status) == (1.0, "ok")
    assert (wrong.score, wrong.status) == (0.0, "ok")


def test_every_benchmark_names_its_source():
    import rlvr.envs.benchmarks as mod
    from rlvr.envs.registry import env_info
    assert set(BENCHMARKS) >= {"gsm8k", "math500", "hendrycks-math", "aime", "mbpp",
                               "humaneval", "ifeval"}
    for name in ("gsm8k", "math500", "hendrycks-math", "aime", "mbpp"):
        assert f"`{BENCHMARKS[name][0]}`" in mod.__doc__          # the table documents it
        assert env_info(name)["doc"]
