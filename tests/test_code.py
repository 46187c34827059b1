"""The code verifier: extraction, typed comparison, grader tricks on both backends, HumanEval's
canonical and corrupted solutions, the code environments and `rlvr score --env code`."""
from __future__ import annotations

import json
import math
import random

import pytest

from rlvr.core import INFRA_ERROR, OK, UNPARSED, Task
from rlvr.sandbox import Limits, RunResult
from rlvr.verifiers.code import (CodeReward, CodeTests, TestCase, compare_stdout, compare_values,
                                 extract_code)
from sandbox_support import make_sandbox


@pytest.fixture(scope="module", params=["process", "docker"])
def reward(request):
    sb = make_sandbox(request.param)
    yield CodeReward(backend=request.param).use_sandbox(sb)
    sb.close()


def fenced(code: str) -> str:
    return f"<think>thinking</think>\n```python\n{code}\n```"


# --------------------------------------------------------------------------- pure functions

def test_extract_code_takes_the_last_block_of_the_answer_span():
    assert extract_code("```python\na = 1\n```\ntext\n```py\nb = 2\n```") == "b = 2\n"
    assert extract_code("no code here") is None
    r = CodeReward()
    # a block inside the think span never counts; with none after it the sample is unparsed
    v = r.score(Task("t", answer=CodeTests([TestCase([1], 1)], "f")),
                "<think>```python\ndef f(x): return x\n```</think> I am done.")
    assert v.status == UNPARSED and v.score == 0.0


@pytest.mark.parametrize("expected, actual, same", [
    (1, True, False), (True, 1, False), (True, True, True),        # bool is not a number
    (1, 1.0, True), (0.1 + 0.2, 0.3, True), (1.0, 1.001, False),   # a declared tolerance
    (float("nan"), float("nan"), True), (1e300, math.inf, False),
    ((1, 2), [1, 2], False), ([1, 2], [1, 2], True), ([1, 2], [1, 2, 3], False),
    ({"a": [1]}, {"a": [1]}, True), ({"a": 1}, {"a": 1, "b": 2}, False),
    ("1", 1, False), (None, 0, False), ({1, 2}, {2, 1}, True),
])
def test_compare_values_is_typed(expected, actual, same):
    assert compare_values(expected, actual, tol=1e-6) is same


def test_compare_stdout_checks_every_line():
    assert compare_stdout("1 2\n3\n", "1   2  \n3\n\n")[0]              # whitespace-tolerant
    assert not compare_stdout("1\n2\n3\n", "1\n2\n")[0]                 # truncated: no zip pass
    assert not compare_stdout("1\n", "1\n2\n")[0]                       # extra line
    assert compare_stdout("0.333333\n", "0.3333333\n", 1e-6)[0]         # a declared tolerance
    assert not compare_stdout("10\n", "10.0000001\n")[0]                # integers are exact


class _FlakySandbox:
    """A sandbox whose first `outages` runs are infrastructure failures."""
    concurrency, _closed = 1, False

    def __init__(self, outages, real=None):
        self.outages, self.calls, self.real = outages, 0, real

    def run(self, *args, **kwargs):
        self.calls += 1
        if self.calls <= self.outages:
            return RunResult("infra_error", reason="engine restarting")
        return self.real.run(*args, **kwargs)


def test_sandbox_outage_is_infra_error_after_bounded_retries():
    flaky = _FlakySandbox(outages=10)
    r = CodeReward(retries=2).use_sandbox(flaky)
    v = r.score(Task("t", answer=CodeTests([TestCase([1], 1)], "f")), fenced("def f(x): return x"))
    assert v.status == INFRA_ERROR and v.failed and flaky.calls == 3   # 1 try + 2 retries
    assert "engine restarting" in v.reason


def test_a_limit_is_named_against_the_limits_the_run_had():
    """A sandbox may tighten a run's limits (a Docker pool's are fixed when it starts): whether
    the program reached one, and which, is judged against the limits it ran under."""
    r = CodeReward(limits=Limits(processes=64))
    refused = {0: {"i": 0,
                   "error": "BlockingIOError: [Errno 11] Resource temporarily unavailable"}}
    ran = RunResult("ok", 1, tasks_created=45, limits=Limits(processes=48))
    assert "more than 48 processes" in r._limit_passed(ran, refused)
    assert r._limit_passed(RunResult("ok", 1, tasks_created=45), refused) == ""  # 45 of 64


# --------------------------------------------------------------------------- grader tricks

SECRET_A, SECRET_B = random.Random(7).getrandbits(60), random.Random(8).getrandbits(60)
ADD = CodeTests([TestCase([SECRET_A, SECRET_B], SECRET_A + SECRET_B), TestCase([2, 3], 5)], "add")

