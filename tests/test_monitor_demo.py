"""benchmarks/monitor_demo.py: its premise (the loosened verifier pays for a hedge, the strict
second opinion does not, the hedge detector flags it) and a smoke run on a tiny random model."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "monitor_demo.py"


def test_the_loose_verifier_pays_for_a_hedge_that_the_monitor_catches(tmp_path, benchmark_script):
    import rlvr
    from rlvr.core import Verdict
    from rlvr.monitor import Monitor, MonitorSettings
    from rlvr.trainer.sampling.rollout import Rollout
    demo = benchmark_script("monitor_demo")
    demo.register_loose_env()
    env = rlvr.load_env(demo.ENV, n_terms=2, max_value=20)
    task = env.sample(1)[0]
    a = int(task.answer)
    hedge = f"<think>hmm</think> <answer>{a - 1} or {a} or {a + 1}</answer>"
    verdict = env.reward.score(task, hedge)
    assert verdict.score == 1.0 and verdict.components["numeric_match"] == 0.0
    assert env.reward.score(task, f"<think>x</think> <answer>{a + 1}</answer>").score == 0.0
    monitor = Monitor(env, demo.ENV, MonitorSettings(every=1), tmp_path)
    r = Rollout([task], [[1]], [[2]], [rlvr.Completion(hedge)], [verdict],
                __import__("torch").tensor([1.0]), __import__("torch").tensor([True]))
    m = monitor.observe(r, 1).metrics
    assert m["hack/hedge"] == 1.0 and m["monitor/disagree_reward_count"] == 1


def test_the_demo_runs_both_arms_on_a_tiny_model(tmp_path):
    out = tmp_path / "demo"
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--tiny", "--no-pin"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    for arm in ("log", "screen"):
        rows = [json.loads(line) for line in (out / arm / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in rows] == [1, 2]
        assert {"hack/hedge", "monitor/disagree_reward", "rewards/numeric_match/mean"} <= set(rows[0])
    assert "monitor/screened" in rows[0]                  # the screen arm says how many
    table = (out / "summary.md").read_text()
    assert table.count("\n| log |") + table.count("\n| screen |") == 2
    assert (out / "compare" / "monitor.png").exists()
