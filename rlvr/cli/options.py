"""Command-line options built from a config dataclass, so the two cannot drift.

Each field becomes `--field-name` with the field's type, its default and its docstring as the help
text (read by `rlvr.usage.field_docs`). Booleans become `--name/--no-name`. Fields of other types
(dicts, lists) are the subcommand's to declare by hand.
"""
from __future__ import annotations

import argparse
import dataclasses
import types
import typing

from rlvr.usage import field_docs

_SCALARS = (int, float, str)


def _scalar(hint):
    """int / float / str / bool, unwrapping `X | None`; None for anything else."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = args[0] if len(args) == 1 else None
    return hint if hint in _SCALARS or hint is bool else None


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def add_config_options(parser, cls, *, skip=(), flags: dict | None = None,
                       defaults: dict | None = None) -> None:
    """Add one option per field of dataclass `cls` (minus `skip`). `flags` renames a field's
    option strings (e.g. {'output': ('-o', '--output')}); `defaults` overrides a default shown on
    this command line only."""
    flags, defaults = flags or {}, defaults or {}
    docs, hints = field_docs(cls), typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        typ = _scalar(hints[f.name])
        if f.name in skip or typ is None:
            continue
        default = defaults.get(f.name, _default(f))
        names = flags.get(f.name, ("--" + f.name.replace("_", "-"),))
        kwargs = {"dest": f.name, "help": docs.get(f.name, "")}
        if typ is bool:
            kwargs.update(action=argparse.BooleanOptionalAction, default=default)
        elif default is dataclasses.MISSING:
            kwargs.update(type=typ, required=True)
        else:
            kwargs.update(type=typ, default=default)
            if default is not None and "(default" not in kwargs["help"]:
                kwargs["help"] = f"{kwargs['help']} (default: {default})".strip()
        parser.add_argument(*names, **kwargs)


def config_kwargs(cls, args: argparse.Namespace, **extra) -> dict:
    """The parsed values of `cls`'s fields, plus `extra` (which wins)."""
    names = {f.name for f in dataclasses.fields(cls)}
    values = {k: v for k, v in vars(args).items() if k in names}
    return {**values, **extra}
