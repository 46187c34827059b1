"""MBPP-style `assert` strings -> tests that run every assert, with the verdict kept on the host.

An assert mixes two things: calls into the program under test, and the check around them with
the expected values. Each assert is split where the program's values enter it. Every call into
the program -- a call whose function is a name the program must define (the task's function, a
class it defines), or such a name on its own -- is a *probe*, a piece of source the sandbox
evaluates in the solution's namespace (after the row's setup code), returning the plain value,
as the driver does for any functional test. A conversion written straight around a probe
(`list(f(x))`, `sorted(f(x))`, `set(f(x))`, ...) belongs to the probe, so iterators and
non-plain containers arrive as plain values. What is left -- `_r0 == [1, 2]`,
`set(_r0) == {4, 5}`, `math.isclose(_r0, 3.5, rel_tol=1e-3)`, `len(_r0) == 2 and 3 in _r0`,
`_r0 != 7` -- is the *check*: evaluated on the host with the decoded plain values bound to the
placeholders, so the expected values never enter the sandbox and a program that forges its own
answers (always-equal objects, patched builtins) gains nothing. Any shape of assert works
this way; none is matched against a list of known forms, so none can be dropped.

An assert that cannot be split -- not Python, not an `assert`, a name the host cannot resolve, a
probe using a name bound elsewhere in the assert (a comprehension variable) -- is *unrunnable*:
the task keeps it, and scoring the task is an `error` naming it, never a pass over the rest.
"""
from __future__ import annotations

import ast
import builtins
import sys

from .code import CodeTests, TestCase
from .code_checks import PLACEHOLDER, host_namespace, modules_of, setup_namespace

__all__ = ["convert_asserts", "split_assert", "WRAPPERS"]

WRAPPERS = frozenset({"list", "tuple", "set", "frozenset", "sorted", "dict", "str"})
"""Conversions evaluated with the probe they wrap: an iterator or a collections type the program
returns only becomes comparable once converted, and the conversion adds no expected value."""


def _bound_names(tree) -> set[str]:
    """Names an assert binds itself: comprehension targets, lambda arguments, walrus targets."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.comprehension):
            out |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Lambda):
            a = node.args
            out |= {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
            out |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
        elif isinstance(node, ast.NamedExpr):
            out.add(node.target.id)
    return out


class _Splitter(ast.NodeTransformer):
    """Replaces each probe (outermost program call or program name, with the conversions written
    straight around it) by a placeholder, collecting the probes' source."""

    def __init__(self, program: set[str]):
        self.program = program
        self.probes: list[ast.expr] = []

    def _mentions(self, node) -> bool:
        return any(isinstance(n, ast.Name) and n.id in self.program for n in ast.walk(node))

    def _is_probe(self, node) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.program
        if isinstance(node, ast.Call) and self._mentions(node.func):
            return True
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in WRAPPERS and len(node.args) == 1 and not node.keywords
                and self._is_probe(node.args[0]))

    def visit(self, node):
        if isinstance(node, ast.expr) and self._is_probe(node):
            self.probes.append(node)
            return ast.copy_location(ast.Name(PLACEHOLDER.format(len(self.probes) - 1),
                                              ast.Load()), node)
        return super().visit(node)


def split_assert(text: str, host: dict) -> tuple[list[str], str, str]:
    """One assert -> (probes, check, entry point). Raises ValueError saying why it cannot run.

    >>> split_assert("assert math.isclose(f([1, 2], k=2), 3.5) and g(1) != 2", {})
    (['f([1, 2], k=2)', 'g(1)'], 'math.isclose(_r0, 3.5) and _r1 != 2', 'f')
    """
    try:
        module = ast.parse(text.strip())
    except SyntaxError as exc:
        raise ValueError(f"not Python: {exc.msg}") from None
    if len(module.body) != 1 or not isinstance(module.body[0], ast.Assert):
        raise ValueError("not a single assert statement")
    test = module.body[0].test
    local = _bound_names(test)
    names = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)
             and isinstance(n.ctx, ast.Load)} - local
    program = {n for n in names if n not in host and not hasattr(builtins, n)
               and not _is_module_use(test, n)}
    if not program:
        raise ValueError("it calls nothing the program defines")
    splitter = _Splitter(program)
    check = splitter.visit(test)
    probes = splitter.probes
    for probe in probes:
        inner = {n.id for n in ast.walk(probe) if isinstance(n, ast.Name)}
        if inner & (local - _bound_names(probe)):
            raise ValueError("a call into the program uses a name bound by the assert itself")
    called = [c.func.id for c in _calls(probes) if c.func.id in program]
    entry = called[0] if called else sorted(program)[0]
    return [ast.unparse(p) for p in probes], ast.unparse(check), entry


def _calls(probes):
    for p in probes:
        for n in ast.walk(p):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                yield n


def _is_module_use(test, name: str) -> bool:
    """`name` is a standard module the check uses as one (`math.isclose`), never called."""
    if name not in sys.stdlib_module_names:
        return False
    uses = [n for n in ast.walk(test) if isinstance(n, (ast.Attribute, ast.Call))]
    as_base = any(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                  and n.value.id == name for n in uses)
    called = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
                 for n in uses)
    return as_base and not called


def convert_asserts(asserts: list[str], setup: str = "") -> CodeTests:
    """MBPP-style `test_list` -> a CodeTests with one test per assert, every one of them run.

    `setup`: the row's test setup code (MBPP's `test_setup_code`, or its `test_imports`), run
    before the checks on the host and after the solution in the sandbox. Asserts that cannot be
    split are kept in `CodeTests.unrunnable`, which makes scoring the task an `error`.
    """
    host = setup_namespace(setup)
    cases, unrunnable, entry = [], [], None
    for text in asserts:
        try:
            probes, check, name = split_assert(text, host)
            ns = host_namespace(setup, modules_of(check))
            missing = _unresolved(check, ns, len(probes))
            if missing:
                raise ValueError(f"the check names {missing[0]!r}, which the host cannot resolve")
        except ValueError as exc:
            unrunnable.append(f"{text.strip()[:100]} ({exc})")
            continue
        entry = entry or name
        cases.append(TestCase(probes, check, "assert", text=text.strip()))
    return CodeTests(cases, entry or "", strict_sequences=True, equality="python", setup=setup,
                     unrunnable=tuple(unrunnable), n_declared=len(asserts))


def _unresolved(check: str, ns: dict, n_probes: int) -> list[str]:
    tree = ast.parse(check, mode="eval")
    local = _bound_names(tree) | {PLACEHOLDER.format(k) for k in range(n_probes)}
    return [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id not in local
            and n.id not in ns and not hasattr(builtins, n.id)]