TRICKS = {
    "prints_passed": "print('PASSED'); print('All tests passed')\ndef add(a, b): return 0",
    "exit_before_tests": "import os\nos._exit(0)\ndef add(a, b): return a + b",
    "sys_exit_zero": "import sys\ndef add(a, b): sys.exit(0)",
    "patched_sys_exit": "import sys\nsys.exit = lambda *a: None\ndef add(a, b): raise SystemExit(0)",
    "patched_isclose": ("import math, builtins\nmath.isclose = lambda *a, **k: True\n"
                        "builtins.abs = lambda x: 0\ndef add(a, b): return -1"),
    "always_equal": ("class Yes:\n    def __eq__(self, other): return True\n"
                     "    def __ne__(self, other): return False\ndef add(a, b): return Yes()"),
    "int_subclass": ("class Int(int):\n    def __eq__(self, other): return True\n"
                     "def add(a, b): return Int(0)"),
    "inspects_frames": ("import sys, gc\ndef add(a, b):\n    f = sys._getframe(1)\n"
                        "    found = [v for fr in (f, f.f_back) if fr for v in fr.f_locals.values()"
                        " if isinstance(v, int) and v > 10 ** 12]\n"
                        "    return found[0] if found else 0"),
    "reads_tests_from_disk": ("import os\ndef add(a, b):\n    seen = ''\n"
                              "    for root, _, files in os.walk('/work'):\n"
                              "        for n in files: seen += open(os.path.join(root, n)).read()\n"
                              "    return len(seen)"),
    "forges_the_result_pipe": ("import os, json\nfor i in range(2):\n"
                               "    os.write(3, (json.dumps({'i': i, 'value': 5}) + '\\n').encode())\n"
                               "os._exit(0)\ndef add(a, b): return a + b"),
    "duplicates_a_record": ("import os, json\nos.write(3, b'{\"i\": 1, \"value\": 5}\\n')\n"
                            "def add(a, b): return a + b"),
    "extra_record": ("import os\nos.write(3, b'{\"i\": 7, \"value\": 0}\\n')\n"
                     "def add(a, b): return a + b"),
    "closes_the_pipe": "import os\nos.close(3)\ndef add(a, b): return a + b",
    "garbage_on_the_pipe": "import os\nos.write(3, b'not json\\n')\ndef add(a, b): return a + b",
}


@pytest.mark.parametrize("trick", sorted(TRICKS))
def test_grader_tricks_earn_nothing(reward, trick):
    v = reward.score(Task("t", answer=ADD), fenced(TRICKS[trick]))
    assert v.status == OK, v
    # the second test (2 + 3 = 5) is guessable: a forger may hit it, never the secret sum
    assert v.score <= 0.5, (trick, v.reason)
    assert not v.score or trick == "forges_the_result_pipe", (trick, v.reason)


def test_honest_solutions_and_partial_credit(reward):
    task = Task("t", answer=ADD)
    assert reward.score(task, fenced("def add(a, b):\n    return a + b")).score == 1.0
    half = reward.score(task, fenced("def add(a, b):\n    return 5"))
    assert half.score == 0.5 and "test 0: expected" in half.reason
    strict = CodeReward(all_or_nothing=True).use_sandbox(reward.sandbox)
    assert strict.score(task, fenced("def add(a, b):\n    return 5")).score == 0.0


def test_a_stall_scores_zero_and_a_crash_fails_only_its_test(reward):
    """A program past its time limit is wrong as a whole (issue 13.1: partial credit for the
    answers before a stall made stalling pay); an exception fails only the test it hit."""
    tests = CodeTests([TestCase([1], 1), TestCase([0], 0)], "f")
    hang = CodeReward(limits=Limits(wall_s=2, cpu_s=2)).use_sandbox(reward.sandbox)
    v = hang.score(Task("t", answer=tests), fenced("def f(x):\n    while x == 0: pass\n    return x"))
    assert v.status == OK and v.score == 0.0 and "limit exceeded after 2.0 s" in v.reason, v.reason
    v = reward.score(Task("t", answer=tests), fenced("def f(x):\n    return 1 // x"))
    assert v.score == 0.5 and "ZeroDivisionError" in v.reason


def test_stdin_stdout_tests(reward):
    tests = CodeTests.from_rows([{"stdin": "3\n", "stdout": "1\n2\n3\n"},
                                 {"stdin": "1\n", "stdout": "1\n"}])
    task = Task("io", answer=tests)
    good = "n = int(input())\nfor i in range(n): print(i + 1)"
    assert reward.score(task, fenced(good)).score == 1.0
    truncated = "n = int(input())\nprint(1)"
    v = reward.score(task, fenced(truncated))
    assert v.score == 0.5 and "expected 3 lines, got 1" in v.reason
    cheat = "print('1\\n2\\n3'); import os; os.write(3, b'{\"i\": 1, \"stdout\": \"1\", \"rc\": 0}\\n')"
    assert reward.score(task, fenced(cheat)).score <= 0.5


# --------------------------------------------------------------------------- HumanEval

