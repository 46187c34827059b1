"""`rlvr plot passk RESULT.json [RESULT2.json ...]`: pass@k against k, one curve per model.

The "reasoning boundary" picture (Yue et al. 2025, Figure 1): RL-trained models lead
at small k, base models may catch up or overtake at large k. Each curve is the unbiased pass@k
(Chen et al. 2021) at every k from 1 to n, recomputed from the per-task correct counts that
`rlvr eval -o` records, with its bootstrap confidence band over tasks (rlvr/passk.py); k is on
a log axis. Where two curves cross, the crossing is marked and printed; a crossing inside
overlapping bands is marked as such (the data cannot tell the order there).

Curves compare only on the same tasks. Results whose shared task ids hold different problems
(each task's fingerprint differs: another environment or other environment arguments) are
refused. When the results cover different task sets of the same problems (another `--tasks`, a
run that failed some tasks), every curve is recomputed on the tasks all of them share, and the
report says so; when they share none, or a file has no per-task counts, the curves are drawn as
they are, with a note saying why they do not compare.

>>> report = plot_passk(["base.json", "grpo.json"], "passk.png")    # doctest: +SKIP
>>> report.crossings                                                # doctest: +SKIP
[Crossing(a='GRPO', b='base', k=23.4, leader_after='base', bands_overlap=True)]
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from rlvr.passk import PassAtK, pass_at_k_curve

__all__ = ["Curve", "Crossing", "PassKReport", "load_curve", "check_same_tasks", "TasksDiffer",
           "on_common_tasks", "find_crossings", "draw_passk", "plot_passk", "run_cli"]


@dataclass
class Curve:
    """One model's pass@k curve and band."""
    label: str
    points: PassAtK
    greedy: float | None = None
    tasks: int = 0
    samples: int = 0
    task_counts: dict | None = None
    """Correct samples per task id (None when the file does not record them)."""
    estimator: tuple = (1000, 0.95, 0)
    """The bootstrap's resamples, level and seed, for recomputing the curve."""
    fingerprints: dict | None = None
    """What each task id asked (eval_records.task_fingerprint); None in older files."""
    env: tuple | None = None
    """(environment, its arguments) the file was evaluated on; None when it does not say."""
    source: str = ""
    """The file the curve came from, for messages."""


@dataclass
class Crossing:
    """Curves `a` and `b` change order between two neighbouring k; `k` is interpolated on log k."""
    a: str
    b: str
    k: float
    leader_after: str
    bands_overlap: bool


@dataclass
class PassKReport:
    path: Path
    curves: list[Curve]
    crossings: list[Crossing] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Warnings about what the curves compare (different task sets)."""

    def summary(self) -> str:
        lines = [f"wrote {self.path}"]
        for c in self.curves:
            lo, hi = c.points.value[0], c.points.value[-1]
            lines.append(f"  {c.label}: pass@1 {lo:.3f} -> pass@{c.points.ks[-1]} {hi:.3f} "
                         f"({c.tasks} tasks, n={c.samples})")
        if not self.crossings and len(self.curves) > 1:
            lines.append("  the curves do not cross over the k measured")
        for x in self.crossings:
            lines.append(f"  {x.a} and {x.b} cross at k ~ {x.k:.1f}; {x.leader_after} leads after"
                         + (" (inside overlapping confidence bands)" if x.bands_overlap else ""))
        return "\n".join(lines)


def load_curve(path: str | Path, label: str | None = None, every_k: bool = True) -> Curve:
    """A curve from an `rlvr eval` results file: recomputed at every k <= n from the recorded
    counts (same bootstrap seed and level as the run), or the reported points if it has none."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a folder; `rlvr plot passk` takes results files written by "
                         f"`rlvr eval -o` (a run's own metrics: `rlvr plot {path}`)")
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"no results file {path}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not JSON ({exc}); pass files written by `rlvr eval -o`")
    if not isinstance(data, dict) or "pass_at" not in data:
        raise ValueError(f"{path} has no pass@k results; pass files written by `rlvr eval -o`")
    if not data["pass_at"]:
        raise ValueError(f"{path} holds no pass@k: no task was sampled ("
                         f"{len(data.get('failed_tasks') or {})} failed); rerun `rlvr eval`")
    cfg = data.get("config", {})
    name = label or data.get("label") or cfg.get("label") or path.stem
    n, counts, ids = data.get("samples"), data.get("correct_counts"), data.get("task_ids")
    estimator = (cfg.get("bootstrap", 1000), cfg.get("level", 0.95), cfg.get("seed", 0))
    task_counts = dict(zip(ids, counts)) if ids and counts and len(ids) == len(counts) else None
    prints = data.get("task_fingerprints")
    prints = dict(zip(ids, prints)) if ids and prints and len(ids) == len(prints) else None
    env = (cfg["env"], cfg.get("env_kwargs") or {}) if cfg.get("env") else None
    if every_k and counts and n:
        points = pass_at_k_curve(counts, n, range(1, n + 1), *estimator)
    else:
        ks = sorted(int(key.split("@")[1]) for key in data["pass_at"])
        ci = data.get("pass_at_ci", {})
        val = [data["pass_at"][f"pass@{k}"] for k in ks]
        points = PassAtK(ks, val, [ci.get(f"pass@{k}", [v, v])[0] for k, v in zip(ks, val)],
                         [ci.get(f"pass@{k}", [v, v])[1] for k, v in zip(ks, val)],
                         len(counts or []), cfg.get("level", 0.95), 0)
    return Curve(name, points, data.get("greedy_pass1"), data.get("sampled_tasks", 0), n or 0,
                 task_counts, estimator, prints, env, str(path))


