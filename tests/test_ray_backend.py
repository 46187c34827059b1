"""`rlvr score --backend ray` writes exactly what the process pool writes, timeouts included."""
import json
import os
from pathlib import Path

import pytest

import envs_for_tests  # noqa: F401  (registers test-hang)
from rlvr import ScoreConfig, score_file

TESTS_DIR = str(Path(__file__).parent)


@pytest.fixture(scope="module")
def ray_local():
    import ray   # a test extra: its absence is a failure, not a skip
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (TESTS_DIR, os.environ.get("PYTHONPATH")) if p)   # Ray workers import our test envs
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _rows(path: Path) -> None:
    texts = ["<answer>0</answer>", "<answer>2</answer>", "hang", "<answer>5</answer>",
             "<answer>8</answer>", "<think>unclosed", "<answer>12</answer>"]
    lines = [json.dumps({"id": f"t{i}", "completion": c}) for i, c in enumerate(texts)]
    lines.insert(3, "{broken json")
    lines.append(json.dumps({"id": "t9", "completion": ["not", "a", "string"]}))
    lines.append(json.dumps({"id": "no-such-task", "completion": "1"}))
    path.write_text("\n".join(lines) + "\n")


def _comparable(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for r in rows:
        r.pop("latency_s")
        if r["status"] == "timeout":
            r["reason"] = r["reason"].split(":")[0]      # the measured seconds differ
    return rows


def test_ray_backend_output_identical_to_process_pool(tmp_path, ray_local):
    _rows(tmp_path / "in.jsonl")
    outs = {}
    for backend in ("process", "ray"):
        out = tmp_path / f"{backend}.jsonl"
        summary = score_file(ScoreConfig(env="test-hang", input=str(tmp_path / "in.jsonl"),
                                         output=str(out), workers=2, deadline_s=1.0,
                                         backend=backend, progress=False, block_rows=4))
        outs[backend] = _comparable(out)
        assert summary.by_status == {"ok": 5, "unparsed": 1, "timeout": 1, "error": 3}
    assert outs["ray"] == outs["process"]
    statuses = [r["status"] for r in outs["ray"]]
    assert statuses == ["ok", "ok", "timeout", "error", "ok", "ok", "unparsed", "ok", "error",
                        "error"]
