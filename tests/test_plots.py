"""`rlvr plot` / `rlvr compare` on small synthetic run folders: real PNGs, skipped panels noted."""
import json
import math

import pytest

from rlvr.cli import main
from rlvr.trainer.plots import PANELS, compare_runs, load_run, plot_run, smooth

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _write_run(path, steps=12, with_think=True, with_kl=True, with_eval=True, algorithm="grpo"):
    path.mkdir(parents=True)
    rows = []
    for s in range(1, steps + 1):
        row = {"step": s, "reward": 0.1 + 0.05 * s, "rewards/numeric_match/mean": 0.05 * s,
               "completions/mean_length": 40.0 + s, "completions/clipped_ratio": 0.5 / s,
               "completions/mean_terminated_length": 30.0 + s, "entropy": 1.0 - 0.02 * s}
        if with_think:
            row.update({"think/well_formed_rate": 0.08 * s % 1.0, "think/unclosed_rate": 0.1,
                        "think/reflection_rate": 0.0, "think/mean_tokens": 20.0 + s,
                        "answer/mean_tokens": 5.0})
        if with_kl:
            row["kl"] = 0.001 * s if s != 3 else None      # a NaN logged as null: skipped
        rows.append(row)
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if with_eval:
        ev = [{"step": s, "pass@1": 0.1 * s / steps, "pass@8": 0.3 + 0.02 * s, "tasks": 8}
              for s in (steps // 2, steps)]
        (path / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ev))
    (path / "config.json").write_text(json.dumps(
        {"config": {"algorithm": algorithm, "env": "arithmetic", "model": "/x/smollm2"}}))
    return path


def _is_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, path
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width > 300 and height > 200, (path, width, height)
    return True


def test_plot_run_writes_every_panel_as_png(tmp_path):
    run = _write_run(tmp_path / "run")
    report = plot_run(run)
    names = {p.name for p in report.files}
    assert names == {"overview.png"} | {f"{p.name}.png" for p in PANELS}
    assert all(_is_png(p) for p in report.files)
    assert report.files[0] == run / "plots" / "overview.png"
    assert report.notes == []


def test_missing_metrics_are_skipped_with_a_note(tmp_path):
    run = _write_run(tmp_path / "run", with_think=False, with_kl=False, with_eval=False)
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 13, "reward": 0.')          # a run killed mid-line
    report = plot_run(run, tmp_path / "out")
    names = {p.name for p in report.files}
    assert "reward.png" in names and "length.png" in names
    for skipped in ("think_rates", "think_tokens", "kl", "eval"):
        assert f"{skipped}.png" not in names
        assert any(f"'{skipped}'" in n for n in report.notes), report.notes
    assert any("not JSON" in n for n in report.notes)
    assert _is_png(tmp_path / "out" / "overview.png")


def test_compare_overlays_runs_and_cli(tmp_path, capsys):
    a = _write_run(tmp_path / "a" / "run")
    b = _write_run(tmp_path / "b" / "run", with_kl=False, algorithm="dr_grpo")
    report = compare_runs([a, b], tmp_path / "cmp")
    assert {p.name for p in report.files} >= {"overview.png", "length.png", "kl.png"}
    runs = [load_run(a, "a"), load_run(b, "b")]
    assert runs[1].rows["metrics.jsonl"][0]["step"] == 1
    assert main(["compare", str(a), str(b), "-o", str(tmp_path / "cli"),
                 "--names", "grpo,dr_grpo"]) == 0
    assert "overview" in capsys.readouterr().out
    assert _is_png(tmp_path / "cli" / "overview.png")
    assert main(["plot", str(a)]) == 0
    assert main(["plot", str(tmp_path)]) == 2            # not a run folder: usage error
    assert "not a run folder" in capsys.readouterr().err
    with pytest.raises(ValueError):
        compare_runs([a], tmp_path / "one")


def test_smooth_is_a_centred_moving_average():
    # window 3: interior points average their neighbours, (1+2+6)/3 = 3 and (2+6+7)/3 = 5;
    # the ends shrink the window to stay centred, so they keep their own value.
    assert smooth([1.0, 2.0, 6.0, 7.0], 3) == pytest.approx([1.0, 3.0, 5.0, 7.0])
    assert smooth([1.0, 5.0], 1) == [1.0, 5.0]
    assert all(math.isclose(v, 7.0) for v in smooth([7.0] * 50))   # constant stays constant
    line = [float(i) for i in range(40)]
    assert smooth(line) == pytest.approx(line)                      # no lag on a trend
    with pytest.raises(ValueError):
        smooth([1.0], 2)
