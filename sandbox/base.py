"""The sandbox interface shared by every backend: Limits in, RunResult out.

`Sandbox.run(program, language, stdin, files, limits)` runs one untrusted program and always
returns a RunResult -- a sandbox outage is `infra_error`, never an exception and never the
program's failure. Backends only implement `_execute(request) -> raw agent result`.
"""
from __future__ import annotations

import base64
import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Mapping, Sequence

__all__ = ["Limits", "RunResult", "Sandbox", "SandboxUnavailable", "RUN_STATUSES", "LANGUAGES",
           "LIMIT_STATUSES", "Job", "max_run_s"]

RUN_STATUSES = ("ok", "runtime_error", "timeout", "memory_limit", "output_limit", "process_limit",
                "left_state", "killed", "infra_error")
LIMIT_STATUSES = ("timeout", "memory_limit", "output_limit", "process_limit", "left_state",
                  "killed")
"""Runs the program itself ended by passing a limit (or by leaving state the clean-up could not
remove): the program's fault, never the sandbox's -- a verifier scores them 0."""
SYSTEM_PYTHON = "/usr/bin/python3"
RESPONSE_MARGIN_S = 15.0
"""How long past a run's wall limit the host waits for the agent's answer (kill, drain, clean-up)
before it gives up on the agent; so `wall_s + RESPONSE_MARGIN_S` bounds every run."""


class SandboxUnavailable(RuntimeError):
    """The requested isolation is missing; the message says what to install or change."""


@dataclass(frozen=True)
class Limits:
    """Resource limits for one run (every process the program starts shares them)."""
    wall_s: float = 10.0
    """Wall-clock deadline; past it every process of the run is SIGKILLed."""
    cpu_s: float = 10.0
    """CPU seconds per process (RLIMIT_CPU)."""
    memory_mb: int = 1024
    """Address space per process (RLIMIT_AS) and, with the disk, the run's cgroup memory."""
    processes: int = 64
    """Processes + threads of the run's uid (RLIMIT_NPROC and the pids cgroup)."""
    file_mb: int = 64
    """Largest file the program may write (RLIMIT_FSIZE)."""
    disk_mb: int = 64
    """Size of the private tmpfs holding /work, /tmp and /dev/shm."""
    open_files: int = 256
    """Most file descriptors the program may hold open at once (RLIMIT_NOFILE)."""
    output_bytes: int = 1 << 20
    """Cap per stream (stdout, stderr, result channel); past it the run is stopped."""

    def __post_init__(self):
        for name, value in asdict(self).items():
            if not value or value <= 0:
                raise ValueError(f"Limits.{name} must be positive, got {value!r}")


@dataclass
class RunResult:
    """What became of one run. `status` is one of RUN_STATUSES."""
    status: str
    exit_code: int | None = None
    signal: int | None = None
    stdout: str = ""
    stderr: str = ""
    channel: bytes = b""
    """Bytes the program wrote to fd 3 (the code verifier's result pipe)."""
    wall_s: float = 0.0
    cpu_s: float | None = None
    peak_memory_mb: float | None = None
    truncated: bool = False
    reason: str = ""
    backend: str = ""
    tasks_created: int | None = None
    """Processes and threads the run created, as the sandbox counted them (PIDs allocated in its
    PID namespace while it ran); None where it could not count."""
    limits: Limits | None = None
    """The limits the run ran under: those asked for, tightened to the backend's own where it
    has fixed ones (a Docker container's). A verdict naming a limit compares with these."""

    def __post_init__(self):
        if self.status not in RUN_STATUSES:
            raise ValueError(f"unknown run status {self.status!r}; expected one of {RUN_STATUSES}")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["channel"] = self.channel.decode("utf-8", "replace")
        return d


# The interpreter/compiler line per language; `{src}` is the program's file name in /work.
LANGUAGES = {
    "python": {"file": "main.py", "argv": [SYSTEM_PYTHON, "-s", "main.py"]},
    "c": {"file": "main.c", "argv": ["/bin/sh", "-c",
                                      "gcc -O2 -pipe -o /tmp/main main.c -lm && exec /tmp/main"]},
    "cpp": {"file": "main.cpp", "argv": ["/bin/sh", "-c",
                                          "g++ -O2 -pipe -o /tmp/main main.cpp && exec /tmp/main"]},
}


@dataclass
class Job:
    """One run request (what `run_many` takes)."""
    program: str
    language: str = "python"
    stdin: str | bytes = ""
    files: Mapping[str, str | bytes] = field(default_factory=dict)
    limits: Limits | None = None


def _b64(data: str | bytes) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def _check_name(name: str) -> str:
    parts = name.split("/")
    if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"file name {name!r} must be a relative path inside the work dir")
    return name


