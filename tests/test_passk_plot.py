"""`rlvr plot passk`: curves from `rlvr eval` results, their bands, and the crossing point."""
import json

import pytest

from rlvr.cli import main
from rlvr.passk import mean_pass_at_k
from rlvr.trainer.evaluation.passk_plot import find_crossings, load_curve, plot_passk


def _result(path, label, counts, n=16, ks=(1, 4, 16)):
    """A results file as `rlvr eval -o` writes it (the fields the plot reads)."""
    data = {"format": "rlvr-eval/1", "label": label, "samples": n, "sampled_tasks": len(counts),
            "correct_counts": counts, "greedy_pass1": 0.5,
            "config": {"label": label, "bootstrap": 200, "level": 0.9, "seed": 0},
            "pass_at": {f"pass@{k}": mean_pass_at_k(n, counts, k) for k in ks},
            "pass_at_ci": {f"pass@{k}": [0.0, 1.0] for k in ks}}
    path.write_text(json.dumps(data))
    return path


def test_sharpened_vs_broad_models_cross_where_hand_computed(tmp_path):
    # "RL": half the tasks always right, half never -> pass@k = 0.5 at every k.
    # "base": every task right 2 times in 16 -> pass@k = 1 - C(14,k)/C(16,k), which passes 0.5
    # between k = 4 (1 - 1001/1820 = 0.45) and k = 5 (1 - 2002/4368 = 0.54).
    rl = _result(tmp_path / "rl.json", "RL", [16] * 20 + [0] * 20)
    base = _result(tmp_path / "base.json", "base", [2] * 40)
    report = plot_passk([rl, base], tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 10_000
    assert len(report.crossings) == 1
    x = report.crossings[0]
    assert {x.a, x.b} == {"RL", "base"} and x.leader_after == "base" and 4 < x.k < 5
    # curves are recomputed at every k <= n from the counts, with a band around each point
    curve = report.curves[1]
    assert curve.points.ks == list(range(1, 17))
    assert curve.points.value[4] == pytest.approx(1 - 2002 / 4368)
    assert all(lo <= v <= hi for lo, v, hi in zip(curve.points.low, curve.points.value,
                                                   curve.points.high))
    assert "cross at k ~ 4" in report.summary()


def test_no_crossing_when_one_model_leads_everywhere(tmp_path):
    good = _result(tmp_path / "a.json", "a", [8] * 10)
    bad = _result(tmp_path / "b.json", "b", [1] * 10)
    report = plot_passk([good, bad], tmp_path / "p.png")
    assert report.crossings == [] and "do not cross" in report.summary()
    # curves that only touch (equal at k = n) do not count as crossing
    assert find_crossings([load_curve(good), load_curve(good, label="copy")]) == []


def test_a_file_without_counts_plots_its_reported_points(tmp_path):
    path = _result(tmp_path / "a.json", "a", [3, 5])
    data = json.loads(path.read_text())
    del data["correct_counts"]
    path.write_text(json.dumps(data))
    curve = load_curve(path)
    assert curve.points.ks == [1, 4, 16] and curve.points.low == [0.0, 0.0, 0.0]


def test_cli_writes_the_png_and_refuses_bad_input(tmp_path, capsys):
    a = _result(tmp_path / "a.json", "RL", [16] * 5 + [0] * 5)
    b = _result(tmp_path / "b.json", "base", [2] * 10)
    assert main(["plot", "passk", str(a), str(b), "-o", str(tmp_path / "out.png"),
                 "--names", "trained,base model"]) == 0
    assert (tmp_path / "out.png").exists()
    printed = capsys.readouterr().out
    assert "trained and base model cross" in printed
    assert main(["plot", "passk", str(a)]) == 0 and (tmp_path / "passk.png").exists()
    (tmp_path / "bad.json").write_text('{"rows": 1}')
    assert main(["plot", "passk", str(tmp_path / "bad.json")]) == 2
    assert main(["plot", "passk", str(tmp_path / "missing.json")]) == 2
    assert main(["plot", "passk"]) == 2
    assert main(["plot", "passk", str(a), "--names", "x,y"]) == 2
    assert "rlvr eval -o" in capsys.readouterr().err


def _with_tasks(path, label, counts, ids, n=16):
    _result(path, label, counts, n)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "task_ids": ids}))
    return path


def test_results_on_different_tasks_are_compared_on_their_common_tasks(tmp_path, capsys):
    """a covers t0..t9, b covers t5..t14: both curves are recomputed on t5..t9, and the
    difference is reported (a: 8 right on t0-t4 and 1 on t5-t9 would otherwise lead)."""
    a = _with_tasks(tmp_path / "a.json", "a", [8] * 5 + [1] * 5, [f"t{i}" for i in range(10)])
    b = _with_tasks(tmp_path / "b.json", "b", [4] * 10, [f"t{i}" for i in range(5, 15)])
    report = plot_passk([a, b], tmp_path / "p.png")
    assert [c.tasks for c in report.curves] == [5, 5]
    assert report.curves[0].points.value[0] == pytest.approx(1 / 16)    # t5..t9: 1 of 16 each
    assert report.curves[1].points.value[0] == pytest.approx(4 / 16)
    assert report.notes == ["the results cover different tasks (a: 10, b: 10; 5 in common): "
                            "every curve is drawn on the 5 common tasks (greedy stars left out)"]
    assert main(["plot", "passk", str(a), str(b), "-o", str(tmp_path / "q.png")]) == 0
    assert "warning: the results cover different tasks" in capsys.readouterr().err
    c = _with_tasks(tmp_path / "c.json", "c", [4] * 3, ["x", "y", "z"])
    assert plot_passk([a, c], tmp_path / "r.png").notes[0].startswith("the results share no task")
    same = _with_tasks(tmp_path / "d.json", "d", [2] * 10, [f"t{i}" for i in range(10)])
    assert plot_passk([a, same], tmp_path / "s.png").notes == []


def test_markers_at_0_and_1_are_drawn_whole(tmp_path, monkeypatch):
    """Points at pass@k 0 and 1 (and at k = 1, on the left frame) are not cut by the axes."""
    import matplotlib.pyplot as plt
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    top = _result(tmp_path / "top.json", "top", [4] * 4, n=4, ks=(1, 2, 4))
    bottom = _result(tmp_path / "bottom.json", "bottom", [0] * 4, n=4, ks=(1, 2, 4))
    plot_passk([top, bottom], tmp_path / "p.png")
    fig = figures[0]
    fig.canvas.draw()
    ax = fig.axes[0]
    cut = []
    for line in ax.lines:
        if line.get_marker() in (None, "None", "") or not line.get_clip_on():
            continue            # a marker drawn without clipping is whole
        r = line.get_markersize() / 2 * fig.dpi / 72
        for x, y in line.get_xydata():
            px, py = ax.transData.transform((x, y))
            if px - r < ax.bbox.x0 or py - r < ax.bbox.y0 or py + r > ax.bbox.y1:
                cut.append((line.get_label(), x, y))
    assert cut == []


def test_a_result_where_every_task_failed_is_refused_in_one_line(tmp_path, capsys):
    path = tmp_path / "failed.json"
    path.write_text(json.dumps({"format": "rlvr-eval/1", "pass_at": {}, "pass_at_ci": {},
                                "correct_counts": [], "samples": 4,
                                "failed_tasks": {"t0": "boom", "t1": "boom"}}))
    assert main(["plot", "passk", str(path)]) == 2
    err = capsys.readouterr().err
    assert "no task was sampled (2 failed)" in err and len(err.strip().splitlines()) == 1
