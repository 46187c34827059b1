"""The test driver that runs INSIDE the sandbox, and the value codec both sides share.

Standard library only (it is copied into the sandbox as /work/main.py). It receives the solution
(`solution.py`) and the test *inputs* (`tests.json`) -- never the expected outputs -- and writes one
JSON record per test to file descriptor 3, a pipe the host reads apart from stdout/stderr:

    {"i": 0, "value": <encoded return value>}    functional test: the entry point's result
    {"i": 1, "error": "ValueError: ..."}         the call raised
    {"i": 2, "stdout": "...", "rc": 0}           stdin/stdout test: the program's output
    {"i": 3, "values": [{"value": ...}, {"error": "..."}]}   an assert's probes, one by one
    {"load_error": "..."}                        the solution could not be loaded

The host owns every comparison. A solution can tamper with this driver (it runs in the same
process), but all it can forge is its own answers: without the expected outputs, forging earns
nothing, and a malformed, missing or extra record fails the sample.
"""
import base64
import json
import math
import os
import subprocess
import sys

MAX_DEPTH = 64


def encode(value, depth=0):
    """A Python value -> plain JSON with tags for what JSON cannot say (tuple, set, nan...).

    Exact type checks: a subclass (an int whose __eq__ always says yes) is not a plain value.
    """
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    t = type(value)
    if value is None or t is bool or t is str:
        return value
    if t is int:
        return value if abs(value) < 1 << 1000 else {"__int__": hex(value)}
    if t is float:
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if t is list:
        return [encode(v, depth + 1) for v in value]
    if t is tuple:
        return {"__tuple__": [encode(v, depth + 1) for v in value]}
    if t is dict:
        return {"__dict__": [[encode(k, depth + 1), encode(v, depth + 1)]
                             for k, v in value.items()]}
    if t in _PLAIN_AS:     # collections' containers (Counter, deque...): their plain contents
        return encode(_PLAIN_AS[t](value), depth)
    if t is set or t is frozenset:
        return {"__set__": [encode(v, depth + 1) for v in value]}
    if t is bytes:
        return {"__bytes__": base64.b64encode(value).decode()}
    if t is complex:
        return {"__complex__": [value.real, value.imag]}
    raise TypeError(f"unsupported result type {t.__name__}")


def _plain_types():
    import collections
    return {collections.Counter: dict, collections.OrderedDict: dict,
            collections.defaultdict: dict, collections.deque: list}


_PLAIN_AS = _plain_types()
"""Standard containers a reference solution returns where a benchmark compares with a plain
value (MBPP's `collections.Counter(...) == {...}`); sent as that plain value, compared on the
host like one. Exact types, so a subclass is still refused."""


def decode(obj, depth=0):
    """Inverse of `encode`. Raises ValueError on anything `encode` cannot have produced."""
    if depth > MAX_DEPTH + 1:
        raise ValueError("value nested too deeply")
    t = type(obj)
    if obj is None or t in (bool, int, float, str):
        return obj
    if t is list:
        return [decode(v, depth + 1) for v in obj]
    if t is dict and len(obj) == 1:
        (tag, body), = obj.items()
        if tag == "__tuple__" and type(body) is list:
            return tuple(decode(v, depth + 1) for v in body)
        if tag == "__set__" and type(body) is list:
            return {_hashable(decode(v, depth + 1)) for v in body}
        if tag == "__dict__" and type(body) is list:
            if not all(type(p) is list and len(p) == 2 for p in body):
                raise ValueError("malformed __dict__")
            return {_hashable(decode(k, depth + 1)): decode(v, depth + 1) for k, v in body}
        if tag == "__int__" and type(body) is str:
            return int(body, 16)
        if tag == "__float__" and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag == "__bytes__" and type(body) is str:
            return base64.b64decode(body, validate=True)
        if tag == "__complex__" and type(body) is list and len(body) == 2:
            return complex(*body)
    raise ValueError(f"malformed value: {str(obj)[:80]}")


def _hashable(v):
    hash(v)
    return v


def _describe(exc):
    return f"{type(exc).__name__}: {exc}"[:500]


