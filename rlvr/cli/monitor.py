"""`rlvr monitor RUN_DIR`: the reward-hacking monitor's table for a run (docs/monitoring.md)."""
from __future__ import annotations

from pathlib import Path

__all__ = ["add_parser"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "monitor", help="the reward-hacking monitor's table for a run (rates, disagreements)",
        description="Print a run's hack/* rates and second-opinion disagreement counts per step "
                    "beside the reward, and its latest disagreements (RUN_DIR/monitor/"
                    "disagreements.jsonl). Works on a run that is still training.")
    p.add_argument("run_dir", type=Path, nargs="?", metavar="RUN_DIR")
    p.add_argument("--last", type=int, default=20, help="steps shown (default 20)")
    p.add_argument("--top", type=int, default=5,
                   help="latest disagreements shown each way (default 5)")
    p.add_argument("--list", action="store_true", help="list the registered detectors")
    p.set_defaults(func=_monitor)


def _monitor(args) -> int:
    from rlvr.monitor.report import detector_table, monitor_table
    from rlvr.usage import UsageError
    if args.list:
        print(detector_table())
        return 0
    if args.run_dir is None:
        raise UsageError("rlvr monitor needs a RUN_DIR (or --list)")
    try:
        print(monitor_table(args.run_dir, args.last, args.top))
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from exc
    return 0
