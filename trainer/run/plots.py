"""Pictures of a run: the R1-Zero story (reward up, length up, thinking takes shape) at a glance.

`plot_run(run_dir)` reads a run folder's `metrics.jsonl` (one row per step, names from
docs/trainer.md) and `eval.jsonl`, and writes one PNG per panel plus `overview.png` (every panel
in one grid) under `run_dir/plots/`. `compare_runs([a, b, ...], out_dir)` draws the same panels
with the runs overlaid, e.g. GRPO against Dr. GRPO on response length.

Each panel draws the raw per-step values as faint points and a centred moving average over
them as a line (RL curves are noisy; the smoothed line is what the eye should follow, the points
say how much to trust it); a series of at most `SPARSE_POINTS` points (an evaluation, a short
run, a metric logged on one step) is drawn point to point with a marker on every point. The y
axis comes from the data (a negative DAPO reward shows below 0); curves that coincide (a
weighted reward equal to its only weighted component) are one line named for both. Evaluations
are separate measurements on a finite set of tasks: points with their 95% Wilson intervals,
never a line that would invent a trajectory between them. A panel
whose metrics a run never logged is skipped with a note -- a REINFORCE run has no KL, an old
run has no think metrics -- never an error.

>>> report = plot_run("runs/r1zero")            # doctest: +SKIP
>>> report.files[0]                            # doctest: +SKIP
PosixPath('runs/r1zero/plots/overview.png')
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Series", "Panel", "PANELS", "EPISODE_PANELS", "SFT_PANELS", "RunData", "PlotReport", "load_run",
           "smooth", "y_range", "plot_run", "compare_runs"]


@dataclass(frozen=True)
class Series:
    """One curve: a metric name, or a regex (`pattern=True`) whose first group labels each match;
    `label` names it in the legend and in notes (a pattern's own text is never shown)."""
    metric: str
    label: str = ""
    pattern: bool = False


@dataclass(frozen=True)
class Panel:
    """One plot: curves read from `source` against the training step."""
    name: str
    title: str
    ylabel: str
    series: tuple[Series, ...]
    source: str = "metrics.jsonl"
    unit_interval: bool = False   # rates and accuracies: the y axis shows at least [0, 1]
    measurements: bool = False    # separate measurements (evaluations): points with 95%
                                  # intervals from each row's `tasks`, never joined by a line
    needs: str = ""               # drawn only for runs that logged a metric with this prefix


PANELS: tuple[Panel, ...] = (
    Panel("reward", "Reward and accuracy", "mean over the rollout batch",
          (Series("reward", "reward (weighted)"),
           Series(r"rewards/(.+)/mean", "per-reward means", pattern=True)), unit_interval=True),
    Panel("length", "Response length", "tokens",
          (Series("completions/mean_length", "mean length"),
           Series("completions/mean_terminated_length", "mean length (stopped)"))),
    Panel("clipped", "Truncated responses", "fraction hitting max length",
          (Series("completions/clipped_ratio", "clipped ratio"),), unit_interval=True),
    Panel("think_rates", "Think-tag format", "fraction of completions",
          (Series("think/well_formed_rate", "well-formed"),
           Series("think/unclosed_rate", "<think> unclosed"),
           Series("think/reflection_rate", "reflection phrase")), unit_interval=True),
    Panel("think_tokens", "Thinking vs answering", "tokens per completion",
          (Series("think/mean_tokens", "think tokens"),
           Series("answer/mean_tokens", "answer tokens"))),
    Panel("entropy", "Policy entropy", "nats per token", (Series("entropy", "entropy"),)),
    Panel("kl", "KL to the reference policy", "per token (k3)", (Series("kl", "KL"),)),
    Panel("eval", "Held-out evaluation (step 0 = the base model)", "rate on held-out tasks",
          (Series(r"(pass@\d+)", "pass@k", pattern=True),
           Series("think/well_formed_rate", "think well-formed")),
          source="eval.jsonl", unit_interval=True, measurements=True),
)

# Multi-turn episodes (docs/multiturn.md): drawn only for runs that logged these metrics, with no
# note for the single-turn runs that have none.
EPISODE_PANELS: tuple[Panel, ...] = (
    Panel("tool_use", "Tool use per episode", "per episode / share of calls",
          (Series("tool_calls/mean", "tool calls per episode"),
           Series("tool_calls/error_rate", "share of calls that failed"),
           Series("turns/mean", "turns per episode"))),
)

# The reward-hacking monitor (docs/monitoring.md): its rates beside the reward, drawn next to the
# reward panel for runs that logged them, with no note for runs that did not.
MONITOR_PANELS: tuple[Panel, ...] = (
    Panel("monitor", "Reward-hacking monitor (rates that stayed 0 not drawn)",
          "rate over the rollout batch",
          (Series("reward", "reward (weighted)"), Series(r"hack/(.+)", pattern=True),
           Series("monitor/disagree_reward", "disagree_reward"),
           Series("monitor/disagree_refuse", "disagree_refuse")),
          unit_interval=True, needs="hack/"),
)

# Supervised fine-tuning runs (`rlvr sft`, config.json's "kind": "sft"): their own panels
# instead of the RL ones, which such a run never logs.
SFT_PANELS: tuple[Panel, ...] = (
    Panel("sft_loss", "Supervised loss", "NLL per completion token",
          (Series("loss", "training batch"),)),
    Panel("sft_eval_loss", "Held-out loss (step 0 = before training)",
          "NLL per completion token", (Series("loss", "held-out"),), source="eval.jsonl"),
    Panel("sft_grad_norm", "Gradient norm", "before clipping", (Series("grad_norm", "grad norm"),)),
    Panel("sft_throughput", "Throughput", "tokens per second",
          (Series("throughput/tokens_per_s", "tokens/s (prompt + completion)"),)),
)


@dataclass
class RunData:
    """The rows of one run folder's metric files, keyed by file name; `kind` is "rl" or
    "sft" (config.json's "kind")."""
    name: str
    path: Path
    rows: dict[str, list[dict]]
    notes: list[str] = field(default_factory=list)
    kind: str = "rl"


@dataclass
class PlotReport:
    """What was written and what was skipped (and why)."""
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _read_jsonl(path: Path, notes: list[str]) -> list[dict]:
    if not path.exists():
        return []
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:   # a run still writing, or killed mid-line
            notes.append(f"{path}: line {n} is not JSON; skipped")
            continue
        if isinstance(row, dict) and isinstance(row.get("step"), (int, float)):
            rows.append(row)
    return rows


def load_run(run_dir: str | Path, name: str | None = None) -> RunData:
    """Read metrics.jsonl and eval.jsonl; a folder with neither is not a run (FileNotFoundError)."""
    path = Path(run_dir)
    if not path.is_dir():
        raise FileNotFoundError(f"run folder not found: {path}")
    sources = {p.source for p in PANELS}
    if not any((path / s).exists() for s in sources):
        raise FileNotFoundError(f"{path} is not a run folder: it has none of {sorted(sources)}")
    notes: list[str] = []
    rows = {s: _read_jsonl(path / s, notes) for s in sources}
    return RunData(name or path.name, path, rows, notes, _kind(path))


def _kind(path: Path) -> str:
    try:
        return json.loads((path / "config.json").read_text()).get("kind", "rl")
    except (OSError, ValueError, AttributeError):
        return "rl"


def _points(rows: list[dict], key: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for row in rows:
        v = row.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            xs.append(float(row["step"]))
            ys.append(float(v))
    return xs, ys


def _curves(run: RunData, panel: Panel) -> list[tuple[str, list[float], list[float]]]:
    """(label, steps, values) for every series of `panel` that `run` logged."""
    rows, out = run.rows.get(panel.source, []), []
    keys = sorted({k for r in rows for k in r})
    for s in panel.series:
        if s.pattern:
            matches = [(k, m.group(1)) for k in keys if (m := re.fullmatch(s.metric, k))]
        else:
            matches = [(s.metric, s.label or s.metric)] if s.metric in keys else []
        for key, label in matches:
            xs, ys = _points(rows, key)
            if xs and not (panel.needs and key != "reward" and not any(ys)):
                out.append((label, xs, ys))     # (the monitor's rates that stayed 0: left out)
    return _merge_identical(out)


def _merge_identical(curves: list[tuple[str, list[float], list[float]]]):
    """One line for curves that coincide at every point (a weighted reward equal to its only
    weighted component): drawn twice, the second hides the first and its legend entry lies."""
    out: list[tuple[str, list[float], list[float]]] = []
    for label, xs, ys in curves:
        for i, (other, oxs, oys) in enumerate(out):
            if oxs == xs and all(math.isclose(a, b, abs_tol=1e-9) for a, b in zip(oys, ys)):
                out[i] = (f"{other} and {label} (same values)", oxs, oys)
                break
        else:
            out.append((label, xs, ys))
    return out


def smooth(values: list[float], window: int | None = None) -> list[float]:
    """Centred moving average (the window shrinks at the ends). Centred rather than an EMA
    because an EMA lags: on a rising reward curve it draws the rise steps late. With no window
    given it adapts to the run length: about an eighth of the points, odd, at most 25."""
    n = len(values)
    if window is None:
        window = min(25, max(1, n // 8) | 1)
    if window < 1 or window % 2 == 0:
        raise ValueError(f"smoothing window must be a positive odd number, got {window}")
    half = window // 2
    out = []
    for i in range(n):
        lo, hi = max(0, i - half), min(n, i + half + 1)
        h = min(i - lo, hi - 1 - i)          # symmetric at the edges, so the ends are not biased
        part = values[i - h:i + h + 1]
        out.append(sum(part) / len(part))
    return out


def _draw(ax, panel: Panel, runs: list[RunData]) -> bool:
    """Draw `panel` for every run on `ax`; False when no run has any of its metrics."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = ["-", "--", ":", "-."]
    drawn, values = 0, []
    for r, run in enumerate(runs):
        if panel.needs and not any(k.startswith(panel.needs)
                                   for row in run.rows.get(panel.source, []) for k in row):
            continue
        for s, (label, xs, ys) in enumerate(_curves(run, panel)):
            # One run: a colour per series. Several: a colour per run, a line style per series.
            color = colors[(s if len(runs) == 1 else r) % len(colors)]
            style = styles[0] if len(runs) == 1 else styles[s % len(styles)]
            name = label if len(runs) == 1 else f"{run.name}: {label}"
            if panel.measurements:
                n = _sizes(run, panel, xs)
                lo, hi = zip(*(wilson(y, k) for y, k in zip(ys, n)))
                ax.errorbar(xs, ys, yerr=[[max(0.0, y - a) for y, a in zip(ys, lo)],
                                          [max(0.0, b - y) for y, b in zip(ys, hi)]],
                            fmt="o", linestyle="none", color=color, markersize=6, capsize=4,
                            label=name)
                values += list(lo) + list(hi)
            elif len(xs) <= SPARSE_POINTS:
                # evals, short runs, a metric logged on one step: every point is a marker (a
                # line through one point is invisible), and the legend shows the marker too
                ax.plot(xs, ys, style, marker="o", markersize=6 if len(xs) > 1 else 8,
                        color=color, linewidth=1.8, label=name)
            else:
                ax.plot(xs, ys, "o", color=color, alpha=0.3, markersize=3.5, markeredgewidth=0)
                ax.plot(xs, smooth(ys), style, color=color, linewidth=1.8, label=name)
            values += ys
            drawn += 1
    if not drawn:
        return False
    ax.set_title(panel.title, fontsize=11)
    ax.set_xlabel("training step")
    ax.set_ylabel(panel.ylabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.ticklabel_format(axis="y", useOffset=False)    # no "1e-5+4.654" corner offsets
    ax.set_ylim(*y_range(values, panel.unit_interval))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best", framealpha=0.8)
    return True


SPARSE_POINTS = 12
"""Series with at most this many points are drawn point to point with markers, unsmoothed."""

FLAT_SPAN = 0.1
"""A series is never stretched over less than this share of its magnitude: an entropy moving by
0.001 around 0.65 shows as nearly flat, not as noise zoomed to the panel's height."""


def wilson(p: float, n: int | None, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a rate `p` measured on `n` tasks (Wilson 1927); (p, p)
    when the count is unknown. For pass@k at k > 1, a mean of per-task estimates, it is the
    interval of a rate on n tasks: an approximation, not exact."""
    if not n:
        return p, p
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _sizes(run: RunData, panel: Panel, xs: list[float]) -> list[int | None]:
    """The number of tasks behind each measurement at steps `xs` (the rows' `tasks`)."""
    by_step = {r.get("step"): r.get("tasks") for r in run.rows.get(panel.source, [])}
    return [by_step.get(int(x)) for x in xs]


def y_range(values: list[float], unit_interval: bool = False) -> tuple[float, float]:
    """The y axis from the data, with a 3% margin. Rates and accuracies always show [0, 1]
    as well, but the data widens it: a weighted reward may pass 1, and DAPO's overlong penalty
    drives a reward below 0."""
    lo, hi = min(values), max(values)
    if unit_interval:
        lo, hi = min(lo, 0.0), max(hi, 1.0)
    span = FLAT_SPAN * max(abs(lo), abs(hi)) or 0.1
    if hi - lo < span:         # nearly flat: show it flat, centred in a band of `span`
        mid = (lo + hi) / 2
        return mid - span / 2, mid + span / 2
    pad = 0.03 * (hi - lo)
    return lo - pad, hi + pad


def _render(runs: list[RunData], out_dir: Path, suptitle: str) -> PlotReport:
    import matplotlib
    matplotlib.use("Agg")          # files only; never needs a display
    import matplotlib.pyplot as plt
    out_dir.mkdir(parents=True, exist_ok=True)
    report = PlotReport(notes=[n for run in runs for n in run.notes])
    present = []
    sft = all(run.kind == "sft" for run in runs)
    for panel in SFT_PANELS if sft else (*PANELS[:1], *MONITOR_PANELS, *PANELS[1:],
                                         *EPISODE_PANELS):
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        if _draw(ax, panel, runs):
            fig.tight_layout()
            fig.savefig(out_dir / f"{panel.name}.png", dpi=110)
            report.files.append(out_dir / f"{panel.name}.png")
            present.append(panel)
        elif panel not in EPISODE_PANELS + MONITOR_PANELS and panel.name != "sft_eval_loss":
            wanted = " or ".join(s.label if s.pattern else s.metric for s in panel.series)
            none = all(not run.rows.get(panel.source) for run in runs)
            report.notes.append(f"skipped '{panel.name}' ({panel.title}): " + (
                "the run did no evaluation" if none and panel.source == "eval.jsonl" else
                f"no {wanted} in {panel.source}"))
        plt.close(fig)
    if present:
        cols = 2 if len(present) > 1 else 1
        nrows = math.ceil(len(present) / cols)
        fig, axes = plt.subplots(nrows, cols, figsize=(6.4 * cols, 3.8 * nrows), squeeze=False)
        for ax, panel in zip(axes.flat, present):
            _draw(ax, panel, runs)
        for ax in list(axes.flat)[len(present):]:
            ax.set_visible(False)
        fig.suptitle(suptitle, fontsize=13)
        fig.tight_layout()
        fig.savefig(out_dir / "overview.png", dpi=90)
        plt.close(fig)
        report.files.insert(0, out_dir / "overview.png")
    return report


def _title(run: RunData) -> str:
    """'<run name>: <algorithm> on <env>, <model>' from config.json when the run wrote one."""
    try:
        cfg = json.loads((run.path / "config.json").read_text())["config"]
        if run.kind == "sft":
            return f"{run.name}: sft on {Path(cfg['data']).name}, {Path(cfg['model']).name}"
        return f"{run.name}: {cfg.get('preset', cfg.get('algorithm'))} on {cfg['env']}, {Path(cfg['model']).name}"
    except (OSError, KeyError, TypeError, json.JSONDecodeError):
        return run.name


def plot_run(run_dir: str | Path, out_dir: str | Path | None = None) -> PlotReport:
    """PNG per panel + overview.png for one run (default out_dir: run_dir/plots)."""
    run = load_run(run_dir)
    return _render([run], Path(out_dir) if out_dir else run.path / "plots", _title(run))


def compare_runs(run_dirs: list[str | Path], out_dir: str | Path,
                 names: list[str] | None = None) -> PlotReport:
    """The same panels with several runs overlaid. Runs are named by folder unless `names` given;
    two folders with the same name are told apart by their parent folder."""
    if len(run_dirs) < 2:
        raise ValueError("compare needs at least two run folders")
    paths = [Path(p) for p in run_dirs]
    if names is None:
        names = [p.name for p in paths]
        if len(set(names)) < len(names):
            names = [f"{p.parent.name}/{p.name}" for p in paths]
    elif len(names) != len(paths):
        raise ValueError(f"{len(names)} names for {len(paths)} runs")
    runs = [load_run(p, n) for p, n in zip(paths, names)]
    return _render(runs, Path(out_dir), "compare: " + " vs ".join(names))
