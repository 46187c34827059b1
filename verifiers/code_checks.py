"""Where an MBPP-style assert's check runs: on the host, over the plain values of its probes.

The check (`set(_r0) == {4, 5}`) is the dataset's code; the placeholders stand for what the
program's calls returned, decoded into plain values by the sandbox channel's codec, so no object
the program made ever runs here. See rlvr.verifiers.code_asserts for how asserts are split.
"""
from __future__ import annotations

import ast
import sys
from functools import lru_cache

from .code_driver import decode

__all__ = ["PLACEHOLDER", "check_assert", "host_namespace", "modules_of", "setup_namespace"]

PLACEHOLDER = "_r{}"
"""The name a check reads the k-th probe's value under."""


@lru_cache(maxsize=256)
def setup_namespace(setup: str) -> dict:
    """The names a row's test setup code defines (run once per setup text)."""
    ns: dict = {"__name__": "mbpp_setup"}
    if setup.strip():
        exec(compile(setup, "<test setup>", "exec"), ns)   # the dataset's own code, never the model's
    return ns


def host_namespace(setup: str, modules: tuple[str, ...] = ()) -> dict:
    """Where checks are evaluated: the row's setup code (the dataset's, trusted) plus the standard
    modules a check names (`math.isclose`), imported here."""
    ns = dict(setup_namespace(setup))
    for name in modules:
        ns.setdefault(name, __import__(name))
    return ns


@lru_cache(maxsize=4096)
def modules_of(check: str) -> tuple[str, ...]:
    """The standard modules a check uses by attribute (`math` of `math.isclose`)."""
    tree = ast.parse(check, mode="eval")
    return tuple(sorted({n.value.id for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                         and isinstance(n.value, ast.Name)
                         and n.value.id in sys.stdlib_module_names}))


def check_assert(probes: list, check: str, text: str, record: dict, setup: str) -> str:
    """An assert's `check`, evaluated here over its probes' plain values: '' when it holds, else
    why not. A probe that raised raises again where the check reads it, as in the assert itself
    (so `and` and `or` short-circuit as written)."""
    if "error" in record:
        return f"raised {str(record['error'])[:200]}"
    results = record["values"]
    if len(results) != len(probes):
        raise ValueError(f"{len(results)} probe results for {len(probes)} probes")
    bound = _Probes(host_namespace(setup, modules_of(check)),
                    {PLACEHOLDER.format(k): r for k, r in enumerate(results)})
    try:     # the dataset's check over plain values; globals, so comprehensions see them too
        held = bool(eval(compile(check, "<assert>", "eval"), bound))
    except _ProbeRaised as exc:
        return f"{text[:100]}: raised {exc}"
    except Exception as exc:  # noqa: BLE001 -- the check failing on the program's values fails it
        return f"{text[:100]}: {type(exc).__name__}: {str(exc)[:120]}"
    return "" if held else f"{text[:100]}: got {repr(bound.seen())[:160]}"


class _ProbeRaised(Exception):
    pass


class _Probes(dict):
    """A check's namespace: the host's names, and each placeholder read as its probe's decoded
    value, or its error raised again when the check reads it."""

    def __init__(self, names: dict, probes: dict):
        super().__init__(names)
        self.probes = probes

    def __getitem__(self, name):
        rec = self.probes.get(name)
        if rec is None:
            return super().__getitem__(name)
        if "error" in rec:
            raise _ProbeRaised(str(rec["error"])[:200])
        return decode(rec["value"])

    def seen(self):
        return [decode(r["value"]) if "value" in r else f"raised {r['error'][:60]}"
                for r in self.probes.values()]

