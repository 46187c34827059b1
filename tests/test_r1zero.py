"""The README's main job (scripts/r1zero.sh) end to end in tiny-model mode, and its pieces."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr.trainer.recipes.r1zero import (R1ZERO_SETTINGS, RunFolderError, default_output, eval_table,
                                 r1zero_config, resume_point, summary_table, think_tokenizer)

ROOT = Path(__file__).resolve().parents[1]


def _script(args, tmp_path):
    env = {**os.environ, "RLVR_PYTHON": sys.executable, "RLVR_CACHE": str(tmp_path / "cache")}
    return subprocess.run(["bash", str(ROOT / "scripts" / "r1zero.sh"), *args], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.timeout(900)      # a few seconds on an idle machine; minutes on a shared one
def test_r1zero_script_tiny_mode_runs_trains_and_plots(tmp_path):
    out = tmp_path / "run"
    proc = _script(["--tiny", "-o", str(out)], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert {"reward", "rewards/numeric_match/mean", "rewards/think_format/mean",
            "think/well_formed_rate"} <= set(rows[0])
    # the held-out evaluation: the base model (step 0) and the trained policy, same tasks
    evals = [json.loads(line) for line in (out / "eval.jsonl").read_text().splitlines()]
    assert [e["step"] for e in evals] == [0, 2] and {e["tasks"] for e in evals} == {8}
    assert all(0.0 <= e["pass@1"] <= 1.0 and 0.0 <= e["think/well_formed_rate"] <= 1.0
               for e in evals)
    # the live bar names the preset and shows the R1-Zero numbers; table, eval and plots follow
    assert "R1-Zero GRPO 2/2" in proc.stderr and "acc " in proc.stderr and "think " in proc.stderr
    assert "hit max_completion_length" not in proc.stderr        # tiny mode trips no warning
    assert "accuracy" in proc.stdout and "think well-formed" in proc.stdout
    assert "held-out, 8 never-trained problems, greedy" in proc.stdout
    assert "rewards numeric_match x1, think_format x0.5" in proc.stdout
    overview = out / "plots" / "overview.png"
    assert f"plots:  {overview}" in proc.stdout
    assert overview.read_bytes()[:4] == b"\x89PNG" and (out / "plots" / "eval.png").exists()
    assert (out / "checkpoints" / "latest").exists()
    assert (tmp_path / "cache" / "tiny-model" / "config.json").exists()

    # a second run into the folder never overwrites it: refused, naming the flag, nothing touched
    before = {p: p.read_bytes() for p in (out / "metrics.jsonl", out / "eval.jsonl")}
    proc = _script(["--tiny", "-o", str(out)], tmp_path)
    assert proc.returncode == 2 and "--overwrite" in proc.stderr, proc.stderr[-2000:]
    assert "finished run of 2 steps" in proc.stderr
    assert all(p.read_bytes() == b for p, b in before.items())


@pytest.mark.timeout(900)
def test_a_run_folder_is_resumed_refused_or_overwritten_never_clobbered(tmp_path, capsys):
    from rlvr.trainer.recipes.r1zero import main
    out, cache = tmp_path / "run", tmp_path / "cache"
    tiny = ["--tiny", "-o", str(out), "--cache", str(cache)]
    assert main(tiny) == 0
    before = {p: p.read_bytes() for p in (out / "metrics.jsonl", out / "eval.jsonl",
                                          out / "config.json")}
    capsys.readouterr()
    assert main(tiny + ["lr=0.5"]) == 2                      # other settings: refused
    err = capsys.readouterr().err
    assert "lr 0.001 -> 0.5" in err and "--overwrite" in err
    assert all(p.read_bytes() == b for p, b in before.items())

    # the same settings with more steps resume it from its checkpoint
    assert main(tiny + ["steps=3"]) == 0
    captured = capsys.readouterr()
    assert "resuming" in captured.out and "R1-Zero GRPO 3/3" in captured.err
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [json.loads(line) for line in (out / "eval.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3] and [e["step"] for e in evals] == [0, 2, 3]
    assert (out / "metrics.jsonl").read_bytes().startswith(before[out / "metrics.jsonl"])

    # --overwrite replaces it; the bar names the preset in use
    assert main(tiny + ["--overwrite", "preset=dr_grpo"]) == 0
    err = capsys.readouterr().err
    assert "R1-Zero Dr. GRPO 2/2" in err and "R1-Zero GRPO" not in err
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert json.loads((out / "config.json").read_text())["config"]["preset"] == "dr_grpo"


def test_tiny_mode_writes_elsewhere_than_the_real_run():
    assert default_output(tiny=False) == "runs/r1zero"
    assert default_output(tiny=True) != "runs/r1zero"
    assert not default_output(tiny=True).startswith("runs/r1zero/")
    script = (ROOT / "scripts" / "r1zero.sh").read_text()
    assert "-o runs/r1zero" not in script        # the script leaves the folder to the module


def _fake_run(out: Path, cfg, steps_done: int | None, **changed):
    out.mkdir(parents=True)
    saved = {**json.loads(json.dumps(cfg.to_dict(), default=str)), **changed}
    (out / "config.json").write_text(json.dumps({"config": saved}))
    (out / "metrics.jsonl").write_text('{"step": 1}\n')
    if steps_done is not None:
        ckpt = out / "checkpoints" / f"step-{steps_done:06d}"
        ckpt.mkdir(parents=True)
        (ckpt / "state.json").write_text(json.dumps({"step": steps_done}))
        (out / "checkpoints" / "latest").write_text(ckpt.name)


def test_resume_point_resumes_or_refuses(tmp_path):
    cfg = r1zero_config("/m", str(tmp_path / "x"))
    assert resume_point(tmp_path / "empty", cfg) is None            # nothing there: fresh
    _fake_run(tmp_path / "half", cfg, steps_done=4)
    assert resume_point(tmp_path / "half", cfg).name == "step-000004"
    _fake_run(tmp_path / "done", cfg, steps_done=cfg.steps)
    with pytest.raises(RunFolderError, match=f"finished run of {cfg.steps} steps.*--overwrite"):
        resume_point(tmp_path / "done", cfg)
    _fake_run(tmp_path / "other", cfg, steps_done=4, lr=3e-4)
    with pytest.raises(RunFolderError, match=r"other settings \(lr 0.0003 -> 1e-05\).*--overwrite"):
        resume_point(tmp_path / "other", cfg)
    _fake_run(tmp_path / "killed", cfg, steps_done=None)             # no checkpoint yet
    with pytest.raises(RunFolderError, match="no checkpoint to resume from.*--overwrite"):
        resume_point(tmp_path / "killed", cfg)
    (tmp_path / "other" / "keep.txt").write_text("not ours")
    assert resume_point(tmp_path / "other", cfg, overwrite=True) is None
    assert sorted(p.name for p in (tmp_path / "other").iterdir()) == ["keep.txt"]


def test_main_job_settings_resolve_and_overrides_win():
    from rlvr.trainer.config import PRESETS
    cfg = r1zero_config("/m", "/o", overrides=["steps=3", "lr=2e-6"], tokenizer="/t")
    assert (cfg.preset, cfg.env, cfg.steps, cfg.lr) == ("grpo", "arithmetic", 3, 2e-6)
    assert cfg.env_args == R1ZERO_SETTINGS["env_args"] and cfg.progress is False
    assert cfg.tokenizer == "/t" and cfg.env_args["format_weight"] > 0     # R1-Zero's pair
    dr = r1zero_config("/m", "/o", overrides=["preset=dr_grpo"])
    assert dr.preset == "dr_grpo" and dr.beta == 0.0
    assert dr.scale_rewards == PRESETS["dr_grpo"]["scale_rewards"]
    with pytest.raises(ValueError, match="unknown key .stepz."):
        r1zero_config("/m", "/o", overrides=["stepz=3"])


def test_think_tokenizer_opens_the_think_block(tmp_path):
    from transformers import AutoTokenizer

    from rlvr.trainer.models.tiny import build_tiny_model
    model = build_tiny_model(tmp_path / "model")
    path = think_tokenizer(model, tmp_path)
    tok = AutoTokenizer.from_pretrained(path)
    msgs = [{"role": "user", "content": "What is 2 + 3?"}]
    text = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    plain = AutoTokenizer.from_pretrained(model).apply_chat_template(
        msgs, add_generation_prompt=True, tokenize=False)
    assert text == plain + "<think>"
    assert tok.apply_chat_template(msgs, tokenize=False) == \
        AutoTokenizer.from_pretrained(model).apply_chat_template(msgs, tokenize=False)
    assert think_tokenizer(model, tmp_path) == path            # reused, not rewritten


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


def test_eval_table_is_base_against_the_last_evaluation():
    evals = [{"step": 0, "pass@1": 0.06, "think/well_formed_rate": 0.0, "tasks": 100},
             {"step": 8, "pass@1": 0.3, "think/well_formed_rate": 0.5, "tasks": 100},
             {"step": 12, "pass@1": 0.52, "think/well_formed_rate": 0.97, "tasks": 100}]
    table = eval_table(evals).splitlines()
    assert "100 never-trained problems" in table[0]
    assert table[0].split()[-4:] == ["base", "step", "12", "change"]
    assert table[1].split()[-3:] == ["0.060", "0.520", "+0.460"]
    assert table[2].split()[-3:] == ["0.000", "0.970", "+0.970"]
    assert eval_table([]) == "(no held-out evaluation)"


def test_readme_quick_start_is_exactly_two_commands():
    import re
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Quick start"):]
    section = section[:section.index("\n## ", 3)]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    commands = [line for line in block.splitlines() if line.strip()]
    assert [c.split("#")[0].split() for c in commands] == [["bash", "scripts/r1zero.sh"],
                                                           ["bash", "scripts/test.sh"]]


def test_held_out_accuracy_counts_right_answers_not_well_formed_ones():
    # The main job's env pays 1.0 for the format alone: a well-formed wrong answer must not
    # count as solved in the held-out pass@1 (it did: format was read as accuracy).
    import types

    import rlvr
    from rlvr.core import Completion
    from rlvr.trainer.recipes.r1zero import held_out_eval
    from rlvr.trainer.sampling.rollout import Rollout
    env = rlvr.load_env("arithmetic", n_terms=2, max_value=20, ops="+", test_fraction=0.5,
                        prompt_style="chat", format_weight=1.0)

    class Engine:
        def generate(self, tasks, group_size, max_new_tokens, greedy=False):
            texts = [f"<think>x</think><answer>{t.answer if i % 4 == 0 else -1}</answer>"
                     for i, t in enumerate(tasks)]
            return Rollout(list(tasks), [[1]] * len(tasks), [[2]] * len(tasks),
                           [Completion(s, [2], "stop") for s in texts], group_size=1)

    def tok(text, add_special_tokens=False):
        return types.SimpleNamespace(input_ids=text.split())
    cfg = types.SimpleNamespace(seed=0, max_completion_length=64, reflection_phrases=())
    trainer = types.SimpleNamespace(env=env, cfg=cfg, engine=Engine(), tokenizer=tok)
    out = held_out_eval(trainer, 8)
    assert out["pass@1"] == 0.25 and out["think/well_formed_rate"] == 1.0


def test_the_readme_table_is_the_committed_run():
    """The README's main-job table is what the committed run's own files print, line for line."""
    root = Path(__file__).resolve().parents[1]
    results = root / "benchmarks" / "results" / "r1zero_main"
    rows = [json.loads(x) for x in (results / "metrics.jsonl").read_text().splitlines() if x]
    evals = [json.loads(x) for x in (results / "eval.jsonl").read_text().splitlines() if x]
    readme = root.joinpath("README.md").read_text().splitlines()
    printed = summary_table(rows).splitlines()[:4] + eval_table(evals).splitlines()[:2]
    for line in printed:
        assert line.rstrip() in (r.rstrip() for r in readme), line
