"""`rlvr boundary A.json B.json ... -o DIR`: several models' reasoning boundary, one report."""
from __future__ import annotations

from pathlib import Path

__all__ = ["add_parser"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "boundary", help="compare models' reasoning boundary: pass@k, Cover@tau, support, crossing",
        description="Read `rlvr eval -o` results of two or more models on the same tasks and "
                    "write DIR/boundary.json, boundary.md, passk.png and cover.png: pass@k with "
                    "bootstrap bands, Cover@tau, per-pair support counts (solved by both, by "
                    "only one, by neither) and the k where the curve leading at k=1 is overtaken.")
    p.add_argument("results", type=Path, nargs="+", metavar="RESULT.json")
    p.add_argument("-o", "--out", type=Path, default=Path("boundary"),
                   help="output folder (default: ./boundary)")
    p.add_argument("--names", help="comma-separated model names, one per file")
    p.add_argument("--taus", default=None,
                   help="comma-separated Cover@tau thresholds in (0, 1] (default: "
                        "0.05,0.1,0.25,0.5,0.75,0.9,1)")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    p.set_defaults(func=_run)


def _floats(text: str) -> tuple[float, ...]:
    from rlvr.usage import UsageError
    try:
        return tuple(float(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise UsageError(f"--taus takes numbers in (0, 1] separated by commas, got {text!r}") \
            from None


def _run(args) -> int:
    from rlvr.trainer.evaluation.boundary_report import DEFAULT_TAUS, boundary_report
    from rlvr.usage import UsageError
    names = [n.strip() for n in args.names.split(",")] if args.names else None
    taus = _floats(args.taus) if args.taus else DEFAULT_TAUS
    try:
        report = boundary_report(args.results, args.out, names, taus, args.resamples)
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    print((args.out / "boundary.md").read_text(), end="")
    print(f"wrote {', '.join(str(f) for f in report.files)}")
    return 0
