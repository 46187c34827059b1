"""MBPP-style asserts: every assert a task carries runs and counts, whatever its shape.

Each shape below is one MBPP's published test lists use (the `full` and `sanitized` configs,
Austin et al. 2021). Every row pairs it with a plain `f(x) == y` assert, as MBPP's rows do, and
two programs: a right one, and one that satisfies only the plain assert (hard-coded from the
prompt, which shows the asserts). The right one must pass every assert, the other must fail the
shape's assert -- on both sandbox backends. A shape that is dropped, or read differently from
the assert, fails here.
"""
from __future__ import annotations

import pytest

from rlvr.core import ERROR, OK, Task
from rlvr.verifiers.code import CodeReward, TestCase
from rlvr.verifiers.code_asserts import convert_asserts
from sandbox_support import make_sandbox


@pytest.fixture(scope="module", params=["process", "docker"])
def sandbox(request):
    sb = make_sandbox(request.param)
    yield sb
    sb.close()


def run(sandbox, tests, code, all_or_nothing=False):
    reward = CodeReward(backend=sandbox.backend, all_or_nothing=all_or_nothing)
    return reward.use_sandbox(sandbox).score(Task("t", answer=tests),
                                             f"<think>x</think>\n```python\n{code}\n```")


# (name, the shape's assert, plain assert, right program, program that passes only the plain one,
#  setup code)
SHAPES = [
    ("eq", "assert f(3) == 9", "assert f(2) == 4", "def f(x): return x * x",
     "def f(x): return 4", ""),
    ("eq reversed, no spaces", "assert 9==f(3)", "assert f(2)==4", "def f(x): return x * x",
     "def f(x): return 4", ""),
    ("set(...) ==", "assert set(f([3, 1, 2])) == set([1, 2, 3])", "assert f([1]) == [1]",
     "def f(xs): return list(reversed(sorted(xs)))", "def f(xs): return [1]", ""),
    ("sorted(...) ==", "assert sorted(f('cab')) == ['a', 'b', 'c']", "assert f('a') == ['a']",
     "def f(s): return list(s)", "def f(s): return ['a']", ""),
    ("math.isclose rel_tol", "assert math.isclose(f(2), 12.566, rel_tol=0.001)",
     "assert f(0) == 0", "import math\ndef f(r): return math.pi * r * r", "def f(r): return 0",
     "import math"),
    ("math.isclose abs_tol, no import in setup", "assert math.isclose(f(1), 3.1416, abs_tol=1e-3)",
     "assert f(0) == 0", "import math\ndef f(r): return math.pi * r * r", "def f(r): return 0", ""),
    ("== True", "assert f(4) == True", "assert f(3) == False", "def f(n): return n % 2 == 0",
     "def f(n): return False", ""),
    ("is True / is None", "assert f(4) is True and f(0) is None", "assert f(3) == False",
     "def f(n): return None if n == 0 else n % 2 == 0", "def f(n): return 0", ""),
    ("bare truthy", "assert f(4)", "assert not f(3)", "def f(n): return n % 2 == 0",
     "def f(n): return False", ""),
    ("not", "assert not f(5)", "assert f(4)", "def f(n): return n % 2 == 0",
     "def f(n): return True", ""),
    ("!=", "assert f(3) != 10", "assert f(2) == 4", "def f(x): return x * x",
     "def f(x): return 4 if x == 2 else 10", ""),
    ("len(...)", "assert len(f(5)) == 5", "assert f(1) == [0]", "def f(n): return list(range(n))",
     "def f(n): return [0]", ""),
    ("in", "assert 'b' in f('abc')", "assert f('a') == ['a']", "def f(s): return list(s)",
     "def f(s): return ['a']", ""),
    ("result in (alternatives)", "assert f([3, 3, 1]) in (3, 1)", "assert f([2]) == 2",
     "def f(xs): return max(xs)", "def f(xs): return 2", ""),
    ("and", "assert f(3) == 9 and f(4) == 16", "assert f(2) == 4", "def f(x): return x * x",
     "def f(x): return 4 if x == 2 else 9", ""),
    ("or", "assert f(3) == 9 or f(3) == -9", "assert f(2) == 4", "def f(x): return x * x",
     "def f(x): return 4", ""),
    ("keyword arguments", "assert f(2, power=3) == 8", "assert f(2) == 4",
     "def f(x, power=2): return x ** power", "def f(x, power=2): return 4", ""),
    ("starred arguments", "assert f(*[2, 3]) == 5", "assert f(1, 1) == 2",
     "def f(a, b): return a + b", "def f(a, b): return 2", ""),
    ("round(...)", "assert round(f(2), 2) == 6.28", "assert f(0) == 0",
     "def f(r): return 3.14159 * r", "def f(r): return 0", ""),
    ("abs(... - e) < tol", "assert abs(f(1) - 3.14159) < 1e-4", "assert f(0) == 0",
     "def f(r): return 3.14159 * r", "def f(r): return 0", ""),
    ("tuple(...) / list(...) of an iterator", "assert list(f([1, 2])) == [2, 4]",
     "assert tuple(f([])) == ()", "def f(xs): return map(lambda x: 2 * x, xs)",
     "def f(xs): return iter(())", ""),
    ("str(...)", "assert str(f(3)) == '9'", "assert f(2) == 4", "def f(x): return x * x",
     "def f(x): return 4", ""),
    ("a Counter compared with a dict", "assert f('aab') == {'a': 2, 'b': 1}",
     "assert f('') == {}", "import collections\ndef f(s): return collections.Counter(s)",
     "def f(s): return {}", ""),
    ("float result == int", "assert f(10, 8, 6) == 240", "assert f(0, 0, 0) == 0",
     "def f(l, b, h): return (l * b * h) / 2", "def f(l, b, h): return 0", ""),
    ("nested call", "assert f(f(2)) == 16", "assert f(2) == 4", "def f(x): return x * x",
     "def f(x): return 4", ""),
    ("two calls compared", "assert f(-3) == f(3)", "assert f(2) == 4", "def f(x): return x * x",
     "def f(x): return 4 if x == 2 else x", ""),
    ("arguments built from a class the program defines",
     "assert f([Pair(5, 24), Pair(15, 25), Pair(27, 40)], 3) == 3",
     "assert f([Pair(1, 2)], 1) == 1",
     "class Pair:\n    def __init__(self, a, b): self.a, self.b = a, b\n"
     "def f(ps, n): return len([p for p in ps if p.a < p.b])",
     "class Pair:\n    def __init__(self, a, b): pass\ndef f(ps, n): return 1", ""),
    ("arguments from the test setup code", "assert f(root) == 3", "assert f(None) == 0",
     "def f(t): return 0 if t is None else 1 + max(f(t.left), f(t.right))",
     "def f(t): return 0",
     "class Node:\n    def __init__(self, left=None, right=None): self.left, self.right = left, right\n"
     "root = Node(Node(Node()), Node())"),
    ("a comprehension over the result", "assert all(x % 2 == 0 for x in f(4))",
     "assert f(0) == []", "def f(n): return [2 * k for k in range(n)]",
     "def f(n): return [] if n == 0 else [1]", ""),
    ("a helper from the test setup code", "assert same(f([2, 1]), [1, 2])", "assert f([]) == []",
     "def f(xs): return sorted(xs)", "def f(xs): return list(xs)",
     "def same(a, b): return sorted(a) == sorted(b) and a == b"),
]