class _Channel:
    """The result pipe. Only the driver's own process reports: a child the solution forked
    that returns into the driver (a fork bomb's children, or a child answering differently from
    its parent) exits silently instead of adding records, so the record stream stays the
    driver's answers and the run's real fault (e.g. the process limit) is what gets reported."""

    def __init__(self, fd):
        self.fd = fd
        self.owner = os.getpid()

    def emit(self, record):
        if os.getpid() != self.owner:
            os._exit(0)
        data = (json.dumps(record) + "\n").encode()
        while data:
            data = data[os.write(self.fd, data):]


def load_solution(path="solution.py"):
    """The solution as a real module, `solution`, registered in sys.modules before it runs.

    A plain dict namespace breaks pickling of anything the solution defines
    (`multiprocessing.Pool().map(_sq, ...)` fails with "it's not the same object as
    solution._sq"): pickle finds functions by module name and attribute. A module from the file,
    in sys.modules under its name, is what `import solution` would give, so pickling by
    reference works, in forked children and (the work dir is on sys.path) in spawned ones.
    """
    import importlib.util
    spec = importlib.util.spec_from_file_location("solution", os.path.abspath(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules["solution"] = module
    spec.loader.exec_module(module)
    return module


def run_functions(spec, chan):
    try:
        module = load_solution()
        fn = getattr(module, spec["entry_point"], None)
        if not callable(fn):
            raise NameError(f"the solution defines no function {spec['entry_point']!r}")
    except BaseException as exc:  # noqa: BLE001 -- SystemExit included: report and stop
        chan.emit({"load_error": _describe(exc)})
        return
    for i, args in enumerate(spec["inputs"]):
        try:
            record = {"i": i, "value": encode(fn(*decode(args)))}
        except BaseException as exc:  # noqa: BLE001 -- a test's failure, whatever it raised
            record = {"i": i, "error": _describe(exc)}
        chan.emit(record)


def run_probes(spec, chan):
    """MBPP-style asserts: each assert's probes (calls into the solution) evaluated in the
    solution's namespace after the test setup code; the checks stay on the host."""
    try:
        module = load_solution()
        if spec["setup"].strip():
            exec(compile(spec["setup"], "<test setup>", "exec"), module.__dict__)
    except BaseException as exc:  # noqa: BLE001 -- SystemExit included: report and stop
        chan.emit({"load_error": _describe(exc)})
        return
    for i, probes in enumerate(spec["probes"]):
        values = []
        for source in probes:
            try:
                values.append({"value": encode(eval(source, module.__dict__))})
            except BaseException as exc:  # noqa: BLE001 -- this probe's failure
                values.append({"error": _describe(exc)})
        chan.emit({"i": i, "values": values})


def _undumpable():
    """Make this process's /proc files root's (prctl PR_SET_DUMPABLE 0): a program run as a
    child under the same uid cannot open /proc/<driver>/fd/3 and write records of its own."""
    import ctypes
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)


def run_io(spec, chan):
    """Each stdin in its own interpreter (fresh globals per test), all in this one execution."""
    _undumpable()
    cap = spec["output_bytes"]
    for i, stdin in enumerate(spec["inputs"]):
        with open(f"/tmp/stdin{i}", "w") as f:
            f.write(stdin)
        with open(f"/tmp/stdin{i}") as fin, open(f"/tmp/stdout{i}", "w+b") as fout:
            try:
                rc = subprocess.run([sys.executable, "-s", "solution.py"], stdin=fin, stdout=fout,
                                    stderr=subprocess.DEVNULL, timeout=spec["timeout_s"]).returncode
                record = {"i": i, "rc": rc}
            except subprocess.TimeoutExpired:
                record = {"i": i, "rc": None, "timeout": True}
            fout.seek(0)
            record["stdout"] = fout.read(cap).decode("utf-8", "replace")
        chan.emit(record)


def main():
    chan = _Channel(os.dup(3))      # our own copy: the solution may close fd 3
    os.close(3)
    with open("tests.json") as f:
        spec = json.load(f)
    os.remove("tests.json")
    if spec["mode"] == "function":
        run_functions(spec, chan)
    elif spec["mode"] == "probes":
        run_probes(spec, chan)
    else:
        run_io(spec, chan)


if __name__ == "__main__":
    main()
