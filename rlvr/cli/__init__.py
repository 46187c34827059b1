"""The `rlvr` command line: the one place that may import every component folder.

Each subcommand is a module of this package defining `add_parser(subparsers)`; the work itself lives
in the component it drives. Exit codes (`rlvr.usage`): 0 success, 1 failure, 2 bad usage, 3 finished
but some rows/items ended in error.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

from rlvr.usage import EXIT_USAGE, UsageError

# OpenMP's threads spin while they wait for each other; when another process holds a core, a
# spinning thread burns the time its descheduled partner needs, and a 2-thread forward/backward
# beside two busy processes ran 5.7x slower instead of the fair 2x (benchmarks/README.md, "CPU
# contention"). Spinning briefly, then sleeping, keeps it near fair at ~3% when the machine is
# idle. The command line sets this before torch loads; a library user's process is left alone.
os.environ.setdefault("GOMP_SPINCOUNT", "10000")

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
    "rlvr.cli.distill_data",
    "rlvr.cli.monitor",
    "rlvr.cli.serve",
    "rlvr.cli.sft",
    "rlvr.cli.boundary",
]

# Subcommands that build an environment by name take --import MODULE (`envs list|show` add it
# themselves, one level down).
_TAKES_ENV = ("score", "eval", "train", "make-prefs", "audit", "distill-data", "serve")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rlvr", description="Reinforcement learning with verifiable rewards.")
    parser.add_argument("--version", action="version",
                        version=f"rlvr {importlib.import_module('rlvr').__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _SUBCOMMANDS:
        importlib.import_module(module).add_parser(sub)
    for name in _TAKES_ENV:
        add_import_option(sub.choices[name])
    return parser


def add_import_option(parser: argparse.ArgumentParser) -> None:
    """--import MODULE, run by `main` before the subcommand (see `import_user_module`)."""
    parser.add_argument("--import", dest="imports", action="append", default=[],
                        metavar="MODULE", help="import MODULE first (a module name found from "
                        "the current directory, or a .py file): the environments it registers "
                        "with @register_env become available (repeatable)")


def import_user_module(spec: str) -> None:
    """Import a module of the user's that registers environments, as `python -m` would find it
    (the current directory first) or from a .py file's own folder. Its folder stays on
    sys.path, so spawned pool workers, which inherit it, import the module again by name."""
    path = Path(spec)
    folder, name = (path.resolve().parent, path.stem) if path.suffix == ".py" else \
        (Path.cwd(), spec)
    if path.suffix == ".py" and not path.is_file():
        raise UsageError(f"--import {spec}: no such file")
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name not in (name, name.split(".")[0]):
            raise              # the user's module itself imports something missing
        raise UsageError(f"--import {spec}: no module named {name!r} in {folder} or on "
                         "sys.path; give a module name or a path to a .py file") from None


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """The parsed command line. KEY=VALUE pairs may come after flags (argparse takes a
    positional list once: `train steps=1 --overwrite lr=1e-5` leaves `lr=1e-5` over) and join
    the pairs; anything else unrecognised is the subcommand's usage error, not the top level's."""
    args, extras = parser.parse_known_args(argv)
    if extras and isinstance(getattr(args, "overrides", None), list):
        pairs = [a for a in extras if "=" in a and not a.startswith("-")]
        args.overrides += pairs
        extras = [a for a in extras if a not in pairs]
    if extras:
        _subcommand_parser(parser, args).error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def _subcommand_parser(parser: argparse.ArgumentParser, args) -> argparse.ArgumentParser:
    """The innermost (sub)parser the command line chose (`rlvr envs show` -> envs show's)."""
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = getattr(args, subs[0].dest, None) if subs and subs[0].dest else None
        if chosen not in (subs[0].choices if subs else {}):
            return parser
        parser = subs[0].choices[chosen]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parse(parser, argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        for module in getattr(args, "imports", []):
            import_user_module(module)
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"rlvr {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:       # a run's own stop says what it kept (trainer/run/)
        print(str(exc) or "interrupted", file=sys.stderr)
        return getattr(exc, "exit_code", 130)

