"""Weights & Biases as an optional logger (trainer/run/wandb_sink.py), in W&B's offline mode: the
records W&B itself wrote are read back (its .wandb file: a LevelDB-style log of protobuf
records), so the test sees what a `wandb sync` would upload."""
import json
import struct
import time

import pytest

wandb = pytest.importorskip("wandb")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_DISABLED", raising=False)


def wandb_records(run_dir, runs=1):
    """Every record of the run's offline .wandb file(s), in order, once W&B's service (a
    separate process, which writes the file after `finish` returns) has written the `exit`
    record of each of the `runs` sessions."""
    for _ in range(600):
        recs = _read_records(run_dir)
        if sum(r.WhichOneof("record_type") == "exit" for r in recs) >= runs:
            return recs
        time.sleep(0.1)
    raise AssertionError(f"W&B wrote no exit record under {run_dir} within 60 s")


def _read_records(run_dir):
    from wandb.proto import wandb_internal_pb2 as pb
    out = []
    for path in sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb")):
        data, pos, chunk = path.read_bytes(), 7, b""      # ":W&B" + magic + version
        assert data[:4] == b":W&B"
        while pos + 7 <= len(data):
            left = 32768 - pos % 32768                     # records never straddle a block header
            if left < 7:
                pos += left
                continue
            length, kind = struct.unpack("<HB", data[pos + 4:pos + 7])
            if length == 0 and kind == 0:                  # block padding
                pos += left
                continue
            chunk += data[pos + 7:pos + 7 + length]
            pos += 7 + length
            if kind in (1, 4):                             # FULL or LAST: a whole record
                rec = pb.Record()
                rec.ParseFromString(chunk)
                out.append(rec)
                chunk = b""
    return out


def history(records):
    rows = []
    for r in records:
        if r.WhichOneof("record_type") == "history":
            items = {i.key or "/".join(i.nested_key): json.loads(i.value_json)
                     for i in r.history.item}
            rows.append({k: v for k, v in items.items() if not k.startswith("_") or k == "_step"})
    return rows


def _run_folder(path, steps=3):
    path.mkdir(parents=True)
    rows = [{"step": s, "reward": 0.1 * s, "rewards/numeric_match/mean": 0.1 * s}
            for s in range(1, steps + 1)]
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (path / "config.json").write_text(json.dumps({"config": {"lr": 1e-5, "steps": steps}}))
    return rows


def test_sink_logs_the_same_names_config_and_artifacts(tmp_path):
    from rlvr.trainer.run.wandb_sink import WandbSink
    run = tmp_path / "run"
    rows = _run_folder(run)
    sink = WandbSink(run, {"lr": 1e-5, "steps": 3, "env_kwargs": {"n_terms": 2}})
    for r in rows:
        sink.log(r["step"], {**{k: v for k, v in r.items() if k != "step"},
                             "kl": float("nan"), "note": "text"})
    sink.log(3, {"pass@1": 0.4, "tasks": 8}, "eval.jsonl")
    sink.close()
    recs = wandb_records(run)
    got = history(recs)
    assert got[:2] == [{"reward": 0.1, "rewards/numeric_match/mean": 0.1, "_step": 1},
                       {"reward": 0.2, "rewards/numeric_match/mean": 0.2, "_step": 2}]
    last = got[2]      # step 3: the training row, the eval row (TensorBoard's eval/ names), plots
    assert last["_step"] == 3 and last["reward"] == pytest.approx(0.3)
    assert last["eval/pass@1"] == 0.4 and last["eval/tasks"] == 8
    assert all("kl" not in r and "note" not in r for r in got)     # NaN and text left out
    run_rec = next(r.run for r in recs if r.WhichOneof("record_type") == "run")
    config = {i.key or "/".join(i.nested_key): json.loads(i.value_json)
              for i in run_rec.config.update}
    assert config["lr"] == 1e-5 and config["env_kwargs"] == {"n_terms": 2}
    assert run_rec.run_id == (run / "wandb_run_id").read_text()
    arts = {r.artifact.type: [e.path for e in r.artifact.manifest.contents]
            for r in recs if r.WhichOneof("record_type") == "artifact"}
    assert arts["run-config"] == ["config.json"]
    assert "plots/overview.png" in arts["plots"] and "plots/reward.png" in arts["plots"]