class Sandbox:
    """Base of the backends. Thread-safe: `run` may be called from many threads at once."""
    backend = "base"
    startup_s = 0.0
    """The longest constructing this backend may take (a verifier's first call pays it)."""

    def __init__(self, limits: Limits | None = None, python: str = SYSTEM_PYTHON,
                 warm: bool = True):
        self.limits = limits or Limits()
        self.python = python
        self.warm = warm
        """Run Python programs in a fork of the agent's started interpreter (skips start-up)."""
        self._closed = False
        self._lock = threading.Lock()

    # -- public
    def run(self, program: str, language: str = "python", stdin: str | bytes = "",
            files: Mapping[str, str | bytes] | None = None, limits: Limits | None = None,
            argv: Sequence[str] | None = None) -> RunResult:
        """Run `program` (source text) with `files` beside it in /work; never raises for
        anything the program does."""
        if language not in LANGUAGES:
            raise ValueError(f"unknown language {language!r}; supported: {sorted(LANGUAGES)}")
        spec = LANGUAGES[language]
        files = {_check_name(k): v for k, v in (files or {}).items()}
        files[spec["file"]] = program
        line = list(argv) if argv else [self.python if a == SYSTEM_PYTHON else a
                                        for a in spec["argv"]]
        lim = self._effective(limits or self.limits)
        request = {"argv": line, "files": {k: _b64(v) for k, v in files.items()},
                   "stdin": _b64(stdin) if stdin else "", "limits": asdict(lim),
                   "warm": self.warm and language == "python" and not argv}
        try:
            raw = self._execute(request, lim)
        except SandboxUnavailable as exc:
            return RunResult("infra_error", reason=str(exc), backend=self.backend)
        return self._to_result(raw, lim)

    def run_many(self, jobs: Sequence[Job], workers: int | None = None) -> list[RunResult]:
        """Run jobs concurrently (the work happens in sandbox processes, so threads suffice)."""
        workers = max(1, workers or self.concurrency)
        with ThreadPoolExecutor(workers) as ex:
            return list(ex.map(lambda j: self.run(j.program, j.language, j.stdin, j.files,
                                                  j.limits), jobs))

    @property
    def concurrency(self) -> int:
        return os.cpu_count() or 1

    def close(self) -> None:
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @classmethod
    def max_run_s(cls, limits: Limits) -> float:
        """The longest one `run` under `limits` can take before it returns, whatever the program
        does: past it the host itself gives up and reports the agent as failed."""
        return max_run_s(limits)

    # -- backend hooks
    def _execute(self, request: dict, limits: Limits) -> dict:
        raise NotImplementedError

    def _effective(self, limits: Limits) -> Limits:
        """The limits a run asking for `limits` gets (a backend with fixed limits of its own
        tightens them to those)."""
        return limits

    # -- shared
    def _to_result(self, raw: dict, lim: Limits) -> RunResult:
        if "infra_error" in raw:
            return RunResult("infra_error", reason=raw["infra_error"], backend=self.backend)
        out, err, chan = (base64.b64decode(raw[k]) for k in ("stdout", "stderr", "channel"))
        peak = raw.get("cg_peak_bytes")
        peak_mb = peak / 2**20 if peak else (raw["peak_kb"] / 1024 if raw.get("peak_kb") else None)
        res = RunResult("ok", raw.get("exit_code"), raw.get("signal"),
                        out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), chan,
                        raw["wall_s"], raw.get("cpu_s"), peak_mb, any(raw["truncated"]),
                        backend=self.backend, tasks_created=raw.get("tasks_created"), limits=lim)
        res.status, res.reason = classify(raw, res, lim)
        return res


def max_run_s(limits: Limits) -> float:
    return limits.wall_s + RESPONSE_MARGIN_S


NEAR_LIMIT = 0.8
"""What the program writes (stderr, result records) names a limit only when the sandbox measured
at least this fraction of it: peak memory (the address-space limit fires before resident memory
reaches it), processes and threads created. A program that merely prints "MemoryError" has hit
no limit."""


def classify(raw: dict, res: RunResult, lim: Limits) -> tuple[str, str]:
    """Decide the run status from what the agent saw (the order matters: causes first). Every
    reason for a limit names the limit, so a verdict can quote it; none is read from the
    program's own words alone (`NEAR_LIMIT`)."""
    sig = res.signal
    if raw.get("reason") == "output_limit":
        return "output_limit", (f"output limit exceeded: a stream passed {lim.output_bytes} "
                                "bytes; the run was stopped")
    if raw.get("left_state"):
        return "left_state", ("the program left state the sandbox could not remove: "
                              f"{', '.join(map(str, raw['left_state'][:3]))}")
    if raw.get("cg_pids_max"):
        return "process_limit", (f"process limit exceeded: the program tried to run more than "
                                 f"{lim.processes} processes/threads")
    if raw.get("reason") == "timeout":
        return "timeout", (f"time limit exceeded after {lim.wall_s:.1f} s (wall clock); "
                           "every process killed")
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and res.cpu_s is not None
                                 and res.cpu_s >= lim.cpu_s):
        return "timeout", f"CPU time limit exceeded after {lim.cpu_s:.1f} s"
    measured_near = (res.peak_memory_mb is not None
                     and res.peak_memory_mb >= NEAR_LIMIT * lim.memory_mb)
    memory_hit = raw.get("cg_oom") or (res.exit_code not in (0, None) and measured_near
                                       and "MemoryError" in res.stderr[-2000:])
    if memory_hit:
        return "memory_limit", f"memory limit exceeded: {lim.memory_mb} MB"
    if sig == signal.SIGXFSZ:
        return "output_limit", f"file size limit exceeded: a file passed {lim.file_mb} MB"
    if sig is not None:
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        status = "killed" if sig == signal.SIGKILL else "runtime_error"
        return status, f"terminated by {name}"
    if res.exit_code == 0:
        return "ok", ""
    return "runtime_error", f"exit code {res.exit_code}"