class TasksDiffer(ValueError):
    """Two results hold different problems under the same task ids: not comparable."""


def _env_text(env: tuple) -> str:
    return f"{env[0]} {json.dumps(env[1], sort_keys=True)}"


def check_same_tasks(curves: list[Curve]) -> None:
    """Refuse (TasksDiffer, one line naming the difference) curves whose shared task ids name
    different problems: by each task's fingerprint, or, for files without them, by the
    environment and arguments they were evaluated on. The first curve is the reference."""
    first = curves[0]
    for c in curves[1:]:
        where = f"{first.source or first.label} and {c.source or c.label}"
        envs = (f" (evaluated on {_env_text(first.env)} vs {_env_text(c.env)})"
                if first.env and c.env and first.env != c.env else "")
        fix = ("; evaluate every model on the same tasks, e.g. a base model on a run's with "
               "`rlvr eval --env-from RUN_DIR`")
        if first.fingerprints and c.fingerprints:
            clash = [t for t in first.fingerprints
                     if t in c.fingerprints and first.fingerprints[t] != c.fingerprints[t]]
            if clash:
                raise TasksDiffer(f"{where} hold different problems under the same task ids "
                                  f"({len(clash)} of them, e.g. {clash[0]!r}){envs}{fix}")
        elif envs:
            raise TasksDiffer(f"{where} were evaluated on different tasks{envs}{fix}")



def on_common_tasks(curves: list[Curve]) -> tuple[list[Curve], list[str]]:
    """The curves recomputed on the tasks they all cover, and a note when that changed them
    (or when they cannot be compared that way)."""
    if len(curves) < 2:
        return curves, []
    check_same_tasks(curves)
    missing = [c.label for c in curves if c.task_counts is None]
    sets = [set(c.task_counts) for c in curves if c.task_counts is not None]
    if missing:
        return curves, [f"{', '.join(missing)}: no per-task counts, so the curves cannot be "
                        "checked for covering the same tasks; drawn as they are"]
    if all(s == sets[0] for s in sets):
        return curves, []
    common = set.intersection(*sets)
    sizes = ", ".join(f"{c.label}: {len(c.task_counts)}" for c in curves)
    if not common:
        return curves, [f"the results share no task ({sizes}): each curve is drawn on its own "
                        "tasks, and they do not compare"]
    out = []
    for c in curves:
        counts = [c.task_counts[t] for t in c.task_counts if t in common]
        points = pass_at_k_curve(counts, c.samples, range(1, c.samples + 1), *c.estimator)
        out.append(Curve(c.label, points, None, len(counts), c.samples,
                         {t: c.task_counts[t] for t in c.task_counts if t in common},
                         c.estimator, c.fingerprints, c.env, c.source))
    return out, [f"the results cover different tasks ({sizes}; {len(common)} in common): every "
                 f"curve is drawn on the {len(common)} common tasks (greedy stars left out)"]