def test_a_resumed_run_continues_the_same_wandb_run(tmp_path):
    from rlvr.trainer.run.wandb_sink import WandbSink
    run = tmp_path / "run"
    _run_folder(run)
    first = WandbSink(run, {"steps": 3})
    first.log(1, {"reward": 0.1})
    first.close(plots=False)
    second = WandbSink(run, {"steps": 6})
    second.log(4, {"reward": 0.4})
    second.close(plots=False)
    ids = {r.run.run_id for r in wandb_records(run, runs=2) if r.WhichOneof("record_type") == "run"}
    assert ids == {(run / "wandb_run_id").read_text()}


def test_missing_wandb_names_the_extra(tmp_path, monkeypatch):
    import sys
    from rlvr.trainer.run.wandb_sink import WandbSink
    monkeypatch.setitem(sys.modules, "wandb", None)      # as if not installed
    with pytest.raises(ImportError, match=r"pip install 'rlvr\[wandb\]'"):
        WandbSink(tmp_path / "run", {})


@pytest.mark.timeout(900)
def test_rlvr_train_reports_to_wandb_with_the_same_names(tmp_path, capsys):
    """`report_to = ["tensorboard", "wandb"]`: both written, W&B with metrics.jsonl's names."""
    from rlvr.cli import main
    from rlvr.trainer.models.tiny import build_tiny_model
    model = build_tiny_model(tmp_path / "model")
    out = tmp_path / "run"
    env_kwargs = json.dumps({"n_terms": 2, "max_value": 9, "prompt_style": "base"})
    assert main(["train", f"model={model}", f"output_dir={out}", "steps=2", "eval_every=2",
                 "eval_tasks=2", "eval_k=2", "prompts_per_step=2", "group_size=2",
                 "max_completion_length=8", "progress=false", "checkpoint_every=0",
                 f"env_kwargs={env_kwargs}", 'report_to=["tensorboard", "wandb"]']) == 0
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    recs = wandb_records(out)
    logged = history(recs)
    for row in rows:           # every finite number of every step, under its own name
        want = {k: v for k, v in row.items() if k != "step" and isinstance(v, (int, float))
                and not isinstance(v, bool)}
        got = {k: v for h in logged if h["_step"] == row["step"] for k, v in h.items()}
        assert want and {k: got.get(k) for k in want} == pytest.approx(want), row["step"]
    assert any("eval/pass@1" in h for h in logged)
    run_rec = next(r.run for r in recs if r.WhichOneof("record_type") == "run")
    config = {i.key or "/".join(i.nested_key): json.loads(i.value_json)
              for i in run_rec.config.update}
    assert config["steps"] == 2 and config["report_to"] == ["tensorboard", "wandb"]
    types = {r.artifact.type for r in recs if r.WhichOneof("record_type") == "artifact"}
    assert types == {"run-config", "plots"}


def test_report_to_names_only_known_sinks():
    from rlvr.trainer.config import TrainConfig
    assert TrainConfig().report_to == ("tensorboard",)
    with pytest.raises(ValueError, match="report_to"):
        TrainConfig(report_to=("tensorboard", "mlflow"))


def test_wandb_environment_variables_win_over_rlvrs_defaults(tmp_path, monkeypatch):
    """WANDB_DIR puts W&B's files there, not in the run folder; WANDB_NAME names the run."""
    from rlvr.trainer.run.wandb_sink import WandbSink, init_defaults
    run, elsewhere = tmp_path / "run", tmp_path / "wandb-files"
    elsewhere.mkdir()
    _run_folder(run)
    monkeypatch.setenv("WANDB_DIR", str(elsewhere))
    monkeypatch.setenv("WANDB_NAME", "my-name")
    monkeypatch.chdir(tmp_path)      # W&B's fallback folder, were WANDB_DIR not honoured
    wandb.teardown()                 # W&B reads its variables once per process, at set-up
    sink = WandbSink(run, {"steps": 3})
    sink.log(1, {"reward": 0.1})
    sink.close(plots=False)
    assert not (run / "wandb").exists()
    recs = wandb_records(elsewhere)
    assert history(recs)[0]["reward"] == 0.1
    assert next(r.run for r in recs if r.WhichOneof("record_type") == "run").display_name == \
        "my-name"
    wandb.teardown()                 # later tests set W&B up without these variables
    monkeypatch.delenv("WANDB_DIR")
    monkeypatch.delenv("WANDB_NAME")
    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    assert init_defaults(run) == {"dir": str(run), "project": "rlvr", "name": "run",
                                  "resume": "allow"}