@pytest.mark.parametrize("shape", SHAPES, ids=[s[0] for s in SHAPES])
def test_every_assert_shape_runs_and_counts(sandbox, shape):
    _, shaped, plain, right, plain_only, setup = shape
    tests = convert_asserts([plain, shaped], setup)
    assert tests.n_tests == 2 and len(tests.cases) == 2 and not tests.unrunnable
    good = run(sandbox, tests, right)
    assert (good.status, good.score, good.reason) == (OK, 1.0, "2/2 passed")
    bad = run(sandbox, tests, plain_only)
    assert bad.status == OK and bad.score == 0.5 and bad.reason.startswith("1/2 passed: test 1:")
    assert run(sandbox, tests, plain_only, all_or_nothing=True).score == 0.0


def test_no_assert_of_a_task_goes_unrun(sandbox):
    """One task carrying every shape: a program wrong on any single assert loses exactly that
    one, so every assert was run and counted (n = all of them)."""
    asserts = [s[1].replace("f(", f"f{k}(").replace("Pair(", f"Pair{k}(")
               for k, s in enumerate(SHAPES)]
    setups = "\n".join(s[5].replace("f(", f"f{k}(") for k, s in enumerate(SHAPES) if s[5])
    right = "\n".join(s[3].replace("def f(", f"def f{k}(").replace("f(t.", f"f{k}(t.")
                      .replace("Pair", f"Pair{k}") for k, s in enumerate(SHAPES))
    tests = convert_asserts(asserts, setups)
    assert tests.n_tests == len(SHAPES) == len(tests.cases) and not tests.unrunnable
    assert run(sandbox, tests, right).reason == f"{len(SHAPES)}/{len(SHAPES)} passed"
    for k in (0, 4, 13, len(SHAPES) - 1):
        broken = right + f"\ndef f{k}(*a, **kw): raise ValueError('wrong')\n"
        v = run(sandbox, tests, broken)
        assert v.reason.startswith(f"{len(SHAPES) - 1}/{len(SHAPES)} passed: test {k}:")


def test_expected_values_never_enter_the_sandbox():
    """Only the calls into the program are sent; the checks stay on the host, so an always-equal
    object or a patched builtin forges nothing."""
    tests = convert_asserts(["assert set(f(1)) == {41, 42}",
                             "assert math.isclose(f(2), 43.5, rel_tol=1e-3)"])
    _, files = CodeReward()._request("def f(x): pass", tests)
    assert "41" not in files["tests.json"] and "43.5" not in files["tests.json"]
    assert [c.input for c in tests.cases] == [["set(f(1))"], ["f(2)"]]


