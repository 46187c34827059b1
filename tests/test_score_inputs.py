"""`rlvr score` reads what other tools write: chat-format completions, nested fields (lm-eval's
layout), several samples per task (pass@k per task), and refuses formats it cannot read."""
import json

import pytest

from rlvr import load_env
from rlvr.cli import main as cli_main
from rlvr.scoring.fields import completion_text, get_field

ENV = load_env("arithmetic")
TASKS = ENV.sample(4, seed=3)


def _rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _score(tmp_path, src, *extra):
    out = tmp_path / "out.jsonl"
    code = cli_main(["score", "--env", "arithmetic", str(src), "-o", str(out), "--workers", "0",
                     "--no-progress", "--summary-json", str(tmp_path / "s.json"), *extra])
    rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    summary = json.loads((tmp_path / "s.json").read_text()) if code in (0, 3) else None
    return code, rows, summary


def test_chat_format_completions_score_the_last_assistant_turn(tmp_path):
    t = TASKS[0]
    chats = [
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": ENV.gold(t)}],
        # earlier assistant turns do not count: only the last one
        [{"role": "assistant", "content": ENV.gold(t)},
         {"role": "user", "content": "sure?"}, {"role": "assistant", "content": "no idea"}],
        # OpenAI content parts are joined
        [{"role": "assistant", "content": [{"type": "text", "text": "<think>x</think>"},
                                           {"type": "text", "text": f"<answer>{t.answer}</answer>"}]}],
        [{"role": "user", "content": "q"}],                     # no assistant turn: an error row
    ]
    src = _rows(tmp_path / "in.jsonl", [{"id": t.id, "completion": c} for c in chats])
    code, rows, _ = _score(tmp_path, src)
    assert code == 3
    assert [(r["status"], r["score"]) for r in rows[:3]] == [("ok", 1.0), ("unparsed", 0.0),
                                                              ("ok", 1.0)]
    assert rows[3]["status"] == "error" and "no assistant turn" in rows[3]["reason"]


def test_nested_fields_read_lm_eval_harness_rows(tmp_path):
    # lm-evaluation-harness: {"doc_id", "doc": {...}, "resps": [[text]], "target": gold}
    rows = [{"doc_id": 0, "doc": {"id": t.id}, "resps": [[ENV.gold(t) if i % 2 == 0 else "7"]],
             "target": t.answer} for i, t in enumerate(TASKS)]
    src = _rows(tmp_path / "lm_eval.jsonl", rows)
    code, out, _ = _score(tmp_path, src, "--completion-field", "resps.0.0",
                          "--id-field", "doc.id", "--answer-field", "target")
    assert code == 0
    assert [r["score"] for r in out] == [1.0, 0.0, 1.0, 0.0]
    assert out[0]["resps"] == rows[0]["resps"]                # the row is written back as it was


def test_several_samples_per_task_give_pass_at_k_per_task(tmp_path):
    # task 0: 4 samples, 1 right; task 1: 4 samples, all right; task 2: 4 samples, none right
    right = {0: 1, 1: 4, 2: 0}
    rows = [{"id": TASKS[i].id, "answer": TASKS[i].answer,
             "completion": ENV.gold(TASKS[i]) if j < right[i] else "<answer>-1</answer>"}
            for i in right for j in range(4)]
    code, _, summary = _score(tmp_path, _rows(tmp_path / "in.jsonl", rows))
    assert code == 0
    by = summary["samples"]
    assert (by["tasks"], by["samples_min"], by["samples_max"]) == (3, 4, 4)
    # pass@1 = mean(c/n) = (1/4 + 1 + 0) / 3; pass@2 for c=1, n=4: 1 - C(3,2)/C(4,2) = 1/2
    # -> (1/2 + 1 + 0) / 3; pass@4: (1 + 1 + 0) / 3
    assert by["pass_at_k"] == pytest.approx({"1": 1.25 / 3, "2": 1.5 / 3, "4": 2 / 3})


def _eval_sample_rows():
    """`rlvr eval`'s samples layout: per task a right greedy row, then 4 samples (task 0: 1
    right, task 1: none right)."""
    right = {0: 1, 1: 0}
    rows = []
    for i, hits in right.items():
        t = TASKS[i]
        rows.append({"id": t.id, "kind": "greedy", "answer": t.answer, "completion": ENV.gold(t)})
        rows += [{"id": t.id, "kind": "sample", "answer": t.answer,
                  "completion": ENV.gold(t) if j < hits else "<answer>-1</answer>"}
                 for j in range(4)]
    return rows


