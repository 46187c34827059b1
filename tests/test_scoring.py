"""`rlvr score`: every row exactly once, malformed rows, timeouts, resume after a kill."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import envs_for_tests  # noqa: F401  (registers test-hang)
from rlvr import ScoreConfig, load_env, score_file
from rlvr.cli import main as cli_main


def write_rows(path: Path, n: int, seed: int = 0) -> list[dict]:
    """n arithmetic rows: right, wrong, truncated and id-only rows mixed."""
    env = load_env("arithmetic")
    rows = []
    for i, t in enumerate(env.sample(n, seed=seed)):
        kind = i % 4
        text = {0: env.gold(t), 1: f"<think>x</think><answer>{int(t.answer) + 1}</answer>",
                2: "<think>long thought", 3: f"The answer is {t.answer}."}[kind]
        row = {"id": t.id, "completion": text}
        if i % 3:
            row["answer"] = t.answer
        rows.append(row)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def read_out(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_cli_scores_every_row_with_versions(tmp_path, capsys):
    rows = write_rows(tmp_path / "in.jsonl", 40)
    out = tmp_path / "out.jsonl"
    code = cli_main(["score", "--env", "arithmetic", str(tmp_path / "in.jsonl"), "-o", str(out),
                     "--workers", "2", "--no-progress"])
    assert code == 0
    got = read_out(out)
    assert [r["line"] for r in got] == list(range(1, 41))
    assert [r["id"] for r in got] == [r["id"] for r in rows]
    assert [r["score"] for r in got] == [1.0, 0.0, 0.0, 1.0] * 10
    assert [r["status"] for r in got][:4] == ["ok", "ok", "unparsed", "ok"]
    assert got[0]["versions"] == {"rlvr": "0.1.0", "env": "arithmetic@1",
                                  "verifier": "numeric_match@1+think_format@1"}
    for key in ("extracted", "reason", "latency_s", "components"):
        assert key in got[0]
    printed = capsys.readouterr().out
    assert "rows: 40" in printed and "mean score: 0.5000 over 40 scored rows" in printed
    assert "ok=30, unparsed=10" in printed and "latency p50" in printed and "slowest" in printed
    meta = json.loads((tmp_path / "out.jsonl.meta.json").read_text())
    assert meta["config"]["env"] == "arithmetic"


def test_malformed_rows_become_error_rows_with_line_numbers(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    good = {"id": "arithmetic/train/0/0", "completion": "<answer>1</answer>"}
    src.write_text("\n".join([
        json.dumps(good),
        "{not json",
        json.dumps({"id": "x", "completion": 12}),
        json.dumps([1, 2]),
        json.dumps({"completion": "no gold, no id"}),
        json.dumps({"id": "arithmetic/bogus", "completion": "1"}),
        "",
        json.dumps(good),
    ]) + "\n")
    out = tmp_path / "out.jsonl"
    code = cli_main(["score", "--env", "arithmetic", str(src), "-o", str(out), "--no-progress",
                     "--workers", "1"])
    assert code == 3                       # finished, but some rows are in error
    got = read_out(out)
    assert [r["line"] for r in got] == [1, 2, 3, 4, 5, 6, 8]
    assert [r["status"] for r in got] == ["ok", "error", "error", "error", "error", "error", "ok"]
    reasons = [r["reason"] for r in got]
    assert reasons[1].startswith("line 2: bad JSON")
    assert reasons[2] == "line 3: field 'completion' must be a string, got int"
    assert reasons[3] == "line 4: expected a JSON object, got list"
    assert "line 5: row has neither 'answer' (gold answer) nor 'id' (task id) nor 'prompt'" == reasons[4]
    assert reasons[5].startswith("line 6: bad arithmetic task id 'arithmetic/bogus'")
    assert got[1]["raw"] == "{not json"
    assert "error=5" in capsys.readouterr().out


def test_usage_errors_exit_2(tmp_path, capsys):
    assert cli_main(["score", "--env", "nope", str(tmp_path / "missing.jsonl"), "-o", "x"]) == 2
    write_rows(tmp_path / "in.jsonl", 4)
    assert cli_main(["score", "--env", "nope", str(tmp_path / "in.jsonl"), "-o",
                     str(tmp_path / "o.jsonl")]) == 2
    assert "unknown environment 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli_main(["score", str(tmp_path / "in.jsonl")])    # no --env, no -o
    assert exc.value.code == 2


def test_hung_row_is_a_timeout_row_and_neighbours_survive(tmp_path):
    src = tmp_path / "in.jsonl"
    texts = ["<answer>0</answer>", "<answer>2</answer>", "hang", "<answer>6</answer>",
             "<answer>9</answer>"]
    src.write_text("".join(json.dumps({"id": f"t{i}", "completion": c}) + "\n"
                           for i, c in enumerate(texts)))
    out = tmp_path / "out.jsonl"
    t0 = time.monotonic()
    summary = score_file(ScoreConfig(env="test-hang", input=str(src), output=str(out),
                                     workers=2, deadline_s=1.0, progress=False))
    assert time.monotonic() - t0 < 15
    got = read_out(out)
    assert [r["status"] for r in got] == ["ok", "ok", "timeout", "ok", "ok"]
    assert [r["score"] for r in got] == [1.0, 1.0, 0.0, 1.0, 0.0]
    assert summary.by_status["timeout"] == 1 and summary.error_rows == 0


def test_parquet_and_datasets_inputs(tmp_path):
    import datasets
    rows = write_rows(tmp_path / "in.jsonl", 12)
    ds = datasets.Dataset.from_list([{k: r.get(k) for k in ("id", "completion", "answer")}
                                     for r in rows])
    ds.to_parquet(str(tmp_path / "in.parquet"))
    ds.save_to_disk(str(tmp_path / "saved"))
    expected = [r["score"] for r in read_out(_score(tmp_path, "in.jsonl"))]
    assert [r["score"] for r in read_out(_score(tmp_path, "in.parquet"))] == expected
    assert [r["score"] for r in read_out(_score(tmp_path, "saved"))] == expected


def _score(tmp_path, name):
    out = tmp_path / f"{name}.out.jsonl"
    score_file(ScoreConfig(env="arithmetic", input=str(tmp_path / name), output=str(out),
                           workers=0, progress=False))
    return out


def test_resume_after_kill_has_every_row_exactly_once(tmp_path):
    n = 60_000
    write_rows(tmp_path / "in.jsonl", n)
    out = tmp_path / "out.jsonl"
    cmd = [sys.executable, "-m", "rlvr.cli", "score", "--env", "arithmetic",
           str(tmp_path / "in.jsonl"), "-o", str(out), "--workers", "2", "--block-rows", "500",
           "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and out.stat().st_size > 300_000:     # a few thousand rows in
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be killed; use more rows"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = out.read_text().count("\n")
    assert 0 < partial < n
    with open(out, "a") as f:
        f.write('{"id": "torn half-written ro')           # as if killed mid-write
    assert subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    got = read_out(out)
    assert [r["line"] for r in got] == list(range(1, n + 1))
    clean = tmp_path / "clean.jsonl"
    score_file(ScoreConfig(env="arithmetic", input=str(tmp_path / "in.jsonl"), output=str(clean),
                           workers=0, progress=False))
    assert [(r["id"], r["score"], r["status"]) for r in got] == \
           [(r["id"], r["score"], r["status"]) for r in read_out(clean)]


def test_output_of_a_different_run_is_refused(tmp_path, capsys):
    write_rows(tmp_path / "in.jsonl", 4)
    out = tmp_path / "out.jsonl"
    args = ["score", "--env", "arithmetic", str(tmp_path / "in.jsonl"), "-o", str(out),
            "--no-progress", "--workers", "0"]
    assert cli_main(args) == 0
    assert cli_main(args + ["--env-arg", "n_terms=5"]) == 2
    assert "written by a different run" in capsys.readouterr().err
    assert cli_main(args) == 0            # same run again: resumes, nothing to add
    assert len(read_out(out)) == 4


def test_lone_surrogate_in_a_completion_round_trips(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "arithmetic/train/0/0", "completion": "x\\ud800 <answer>35</answer>"}\n'
                   '{"id": "arithmetic/train/0/0", "completion": "<answer>35</answer>"}\n')
    out = tmp_path / "out.jsonl"
    assert cli_main(["score", "--env", "arithmetic", str(src), "-o", str(out), "--no-progress",
                     "--workers", "0"]) == 0
    got = read_out(out)
    assert got[0]["completion"] == "x\ud800 <answer>35</answer>" and got[0]["score"] == 1.0
    assert got[1]["score"] == 1.0
