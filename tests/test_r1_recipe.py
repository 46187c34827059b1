"""The R1 recipe's stages run in order on verified data, skip what finished, and refuse an empty
rejection set with what to change."""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import envs_for_tests  # noqa: F401  (registers test-any-text)
from rlvr.trainer.recipes.r1 import STAGES, R1Config, load_r1_config, main, run_r1, summary

TINY = {"cold_start_tasks": 4, "cold_start_sft_steps": 2, "grpo_steps": 1, "rejection_tasks": 4,
        "rejection_k": 2, "final_sft_steps": 2, "max_completion_length": 8, "tokenizer": "",
        "sft": {"batch_size": 2, "lr": 1e-3, "max_length": 64},
        "grpo": {"prompts_per_step": 2, "group_size": 2, "reward_deadline_s": 0,
                 "checkpoint_every": 0, "tensorboard": False}}


def test_every_stage_runs_on_verified_rows_and_a_rerun_skips_them(tiny_model, tmp_path):
    cfg = R1Config(model=tiny_model, env="test-any-text", env_args={},
                   output_dir=str(tmp_path / "r1"), **TINY)
    done = run_r1(cfg)
    assert list(done) == list(STAGES)
    for data in (done["1-cold-start-data"], done["4-rejection-data"]):
        rows = [json.loads(line) for line in data.read_text().splitlines()]
        assert rows and all(r["status"] == "ok" and r["reward"] >= 1.0 for r in rows)
    teacher_rows = done["1-cold-start-data"].read_text()
    assert "word a0" in teacher_rows                    # the environment's own solver wrote them
    assert json.loads((done["4-rejection-data"]).read_text().splitlines()[0])["teacher"] != \
        json.loads(teacher_rows.splitlines()[0])["teacher"]      # sampled from the GRPO policy
    for stage in ("2-cold-start-sft", "3-grpo", "5-sft"):
        assert (done[stage] / "checkpoints").is_dir()
    stamps = {s: (tmp_path / "r1" / s / "done.json").stat().st_mtime_ns for s in STAGES}
    assert run_r1(cfg) == done                          # finished stages are not redone
    assert stamps == {s: (tmp_path / "r1" / s / "done.json").stat().st_mtime_ns for s in STAGES}
    # a changed setting of a finished stage is refused, and the folder keeps what it trained with
    recorded = (tmp_path / "r1" / "r1_config.json").read_text()
    for change in ({"cold_start_sft_steps": 3}, {"grpo": {**TINY["grpo"], "lr": 0.5}}):
        with pytest.raises(ValueError, match=f"{next(iter(change))} cannot change.*--overwrite"):
            run_r1(dataclasses.replace(cfg, **change))
    assert (tmp_path / "r1" / "r1_config.json").read_text() == recorded
    table = summary(cfg, done)
    assert all(stage in table for stage in STAGES) and "verified rows" in table and "loss" in table


def test_an_empty_rejection_set_is_refused_with_the_fix(tiny_model, tmp_path, capsys):
    # arithmetic's answers are never right from a tiny random model: nothing survives rejection
    args = [f"model={tiny_model}", f"output_dir={tmp_path / 'r1'}", "tokenizer=",
            "env_args={\"n_terms\": 2, \"max_value\": 9}",
            'sft={"batch_size": 2, "max_length": 512}',
            *(f"{k}={json.dumps(v) if isinstance(v, dict) else v}" for k, v in TINY.items()
              if k not in ("tokenizer", "sft"))]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "holds no verified sample" in err and "rejection_k" in err
    assert (tmp_path / "r1" / "3-grpo" / "done.json").exists()      # the stages before stay


def test_config_file_and_overrides_and_bad_input(tmp_path):
    config = Path(__file__).resolve().parents[1] / "configs" / "recipes" / "r1_arithmetic.toml"
    cfg = load_r1_config(str(config), ["grpo_steps=3", 'grpo={"lr": 2e-6}'])
    assert cfg.grpo_steps == 3 and cfg.grpo == {"lr": 2e-6} and cfg.env_args["max_value"] == 999
    with pytest.raises(ValueError, match=r"unknown key .grpo_stepz. \(did you mean .grpo_steps.\?\)"):
        load_r1_config(None, ["grpo_stepz=3"])
    with pytest.raises(ValueError, match="final_sft_from"):
        R1Config(final_sft_from="teacher")


@pytest.mark.parametrize("table, why", [
    ('grpo={"lrr": 1e-5}', "grpo table: unknown key 'lrr' (did you mean 'lr'?)"),
    ('grpo={"lr": "fast"}', "grpo table: lr: expected float, got 'fast'"),
    ('sft={"batch_size": 2.5}', "sft table: batch_size: expected int, got 2.5")])
def test_every_stage_config_is_checked_before_stage_1(tmp_path, capsys, table, why):
    out = tmp_path / "r1"
    assert main([f"output_dir={out}", "tokenizer=", table]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"r1: error: {why}") and "\n" not in err
    assert not out.exists()                                  # nothing ran, nothing written


def test_an_interrupted_sft_stage_resumes_and_the_end_prints_a_table(tiny_model, tmp_path,
                                                                    capsys):
    out = tmp_path / "r1"
    args = [f"model={tiny_model}", f"output_dir={out}", "tokenizer=", "cold_start_tasks=6",
            "env=test-any-text", "env_args={}", "progress=false", "grpo_steps=1",
            "rejection_tasks=4", "rejection_k=2", "final_sft_steps=1", "max_completion_length=8",
            'sft={"batch_size": 2, "max_length": 512}',
            'grpo={"prompts_per_step": 2, "group_size": 2, "reward_deadline_s": 0, '
            '"checkpoint_every": 0, "tensorboard": false}']
    metrics = out / STAGES[1] / "metrics.jsonl"
    child = ("import sys, envs_for_tests; from rlvr.trainer.recipes.r1 import main; "
             "sys.exit(main())")
    proc = subprocess.Popen([sys.executable, "-c", child, *args, "cold_start_sft_steps=100000"],
                            env={**os.environ, "OMP_NUM_THREADS": "1",
                                 "PYTHONPATH": str(Path(__file__).parent)},
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 240
    while not (metrics.exists() and metrics.read_text().strip()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=240)[1]
    assert proc.returncode == 130, err[-3000:]
    steps = len(metrics.read_text().splitlines())
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"r1: interrupted in stage {STAGES[1]} (its checkpoint "
                           f"step-{steps:06d} is kept); resume with: python -m "
                           "rlvr.trainer.recipes.r1 "), err[-2000:]
    # the rerun continues the SFT stage from its checkpoint (a longer run is a resumable change)
    assert main([*args, f"cold_start_sft_steps={steps + 1}"]) == 0
    logged = [json.loads(line)["step"] for line in metrics.read_text().splitlines()]
    assert logged == list(range(1, steps + 2))
    table = capsys.readouterr().out
    assert table.startswith("stage") and all(stage in table for stage in STAGES)
