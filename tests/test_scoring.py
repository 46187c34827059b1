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
from rlvr import Completion, Environment, RowSource, ScoreConfig, Task, load_env, register_env, \
    score_file
from rlvr.cli import main as cli_main
from rlvr.core import BaseReward
from rlvr.scoring import ScoreSummary
from rlvr.scoring.summary import UNSCORED
from rlvr.scoring.run import _ChunkSizer, _json_encoder, _Scored
from rlvr.verifiers import NumericMatch


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
                                  "verifier": "numeric_match@3+think_format@1"}
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
    assert reasons[2] == ("line 3: field 'completion' must be a string or a list of chat "
                          "messages, got int")
    assert reasons[3] == "line 4: expected a JSON object, got list"
    assert "line 5: row has neither 'answer' (gold answer) nor 'id' (task id) nor 'prompt'" == reasons[4]
    assert reasons[5].startswith("line 6: no gold answer: the row has no `answer` field (name "
                                 "the field that holds it with --answer-field) and bad "
                                 "arithmetic task id 'arithmetic/bogus'")
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
    assert time.monotonic() - t0 < 45     # the hang is cut at 1 s; the rest is workers booting
    got = read_out(out)
    assert [r["status"] for r in got] == ["ok", "ok", "timeout", "ok", "ok"]
    assert [r["score"] for r in got] == [1.0, 1.0, 0.0, 1.0, 0.0]
    # a failed row is never hidden: it counts as failed (exit 3), as 0 in the all-rows mean,
    # and its reason is listed
    assert summary.by_status["timeout"] == 1 and summary.error_rows == 1
    assert summary.mean_score == 3 / 4 and summary.mean_all_rows == 3 / 5
    text = summary.render()
    assert "0.7500 over 4 scored rows; 0.6000 over all 5 rows with the 1 failed rows" in text
    assert "1 x timeout: no result within 1s" in text


