"""The sampling benchmark's ratios to llama.cpp's single stream (benchmarks/eval_throughput.py)."""
import pytest


def _row(workload, side, per_s, per_cpu_s):
    return {"workload": workload, "side": side, "tokens_per_s": per_s,
            "tokens_per_cpu_s": per_cpu_s}


def test_eval_sides_are_measured_against_the_mean_of_llama_cpps_runs(benchmark_script):
    bench = benchmark_script("eval_throughput")
    rows = [_row("eval n=32 x 8 tasks", "eval llama.cpp", 100.0, 50.0),
            _row("eval n=32 x 8 tasks", "eval rlvr-continuous", 420.0, 210.0),
            _row("eval n=32 x 8 tasks", "eval llama.cpp", 110.0, 70.0),
            _row("rollout 4x8", "rollout rlvr", 170.0, 90.0)]
    bench.against_llama(rows)
    ratio = rows[1]["vs_llama_cpp"]
    assert ratio["wall"] == pytest.approx(420 / 105) and ratio["cpu"] == pytest.approx(210 / 60)
    assert "vs_llama_cpp" not in rows[0] and "vs_llama_cpp" not in rows[3]  # itself; no rollout


def test_without_llama_cpp_no_ratio_is_made_up(benchmark_script):
    bench = benchmark_script("eval_throughput")
    rows = [_row("eval n=32 x 8 tasks", "eval rlvr-continuous", 420.0, 210.0)]
    bench.against_llama(rows)
    assert "vs_llama_cpp" not in rows[0]
