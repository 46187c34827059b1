"""The run harness `rlvr train`, `rlvr sft` and the R1 recipe share: one loader (KEY=VALUE after
flags, the nearest field of a typo, a TOML mistake's file and line, the old name of a renamed
field), one resume policy, and a stop at a real signal that checkpoints the step and prints the
exact resume command."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlvr.cli import main

ROOT = Path(__file__).resolve().parents[1]
TINY = ["prompts_per_step=2", "group_size=2", "max_completion_length=8", "micro_batch_size=4",
        "reward_deadline_s=0", "tensorboard=false", "progress=false", "checkpoint_every=0",
        'env_args={"n_terms": 2, "max_value": 9, "prompt_style": "base"}']


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_typo_names_the_nearest_field_not_every_field(capsys):
    assert main(["train", "step=1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("rlvr train: error: unknown key 'step' (did you mean 'steps'?); "
                   "`rlvr train --help-config` lists every field")
    assert main(["sft", "lrr=1"]) == 2
    assert "unknown key 'lrr' (did you mean 'lr'?)" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["train", "sft"])
def test_a_toml_mistake_names_the_file_and_the_line(tmp_path, capsys, command):
    bad = tmp_path / "bad.toml"
    bad.write_text('steps = 3\nlr = = 1e-5\n')
    assert main([command, "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "line 2" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, usage", [(["train", "--bogus"], "usage: rlvr train "),
                                         (["sft", "--bogus", "1"], "usage: rlvr sft "),
                                         (["score", "in.jsonl", "-o", "o.jsonl", "--bogus"],
                                          "usage: rlvr score "),
                                         (["envs", "show", "x", "--bogus"],
                                          "usage: rlvr envs show ")])
def test_an_unknown_flag_prints_the_subcommands_usage(capsys, argv, usage):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith(usage) and "unrecognized arguments" in err


def test_pairs_after_flags_and_one_resume_policy(tiny_model, tmp_path, capsys):
    run = tmp_path / "run"
    # KEY=VALUE pairs before and after a flag (argparse alone refused the second group)
    assert main(["train", "steps=1", f"model={tiny_model}", "--overwrite", "lr=1e-5",
                 f"output_dir={run}", "--seed", "3", *TINY]) == 0
    config = json.loads((run / "config.json").read_text())["config"]
    assert (config["lr"], config["steps"], config["seed"]) == (1e-5, 1, 3)
    capsys.readouterr()
    # a resume that would make another run is refused, naming the field and --overwrite
    assert main(["train", "--resume", str(run), "steps=2", "lr=1e-3"]) == 2
    err = capsys.readouterr().err.strip()
    assert "lr=1e-05" in err and "lr cannot change" in err and "--overwrite" in err
    assert len(err.splitlines()) == 1 and len(rows(run / "metrics.jsonl")) == 1
    assert main(["train", "--resume", str(run), "steps=2", "eval_every=0"]) == 0
    assert [r["step"] for r in rows(run / "metrics.jsonl")] == [1, 2]


def test_the_old_name_of_env_args_still_loads_with_a_warning(tmp_path):
    from rlvr.trainer.config import TrainConfig, load_config
    from rlvr.trainer.recipes.r1 import R1Config, load_r1_config
    old = tmp_path / "old.toml"
    old.write_text('env_kwargs = { n_terms = 3 }\n')
    with pytest.warns(DeprecationWarning, match="'env_kwargs' is now 'env_args'"):
        assert load_config(old).env_args == {"n_terms": 3}
    with pytest.warns(DeprecationWarning):         # a later layer's old name wins
        assert load_config(old, ['env_kwargs={"n_terms": 4}']).env_args == {"n_terms": 4}
    with pytest.warns(DeprecationWarning):
        assert TrainConfig(env_kwargs={"n_terms": 5}).env_args == {"n_terms": 5}
    with pytest.warns(DeprecationWarning):
        assert TrainConfig().env_kwargs == {}
    with pytest.warns(DeprecationWarning):
        assert R1Config(env_kwargs={"n_terms": 6}).env_args == {"n_terms": 6}
    with pytest.warns(DeprecationWarning):
        assert load_r1_config(None, ['env_kwargs={"n_terms": 7}']).env_args == {"n_terms": 7}
    with pytest.raises(ValueError, match="both 'env_kwargs' and 'env_args'"):
        load_config(None, {"env_kwargs": {}, "env_args": {}})
    for path in [*ROOT.glob("configs/*.toml"), *ROOT.glob("configs/recipes/*.toml")]:
        assert "env_kwargs" not in path.read_text(), path


def test_the_flag_of_the_old_name_still_loads(tiny_model, tmp_path):
    from rlvr.cli import build_parser, parse
    from rlvr.cli.train import run_overrides
    from rlvr.trainer.config import TrainConfig
    args = parse(build_parser(), ["train", "--env-kwargs", '{"n_terms": 2}', "steps=1"])
    with pytest.warns(DeprecationWarning):
        got = run_overrides(args, TrainConfig, "rlvr train", extra=("preset", "algorithm"))
    assert got == {"env_args": {"n_terms": 2}, "steps": 1}


def _interruptible():
    """The child starts with SIGINT at its default, as a terminal gives it (a background shell
    hands it ignored, and an ignored signal stays ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stop_after_first_step(cmd: list[str], metrics: Path, sig: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_interruptible)
    deadline = time.monotonic() + 240
    while not (metrics.exists() and metrics.read_text().strip()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no step logged in time"
        time.sleep(0.2)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=240)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_checkpoints_the_step_and_prints_the_resume_command(tiny_model, tmp_path, sig):
    run = tmp_path / "run"
    done = _stop_after_first_step(
        [sys.executable, "-m", "rlvr", "train", f"model={tiny_model}", f"output_dir={run}",
         "steps=200", *TINY], run / "metrics.jsonl", sig)
    assert done.returncode == 128 + sig, done.stderr[-3000:]
    logged = rows(run / "metrics.jsonl")
    step = json.loads((run / "checkpoints" / (run / "checkpoints" / "latest").read_text()
                       / "state.json").read_text())["step"]
    assert step == len(logged) >= 1                   # the step in progress finished, kept
    last = done.stderr.strip().splitlines()[-1]
    assert last == (f"rlvr train: interrupted after step {step} of 200, checkpointed; "
                    f"resume with: rlvr train --resume {run}"), done.stderr[-2000:]
    assert main(["train", "--resume", str(run), f"steps={step + 1}"]) == 0
    assert [r["step"] for r in rows(run / "metrics.jsonl")] == list(range(1, step + 2))


def test_sft_stops_at_a_signal_with_its_checkpoint(tiny_model, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{i}+1=", "completion": str(i + 1)}) + "\n"
                            for i in range(20)))
    run = tmp_path / "sft"
    done = _stop_after_first_step(
        [sys.executable, "-m", "rlvr", "sft", f"model={tiny_model}", f"data={data}",
         f"output_dir={run}", "steps=100000", "batch_size=2", "progress=false",
         "tensorboard=false"], run / "metrics.jsonl", signal.SIGINT)
    assert done.returncode == 130, done.stderr[-3000:]
    step = len(rows(run / "metrics.jsonl"))
    assert (run / "checkpoints" / f"step-{step:06d}").is_dir()     # checkpoint_every is 100
    assert done.stderr.strip().splitlines()[-1].endswith(f"resume with: rlvr sft --resume {run}")
