"""The seed-claims report's numbers against hand computations (benchmarks/seed_claims_report.py)."""
import json
import math

import pytest


@pytest.fixture(scope="module")
def report(benchmark_script):
    return benchmark_script("seed_claims_report")


def _write_run(folder, rows, samples=None):
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if samples is not None:
        (folder / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))


class WordTokenizer:
    """One token per whitespace-separated word: lengths a reader can count by hand."""
    def __call__(self, texts, add_special_tokens=False):
        return {"input_ids": [t.split() for t in texts]}


def test_the_entropy_fit_recovers_an_exact_law(report):
    rows = [{"entropy": h, report.ACCURACY: -0.3 * math.exp(h) + 1.2} for h in (0.1, 0.4, 0.9, 1.1)]
    fit = report.fit_exp_entropy(rows)
    assert fit["a"] == pytest.approx(0.3) and fit["b"] == pytest.approx(1.2)
    assert fit["r2"] == pytest.approx(1.0)
    assert report.fit_exp_entropy([{"entropy": 0.5, report.ACCURACY: y} for y in (0, 1)])["a"] is None


def test_arms_are_compared_up_to_their_family_common_step(report, tmp_path):
    row = lambda step, h: {"step": step, "entropy": h, report.ACCURACY: 0.5,
                           "completions/mean_length": 10.0}
    _write_run(tmp_path / "ent_grpo", [row(s, 1.0 - 0.1 * s) for s in range(1, 9)])
    _write_run(tmp_path / "ent_bonus", [row(s, 1.0) for s in range(1, 7)])
    _write_run(tmp_path / "mu2_grpo", [row(s, 1.0) for s in range(1, 4)])
    arms = report.find_arms([tmp_path])
    assert report.common_steps(arms) == {"ent": 6, "mu2": 3}
    summary = report.entropy_summary(arms)
    assert summary["ent_grpo"]["steps"] == 6      # steps 7-8 are not compared
    # the last 5 of steps 1-6: 1 - 0.1 * (2..6) -> mean 0.6
    assert summary["ent_grpo"]["entropy"][1] == pytest.approx(0.6)


def test_wrong_lengths_and_advantage_scale_by_solve_rate(report, tmp_path):
    samples = []
    for step in (1, 2):
        for i in range(8):      # 2 right of 8 on task a: advantages +1.5 / -0.5
            right = i < 2
            samples.append({"step": step, "task_id": "a", "reward": 1.0 if right else 0.0,
                            "advantage": 1.5 if right else -0.5,
                            "completion": "w " * (3 if right else 4 + step)})
    _write_run(tmp_path / "norm_grpo", [{"step": 1}, {"step": 2}], samples)
    out = report.norm_summary(report.find_arms([tmp_path]), WordTokenizer())["norm_grpo"]
    assert [r["wrong_len"] for r in out["per_step"]] == [5, 6]
    assert [r["right_len"] for r in out["per_step"]] == [3, 3]
    cell = out["adv_scale_by_solve_rate"]["0.250"]
    assert cell == {"groups": 2, "adv_scale": pytest.approx((2 * 1.5 + 6 * 0.5) / 8)}


def test_groups_whose_rewards_agree_are_left_out_of_the_scale(report):
    groups = [{"solve_rate": 1.0, "reward_spread": 0.0, "adv_scale": 0.0},
              {"solve_rate": 1.0, "reward_spread": 0.2, "adv_scale": 0.4}]
    assert report._by_rate(groups) == {"1.000": {"groups": 1, "adv_scale": 0.4}}
