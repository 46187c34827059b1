"""The `rlvr` command line: the one place that may import every component folder.

Each subcommand is a module of this package defining `add_parser(subparsers)`; the work itself lives
in the component it drives. Exit codes (`rlvr.usage`): 0 success, 1 failure, 2 bad usage, 3 finished
but some rows/items ended in error.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from rlvr.usage import EXIT_USAGE, UsageError

# Modules defining `add_parser(subparsers)`; each sets `func(args) -> int` on its parser(s).
_SUBCOMMANDS = [
    "rlvr.cli.envs",
    "rlvr.cli.score",
    "rlvr.cli.sandbox",
    "rlvr.cli.train_rm",
    "rlvr.cli.train",
    "rlvr.cli.plot",
    "rlvr.cli.eval",
    "rlvr.cli.export",
    "rlvr.cli.audit",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rlvr", description="Reinforcement learning with verifiable rewards.")
    parser.add_argument("--version", action="version",
                        version=f"rlvr {importlib.import_module('rlvr').__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _SUBCOMMANDS:
        importlib.import_module(module).add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"rlvr {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130

