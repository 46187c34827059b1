"""`rlvr boundary A.json B.json ...`: the reasoning-boundary report of several models.

The note's central picture, as one report over `rlvr eval -o` results on the same tasks: RL
raises pass@1, but does it change the set of problems solvable at large k? For every model the
pass@k curve (unbiased, k = 1 ... n, bootstrap band over tasks) and Cover@tau at several
reliability thresholds; for every pair the per-task support counts (solved by both, by only one,
by neither) and the k at which the curve that leads at k = 1 falls behind, with a band from a
paired task bootstrap (rlvr.boundary). Written as boundary.json (for CI), boundary.md (the
tables) and two plots: pass@k vs k, Cover@tau vs tau.

Results on different problems are refused (the same check as `rlvr plot passk`); results on
different task subsets are compared on the tasks they share, and the report says so.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from rlvr.boundary import cover_at_tau, crossing_k, support_counts
from rlvr.trainer.evaluation.passk_plot import (Curve, load_curve, on_common_tasks,
                                                plot_passk)

__all__ = ["DEFAULT_TAUS", "BoundaryReport", "boundary_report"]

DEFAULT_TAUS = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


@dataclass
class BoundaryReport:
    """Everything the report writes, as plain data (to_dict is boundary.json)."""
    models: list[dict]
    pairs: list[dict]
    tasks: int
    notes: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"tasks": self.tasks, "models": self.models, "pairs": self.pairs,
                "notes": self.notes}


def _model_row(c: Curve, ids: list[str], taus) -> dict:
    counts = [c.task_counts[t] for t in ids]
    ks = [k for k in c.points.ks if k in (1, c.samples) or (k & (k - 1)) == 0]
    at = dict(zip(c.points.ks, zip(c.points.value, c.points.low, c.points.high)))
    return {"label": c.label, "samples": c.samples, "greedy_pass1": c.greedy,
            "pass_at": {f"pass@{k}": {"value": at[k][0], "low": at[k][1], "high": at[k][2]}
                        for k in ks},
            "cover_at": {f"{tau:g}": v for tau, v in zip(taus, cover_at_tau(c.samples, counts,
                                                                             taus))}}


def _pair_row(a: Curve, b: Curve, ids: list[str], resamples: int, seed: int) -> dict:
    ca, cb = [a.task_counts[t] for t in ids], [b.task_counts[t] for t in ids]
    support = support_counts(ca, cb)
    n = min(a.samples, b.samples)
    ks = sorted({2 ** i for i in range(n.bit_length()) if 2 ** i <= n} | {n})
    # the crossing of the curve that leads at k = 1: where RL's sharpened curve is overtaken
    first, second = (a, b) if a.points.value[0] >= b.points.value[0] else (b, a)
    cf = [first.task_counts[t] for t in ids]
    cs = [second.task_counts[t] for t in ids]
    cross = crossing_k(first.samples, cf, second.samples, cs, ks, resamples=resamples, seed=seed)
    return {"first": a.label, "second": b.label, "support": support.to_dict(),
            "leader_at_1": first.label, "overtaken_by": second.label,
            "crossing": cross.to_dict()}


def boundary_report(results: list, out_dir: str | Path, labels: list[str] | None = None,
                    taus=DEFAULT_TAUS, resamples: int = 1000, seed: int = 0) -> BoundaryReport:
    """Load `results` (paths of `rlvr eval -o` files), compare them and write the report."""
    if len(results) < 2:
        raise ValueError("a boundary report compares two or more results files")
    if labels is not None and len(labels) != len(results):
        raise ValueError(f"{len(labels)} names for {len(results)} results")
    curves = [load_curve(r, labels[i] if labels else None) for i, r in enumerate(results)]
    missing = [c.label for c in curves if c.task_counts is None]
    if missing:
        raise ValueError(f"{', '.join(missing)}: no per-task counts (an older `rlvr eval` "
                         "file); rerun `rlvr eval -o` to get them")
    curves, notes = on_common_tasks(curves)
    ids = sorted(set.intersection(*(set(c.task_counts) for c in curves)))
    if not ids:
        raise ValueError("the results share no task; evaluate every model on the same tasks "
                         "(`rlvr eval --env-from RUN_DIR`)")
    report = BoundaryReport([_model_row(c, ids, taus) for c in curves],
                            [_pair_row(a, b, ids, resamples, seed)
                             for i, a in enumerate(curves) for b in curves[i + 1:]],
                            len(ids), notes)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report.files.append(plot_passk(curves, out / "passk.png").path)
    report.files.append(_plot_cover(curves, ids, out / "cover.png"))
    (out / "boundary.json").write_text(json.dumps(report.to_dict(), indent=1) + "\n")
    (out / "boundary.md").write_text(render_markdown(report))
    report.files += [out / "boundary.json", out / "boundary.md"]
    return report


def _plot_cover(curves: list[Curve], ids: list[str], path: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for c in curves:
        taus = [i / c.samples for i in range(1, c.samples + 1)]
        ax.step(taus, cover_at_tau(c.samples, [c.task_counts[t] for t in ids], taus),
                where="post", label=c.label)
    ax.set_xlabel("tau (a task counts when at least this share of its samples is right)")
    ax.set_ylabel("Cover@tau (share of tasks)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"Cover@tau on {len(ids)} tasks", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def render_markdown(r: BoundaryReport) -> str:
    """The report's tables: pass@k and Cover@tau per model, support and crossing per pair."""
    ks = list(r.models[0]["pass_at"])
    lines = [f"# Reasoning boundary on {r.tasks} tasks", ""]
    lines += [f"> {n}" for n in r.notes] + ([""] if r.notes else [])
    lines += ["| model | " + " | ".join(ks) + " |", "|---|" + "---|" * len(ks)]
    for m in r.models:
        cells = [f"{m['pass_at'][k]['value']:.3f} [{m['pass_at'][k]['low']:.2f}, "
                 f"{m['pass_at'][k]['high']:.2f}]" if k in m["pass_at"] else "" for k in ks]
        lines.append(f"| {m['label']} | " + " | ".join(cells) + " |")
    taus = list(r.models[0]["cover_at"])
    lines += ["", "| model | " + " | ".join(f"Cover@{t}" for t in taus) + " |",
              "|---|" + "---|" * len(taus)]
    for m in r.models:
        lines.append(f"| {m['label']} | " + " | ".join(f"{m['cover_at'][t]:.3f}" for t in taus)
                     + " |")
    lines += ["", "| pair | both | only first | only second | neither | support | crossing k |",
              "|---|---|---|---|---|---|---|"]
    for p in r.pairs:
        s, x = p["support"], p["crossing"]
        band = (f" [{x['low']:g}, {x['high']:g}]" if x["low"] is not None else "")
        cross = (f"{p['overtaken_by']} overtakes {p['leader_at_1']} at {x['k']}{band}"
                 if x["k"] is not None else f"none ({x['never_crossed']:.0%} of resamples)")
        lines.append(f"| {p['first']} vs {p['second']} | {s['both']} | {s['only_first']} | "
                     f"{s['only_second']} | {s['neither']} | {s['verdict']} | {cross} |")
    return "\n".join(lines) + "\n"
