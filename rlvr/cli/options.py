"""Command-line options built from a config dataclass, so the two cannot drift.

Each field becomes `--field-name` with the field's type, its default and its docstring as the help
text (read by `rlvr.usage.field_docs`), values converted by `rlvr.usage.coerce`. Booleans become
`--name/--no-name`. Fields of other types (dicts, lists) take JSON with `every_field`, and are
otherwise the subcommand's to declare by hand.
"""
from __future__ import annotations

import argparse
import dataclasses
import types
import typing

from rlvr.usage import coerce, field_docs

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


def _converter(name: str, hint):
    """argparse `type=` for field `name`: `coerce`, its error as argparse's usage error."""
    optional = typing.get_origin(hint) in (typing.Union, types.UnionType)
    typ = _scalar(hint) or _container(hint)

    def convert(value: str):
        try:
            return coerce(name, value, typ, optional)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = typ.__name__
    return convert


def option_type(name: str, hint):
    """argparse `type=` converting a value for a field `name` of type `hint` (an old name of a
    field takes the field's converter under its own name)."""
    return _converter(name, hint)


def _container(hint):
    """dict / list / tuple for such a hint (`tuple`, `dict[str, int]`...), else None."""
    origin = typing.get_origin(hint) or hint
    return origin if origin in (dict, list, tuple) else None


def add_config_options(parser, cls, *, skip=(), flags: dict | None = None,
                       defaults: dict | None = None, every_field: bool = False,
                       only_given: bool = False) -> None:
    """Add one option per field of dataclass `cls` (minus `skip`), named as the field
    (`--field-name`); `flags` adds other option strings (e.g. {'output': ('-o',)}); `defaults` overrides a default shown on
    this command line only; `every_field` adds dict/list/tuple fields too (as JSON);
    `only_given`: an option left out is absent from the parsed namespace (so it cannot
    override a config file), its default only shown in the help."""
    flags, defaults = flags or {}, defaults or {}
    docs, hints = field_docs(cls), typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        typ = _scalar(hints[f.name]) or (_container(hints[f.name]) if every_field else None)
        if f.name in skip or typ is None:
            continue
        default = defaults.get(f.name, _default(f))
        own = "--" + f.name.replace("_", "-")       # always there: flags are named as fields
        names = tuple(dict.fromkeys((*flags.get(f.name, ()), own)))
        kwargs = {"dest": f.name, "help": docs.get(f.name, "")}
        if only_given and default is not dataclasses.MISSING:
            kwargs["help"] = f"{kwargs['help']} (default: {default})".strip()
            default = argparse.SUPPRESS
        if typ is bool:
            kwargs.update(action=argparse.BooleanOptionalAction, default=default)
        elif default is dataclasses.MISSING:
            kwargs.update(type=_converter(f.name, hints[f.name]), required=True)
        else:
            kwargs.update(type=_converter(f.name, hints[f.name]), default=default)
            if default not in (None, argparse.SUPPRESS) and "(default" not in kwargs["help"]:
                kwargs["help"] = f"{kwargs['help']} (default: {default})".strip()
        parser.add_argument(*names, **kwargs)


def config_kwargs(cls, args: argparse.Namespace, **extra) -> dict:
    """The parsed values of `cls`'s fields, plus `extra` (which wins)."""
    names = {f.name for f in dataclasses.fields(cls)}
    values = {k: v for k, v in vars(args).items() if k in names}
    return {**values, **extra}
