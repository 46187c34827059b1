"""pass@k: the unbiased estimator against hand-computed values, and `rlvr eval` end to end."""
import json
import math

import pytest

from rlvr.cli import main
from rlvr.trainer.evaluate import EvalConfig, mean_pass_at_k, pass_at_k


@pytest.mark.parametrize("n,c,k,expected", [
    # 1 - C(n-c, k) / C(n, k), worked by hand:
    (4, 1, 1, 0.25),                  # 1 - C(3,1)/C(4,1) = 1 - 3/4
    (4, 1, 2, 0.5),                   # 1 - C(3,2)/C(4,2) = 1 - 3/6
    (5, 2, 2, 0.7),                   # 1 - C(3,2)/C(5,2) = 1 - 3/10
    (10, 3, 4, 1 - 35 / 210),         # C(7,4) = 35, C(10,4) = 210 -> 5/6
    (8, 0, 8, 0.0),                   # nothing right: no k draws can find one
    (8, 8, 1, 1.0),                   # everything right
    (8, 3, 6, 1.0),                   # n - c = 5 < k = 6: every 6-subset holds a right one
    (32, 1, 8, 0.25),                 # 1 - C(31,8)/C(32,8) = 1 - 24/32
])
def test_pass_at_k_hand_computed(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_is_unbiased_not_the_naive_formula():
    # n=4, c=2, k=2: the naive 1-(1-c/n)^k = 1 - 0.25 = 0.75 overstates it; drawing 2 of 4
    # without replacement misses both right ones only in C(2,2)=1 of C(4,2)=6 ways -> 5/6.
    assert pass_at_k(4, 2, 2) == pytest.approx(5 / 6)
    assert 1 - (1 - 2 / 4) ** 2 != pytest.approx(5 / 6)
    # k = 1 is the plain fraction right, whatever n is.
    assert all(math.isclose(pass_at_k(n, c, 1), c / n) for n in (1, 7, 32) for c in range(n + 1))


def test_mean_over_tasks_and_bad_input():
    # tasks with c = 0, 1, 4 of n = 4 at k = 2: (0 + 0.5 + 1) / 3 = 0.5
    assert mean_pass_at_k(4, [0, 1, 4], 2) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)
    with pytest.raises(ValueError):
        mean_pass_at_k(4, [], 1)
    with pytest.raises(ValueError, match="n >= k"):
        EvalConfig(ks=(1, 8), samples=4)
    with pytest.raises(ValueError, match="sample_tasks"):
        EvalConfig(tasks=10, sample_tasks=11)


def test_rlvr_eval_cli_on_a_tiny_model(tmp_path, capsys):
    from rlvr.trainer.tiny import build_tiny_model
    model = build_tiny_model(tmp_path / "tiny")
    out = tmp_path / "eval.json"
    code = main(["eval", "--env", "arithmetic", "--env-arg", "n_terms=2", "--model", model,
                 "--k", "1,2,4", "--tasks", "3", "--sample-tasks", "2", "--max-tokens", "6",
                 "-o", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "pass@4" in printed and "greedy pass@1" in printed
    data = json.loads(out.read_text())
    # greedy covers the 3 tasks; the 4 samples each were drawn for the first 2 only
    assert data["tasks"] == 3 and data["samples"] == 4 and data["sampled_tasks"] == 2
    assert len(data["correct_counts"]) == 2 and all(0 <= c <= 4 for c in data["correct_counts"])
    # the reported numbers are the estimator applied to the recorded counts
    for k in (1, 2, 4):
        assert data["pass_at"][f"pass@{k}"] == pytest.approx(
            mean_pass_at_k(4, data["correct_counts"], k))
    assert main(["eval", "--env", "arithmetic", "--model", model, "--k", "one"]) == 2


def test_distinct_tasks_never_repeats_a_problem_and_fails_loud_when_short():
    import rlvr
    from rlvr.trainer.evaluate import distinct_tasks
    env = rlvr.load_env("arithmetic", n_terms=2, max_value=3, ops="+")   # 16 expressions in all
    tasks = distinct_tasks(env, "train", 8)
    assert len({t.metadata["expression"] for t in tasks}) == 8
    with pytest.raises(ValueError, match="distinct"):
        distinct_tasks(env, "test", 200)