def find_crossings(curves: list[Curve]) -> list[Crossing]:
    """Every pair of curves that changes order over the k both measured (ties are not crossings:
    a pair must be strictly ahead on each side)."""
    out = []
    for i, a in enumerate(curves):
        for b in curves[i + 1:]:
            ka = dict(zip(a.points.ks, range(len(a.points.ks))))
            common = [k for k in b.points.ks if k in ka]
            kb = dict(zip(b.points.ks, range(len(b.points.ks))))
            prev = None
            for k in common:
                ia, ib = ka[k], kb[k]
                d = a.points.value[ia] - b.points.value[ib]
                if d == 0:
                    continue
                if prev is not None and (prev[1] > 0) != (d > 0):
                    k0, d0 = prev
                    t = d0 / (d0 - d)                            # linear in log k
                    kx = math.exp(math.log(k0) + t * (math.log(k) - math.log(k0)))
                    overlap = not (a.points.low[ia] > b.points.high[ib]
                                   or b.points.low[ib] > a.points.high[ia])
                    out.append(Crossing(a.label, b.label, kx, a.label if d > 0 else b.label,
                                        overlap))
                prev = (k, d)
    return out


def draw_passk(ax, curves: list[Curve], crossings: list[Crossing], title: str | None = None):
    """The curves, their bands, each greedy pass@1 as a star at k = 1, and the crossings."""
    for c in curves:
        p = c.points
        line, = ax.plot(p.ks, p.value, marker="o" if len(p.ks) <= 12 else None, ms=4,
                        label=f"{c.label} ({c.tasks} tasks, n={c.samples})")
        ax.fill_between(p.ks, p.low, p.high, color=line.get_color(), alpha=0.2, lw=0)
        if c.greedy is not None:
            ax.plot([1], [c.greedy], marker="*", ms=10, ls="none", color=line.get_color())
    for x in crossings:
        ax.axvline(x.k, color="0.3", ls="--", lw=1)
        ax.annotate(f"cross k~{x.k:.0f}" + ("\n(bands overlap)" if x.bands_overlap else ""),
                    (x.k, 0.02), xytext=(4, 0), textcoords="offset points", fontsize=8,
                    color="0.2")
    ax.set_xscale("log", base=2)
    kmax = max(c.points.ks[-1] for c in curves)
    ticks = [2 ** i for i in range(int(math.log2(kmax)) + 1)]
    ax.set_xticks(ticks, [str(t) for t in ticks])
    # a margin around k in [1, kmax] and pass@k in [0, 1]: a greedy star at 0 or 1 on k = 1
    # sits inside the frame, whole, not half over the axes' corner
    ax.set_xlim(2 ** -0.2, kmax * 2 ** 0.2)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("k (samples per task, log scale)")
    ax.set_ylabel("pass@k (unbiased; band: "
                  f"{curves[0].points.level:.0%} bootstrap CI over tasks)")
    ax.set_title(title or "pass@k vs k (star: greedy pass@1)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")


def plot_passk(results: list, out: str | Path, labels: list[str] | None = None,
               title: str | None = None) -> PassKReport:
    """Draw the curves of `results` (paths to `rlvr eval` JSON, or Curves) into the PNG `out`."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    if labels is not None and len(labels) != len(results):
        raise ValueError(f"{len(labels)} names for {len(results)} results")
    curves = [r if isinstance(r, Curve) else load_curve(r, labels[i] if labels else None)
              for i, r in enumerate(results)]
    if not curves:
        raise ValueError("no results to plot")
    curves, notes = on_common_tasks(curves)
    crossings = find_crossings(curves)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    draw_passk(ax, curves, crossings, title)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return PassKReport(out, curves, crossings, notes)


def run_cli(results: list[Path], out: Path | None, names: str | None,
            title: str | None = None) -> int:
    """`rlvr plot passk`: the body the CLI calls (default output: passk.png beside the first)."""
    from rlvr.usage import UsageError
    if not results:
        raise UsageError("rlvr plot passk needs one or more RESULT.json files (rlvr eval -o)")
    labels = [n.strip() for n in names.split(",")] if names else None
    target = out or Path(results[0]).with_name("passk.png")
    if target.suffix.lower() != ".png":          # a folder
        target = target / "passk.png"
    try:
        report = plot_passk(results, target, labels, title)
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    for note in report.notes:
        print(f"warning: {note}", file=sys.stderr)
    print(report.summary())
    return 0
