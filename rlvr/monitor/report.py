"""The monitor's table for a run folder (finished or still writing): hack rates and second-opinion
counts per step beside the reward, and the latest disagreements -- a look without plotting."""
from __future__ import annotations

import json
from pathlib import Path

from .monitor import DISAGREEMENTS

__all__ = ["monitor_table", "detector_table"]

_COUNTS = ("monitor/disagree_reward_count", "monitor/disagree_refuse_count", "monitor/screened",
           "monitor/checked")


def _rows(path: Path) -> list[dict]:
    """The JSON rows of `path`; a line a running run is still writing is skipped."""
    rows = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                rows.append(row)
    return rows


def _short(name: str) -> str:
    return name.replace("monitor/", "").replace("_count", "").replace("hack/", "")


def monitor_table(run_dir: str | Path, last: int = 20, top: int = 5) -> str:
    """The rates of the last `last` steps and the `top` latest disagreements each way."""
    run = Path(run_dir)
    if not (run / "metrics.jsonl").exists():
        raise FileNotFoundError(f"{run} is not a run folder (no metrics.jsonl)")
    metrics = [r for r in _rows(run / "metrics.jsonl") if "step" in r]
    rates = sorted({k for r in metrics for k in r if k.startswith("hack/")})
    counts = [k for k in _COUNTS if any(k in r for r in metrics)]
    if not rates:
        return f"{run}: no monitor metrics (monitor_action = 'off', or no step logged yet)"
    cols = ["step", "reward", *rates, *counts]
    width = {c: max(7, len(_short(c))) for c in cols}
    lines = [f"monitor of {run} ({len(metrics)} steps logged; rates are shares of the step's "
             "samples, disagreements are counts)",
             "  ".join(_short(c).rjust(width[c]) for c in cols)]
    for r in metrics[-last:]:
        lines.append("  ".join(_cell(r.get(c), c).rjust(width[c]) for c in cols))
    lines.append("mean:  " + ", ".join(
        f"{_short(k)} {sum(r.get(k, 0) for r in metrics) / len(metrics):.3f}" for k in rates))
    lines += _disagreements(run, top)
    return "\n".join(lines)


def _cell(v, column: str) -> str:
    if v is None:
        return "-"
    if column == "step" or column in _COUNTS:
        return str(int(v))
    return f"{v:.3f}"


def _disagreements(run: Path, top: int) -> list[str]:
    found = _rows(run / DISAGREEMENTS)
    if not found:
        return [f"no disagreements recorded ({DISAGREEMENTS})"]
    out = [f"{len(found)} disagreements in {run / DISAGREEMENTS}; the latest:"]
    for direction, what in (("reward", "we reward, they do not"),
                            ("refuse", "they reward, we do not")):
        picked = [d for d in found if d.get("direction") == direction][-top:]
        if picked:
            out.append(f"  {what} ({sum(d.get('direction') == direction for d in found)}):")
        for d in picked:
            ours, theirs = d.get("ours", {}), d.get("theirs", {})
            text = " ".join(str(d.get("completion", "")).split())
            out.append(f"    step {d.get('step')} {d.get('task_id')}: ours {ours.get('score')} "
                       f"({ours.get('reason') or ours.get('status')}), theirs "
                       f"{theirs.get('score')} ({theirs.get('reason') or theirs.get('status')})"
                       f"\n      {text[:150]!r}")
    return out


def detector_table() -> str:
    """Every registered detector: name, kinds, what it looks for."""
    from .detectors import list_detectors
    return "\n".join(f"{d.name:20s} {','.join(d.kinds):36s} {d.description}"
                     for d in list_detectors())