def test_forged_answers_earn_nothing(sandbox):
    tests = convert_asserts(["assert f(1) == 2", "assert math.isclose(f(2), 3.5)",
                             "assert sorted(f(3)) == [1, 2]"])
    yes = "class Yes:\n    def __eq__(self, o): return True\n    def __lt__(self, o): return False\n"
    assert run(sandbox, tests, yes + "def f(x): return Yes()").score == 0.0
    patched = run(sandbox, tests, yes + "import math, builtins\nmath.isclose = lambda *a, **k: True"
                  "\nbuiltins.sorted = lambda *a, **k: Yes()\ndef f(x): return 2")
    assert patched.score == pytest.approx(1 / 3)       # only f(1) == 2, which it answers
    # a functional test's record in place of an assert's: the program's doing, not our error
    forged = run(sandbox, tests, "import json\n_dumps = json.dumps\n"
                 "json.dumps = lambda o, *a, **k: _dumps({'i': o['i'], 'value': True}) "
                 "if isinstance(o, dict) and 'i' in o else _dumps(o, *a, **k)\n"
                 "def f(x): return 2")
    assert (forged.status, forged.score) == (OK, 0.0) and "malformed result record" in forged.reason


@pytest.mark.parametrize("bad", ["assert f(1) = 2", "f(1) == 2", "assert True",
                                 "assert all(f(x) == x for x in [1, 2])",
                                 "assert f(1) == 1; assert f(2) == 2"])
def test_an_assert_that_cannot_run_makes_the_task_an_error(bad):
    tests = convert_asserts(["assert f(1) == 1", bad])
    assert tests.n_tests == 2 and len(tests.cases) == 1 and len(tests.unrunnable) == 1
    v = CodeReward().score(Task("t", answer=tests), "```python\ndef f(x): return x\n```")
    assert v.status == ERROR and v.score == 0.0 and "1 of the task's 2 tests cannot be run" in v.reason


def test_a_probe_that_raises_fails_only_where_the_assert_reads_it(sandbox):
    tests = convert_asserts(["assert f(1) == 1 or f(0) == 0"])
    assert run(sandbox, tests, "def f(x): return 1 // x").score == 1.0     # short-circuited
    tests = convert_asserts(["assert f(0) == 0 or f(1) == 1"])
    v = run(sandbox, tests, "def f(x): return 1 // x")
    assert v.score == 0.0 and "ZeroDivisionError" in v.reason


def test_mbpp_environment_counts_every_assert(tmp_path):
    """The `mbpp` environment itself: a program satisfying only the plain `==` assert of a
    three-assert task is not a pass."""
    import json

    import rlvr
    row = {"task_id": 2, "text": "Write a function to find the shared elements of two lists.",
           "code": "def similar_elements(a, b):\n    return tuple(set(a) & set(b))",
           "test_list": ["assert similar_elements((3, 4, 5, 6), (5, 7, 4, 10)) == (4, 5)",
                         "assert set(similar_elements((1, 2, 3, 4), (5, 4, 3, 7))) == set((3, 4))",
                         "assert set(similar_elements((11, 12, 14, 13), (17, 15, 14, 13))) == "
                         "set((13, 14))"], "test_setup_code": ""}
    data = tmp_path / "mbpp.jsonl"
    data.write_text(json.dumps(row) + "\n")
    env = rlvr.load_env("mbpp", data=str(data), pooled=False)
    task = env.get_task("mbpp/2")
    assert task.metadata["n_tests"] == 3
    assert env.reward.score(task, env.gold(task)).score == 1.0
    hack = "```python\ndef similar_elements(a, b):\n    return (4, 5)\n```"
    v = env.reward.score(task, hack)
    assert (v.status, v.score) == (OK, 0.0) and "1/3 passed" in v.reason


def test_a_test_case_kind_is_checked():
    with pytest.raises(ValueError, match="mixed"):
        from rlvr.verifiers.code import CodeTests
        CodeTests([TestCase(["f(1)"], "_r0 == 1", "assert"), TestCase([1], 1)], "f")


def test_code_feedback_shows_what_each_call_returned(sandbox):
    from rlvr.envs.tool_envs import attempt_feedback
    tests = convert_asserts(["assert f(2) == 4", "assert sorted(f('ba')) == ['a', 'b']"])
    reward = CodeReward(backend=sandbox.backend).use_sandbox(sandbox)
    ok, text = attempt_feedback("def f(x): return 2 * x", tests, reward)
    assert not ok and "1/2 tests passed" in text
    assert "test 1: sorted(f('ba')) failed its assert: returned ['a', 'a', 'b', 'b']" in text
    assert attempt_feedback("def f(x): return x * x if x == 2 else x", tests, reward)[0]