def test_rlvr_eval_greedy_rows_are_not_pass_at_k_samples(tmp_path):
    code, out, summary = _score(tmp_path, _rows(tmp_path / "in.jsonl", _eval_sample_rows()))
    assert code == 0 and len(out) == 10                   # every row is still scored
    by = summary["samples"]
    assert (by["tasks"], by["samples_min"], by["samples_max"]) == (2, 4, 4)
    # only the sampled rows count: pass@1 = (1/4 + 0) / 2 (the right greedy rows would add)
    assert by["pass_at_k"] == pytest.approx({"1": 0.125, "2": 0.25, "4": 0.5})


def test_resumed_runs_leave_greedy_rows_out_of_pass_at_k_too(tmp_path):
    rows = _eval_sample_rows()
    _score(tmp_path, _rows(tmp_path / "in.jsonl", rows[:6]))  # a run stopped after 6 rows
    src = _rows(tmp_path / "in.jsonl", rows)
    code, out, summary = _score(tmp_path, src)
    assert code == 0 and len(out) == 10 and summary["resumed_rows"] == 6
    assert summary["samples"]["pass_at_k"] == pytest.approx({"1": 0.125, "2": 0.25, "4": 0.5})


def test_one_sample_per_task_reports_no_pass_at_k(tmp_path):
    rows = [{"id": t.id, "answer": t.answer, "completion": ENV.gold(t)} for t in TASKS]
    code, _, summary = _score(tmp_path, _rows(tmp_path / "in.jsonl", rows))
    assert code == 0 and "samples" not in summary


def test_an_unreadable_format_is_refused_naming_the_supported_ones(tmp_path, capsys):
    src = tmp_path / "rows.csv"
    src.write_text("id,completion\na,1\n")
    code, _, _ = _score(tmp_path, src)
    err = capsys.readouterr().err
    assert code == 2
    assert "cannot read .csv files" in err and "JSON-lines" in err and "Parquet" in err


def test_field_helpers():
    assert get_field({"a": [{"b": "x"}]}, "a.0.b") == "x"
    assert get_field({"a.b": 1, "a": {"b": 2}}, "a.b") == 1      # a flat dotted key wins
    with pytest.raises(KeyError, match="resps.1"):
        get_field({"resps": ["x"]}, "resps.1")
    assert completion_text([{"role": "assistant", "content": None}], "c") == ""
    with pytest.raises(ValueError, match="got int"):
        completion_text(3, "c")


def test_transcript_rows_honour_the_id_field(tmp_path):
    # a `messages` row named by --id-field: the same lookup as a completion row
    t = TASKS[0]
    rows = [{"key": t.id, "messages": [{"role": "user", "content": "q"},
                                       {"role": "assistant", "content": text}]}
            for text in (ENV.gold(t), "<answer>-1</answer>")]
    code, out, _ = _score(tmp_path, _rows(tmp_path / "in.jsonl", rows), "--id-field", "key")
    assert code == 0
    assert [(r["status"], r["score"]) for r in out] == [("ok", 1.0), ("ok", 0.0)]


def test_format_reward_alone_does_not_count_as_solving_in_pass_at_k(tmp_path):
    # with R1-Zero's equal weights a well-formed wrong answer scores 1.0, like a right one
    t = TASKS[0]
    right = f"<think>x</think><answer>{t.answer}</answer>"
    wrong = f"<think>x</think><answer>{int(t.answer) + 1}</answer>"
    src = _rows(tmp_path / "in.jsonl", [{"id": t.id, "completion": c}
                                        for c in (right, wrong, wrong, wrong)])
    code, rows, summary = _score(tmp_path, src, "--env-arg", "format_weight=1.0")
    assert code == 0
    assert [r["score"] for r in rows] == [2.0, 1.0, 1.0, 1.0]
    assert [r["solved"] for r in rows] == [True, False, False, False]
    assert summary["samples"]["pass_at_k"] == pytest.approx({"1": 0.25, "2": 0.5, "4": 1.0})
    # resumed from the written rows: the same
    code, _, summary = _score(tmp_path, src, "--env-arg", "format_weight=1.0")
    assert summary["samples"]["pass_at_k"] == pytest.approx({"1": 0.25, "2": 0.5, "4": 1.0})