def test_cli_exits_3_on_a_timeout_row_and_lists_its_reason(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "t0", "completion": "hang"}) + "\n"
                   + json.dumps({"id": "t1", "completion": "<answer>2</answer>"}) + "\n")
    code = cli_main(["score", "--env", "test-hang", str(src), "-o", str(tmp_path / "out.jsonl"),
                     "--deadline", "1", "--workers", "1", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 3
    assert "1.0000 over 1 scored rows; 0.5000 over all 2 rows" in out
    assert "1 x timeout: no result within 1s" in out


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


class SleepsThenMatches(BaseReward):
    """'sleep S ...' sleeps S seconds, 'hang' forever; then exact numeric match."""
    name = "sleeps_then_matches"

    def _score(self, task, completion):
        if completion.text.startswith("sleep "):
            time.sleep(float(completion.text.split()[1]))
        if completion.text == "hang":
            time.sleep(10_000)
        return NumericMatch()._score(task, completion)


@register_env("test-slow-rows", replace=True)
def slow_rows_env():
    return Environment("test-slow-rows", RowSource({"train": [Task("t0", answer="0")]}),
                       [(SleepsThenMatches(), 1.0)], gold=lambda t: f"<answer>{t.answer}</answer>")


def test_a_chunk_keeps_per_row_deadlines_and_is_rescored_around_a_hung_row():
    # One chunk of 7 rows: 4 rows of 0.25 s (1 s together, over the 0.8 s deadline, yet each
    # well inside it), a row that hangs, 2 quick rows. Only the hung row may time out; the rows
    # before it are scored again by a fresh worker, the rows after it once, all in order.
    from rlvr.pool import Factory, WorkerPool
    from rlvr.envs.registry import env_module
    from rlvr.scoring.run import _build_context, _run_chunk, _RowSpec
    env = load_env("test-slow-rows")
    spec = _RowSpec("id", "completion", "answer", {"rlvr": "0.1.0", "env": "test-slow-rows@1"},
                    env.reward.version)
    context = Factory(_build_context, {"env_name": "test-slow-rows", "env_args": {},
                                       "module": env_module("test-slow-rows"), "spec": spec})
    texts = ["sleep 0.25 <answer>0</answer>"] * 4 + ["hang", "<answer>0</answer>", "<answer>1</answer>"]
    raws = [json.dumps({"id": "t0", "completion": t}) + "\n" for t in texts]
    with WorkerPool(1) as pool:
        parts = _run_chunk(pool, context, spec, (range(11, 18), raws), deadline_s=0.8)
    got = [json.loads(line) for part in parts for line in part.data.decode().splitlines()]
    assert [r["line"] for r in got] == list(range(11, 18))
    assert [r["status"] for r in got] == ["ok"] * 4 + ["timeout", "ok", "ok"]
    assert [r["score"] for r in got] == [1.0] * 4 + [0.0, 1.0, 0.0]
    assert got[4]["reason"].startswith("line 15: no result within 0.8s")
    assert sum(part.rows for part in parts) == 7


def _plain_loop_rows(env, src: Path) -> list[bytes]:
    """What rlvr score must write for well-formed rows: the benchmark's plain loop, row by row."""
    versions = {"rlvr": "0.1.0", "env": f"{env.name}@{env.version}"}
    out = []
    with open(src, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            v = env.reward.score(env.task_from_row(row), Completion(row["completion"]))
            out.append(json.dumps({**row, "line": n, "score": v.score, "status": v.status,
                                   "extracted": v.extracted, "reason": v.reason,
                                   "latency_s": 0, "components": v.components,
                                   "solved": v.solved,
                                   "versions": {**versions, "verifier": v.version}},
                                  ensure_ascii=False, default=str).encode())
    return out


def _without_latency(data: bytes) -> list[bytes]:
    import re
    return [re.sub(rb'"latency_s": [-0-9.e]+', b'"latency_s": 0', line)
            for line in data.splitlines()]


def test_output_bytes_equal_a_plain_loop_with_0_1_2_workers_and_batches(tmp_path):
    """Chunked scoring writes exactly what scoring row by row writes (bar the measured latency):
    blank lines, CRLF endings, non-ASCII, escapes and an input field named like an output one."""
    env = load_env("arithmetic")
    rows = []
    for i, t in enumerate(env.sample(70, seed=5)):
        text = [env.gold(t), f"<think>é 中文 \u2028</think><answer>{int(t.answer) + 1}</answer>",
                "<think>unclosed", f"The answer is {t.answer}."][i % 4]
        row = {"id": t.id, "completion": text, **({"answer": t.answer} if i % 3 else {})}
        if i % 9 == 0:
            row.update(score="from the input", extra={"nested": [1, 2.5, None, True]})
        rows.append(json.dumps(row, ensure_ascii=i % 2 == 0))
    rows[10:10] = ["", "   "]
    src = tmp_path / "in.jsonl"
    src.write_bytes(("\r\n".join(rows[:30]) + "\n" + "\n".join(rows[30:]) + "\n").encode())
    expected = _plain_loop_rows(env, src)
    assert len(expected) == 70
    for workers, batch_rows in ((0, 1), (1, 1), (2, 1), (2, 3)):
        out = tmp_path / f"out-{workers}-{batch_rows}.jsonl"
        score_file(ScoreConfig(env="arithmetic", input=str(src), output=str(out),
                               workers=workers, batch_rows=batch_rows, progress=False))
        assert _without_latency(out.read_bytes()) == expected, (workers, batch_rows)


def test_json_encoder_writes_what_json_dumps_writes():
    encode = _json_encoder()
    cyclic: list = []
    cyclic.append(cyclic)
    for value in [{"é\u2028": "\ud800", "n": [1, 2.5e-7, None, True, float("nan")]},
                  {"obj": object, "f": 1e16, "neg": -0.0}, "plain", [{"a": {}}]]:
        assert encode(value) == json.dumps(value, ensure_ascii=False, default=str)
    with pytest.raises(ValueError, match="Circular"):
        encode({"c": cyclic})
    assert encode({"ok": [1]}) == '{"ok": [1]}'      # a failed encode leaves no stale state


def test_chunk_summaries_fold_to_the_row_by_row_summary():
    # (text, status, score, latency, id, reason, counts, sample): ties in latency, unscored
    # statuses, a None score; unscored rows carry a reason (with the line prefix the summary
    # strips); three tasks with several samples each, and two rows that are not pass@k samples
    # (sample None; else whether the row solved its task)
    results = [("{}", st, sc, lat, f"r{i % 3}",
                f"line {11 + i}: broke" if st in UNSCORED else None, None,
                None if i in (0, 4) else st == "ok" and sc is not None and sc >= 1.0)
               for i, (st, sc, lat) in enumerate([
        ("ok", 1.0, 0.5), ("ok", 0.1, 0.2), ("timeout", 0.0, 2.0), ("unparsed", 0.0, 0.5),
        ("error", 0.0, 0.5), ("ok", 0.3, 0.7), ("gold_unparseable", 0.0, 0.1),
        ("ok", None, 0.5), ("ok", 0.7, 0.01), ("infra_error", 0.0, 0.5)])]
    lines = range(11, 21)
    by_row, by_chunk = ScoreSummary(), ScoreSummary()
    for line, (_, st, sc, lat, row_id, reason, _counts, sample) in zip(lines, results):
        by_row.add(st, sc, lat, line, row_id, reason, sample=sample)
    for lo, hi in ((0, 4), (4, 5), (5, 10)):
        part = _Scored.of(lines[lo:hi], results[lo:hi])
        assert part.data == b"{}\n" * (hi - lo)
        by_chunk.merge(part)
    assert by_chunk.to_dict() == by_row.to_dict()
    d = by_row.to_dict()
    # scored: ok/unparsed rows with a score: 1.0 + 0.1 + 0.0 + 0.3 + 0.7 = 2.1 over 5 rows
    assert d["scored_rows"] == 5 and d["mean_score"] == pytest.approx(0.42)
    assert d["by_status"] == {"ok": 5, "unparsed": 1, "gold_unparseable": 1, "timeout": 1,
                              "error": 1, "infra_error": 1}
    # slowest: 2.0 (line 13), 0.7 (16), then the 0.5 ties by line: 20, 18, 15
    assert [s["line"] for s in d["slowest"]] == [13, 16, 20, 18, 15]
    # pass@k from the 8 sample rows only: r0 gets rows 3, 6, 9 (none solved), r1 rows 1, 7 (0.1,
    # None), r2 rows 2, 5, 8 (none solved; 0.3 and 0.7 are partial scores)
    assert d["samples"]["tasks"] == 3 and d["samples"]["samples_min"] == 2
    assert d["failed_rows"] == 4 and d["mean_score_all_rows"] == pytest.approx(0.21)
    assert d["top_failures"] == {"timeout: broke": 1, "error: broke": 1,
                                 "gold_unparseable: broke": 1, "infra_error: broke": 1}


def test_chunk_sizes_double_up_to_about_50ms_of_rows_in_whole_batches():
    sizer = _ChunkSizer(step=3, most=1000)
    assert [sizer.next() for _ in range(4)] == [3, 6, 12, 24]   # one batch first: rows may be slow
    sizer.observe(rows=30, seconds=0.1)          # 3.3 ms a row: 50 ms is 15 rows -> 15 (3 x 5)
    assert [sizer.next() for _ in range(2)] == [15, 15]
    sizer.observe(rows=300, seconds=0.003)       # 10 us a row: 5000 rows, but at most 1000
    assert [sizer.next() for _ in range(7)] == [30, 60, 120, 240, 480, 960, 999]
    sizer.observe(rows=1, seconds=10.0)          # slower than the deadline: one batch a chunk
    assert sizer.next() == 3


def _score_cli(rows: Path, out: Path, *extra: str) -> int:
    return cli_main(["score", str(rows), "-o", str(out), "--workers", "0", "--no-progress",
                     *extra])


def test_an_empty_input_says_0_rows_and_exits_2(tmp_path, capsys):
    rows, out = tmp_path / "rows.jsonl", tmp_path / "out.jsonl"
    for text in ("", "\n   \n"):
        rows.write_text(text)
        assert _score_cli(rows, out, "--env", "arithmetic") == 2
        err = capsys.readouterr().err
        assert "0 rows, nothing to score" in err and len(err.strip().splitlines()) == 1
        assert not out.exists()                     # nothing written for nothing read


@register_env("by-id-rows", replace=True)
def by_id_rows():
    """Tasks looked up by id (a RowSource): rows without an answer need a known id."""
    tasks = [Task(f"q{i}", prompt=f"{i}+1?", answer=str(i + 1)) for i in range(3)]
    return Environment("by-id-rows", RowSource({"train": tasks}), [(NumericMatch(), 1.0)])


def test_failures_are_grouped_by_reason_with_examples_and_capped(tmp_path, capsys):
    """50 unknown task ids are one group with a few examples (and, since the rows carry no
    answer, the option that names the gold field); more than 5 reasons end in '+N more'; json's
    "Invalid control character at" reads "... at column 42", not "at at column"."""
    rows, out = tmp_path / "rows.jsonl", tmp_path / "out.jsonl"
    lines = [json.dumps({"id": f"nope{i}", "completion": "1"}) for i in range(50)]
    lines += [" " * i + "x" for i in range(6)]             # six bad-JSON columns: six reasons
    lines.append('{"id": "q0", "completion": "unterminated}')
    rows.write_text("\n".join(lines) + "\n")
    assert _score_cli(rows, out, "--env", "by-id-rows") == 3
    text = capsys.readouterr().out
    assert ("      50 x error: no gold answer: the row has no `answer` field (name the field that "
            "holds it with --answer-field) and unknown task id (e.g. 'nope0', 'nope1', 'nope2', "
            "...)") in text
    assert "+3 more reasons (3 rows)" in text
    reasons = [r["reason"] for r in read_out(out)]
    assert "line 57: bad JSON (Invalid control character at column 42)" in reasons
    assert not any("at at" in r for r in reasons)
    # one value shared by every row of a group is shown in place, not as examples
    summary = ScoreSummary()
    for line in range(3):
        summary.add("error", None, 0.0, line, None, f"line {line}: missing field 'completion'")
    assert summary.to_dict()["top_failures"] == {"error: missing field 'completion'": 3}


def test_a_completion_field_holding_lists_of_lists_suggests_the_nested_path(tmp_path, capsys):
    """lm-evaluation-harness writes `resps: [[text]]`: the error names `resps.0.0`, which works."""
    rows, out = tmp_path / "rows.jsonl", tmp_path / "out.jsonl"
    rows.write_text(json.dumps({"id": "arithmetic/test/0/0", "resps": [["<answer>1</answer>"]]})
                    + "\n")
    assert _score_cli(rows, out, "--env", "arithmetic", "--completion-field", "resps") == 3
    reason = read_out(out)[0]["reason"]
    assert "got a list of lists" in reason and "--completion-field resps.0.0" in reason
    out.unlink()
    Path(str(out) + ".meta.json").unlink()
    assert _score_cli(rows, out, "--env", "arithmetic", "--completion-field", "resps.0.0") == 0
    assert read_out(out)[0]["status"] == "ok"
