"""`rlvr distill-data`: verified datasets from any teacher (rlvr.trainer.verified_data).

A fake teacher whose right and wrong completions are known decides what must be kept; the kept
rows' verdicts are checked against the environment's own rewards; the programmatic teacher's
traces are checked against the rewards on many tasks; resume is checked after an interruption
and after a SIGKILL of the real command.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rlvr
import rlvr.envs.arithmetic  # noqa: F401  (registers `arithmetic` without the full discovery)
from rlvr.cli import main
from rlvr.core import Completion
from rlvr.envs.arithmetic import arithmetic, worked_steps
from rlvr.envs.countdown_search import SearchFailed, search
from rlvr.envs.math import countdown
from rlvr.trainer.evaluation.evaluate import distinct_tasks
from rlvr.trainer.verified_data import (DistillDataConfig, ProgramTeacher, build,
                                        build_verified_dataset, select, side_paths)

ENV = {"n_terms": 2, "max_value": 9, "ops": "+"}


def _rows(path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def _cfg(tmp_path, **kw) -> DistillDataConfig:
    base = dict(output=str(tmp_path / "out.jsonl"), env="arithmetic", env_args=ENV, tasks=6,
                k=4, workers=0, progress=False, dedup=False, shortest_first=False)
    return DistillDataConfig(**{**base, **kw})


class FakeTeacher:
    """Sample j of a task is right when `right(task_index, j)`, else wrong by one; `calls`
    records the tasks asked for. `stop_after`: raise KeyboardInterrupt (a kill) once that
    many tasks are done."""

    def __init__(self, right, stop_after=None, pad=lambda j: ""):
        self.right, self.stop_after, self.pad = right, stop_after, pad
        self.name, self.calls = "fake", []

    def tasks_per_call(self, k):
        return 2

    def sample(self, tasks, k, seeds):
        if self.stop_after is not None and len(self.calls) >= self.stop_after:
            raise KeyboardInterrupt
        out = []
        for task in tasks:
            self.calls.append(task.id)
            i = int(task.id.rsplit("/", 1)[1])
            out.append([Completion(f"<think>add{self.pad(j)}</think> <answer>"
                                   f"{int(task.answer) + (0 if self.right(i, j) else 1)}</answer>")
                        for j in range(k)])
        return out

    def close(self):
        pass


# ------------------------------------------------------------------ the builder keeps the verified


def test_exactly_the_verified_rows_are_kept_with_their_verdicts(tmp_path):
    right = lambda i, j: (i + j) % 3 == 0          # known right/wrong per (task, sample)
    cfg = _cfg(tmp_path)
    summary = build(cfg, FakeTeacher(right))
    tasks = distinct_tasks(rlvr.load_env("arithmetic", **ENV), "train", cfg.tasks)
    expected = {(t.id, j) for t in tasks for j in range(cfg.k)
                if right(int(t.id.rsplit("/", 1)[1]), j)}
    kept = _rows(cfg.output)
    assert {(r["task_id"], r["sample"]) for r in kept} == expected and len(kept) == len(expected)
    assert (summary.sampled, summary.solved, summary.kept) == (24, len(expected), len(expected))
    env, by_id = rlvr.load_env("arithmetic", **ENV), {t.id: t for t in tasks}
    for r in kept:                        # the row's verdict is the environment's own
        task = by_id[r["task_id"]]
        text = r["completion"][0]["content"]
        v = env.reward.score(task, text)
        assert (r["reward"], r["status"], r["components"]) == (v.score, v.status, v.components)
        assert r["prompt"] == task.prompt and r["completion"] == [
            {"role": "assistant", "content": text}] and r["teacher"] == "fake"
    per_task = json.loads(side_paths(cfg.output).summary.read_text())["pass_rate"]
    assert per_task == {t.id: sum(right(int(t.id.rsplit("/", 1)[1]), j) for j in range(4)) / 4
                        for t in tasks}


def test_base_prompts_give_text_completions(tmp_path):
    cfg = _cfg(tmp_path, env_args={**ENV, "prompt_style": "base"}, k=1, tasks=3)
    build_verified_dataset(cfg)                    # the program teacher
    rows = _rows(cfg.output)
    assert len(rows) == 3 and all(isinstance(r["prompt"], str) and isinstance(
        r["completion"], str) and r["completion"].endswith("</answer>") for r in rows)


def test_select_dedups_then_keeps_the_shortest_m():
    row = lambda text, solved=True, tokens=None: {"completion": text, "solved": solved,
                                                  "completion_tokens": tokens}
    rows = [row("a  long one"), row("no", solved=False), row("a long one"), row("mid one"),
            row("x")]
    assert [r["completion"] for r in select(rows, 0, False, False)] == \
        ["a  long one", "a long one", "mid one", "x"]
    assert [r["completion"] for r in select(rows, 0, False, True)] == \
        ["a  long one", "mid one", "x"]          # whitespace-collapsed duplicate dropped
    assert [r["completion"] for r in select(rows, 2, True, True)] == ["x", "mid one"]
    by_tokens = [row("aaaa", tokens=1), row("b", tokens=3)]     # tokens win over characters
    assert [r["completion"] for r in select(by_tokens, 1, True, True)] == ["aaaa"]


def test_keep_per_task_shortest_first_and_dedup_end_to_end(tmp_path):
    # samples 0..3 all right; 0 and 2 are the same text; 3 is the shortest
    pads = {0: " and carry", 1: " then write the digits down", 2: " and carry", 3: ""}
    cfg = _cfg(tmp_path, keep_per_task=2, shortest_first=True, dedup=True)
    build(cfg, FakeTeacher(lambda i, j: True, pad=pads.get))
    kept = _rows(cfg.output)
    assert len(kept) == 2 * cfg.tasks
    assert all([r["sample"] for r in kept[i:i + 2]] == [3, 0] for i in range(0, len(kept), 2))
    cfg = _cfg(tmp_path, keep_per_task=0, shortest_first=False, dedup=False)
    build(cfg, FakeTeacher(lambda i, j: True, pad=pads.get))     # selection only: no resampling
    assert len(_rows(cfg.output)) == 4 * cfg.tasks


# ------------------------------------------------------------------ resume


def test_a_rerun_after_an_interruption_samples_only_the_rest_without_duplicates(tmp_path):
    right = lambda i, j: j % 2 == 0
    fresh = _cfg(tmp_path / "fresh")
    build(fresh, FakeTeacher(right))
    cfg = _cfg(tmp_path / "killed")
    with pytest.raises(KeyboardInterrupt):
        build(cfg, FakeTeacher(right, stop_after=4))       # 4 of 6 tasks sampled, then killed
    cand = side_paths(cfg.output).candidates
    with open(cand, "a") as f:
        f.write('{"id": "arithmetic/train/0/99", "kind": "sample", "of": 4, "sam')   # torn write
    again = FakeTeacher(right)
    build(cfg, again)
    assert len(again.calls) == 2                           # only the 2 tasks not on disk
    assert _rows(cfg.output) == _rows(fresh.output)        # nothing lost, nothing twice
    build(cfg, again)                                      # a finished run: nothing to sample
    assert len(again.calls) == 2 and _rows(cfg.output) == _rows(fresh.output)


def test_other_sampling_settings_are_refused_and_more_tasks_extend_the_run(tmp_path):
    cfg = _cfg(tmp_path, tasks=3)
    build(cfg, FakeTeacher(lambda i, j: True))
    with pytest.raises(ValueError, match="k: 4 -> 2"):
        build(_cfg(tmp_path, tasks=3, k=2), FakeTeacher(lambda i, j: True))
    more = FakeTeacher(lambda i, j: True)
    build(_cfg(tmp_path, tasks=5), more)
    assert len(more.calls) == 2 and len(_rows(cfg.output)) == 5 * 4


@pytest.fixture
def slow_env_module(tmp_path):
    """A module registering `slow-sums`: arithmetic whose program teacher takes 0.3 s a task,
    so a loaded machine still kills the command between its 5th and 30th task."""
    (tmp_path / "slow_sums.py").write_text(
        "import time\n"
        "from rlvr.envs.registry import register_env\n"
        "from rlvr.envs.arithmetic import arithmetic, arithmetic_trace\n"
        "def _slow(task):\n"
        "    time.sleep(0.3)\n"
        "    return arithmetic_trace(task)\n"
        "@register_env('slow-sums')\n"
        "def slow_sums():\n"
        f"    env = arithmetic(**{ENV!r})\n"
        "    env.teacher = _slow\n"
        "    return env\n")
    return tmp_path


def test_the_command_killed_mid_run_resumes_without_duplicates(slow_env_module):
    out = slow_env_module / "traces.jsonl"
    cmd = [sys.executable, "-m", "rlvr", "distill-data", "--import", "slow_sums",
           "--env", "slow-sums", "--tasks", "30", "--k", "1", "--workers", "0",
           "--no-progress", "-o", str(out)]
    proc = subprocess.Popen(cmd, cwd=slow_env_module, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    cand = side_paths(out).candidates
    deadline = time.time() + 60
    while time.time() < deadline and (not cand.exists() or len(cand.read_text().splitlines()) < 5):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = len(cand.read_text().splitlines())
    assert 5 <= before < 30 and not out.exists()
    # the rerun scores in a worker pool: its workers import the user's module too
    cmd[cmd.index("--workers") + 1] = "1"
    done = subprocess.run(cmd, cwd=slow_env_module, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = _rows(out)
    assert len(rows) == 30 and len({r["task_id"] for r in rows}) == 30
    assert len(cand.read_text().splitlines()) == 30      # the first run's rows were kept


# ------------------------------------------------------------------ the programmatic teacher


@pytest.mark.parametrize("kwargs", [
    {}, {"n_terms": 2, "ops": "*", "max_value": 99, "parentheses": False},
    {"n_terms": 2, "ops": "+", "max_value": 999, "parentheses": False},
    {"n_terms": 4, "max_value": 500, "ops": "-*"}, {"prompt_style": "base", "format_weight": 0.5}],
    ids=["default", "mul2", "add3", "signs", "base"])
def test_the_arithmetic_traces_score_full_reward(kwargs):
    env = arithmetic(**kwargs)
    for split in ("train", "test"):
        for task in env.sample(150, split=split, seed=7):
            v = env.reward.score(task, env.teacher(task))
            assert v.solved and v.status == "ok" and set(v.components.values()) == {1.0}, \
                (task.metadata, env.teacher(task), v)


def test_the_worked_steps_are_the_pupils_method():
    # 47*36: split 36 by place value, one partial product each, then their sum
    assert worked_steps("47 * 36") == (
        ["47*6 = 282.", "47*30 = 1410.", "282 + 1410 = 1692.", "So 47*36 = 1692."], 1692)
    # 347+235: 7+5 = 12 writes 2 carries 1; 4+3+1 = 8; 3+2 = 5
    assert worked_steps("347 + 235")[0] == [
        "ones: 7+5 = 12, write 2 carry 1.", "tens: 4+3+1 = 8, write 8.",
        "hundreds: 3+2 = 5, write 5.", "347 + 235 = 582."]
    # 43-25: 3 < 5 borrows (13-5 = 8), so the tens give 4-1-2 = 1
    assert worked_steps("43 - 25")[0] == [
        "ones: 3-5 needs a borrow, 13-5 = 8.", "tens: 4-1-2 = 1.", "43 - 25 = 18."]
    # precedence: 4*5 first; a negative intermediate is worked on magnitudes, then signed
    assert worked_steps("3 - 4 * 5") == (["4*5 = 20.", "ones: 0-3 needs a borrow, 10-3 = 7.",
                                          "tens: 2-1-0 = 1.", "20 - 3 = 17.",
                                          "So 3 - 20 = -17."], -17)
    assert worked_steps("(2 - 9) * 3")[0][-1] == "So (-7)*3 = -21."


_EQUATION = re.compile(r"(\(?-?\d+\)?(?:\s*[-+*]\s*\(?-?\d+\)?)+) = (-?\d+)")


def _check_steps(steps: list[str]) -> int:
    """Every `x op y = z` in the lines is true, and the digits a column addition writes (ones
    first, then a last carry) spell its sum; returns how many equations were checked."""
    checked, written = 0, []
    for line in steps:
        for left, right in _EQUATION.findall(line):
            assert set(left) <= set("0123456789+-*() ")
            assert eval(left) == int(right), line          # noqa: S307 (digits and ops only)
            checked += 1
        m = re.search(r"write (?:the carry )?(\d)", line)
        if m:
            written.append(m.group(1))
        elif written:       # the line after the columns states the sum they spell
            assert int("".join(reversed(written))) == int(line.rstrip(".").split(" = ")[1]), line
            written = []
    return checked


def test_every_step_of_the_traces_is_true():
    env = arithmetic(n_terms=4, max_value=999, ops="+-*")
    checked = sum(_check_steps(worked_steps(t.metadata["expression"])[0])
                  for t in env.sample(200, seed=3))
    assert checked > 2000


@pytest.mark.parametrize("kwargs", [{}, {"prompt_style": "base", "n_numbers": 3},
                                    {"n_numbers": 5, "use_all": True}])
def test_the_countdown_search_traces_score_full_reward(kwargs):
    env = countdown(**kwargs)
    for task in env.sample(60, seed=5):
        if len(re.findall(r"\d+", task.metadata["solution"])) < len(task.metadata["numbers"]) \
                and kwargs.get("use_all"):
            continue      # the generator's own solution leaves a number out: maybe no answer
        text = env.teacher(task)
        assert env.reward.score(task, text).solved, (task.metadata, text)
        assert text.count("Yes.") == 1 and text.count("Try ") <= 3   # at most 2 dead ends


def test_reasoning_gyms_countdown_has_the_search_teacher():
    pytest.importorskip("reasoning_gym")
    from rlvr.envs.reasoning_gym import reasoning_gym_env
    env = reasoning_gym_env("countdown", size=200)
    for task in env.sample(8, seed=2):
        assert env.reward.score(task, env.teacher(task)).score == 1.0


def test_search_finds_the_way_and_says_when_there_is_none():
    # 3 + 4 = 7 is found first; with every number required, 7 = (3 + 4) * 1 after dead ends
    assert search([3, 4], 7) == ([], ["4 + 3 = 7"], "4 + 3")
    failed, line, expr = search([3, 4, 1], 7, use_all=True)
    assert line[-1].endswith("= 7") and sorted(map(int, re.findall(r"\d+", expr))) == [1, 3, 4]
    with pytest.raises(SearchFailed):
        search([2, 3], 7)


def test_a_solver_that_raises_fails_its_tasks_by_name_not_as_wrong_answers(tmp_path):
    env = arithmetic(**ENV)

    def broken(task):
        raise SearchFailed("no expression over [2, 3] reaches 7")
    env.teacher = broken
    cfg = _cfg(tmp_path, tasks=3)
    summary = build(cfg, ProgramTeacher(env))
    assert summary.sampled == 0 and summary.kept == 0 and len(summary.failed_tasks) == 3
    assert all(why == "program teacher raised SearchFailed: no expression over [2, 3] "
               "reaches 7" for why in summary.failed_tasks.values())


def test_an_environment_without_a_solver_is_a_usage_error(tmp_path, capsys):
    code = main(["distill-data", "--env", "math-arithmetic", "-o", str(tmp_path / "o.jsonl"),
                 "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "no programmatic teacher" in err \
        and "--teacher MODEL" in err and not (tmp_path / "o.candidates.jsonl").exists()


# ------------------------------------------------------------------ model and endpoint teachers


def test_a_local_model_and_a_run_directory_are_teachers(tmp_path, tiny_model):
    policy = tmp_path / "run" / "checkpoints" / "step-3" / "policy"
    policy.parent.mkdir(parents=True)
    policy.symlink_to(tiny_model, target_is_directory=True)
    for name, teacher in (("model", str(tiny_model)), ("run", str(tmp_path / "run"))):
        cfg = _cfg(tmp_path / name, teacher=teacher, tasks=2, k=2, max_completion_length=6)
        summary = build(cfg)
        scored = _rows(side_paths(cfg.output).scored)
        assert summary.sampled == 4 and len(scored) == 4 and summary.teacher == teacher
        assert all(1 <= r["completion_tokens"] <= 6 for r in scored)   # the model's own count
        assert summary.kept == sum(r["solved"] for r in scored)       # a random model: ~0


def test_a_tokenizer_counts_the_tokens_of_text_teachers(tmp_path, tiny_model):
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(tiny_model)
    cfg = _cfg(tmp_path, k=1, tasks=3, tokenizer=str(tiny_model))
    summary = build(cfg)                                      # the program teacher
    rows = _rows(cfg.output)
    assert rows and all(r["completion_tokens"] == len(tok(r["completion"][0]["content"],
                                                          add_special_tokens=False).input_ids)
                        for r in rows)
    assert summary.length_unit == "tokens" and "kept length (tokens)" in summary.render()


def test_an_endpoint_teacher_keeps_its_right_samples_and_reports_failed_tasks(tmp_path, capsys):
    pytest.importorskip("openai")
    from test_eval_endpoint import FakeServer
    tasks = distinct_tasks(rlvr.load_env("arithmetic", **ENV), "train", 4)
    exprs = [t.metadata["expression"] for t in tasks]
    out = tmp_path / "ep.jsonl"
    argv = ["distill-data", "--env", "arithmetic", "--env-arg", "n_terms=2",
            "--env-arg", "max_value=9", "--env-arg", "ops=+", "--tasks", "4", "--k", "4",
            "--teacher", "fake-model", "--retries", "0", "--workers", "0", "--no-progress",
            "--no-dedup", "-o", str(out)]
    with FakeServer(right=2) as server:             # samples 0 and 1 right, 2 and 3 wrong
        server.fail_always.add(exprs[1])
        code = main([*argv, "--endpoint", server.url])
        assert code == 3 and "1 tasks not sampled" in capsys.readouterr().err
        rows = _rows(out)
        assert {(r["task_id"], r["sample"]) for r in rows} == {
            (t.id, j) for t in tasks if t.id != tasks[1].id for j in (0, 1)}
        assert rows[0]["teacher"] == f"fake-model @ {server.url}"
        server.fail_always.clear()
        assert main([*argv, "--endpoint", server.url]) == 0    # the rerun asks for that task
        asked = [r["expr"] for r in server.requests]
        assert asked.count(exprs[1]) == 2 and asked.count(exprs[0]) == 1
    assert len(_rows(out)) == 8


# ------------------------------------------------------------------ the command line


def test_the_command_writes_jsonl_a_datasets_folder_and_a_summary(tmp_path, capsys):
    out, folder = tmp_path / "mul.jsonl", tmp_path / "mul_ds"
    code = main(["distill-data", "--env", "arithmetic", "--env-arg", "n_terms=2",
                 "--env-arg", "ops=*", "--env-arg", "max_value=99", "--env-arg",
                 "parentheses=false", "--tasks", "20", "--k", "2", "--workers", "0",
                 "--no-progress", "--datasets-dir", str(folder), "-o", str(out)])
    printed = capsys.readouterr().out
    assert code == 0 and "20 tasks, 40 completions sampled (2 per task), 40 verified, 20 kept" \
        in printed
    import datasets
    assert datasets.load_from_disk(str(folder)).to_list() == _rows(out)
    summary = json.loads(side_paths(out).summary.read_text())
    assert (summary["tasks"], summary["kept"], summary["statuses"]) == (20, 20, {"ok": 40})


@pytest.mark.parametrize("argv,says", [
    (["--k", "0"], "k must be >= 1"), (["--env", "nope"], "unknown environment"),
    (["--split", "dev"], "no split 'dev'"), (["-o", "out.txt"], "-o traces.jsonl"),
    (["--teacher", "program", "--endpoint", "http://127.0.0.1:9/v1"], "drop --endpoint")])
def test_bad_input_is_one_line_naming_the_fix_and_exit_2(tmp_path, capsys, argv, says):
    base = ["distill-data", "-o", str(tmp_path / "o.jsonl"), "--no-progress", "--workers", "0"]
    code = main(base + argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and says in err and "\n" not in err
