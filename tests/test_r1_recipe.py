"""The R1 recipe's stages run in order on verified data, skip what finished, and refuse an empty
rejection set with what to change."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import envs_for_tests  # noqa: F401  (registers test-any-text)
from rlvr.trainer.recipes.r1 import STAGES, R1Config, load_r1_config, main, run_r1

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
