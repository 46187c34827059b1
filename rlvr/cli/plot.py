"""`rlvr plot RUN_DIR` and `rlvr compare RUN_A RUN_B ...`: PNGs of a run's metrics."""
from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["add_parser"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "plot", help="draw a run's metrics as PNGs (reward, length, think tags, entropy, KL, eval)",
        description="Read RUN_DIR/metrics.jsonl and eval.jsonl and write one PNG per panel plus "
                    "overview.png. Panels whose metrics the run did not log are skipped with a note.")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR",
                   help="a run folder; or `passk` followed by `rlvr eval -o` results: pass@k vs k, "
                        "one curve per model with its confidence band, crossings marked")
    p.add_argument("results", type=Path, nargs="*", metavar="RESULT.json",
                   help="(after `passk`) results files of `rlvr eval -o`")
    p.add_argument("-o", "--out", type=Path, help="output folder (default: RUN_DIR/plots); for "
                   "passk a .png path or folder (default: passk.png beside the first result)")
    p.add_argument("--names", help="(passk) comma-separated curve names (default: each label)")
    p.set_defaults(func=_plot)

    c = subparsers.add_parser(
        "compare", help="overlay the metrics of several runs (e.g. GRPO vs Dr. GRPO)",
        description="The same panels as `rlvr plot`, with every run drawn on each.")
    c.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR")
    c.add_argument("-o", "--out", type=Path, default=Path("runs/compare"),
                   help="output folder (default: runs/compare)")
    c.add_argument("--names", help="comma-separated legend names, one per run (default: folder names)")
    c.set_defaults(func=_compare)


def _report(report) -> int:
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
    if not report.files:
        print("nothing to plot: the run folder has no known metrics yet", file=sys.stderr)
        return 1
    print(f"wrote {len(report.files)} plots; overview: {report.files[0]}")
    for f in report.files[1:]:
        print(f"  {f}")
    return 0


def _plot(args) -> int:
    from rlvr.usage import UsageError
    if str(args.run_dir) == "passk":
        from rlvr.trainer.evaluation.passk_plot import run_cli
        return run_cli(args.results, args.out, args.names)
    if args.results:
        raise UsageError(f"rlvr plot takes one RUN_DIR (or `passk RESULT.json ...`), got "
                         f"{1 + len(args.results)} paths")
    from rlvr.trainer.run.plots import plot_run
    try:
        return _report(plot_run(args.run_dir, args.out))
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from exc


def _compare(args) -> int:
    from rlvr.usage import UsageError
    from rlvr.trainer.run.plots import compare_runs
    names = [n.strip() for n in args.names.split(",")] if args.names else None
    try:
        return _report(compare_runs(args.run_dirs, args.out, names))
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
