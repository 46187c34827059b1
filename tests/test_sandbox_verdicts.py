"""A program past its limits is wrong, never left out (issue 13, item 1), on both backends.

Before: a stalling program ran into the outer pool deadline first and became `timeout` (which
training drops from baselines and losses), and one that answered some tests before looping kept
its partial score. Now every limit -- time, CPU, memory, output, processes, a stdin/stdout test's
time -- gives status `ok`, score 0 and a reason naming the limit, and a code reward declares how
long a verification may take (`max_verify_s`) so an outer deadline can stay behind it.
"""
from __future__ import annotations

import pytest

from rlvr.core import OK, Task
from rlvr.sandbox import Limits
from rlvr.verifiers.code import CodeReward, CodeTests, TestCase
from sandbox_support import make_sandbox

LIMITS = Limits(wall_s=2.0, cpu_s=2.0, memory_mb=300, processes=24, output_bytes=64 << 10)
ADD = CodeTests([TestCase([2, 3], 5), TestCase([1, 1], 2)], entry_point="add")


@pytest.fixture(scope="module", params=["process", "docker"])
def reward(request):
    sandbox = make_sandbox(request.param, limits=LIMITS)
    yield CodeReward(backend=request.param, limits=LIMITS).use_sandbox(sandbox)
    sandbox.close()


def grade(reward, body: str, tests: CodeTests = ADD):
    return reward.run_tests(f"def add(a, b):\n{body}\n", tests)


def assert_zero(verdict, *words):
    assert verdict.status == OK and verdict.score == 0.0, (verdict.status, verdict.reason)
    for w in words:
        assert w in verdict.reason, verdict.reason


def test_infinite_loop_is_wrong_with_its_time_limit(reward):
    assert_zero(grade(reward, "    while True: pass"), "limit exceeded after 2.0 s")


def test_sleeping_past_the_wall_limit_is_wrong(reward):
    assert_zero(grade(reward, "    import time; time.sleep(60)"),
                "time limit exceeded after 2.0 s")


def test_answers_before_the_stall_earn_nothing(reward):
    """The first test passes, the second loops: 0, not 0.5."""
    verdict = grade(reward, "    while a == 1: pass\n    return a + b")
    assert_zero(verdict, "limit exceeded after 2.0 s")


def test_memory_bomb_is_wrong_with_its_memory_limit(reward):
    assert_zero(grade(reward, "    x = [bytearray(1 << 20) for _ in range(2000)]\n"
                              "    return a + b"), "memory limit exceeded")


def test_output_flood_is_wrong_with_its_output_limit(reward):
    assert_zero(grade(reward, "    import sys\n    while True: sys.stdout.write('x' * 65536)"),
                "output limit exceeded")


def test_fork_bomb_is_wrong_and_names_a_limit(reward):
    verdict = grade(reward, "    import os\n    while True:\n        try: os.fork()\n"
                            "        except OSError: pass")
    # the process backend's pids cgroup names the process limit; Docker's run ends at its time
    word = "process limit exceeded" if reward.backend == "process" else "limit exceeded"
    assert_zero(verdict, word)


def test_a_stdin_test_past_its_time_limit_is_wrong(reward):
    tests = CodeTests([TestCase("1\n", "1\n"), TestCase("2\n", "2\n")])
    program = "x = input()\nif x == '2':\n    while True: pass\nprint(x)\n"
    local = CodeReward(backend=reward.backend, limits=LIMITS, io_timeout_s=1.0)
    local.use_sandbox(reward.sandbox)
    assert_zero(local.run_tests(program, tests), "time limit exceeded after 1.0 s on test 1")


def test_a_correct_program_still_passes(reward):
    verdict = grade(reward, "    return a + b")
    assert verdict.status == OK and verdict.score == 1.0, verdict.reason


def test_max_verify_s_covers_every_run_a_verification_may_make():
    """The declared bound: start-up, then retries + 1 runs of the longest wall limit a task can
    get (a stdin/stdout suite: 10x), each with the host's response margin."""
    from rlvr.sandbox import sandbox_class
    from rlvr.sandbox.base import RESPONSE_MARGIN_S
    for backend in ("process", "docker"):
        r = CodeReward(backend=backend, limits=Limits(wall_s=10.0, cpu_s=10.0), retries=2)
        floor = sandbox_class(backend).startup_s + 3 * (10.0 * 10 + RESPONSE_MARGIN_S)
        assert r.max_verify_s >= floor


def test_an_outer_deadline_of_max_verify_s_never_turns_a_stall_into_a_timeout():
    """The issue's case: a pool deadline equal to the sandbox's wall limit fired first."""
    from rlvr.pool import WorkerPool
    reward = CodeReward(limits=LIMITS)
    task = Task("add", answer=ADD)
    stall = "```python\ndef add(a, b):\n    while True: pass\n```"
    with WorkerPool(1) as pool:
        [outcome] = pool.map(_score, [(reward, task, stall)], deadline_s=reward.max_verify_s)
    assert outcome.status == "ok", outcome
    assert_zero(outcome.value, "limit exceeded after 2.0 s")


def _score(_, item):
    reward, task, text = item
    return reward.score(task, text)
