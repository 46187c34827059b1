"""The prepared GPU check works before a GPU is lent: the script parses, its measurement code runs
on the CPU at a tiny size, and the committed dry run passed every step it could run here."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_script_parses_and_the_committed_dry_run_passed_or_skipped_with_a_reason():
    subprocess.run(["bash", "-n", str(ROOT / "benchmarks" / "gpu_check.sh")], check=True)
    record = json.loads((ROOT / "benchmarks/results/gpu_check_dry_run/gpu_check.json").read_text())
    steps = {s["step"]: s for s in record["steps"]}
    assert {"cuda_tests", "grpo_vllm"} <= set(steps) and any(k.startswith("fsdp") for k in steps)
    for s in steps.values():
        assert s["status"] == "passed" or (s["status"] == "skipped" and s["detail"]), s


def test_the_measurement_runs_on_the_cpu(tmp_path):
    out = tmp_path / "hf.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--engine", "hf",
                    "--device", "cpu", "--dry-run", "--out", str(out)], check=True,
                   capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    assert result["dry_run"] and result["engine"] == "hf"
    for key in ("step_s", "generate_s", "update_s", "decode_ms_per_token", "peak_memory_gib"):
        assert result[key] > 0, key
