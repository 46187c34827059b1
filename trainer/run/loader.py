"""One loader for every run config: a TOML file, then KEY=VALUE pairs and the --flags the
command line parsed, each value checked against its field's type before any model loads."""
from __future__ import annotations

import dataclasses
import difflib
import tomllib
import types
import typing
import warnings
from pathlib import Path

from rlvr.usage import coerce

__all__ = ["ALIASES", "read_toml", "parse_pairs", "field_types", "unknown_key", "rename_aliases",
           "load_fields"]

ALIASES = {"env_kwargs": "env_args"}
"""Old field name -> its name now. A config, pair or flag under the old name still loads, with
a DeprecationWarning; a saved run under it resumes without one."""


def read_toml(path: str | Path) -> dict:
    """A TOML file's table; a missing file or a syntax mistake is one line naming the file (and
    tomllib's line and column)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}" if not path.exists()
                                else f"config file {path} is a folder; give a .toml file")
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from None


def parse_pairs(pairs: list[str] | None) -> dict[str, str]:
    """['lr=1e-5', 'env_args={"n_terms": 2}'] -> {'lr': '1e-5', ...}, values still strings."""
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"expected KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def field_types(cls) -> dict[str, tuple[type, bool]]:
    """Each field of dataclass `cls` -> (its type, whether it also takes None); `X | None` is
    read as X, `dict[str, int]` as dict."""
    hints, out = typing.get_type_hints(cls), {}
    for f in dataclasses.fields(cls):
        hint, optional = hints[f.name], False
        if typing.get_origin(hint) in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(hint) if a is not type(None)]
            optional, hint = len(args) < len(typing.get_args(hint)), args[0]
        out[f.name] = (typing.get_origin(hint) or hint, optional)
    return out


def unknown_key(key: str, known, help_hint: str) -> str:
    """The one-line refusal of an unknown key, with the nearest field when one is close."""
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    near = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown key {key!r}{near}; {help_hint} lists every field"


def rename_aliases(data: dict, known, warn: bool = True) -> dict:
    """`data` with each old field name (ALIASES) under its new one, when `known` has the new."""
    data = dict(data)
    for old, new in ALIASES.items():
        if old in data and old not in known and new in known:
            if new in data:
                raise ValueError(f"both {old!r} and {new!r} are given; keep {new!r} "
                                 f"({old!r} is its old name)")
            if warn:
                warnings.warn(f"the config key {old!r} is now {new!r}; write {new} = ... "
                              "(the old name still loads)", DeprecationWarning, stacklevel=3)
            data[new] = data.pop(old)
    return data


_KINDS = {int: (int,), float: (int, float), bool: (bool,), str: (str, bool), dict: (dict,),
          list: (list, tuple), tuple: (list, tuple)}


def _typed(name: str, value, typ: type, optional: bool):
    """`value` for field `name` as its type: a string is converted (`rlvr.usage.coerce`), a
    value from TOML, JSON or Python must already be of the field's kind (a boolean passes for
    a string field: some were booleans once, and their configs check their choices)."""
    if isinstance(value, str) or (optional and value is None):
        return coerce(name, value, typ, optional)
    kinds = _KINDS.get(typ)
    if kinds is not None and (not isinstance(value, kinds) or
                              (isinstance(value, bool) and typ in (int, float))):
        raise ValueError(f"{name}: expected {typ.__name__}, got {value!r}")
    return coerce(name, value, typ, optional)


def load_fields(cls, path: str | Path | None = None, overrides: list[str] | dict | None = None,
                *, extra=(), help_hint: str = "--help-config") -> dict:
    """The typed field values of dataclass `cls` from a TOML file, then `overrides` (KEY=VALUE
    strings, or a dict: the flags parsed and the pairs given, the pairs last). `extra`: keys
    passed through unchecked (a preset's name)."""
    types_ = field_types(cls)      # each layer's old names renamed, so a later layer's win
    data = rename_aliases(read_toml(path), types_) if path is not None else {}
    data.update(rename_aliases(parse_pairs(overrides) if isinstance(overrides, list)
                               else (overrides or {}), types_))
    for key in data:
        if key not in types_ and key not in extra:
            raise ValueError(unknown_key(key, types_, help_hint))
    return {k: v if k not in types_ else _typed(k, v, *types_[k]) for k, v in data.items()}
