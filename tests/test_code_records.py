"""What the code verifier believes, on both backends: exact comparisons where the check is exact,
malformed result records scored against the program, and limits only as the sandbox measured them.

- An integer expected value compares exactly: float approximations of integer answers (a closed
  form left unrounded, `exp(lgamma(...))`, a float accumulator a unit off at 1e16, a bisection
  stopped early) are wrong, as HumanEval's own `==` check says. A tolerance applies only where a
  test asks for one or the environment declares it.
- A channel record that is not exactly one well-formed value or error (a replaced serializer, a
  profile hook deleting a field, records written by the program itself) is `ok`, 0, "malformed
  result" -- never an `error` left out of training.
- A forged `MemoryError` record is one failed test, never "memory limit exceeded".
- Tests that mirror a benchmark's `==` compare as `==` does (`1 == True`); `is True` stays `is`.
"""
from __future__ import annotations

import pytest

from rlvr.core import OK, Task
from rlvr.sandbox import Limits
from rlvr.verifiers.code import CodeReward, CodeTests, TestCase, compare_stdout, compare_values
from rlvr.verifiers.code_asserts import convert_asserts
from rlvr.verifiers.code_humaneval import convert_problem
from sandbox_support import make_sandbox


@pytest.fixture(scope="module", params=["process", "docker"])
def sandbox(request):
    sb = make_sandbox(request.param)
    yield sb
    sb.close()


def fenced(code: str) -> str:
    return f"<think>thinking</think>\n```python\n{code}\n```"


def score(sandbox, tests, code, **kwargs):
    reward = CodeReward(backend=sandbox.backend, **kwargs).use_sandbox(sandbox)
    return reward.score(Task("t", answer=tests), fenced(code))


# --------------------------------------------------------------------------- exact integers

def test_an_integer_expected_value_compares_exactly():
    assert compare_values(5, 5.0) and compare_values(10 ** 16, float(10 ** 16))
    assert not compare_values(120, 119.99999999999997)
    assert not compare_values(120, 119.99999999999997, tol=1e-6)     # even with a tolerance
    assert not compare_values(10 ** 16 + 1, 1e16, tol=1e-6)
    assert not compare_values(0.3, 0.1 + 0.2)                          # no tolerance declared
    assert compare_values(0.3, 0.1 + 0.2, tol=1e-6)                    # declared: it applies
    assert not compare_stdout("0.333333\n", "0.3333333\n")[0]
    assert compare_stdout("0.333333\n", "0.3333333\n", tol=1e-6)[0]
    assert not compare_stdout("12\n", "12.0000001\n", tol=1e-6)[0]


FACTORIAL = CodeTests([TestCase([5], 120), TestCase([20], 2432902008176640000)], "fact")
APPROXIMATIONS = {
    "lgamma": "import math\ndef fact(n): return math.exp(math.lgamma(n + 1))",
    "unrounded_closed_form": "import math\ndef fact(n):\n"
                             "    return math.sqrt(2 * math.pi * n) * (n / math.e) ** n * "
                             "math.exp(1 / (12 * n) - 1 / (360 * n ** 3))",
    "float_accumulator": "def fact(n):\n    r = 1.0\n    for k in range(2, n + 1): r *= k\n"
                         "    return r + (0 if n < 20 else 1024.0)",
}


@pytest.mark.parametrize("name", sorted(APPROXIMATIONS))
def test_float_approximations_of_integer_answers_earn_nothing(sandbox, name):
    for tol in (None, 1e-6):          # the verifier's default, and a declared tolerance
        v = score(sandbox, FACTORIAL, APPROXIMATIONS[name], float_tol=tol, all_or_nothing=True)
        assert v.status == OK and v.score == 0.0, (name, tol, v.reason)
    exact = score(sandbox, FACTORIAL, "import math\ndef fact(n): return math.factorial(n)")
    assert exact.score == 1.0, exact.reason


def test_a_bisection_stopped_early_fails_an_integer_root(sandbox):
    tests = CodeTests([TestCase([49], 7), TestCase([144], 12)], "isqrt")
    early = ("def isqrt(n):\n    lo, hi = 0.0, float(n)\n    for _ in range(40):\n"
             "        mid = (lo + hi) / 2\n        lo, hi = (mid, hi) if mid * mid < n else (lo, mid)\n"
             "    return hi")
    assert score(sandbox, tests, early).score == 0.0
    assert score(sandbox, tests, "def isqrt(n): return float(round(n ** 0.5))").score == 1.0


# --------------------------------------------------------------------------- malformed records

ADD = CodeTests([TestCase([2, 3], 5), TestCase([7, 8], 15)], "add")
CHANNEL = ("import gc, os\n"      # the driver's own copy of the result pipe (fd 3 is closed)
           "fd = next(o.fd for o in gc.get_objects() if type(o).__name__ == '_Channel')\n")