def _corrupt(problem: dict) -> str:
    """The canonical solution with every return value changed (so every test must fail)."""
    ep = problem["entry_point"]
    return (problem["prompt"] + problem["canonical_solution"] + f"\n_canonical = {ep}\n"
            f"def {ep}(*args):\n    r = _canonical(*args)\n"
            "    if isinstance(r, bool): return not r\n"
            "    if isinstance(r, (int, float)): return r + 1\n"
            "    if isinstance(r, (str, list, tuple)): return r + r[:1] + type(r)('#' if "
            "isinstance(r, str) else [None])\n"
            "    if isinstance(r, dict): return {**r, '#': 1}\n"
            "    return 0\n")


def test_humaneval_canonical_solutions_pass_and_corrupted_copies_fail(reward):
    from rlvr.envs.code import humaneval_problems, humaneval_tasks
    problems, conversions = humaneval_problems()
    tasks = humaneval_tasks()
    assert len(tasks) == 164
    traced = sorted(k for k, c in conversions.items() if c.method == "traced")
    assert "HumanEval/32" in traced and len(traced) < 10, traced   # reported, not hidden
    if reward.backend == "docker":   # the full sweep runs on the default backend; a sample here
        tasks = [t for t in tasks if t.id in ("HumanEval/0", "HumanEval/32", "HumanEval/155")]
    gold = [fenced(problems[t.id]["prompt"] + problems[t.id]["canonical_solution"]) for t in tasks]
    bad = [fenced(_corrupt(problems[t.id])) for t in tasks]
    verdicts = reward.score_batch(tasks + tasks, gold + bad)
    n = len(tasks)
    not_passing = [(t.id, v.reason) for t, v in zip(tasks, verdicts[:n]) if v.score != 1.0]
    not_failing = [(t.id, v.reason) for t, v in zip(tasks, verdicts[n:]) if v.score != 0.0]
    assert not not_passing, not_passing[:5]
    assert not not_failing, not_failing[:5]


# --------------------------------------------------------------------------- environments

@pytest.mark.parametrize("name", ["code", "code-stdio", "humaneval"])
def test_code_environments_pass_the_registry_contract(name):
    from rlvr import load_env
    env = load_env(name, pooled=False)      # contract: gold scores 1.0, junk 0.0
    task = env.sample(1, split=env.source.splits[0])[0]
    assert isinstance(task.answer, CodeTests) and task.metadata["n_tests"] >= 1


def test_rlvr_score_env_code_on_a_rows_file(tmp_path):
    from rlvr.cli import main
    rows = [{"id": "f", "entry_point": "double", "tests": [{"input": [2], "output": 4}],
             "completion": "```python\ndef double(x):\n    return 2 * x\n```"},
            {"id": "io", "tests": [{"stdin": "2\n", "stdout": "4\n"}],
             "completion": "```python\nprint(int(input()) * 3)\n```"},
            {"id": "none", "tests": [{"stdin": "", "stdout": "x\n"}], "completion": "no code"}]
    src, out = tmp_path / "rows.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["score", "--env", "code", str(src), "-o", str(out), "--workers", "1",
                 "--no-progress"]) == 0
    got = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert got["f"]["score"] == 1.0 and got["io"]["score"] == 0.0
    assert got["none"]["status"] == "unparsed"


def test_mbpp_and_apps_rows_become_host_owned_tests():
    from rlvr.envs.code import row_to_task
    mbpp = {"text": "Shared elements.", "code": "def common(a, b):\n    return tuple(sorted(set(a) & set(b)))\n",
            "test_list": ["assert common((3, 4), (4, 5)) == (4,)",
                          "assert set(common((1, 2), (2, 1))) == {1, 2}",
                          "assert common((1,), (2,)) == tuple()"]}
    task = row_to_task(mbpp)
    tests = task.answer
    assert tests.entry_point == "common" and tests.strict_sequences
    assert task.metadata["n_tests"] == 3                    # every assert, whatever its shape
    assert [(c.input, c.output) for c in tests.cases] == [
        (["common((3, 4), (4, 5))"], "_r0 == (4,)"), (["set(common((1, 2), (2, 1)))"], "_r0 == {1, 2}"),
        (["common((1,), (2,))"], "_r0 == tuple()")]
    assert task.metadata["solution"].startswith("def common")
    apps = {"question": "Echo.", "input_output": json.dumps({"inputs": ["1\n", ["2", "3"]],
                                                             "outputs": ["1\n", ["2", "3"]]})}
    cases = row_to_task(apps).answer.cases
    assert [(c.input, c.output) for c in cases] == [("1\n", "1\n"), ("2\n3\n", "2\n3\n")]


def test_code_env_reward_runs_through_the_worker_pool():
    """Outside a pool worker the env's reward is pooled (hard deadline); inside, direct."""
    from rlvr import load_env
    from rlvr.pool import WorkerPool
    from rlvr.pooled_reward import PooledReward
    env = load_env("code", check=False)
    reward = env.rewards[0][0]
    assert isinstance(reward, PooledReward)
    tasks = env.sample(3)
    with WorkerPool(1) as pool:
        reward._pool = pool
        verdicts = env.reward.score_batch(tasks, [env.gold(t) for t in tasks][:2] + ["none"])
    assert [v.score for v in verdicts] == [1.0, 1.0, 0.0]
    assert verdicts[2].status == UNPARSED
