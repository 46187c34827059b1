"""What every command line shares: exit codes, the usage error, KEY=VALUE parsing, field help,
the one-line error of an optional dependency that is not installed.

A leaf of the floor layer (imports nothing from rlvr): subcommands in `rlvr.cli`, configs in the
component folders and their tests all use these without importing the CLI itself.
"""
from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import json
from functools import lru_cache

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_ROW_ERRORS = 0, 1, 2, 3


class UsageError(Exception):
    """Bad usage detected after argument parsing (a missing file, an unknown env...)."""


class MissingExtra(UsageError, ModuleNotFoundError):
    """An optional dependency is not installed; the message names the extra that brings it."""


def require_extra(module: str, extra: str, feature: str, alternative: str = ""):
    """Import optional dependency `module`, or raise MissingExtra: one line naming `feature`,
    the package it needs and `pip install 'rlvr[extra]'` (or `alternative`)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        state = "is not installed" if exc.name == module else f"does not import ({exc})"
        raise MissingExtra(f"{feature}: the {module} package {state}; pip install "
                           f"'rlvr[{extra}]'" + (f" ({alternative})" if alternative else ""),
                           name=module) from exc


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


@lru_cache(maxsize=None)
def field_docs(cls: type) -> dict[str, str]:
    """A dataclass's field docstrings (the string literal under each field), read from its source
    and its bases'. They are the one text of each option: `--help`, `--help-config` and the docs."""
    docs: dict[str, str] = {}
    for klass in reversed([c for c in cls.__mro__ if dataclasses.is_dataclass(c)]):
        try:
            tree = ast.parse(inspect.getsource(klass).lstrip())
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body
        for a, b in zip(body, body[1:]):
            if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) \
                    and isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant) \
                    and isinstance(b.value.value, str):
                docs[a.target.id] = " ".join(b.value.value.split())
    return docs


_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def coerce(name: str, value, typ: type, optional: bool = False):
    """A command-line string for config field `name` -> the field's type `typ` (bool, int, float,
    str, dict, list, tuple); `optional`: the word `none` is None. The one coercion of every
    subcommand's flags and KEY=VALUE pairs. Values that are not strings (from TOML, JSON or
    Python) pass through, sequences as the field's own kind."""
    if not isinstance(value, str):
        return tuple(value) if typ is tuple and isinstance(value, list) else value
    if optional and value.lower() == "none":
        return None
    if typ is bool:
        if value.lower() in _TRUE + _FALSE:
            return value.lower() in _TRUE
        raise ValueError(f"{name}: expected true/false, got {value!r}")
    if typ in (int, float):
        try:
            return typ(value)
        except ValueError:
            raise ValueError(f"{name}: expected {typ.__name__}, got {value!r}") from None
    if typ in (dict, list, tuple):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            try:
                parsed = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                parsed = None
        want = dict if typ is dict else (list, tuple)
        if not isinstance(parsed, want):
            example = '{"key": 1}' if typ is dict else '["a", "b"]'
            raise ValueError(f"{name}: expected a {typ.__name__} as JSON (e.g. {example}), "
                             f"got {value!r}")
        return typ(parsed)
    return value
