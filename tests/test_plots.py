"""`rlvr plot` / `rlvr compare` on small synthetic run folders: real PNGs, skipped panels noted."""
import json
import math

import pytest

from rlvr.cli import main
from rlvr.trainer.run.plots import PANELS, compare_runs, load_run, plot_run, smooth

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


# --- what the eye sees (issue 18): the drawn axes, not just that a PNG exists ----------------------
def _axes(run, panel_name):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rlvr.trainer.run.plots import _draw
    fig, ax = plt.subplots()
    assert _draw(ax, next(p for p in PANELS if p.name == panel_name), [load_run(run)])
    return fig, ax


def _write_rows(path, rows, evals=()):
    path.mkdir(parents=True)
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if evals:
        (path / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in evals))
    return path


def test_negative_rewards_are_inside_the_y_axis(tmp_path):
    # DAPO's overlong penalty: rewards of -0.92 and -0.55 must be drawn below 0, not clipped
    rewards = [-0.92, -0.55, -0.3, 0.1]
    run = _write_rows(tmp_path / "dapo", [{"step": s, "reward": r, "rewards/numeric_match/mean": 0.5}
                                          for s, r in enumerate(rewards, 1)])
    fig, ax = _axes(run, "reward")
    lo, hi = ax.get_ylim()
    assert lo < -0.92 and hi >= 1.0           # the data and, for a rate, at least [0, 1]
    assert ax.get_ylim()[0] > -1.2            # ...with a small margin, not a blown-up axis


def test_y_range_comes_from_the_data():
    from rlvr.trainer.run.plots import y_range
    assert y_range([0.2, 0.4], unit_interval=True) == pytest.approx((-0.03, 1.03))
    lo, hi = y_range([1.5, 2.0], unit_interval=True)       # a weighted reward past 1
    assert hi > 2.0 and lo < 0.0
    lo, hi = y_range([100.0, 200.0])                        # lengths: no forced 0..1
    assert 95 < lo < 100 and 200 < hi < 205
    lo, hi = y_range([3.0, 3.0])                            # flat: a visible band around it
    assert lo < 3.0 < hi
    # nearly flat (an entropy moving by 0.001): drawn flat in a band of a tenth of its size,
    # not the noise zoomed to the panel's height
    lo, hi = y_range([0.650, 0.6505, 0.651])
    assert hi - lo == pytest.approx(0.0651) and lo < 0.650 and hi > 0.651


def test_evaluations_are_points_with_intervals_not_a_line(tmp_path):
    # base and final evaluation on 100 tasks: two measurements, each with its 95% interval
    # (about +-0.1 at 0.5), and no line inventing a trajectory between them
    from matplotlib.container import ErrorbarContainer
    from rlvr.trainer.run.plots import wilson
    rows = [{"step": s, "reward": 0.01 * s} for s in range(1, 9)]
    run = _write_rows(tmp_path / "run", rows, evals=[
        {"step": 0, "pass@1": 0.51, "think/well_formed_rate": 0.0, "tasks": 100},
        {"step": 8, "pass@1": 0.59, "think/well_formed_rate": 1.0, "tasks": 100}])
    fig, ax = _axes(run, "eval")
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert [c.get_label() for c in bars] == ["pass@1", "think well-formed"]
    data_line = bars[0].lines[0]
    assert data_line.get_linestyle() == "None" and list(data_line.get_xdata()) == [0, 8]
    lo, hi = wilson(0.51, 100)
    assert 0.08 < 0.51 - lo < 0.11 and 0.08 < hi - 0.51 < 0.11
    segments = bars[0].lines[2][0].get_segments()
    assert [tuple(round(v, 4) for v in (s[0][1], s[1][1])) for s in segments][0] == \
        (round(lo, 4), round(hi, 4))
    assert wilson(1.0, 8)[1] == 1.0 and wilson(0.0, 8)[0] == 0.0 and wilson(0.3, None) == (0.3, 0.3)


def test_weighted_reward_equal_to_its_only_component_is_one_visible_line(tmp_path):
    rows = [{"step": s, "reward": 0.1 * s, "rewards/numeric_match/mean": 0.1 * s,
             "rewards/think_format/mean": 0.05} for s in range(1, 21)]
    fig, ax = _axes(_write_rows(tmp_path / "run", rows), "reward")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["reward (weighted) and numeric_match (same values)", "think_format"]
    # and when they differ, both are drawn with their own names
    rows = [{**r, "reward": r["reward"] + 0.2 * r["rewards/think_format/mean"]} for r in rows]
    fig, ax = _axes(_write_rows(tmp_path / "run2", rows), "reward")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["reward (weighted)", "numeric_match", "think_format"]


def test_sparse_series_get_markers(tmp_path):
    # a 40-step run whose think tokens were logged on one step only, and an eval at two steps
    rows = [{"step": s, "reward": 0.01 * s} for s in range(1, 41)]
    rows[9]["think/mean_tokens"] = 12.0
    run = _write_rows(tmp_path / "run", rows, evals=[{"step": 0, "pass@1": 0.1},
                                                     {"step": 40, "pass@1": 0.5}])
    fig, ax = _axes(run, "think_tokens")
    labelled = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]
    assert len(labelled) == 1 and len(labelled[0].get_xdata()) == 1
    assert labelled[0].get_marker() == "o" and labelled[0].get_markersize() >= 6
    fig, ax = _axes(run, "reward")            # a dense series stays a smoothed line
    labelled = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]
    assert labelled[0].get_marker() in ("None", None, "")