MALFORMED = {
    "replaced_serializer": ("import json\n_dumps = json.dumps\n"
                            "json.dumps = lambda r, *a, **k: _dumps({'i': r.get('i', 0)})\n"
                            "def add(a, b): return a + b"),
    "profile_hook_deletes_a_field": (
        "import sys\n"
        "def hook(frame, event, arg):\n"
        "    if event == 'call' and frame.f_code.co_name == 'emit':\n"
        "        frame.f_locals['record'].pop('value', None)\n"
        "sys.setprofile(hook)\n"
        "def add(a, b): return a + b"),
    "writes_its_own_records": (CHANNEL +
                               "os.write(fd, b'{\"i\": 0}\\n{\"i\": 1, \"value\": 15, \"x\": 1}\\n')\n"
                               "os._exit(0)\ndef add(a, b): return a + b"),
    "value_and_error": (CHANNEL +
                        "os.write(fd, b'{\"i\": 0, \"value\": 5, \"error\": \"no\"}\\n')\n"
                        "os._exit(0)\ndef add(a, b): return a + b"),
    "undecodable_value": (CHANNEL +
                          "os.write(fd, b'{\"i\": 0, \"value\": {\"__tuple__\": 5}}\\n')\n"
                          "os._exit(0)\ndef add(a, b): return a + b"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_record_is_the_programs_doing(sandbox, name):
    v = score(sandbox, ADD, MALFORMED[name])
    assert v.status == OK and v.score == 0.0, (name, v.status, v.reason)
    assert "malformed result" in v.reason, (name, v.reason)


def test_a_forged_memory_error_is_a_failed_test_not_a_limit(sandbox):
    forged = (CHANNEL +
              "os.write(fd, b'{\"i\": 0, \"error\": \"MemoryError: \"}\\n"
              "{\"i\": 1, \"error\": \"BlockingIOError: [Errno 11] no\"}\\n')\n"
              "os._exit(0)\ndef add(a, b): return a + b")
    v = score(sandbox, ADD, forged)
    assert v.status == OK and v.score == 0.0, v.reason
    assert "limit exceeded" not in v.reason and "raised MemoryError" in v.reason, v.reason


def test_memory_error_on_stderr_is_no_limit_unless_measured(sandbox):
    """The run's status too: "MemoryError" printed before exit 1 is a crash, not the limit."""
    forged = sandbox.run("import sys\nsys.stderr.write('MemoryError\\n')\nsys.exit(1)\n")
    assert forged.status == "runtime_error", (forged.status, forged.reason)
    bomb = sandbox.run("chunks = []\nwhile True:\n    chunks.append(bytearray(50 << 20))\n",
                       limits=Limits(wall_s=5, memory_mb=300))
    assert bomb.status == "memory_limit", (bomb.status, bomb.reason, bomb.peak_memory_mb)


def test_a_real_memory_bomb_still_names_the_memory_limit(sandbox):
    limits = Limits(wall_s=4.0, cpu_s=3.0, memory_mb=300)
    bomb = "def add(a, b):\n    x = [bytearray(1 << 20) for _ in range(2000)]\n    return a + b"
    v = score(sandbox, ADD, bomb, limits=limits)
    assert v.status == OK and v.score == 0.0 and "memory limit exceeded" in v.reason, v.reason


# --------------------------------------------------------------------------- a benchmark's ==

PROBLEM = {
    "task_id": "Fake/0", "entry_point": "is_even",
    "prompt": "def is_even(n):\n    '''Whether n is even.'''\n",
    "canonical_solution": "    return n % 2 == 0\n",
    "test": "def check(candidate):\n    assert candidate(4) == True\n    assert candidate(3) == False\n"
            "    assert candidate(2) is True\n",
}


def test_tests_mirroring_an_eq_check_compare_as_eq_does(sandbox):
    tests = convert_problem(PROBLEM).tests
    assert tests.equality == "python" and [c.check for c in tests.cases] == ["eq", "eq", "is"]
    eq_only = CodeTests(tests.cases[:2], "is_even", strict_sequences=True, equality="python")
    ints = "def is_even(n): return int(n % 2 == 0)"
    assert score(sandbox, eq_only, ints).score == 1.0          # 1 == True, as the check says
    assert score(sandbox, tests, ints).score == pytest.approx(2 / 3)   # `is True` refuses 1
    assert score(sandbox, tests, "def is_even(n): return n % 2 == 0").score == 1.0
    mbpp = convert_asserts(["assert f(2) == 4.0", "assert f(3) == (9,)"])
    assert mbpp.equality == "python"
    assert score(sandbox, mbpp, "def f(x): return x * x if x == 2 else [x * x]").score == 0.5
    typed = CodeTests(tests.cases[:2], "is_even")        # rlvr's own: bool is never a number
    assert score(sandbox, typed, ints).score == 0.0
