"""The reasoning-boundary metrics against values computed by hand."""
import pytest

from rlvr.boundary import cover_at_tau, crossing_k, support_counts
from rlvr.passk import pass_at_k


def test_cover_counts_tasks_at_or_above_the_threshold():
    # rates 0, 1/4, 1/2, 1: at tau 1/4 three tasks, at 1/2 two, at 1 one
    assert cover_at_tau(4, [0, 1, 2, 4], [0.25, 0.5, 1.0]) == [0.75, 0.5, 0.25]
    # a rate exactly on the threshold counts though 1/3 is not exact in binary
    assert cover_at_tau([3, 6], [1, 2], [1 / 3]) == [1.0]
    with pytest.raises(ValueError, match="tau"):
        cover_at_tau(4, [1], [0.0])
    with pytest.raises(ValueError, match="c <= n"):
        cover_at_tau(4, [5], [0.5])


def test_support_counts_and_their_verdict():
    s = support_counts([3, 0, 0, 1, 0], [1, 2, 0, 0, 0])
    assert (s.both, s.only_first, s.only_second, s.neither) == (1, 1, 1, 2)
    assert s.verdict == "shifted"
    assert support_counts([1, 0], [1, 1]).verdict == "expanded"
    assert support_counts([1, 1], [1, 0]).verdict == "shrunk"
    assert support_counts([1, 0], [5, 0]).verdict == "preserved"
    with pytest.raises(ValueError, match="same tasks"):
        support_counts([1], [1, 2])


def test_the_crossing_of_a_sharpened_and_a_broad_model():
    # first: sure on task 1, never on task 2 (pass@k = 0.5 for all k);
    # second: 1 in 8 on both tasks, so its pass@k rises past 0.5 between k = 4 and k = 8.
    first, second, n = [8, 0], [1, 1], 8
    ks = [1, 2, 4, 8]
    b = [pass_at_k(n, 1, k) for k in ks]            # 0.125, 0.25, 0.5, 1.0
    assert b[2] == 0.5 and b[3] == 1.0
    cross = crossing_k(n, first, n, second, ks, resamples=0)
    assert cross.k == 8                              # at k = 4 they tie: not below yet
    assert crossing_k(n, second, n, first, ks, resamples=0).k is None   # starts below


def test_the_crossing_band_comes_from_paired_resamples():
    first = [8] * 10 + [0] * 10
    second = [1] * 20
    cross = crossing_k(8, first, 8, second, [1, 2, 4, 8], resamples=200, seed=1)
    assert cross.k == 8
    # every resample with a crossing crosses at a k that was evaluated
    assert cross.low in (4.0, 8.0) and cross.high == 8.0
    assert 0 <= cross.never < 1


def _results(path, label, counts, n=8, prints=None):
    import json
    ids = [f"t{i}" for i in range(len(counts))]
    path.write_text(json.dumps({
        "label": label, "samples": n, "correct_counts": counts, "task_ids": ids,
        "task_fingerprints": prints or [f"p{i}" for i in range(len(counts))],
        "pass_at": {"pass@1": sum(counts) / n / len(counts)}, "greedy_pass1": None,
        "sampled_tasks": len(counts), "config": {"env": "arithmetic", "env_kwargs": {}}}))
    return path


def test_the_boundary_report_writes_tables_plots_and_json(tmp_path):
    import json
    from rlvr.cli import main
    # "grpo" is sure of tasks 0-1 and never right on 2-3; "base" is right 1 in 8 on all four
    grpo = _results(tmp_path / "grpo.json", "grpo", [8, 8, 0, 0])
    base = _results(tmp_path / "base.json", "base", [1, 1, 1, 1])
    out = tmp_path / "report"
    assert main(["boundary", str(grpo), str(base), "-o", str(out), "--resamples", "50"]) == 0
    data = json.loads((out / "boundary.json").read_text())
    models = {m["label"]: m for m in data["models"]}
    assert models["grpo"]["cover_at"]["0.5"] == 0.5 and models["base"]["cover_at"]["0.5"] == 0.0
    assert models["base"]["cover_at"]["0.1"] == 1.0
    assert models["grpo"]["pass_at"]["pass@1"]["value"] == 0.5
    pair = data["pairs"][0]
    assert pair["support"] == {"both": 2, "only_first": 0, "only_second": 2, "neither": 0,
                               "verdict": "expanded"}
    assert pair["leader_at_1"] == "grpo" and pair["crossing"]["k"] == 8   # tied at k = 4, behind from 8
    for name in ("passk.png", "cover.png", "boundary.md"):
        assert (out / name).stat().st_size > 0
    assert "base overtakes grpo at 8" in (out / "boundary.md").read_text()


def test_the_boundary_report_refuses_different_problems(tmp_path, capsys):
    from rlvr.cli import main
    a = _results(tmp_path / "a.json", "a", [1, 2])
    b = _results(tmp_path / "b.json", "b", [1, 2], prints=["p0", "other"])
    assert main(["boundary", str(a), str(b), "-o", str(tmp_path / "r")]) == 2
    assert "different problems" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
