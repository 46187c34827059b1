"""The `rlvr` command line. Each subcommand lives with its component and is listed here.

Exit codes: 0 success, 1 failure, 2 bad usage, 3 finished but some rows/items ended in error.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_ROW_ERRORS = 0, 1, 2, 3

# Modules defining `add_parser(subparsers)`; each sets `func(args) -> int` on its parser(s).
_SUBCOMMANDS = [
    "rlvr.cli_envs",
    "rlvr.scoring",
    "rlvr.sandbox.cli",
    "rlvr.trainer.rm_cli",
    "rlvr.trainer.cli",
    "rlvr.trainer.plot_cli",
    "rlvr.trainer.evaluate",
]


class UsageError(Exception):
    """Bad usage detected after argument parsing (a missing file, an unknown env...)."""


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


def parse_kv(pairs: list[str]) -> dict:
    """['n_terms=4', 'ops="+-"'] -> {'n_terms': 4, 'ops': '+-'} (values parsed as JSON if they can be)."""
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"expected KEY=VALUE, got {pair!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


if __name__ == "__main__":
    sys.exit(main())
