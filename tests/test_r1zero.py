"""The README's main job (scripts/r1zero.sh) end to end in tiny-model mode, and its pieces."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr.trainer.r1zero import R1ZERO_SETTINGS, r1zero_config, summary_table

ROOT = Path(__file__).resolve().parents[1]


def test_r1zero_script_tiny_mode_runs_trains_and_plots(tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "RLVR_PYTHON": sys.executable, "RLVR_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "r1zero.sh"), "--tiny", "-o", str(out)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert {"reward", "completions/mean_length", "think/well_formed_rate"} <= set(rows[0])
    # the live bar shows the R1-Zero numbers; the summary table and the plot path follow
    assert "R1-Zero GRPO 2/2" in proc.stderr and "acc " in proc.stderr and "think " in proc.stderr
    assert "accuracy" in proc.stdout and "mean length (tokens)" in proc.stdout
    overview = out / "plots" / "overview.png"
    assert f"plots:  {overview}" in proc.stdout
    assert overview.read_bytes()[:4] == b"\x89PNG"
    assert (out / "checkpoints" / "latest").exists()
    assert (tmp_path / "cache" / "tiny-model" / "config.json").exists()


def test_main_job_settings_resolve_and_overrides_win():
    cfg = r1zero_config("/m", "/o", overrides=["steps=3", "lr=2e-6"])
    assert (cfg.algorithm, cfg.env, cfg.steps, cfg.lr) == ("grpo", "arithmetic", 3, 2e-6)
    assert cfg.env_kwargs == R1ZERO_SETTINGS["env_kwargs"] and cfg.progress is False
    dr = r1zero_config("/m", "/o", overrides=["preset=dr_grpo"])
    assert dr.algorithm == "dr_grpo" and dr.scale_rewards is False and dr.beta == 0.0
    with pytest.raises(ValueError, match="unknown config key"):
        r1zero_config("/m", "/o", overrides=["stepz=3"])


def test_summary_table_compares_first_and_last_quarter():
    rows = [{"step": s, "reward": r, "completions/mean_length": 10.0 * s}
            for s, r in zip(range(1, 9), [0.0, 0.2, 0.1, 0.3, 0.3, 0.4, 0.5, 0.7])]
    table = summary_table(rows).splitlines()
    assert "steps 1-2" in table[0] and "steps 7-8" in table[0]
    # reward: mean(0.0, 0.2) = 0.1 -> mean(0.5, 0.7) = 0.6, change +0.5
    assert table[1].split() == ["reward", "0.100", "0.600", "+0.500"]
    # length: mean(10, 20) = 15 -> mean(70, 80) = 75
    assert table[2].split() == ["mean", "length", "(tokens)", "15.0", "75.0", "+60.0"]
    assert len(table) == 3            # metrics the run never logged are left out
