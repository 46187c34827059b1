"""The sandbox agent's core: framing, the program's own process, and `supervise`.

The `_agent*` modules use the standard library only (and libseccomp's bindings): they run under
the system interpreter started with an EMPTY environment, inside the sandbox's mount namespace or
container. `supervise` runs one request's program as a child of a PID 1 and returns what became
of it; `_agent_process` and `_agent_docker` build the isolation around it, `_agent_confine` the
program's last restrictions.
"""
import base64
import ctypes
import json
import os
import platform
import resource
import select
import signal
import struct
import sys
import time

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 36, 38
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(platform.machine())
SANDBOX_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/work", "LANG": "C.UTF-8",
               "TMPDIR": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"}
DEVICES = ("null", "zero", "full", "random", "urandom")
POLL_S = 0.01
INODES_PER_MB = 256
"""Files + directories per MB of scratch disk (16,384 for the default 64 MB): a run cannot make
its clean-up slow by filling the tmpfs with millions of empty files."""
AGENT_TASKS = 2
"""The docker agent's own tasks in its container while a program runs (PID 1 and the run's
runner): a container's pids limit is its pool's `processes` plus these, so the program's tree
gets exactly `processes`."""


def cgroup_first_slack(processes):
    """How far above `processes` to set RLIMIT_NPROC where a pids cgroup holds the run to them,
    so that the cgroup, which counts the forks it refuses, always refuses first: both count a
    fork from its start, and concurrent forks (a fork bomb's) add at most one in flight per
    task: a per-uid limit just above the cgroup's fired first in most bombs, one twice the
    cgroup's (plus the agent's tasks) cannot."""
    return processes + AGENT_TASKS


def flat_counter(text, key):
    """`key`'s count in a flat-keyed cgroup file's text (memory.events, pids.events); None
    where the file has no such key."""
    for line in text.splitlines():
        if line.startswith(key + " "):
            return int(line.split()[1])
    return None


def inode_cap(limits):
    return max(1024, int(limits["disk_mb"]) * INODES_PER_MB)

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _b(s):
    return None if s is None else s.encode()


def mount(src, target, fstype, flags, data=None):
    _check(_libc.mount(_b(src), _b(target), _b(fstype), ctypes.c_ulong(flags), _b(data)),
           f"mount {target}")


def prctl(option, arg):
    _check(_libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0), f"prctl {option}")


# --------------------------------------------------------------------------- framing

def read_exact(fd, n):
    buf = b""
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def recv(fd):
    head = read_exact(fd, 4)
    if head is None:
        return None
    body = read_exact(fd, struct.unpack(">I", head)[0])
    return None if body is None else json.loads(body)


def send(fd, obj):
    data = json.dumps(obj).encode()
    data = struct.pack(">I", len(data)) + data
    while data:
        data = data[os.write(fd, data):]


# --------------------------------------------------------------------------- the program

def _child(spec_fd, fds, cgroup_fds, confine):
    """In the forked child: wait for this run's spec, wire the streams, apply limits, drop every
    privilege, exec. The spec (argv, limits, uid) is all it ever receives: the program's text
    and stdin reach it as files in /work, never through this process's memory."""
    try:
        req = recv(spec_fd)
        if req is None:             # no run came (the agent is shutting down)
            os._exit(0)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        stdin_path = req.get("stdin_path")
        stdin = os.open(stdin_path, os.O_RDONLY) if stdin_path else os.open("/dev/null", 0)
        os.dup2(stdin, 0)
        for fd in cgroup_fds:          # join the slot's cgroups (pid "0" = the writer itself)
            os.write(fd, b"0")
        os.closerange(4, 65536)
        lim = req["limits"]
        cpu = max(1, int(lim["cpu_s"] + 0.999))
        mem = int(lim["memory_mb"]) << 20
        nproc = lim["processes"] + req.get("nproc_slack", 0)
        for res, value in ((resource.RLIMIT_CPU, (cpu, cpu + 1)),
                           (resource.RLIMIT_AS, (mem, mem)),
                           (resource.RLIMIT_NPROC, (nproc, nproc)),
                           (resource.RLIMIT_FSIZE, (lim["file_mb"] << 20, lim["file_mb"] << 20)),
                           (resource.RLIMIT_NOFILE, (lim["open_files"], lim["open_files"])),
                           (resource.RLIMIT_CORE, (0, 0))):
            resource.setrlimit(res, value)
        os.chdir("/work")
        uid = req["uid"]
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)            # from root to a non-root uid: all capabilities are cleared
        if os.getuid() == 0 or os.geteuid() == 0:
            raise RuntimeError("refusing to run a program as root")
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        confine.apply()           # fresh keyrings, then the seccomp filter
        os.umask(0o077)
        if req.get("warm"):
            _run_warm(req["argv"][-1])
        os.execve(req["argv"][0], req["argv"], dict(SANDBOX_ENV))
    except BaseException as exc:  # noqa: BLE001 -- report anything, then die without cleanup
        os.write(2, f"rlvr sandbox: could not start the program: {exc!r}\n".encode())
        os._exit(127)


def _run_warm(script):
    """Run a Python script in this already-started interpreter, as `python3 -s script` would.

    The fork skips the interpreter's start-up (most of a short run's cost). What the program
    sees: a fresh `__main__`, argv, the sandbox environment, new std streams on fds 0-2, the
    script's directory first on sys.path; at the end, non-daemon threads are joined and atexit
    handlers run, as at a normal interpreter exit. The memory it inherits is the agent's: an
    interpreter started from an empty environment that never sees a host secret, forked
    (`Program`) before any run's text or output entered it.
    """
    import atexit
    import builtins
    import io
    import threading
    import traceback
    import types
    os.environ.clear()
    os.environ.update(SANDBOX_ENV)
    sys.argv = [script]
    sys.path.insert(0, "/work")
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(
        io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8")
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding="utf-8",
        errors="backslashreplace", line_buffering=True)
    main = types.ModuleType("__main__")
    main.__file__, main.__builtins__ = "/work/" + script, builtins
    sys.modules["__main__"] = main
    code = 0
    try:
        with open(script, "rb") as f:
            source = f.read()
        exec(compile(source, main.__file__, "exec"), main.__dict__)
    except SystemExit as exc:
        code = _exit_status(exc.code)
    except BaseException as exc:  # noqa: BLE001 -- the program's own crash, reported as python does
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
        code = 1
    try:
        threading._shutdown()
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        code = code or 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 -- e.g. stdout closed by the program
            code = code or 120
    os._exit(code)


def _exit_status(value):
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    try:
        sys.stderr.write(f"{value}\n")
    except BaseException:  # noqa: BLE001
        pass
    return 1


class _Stream:
    """One output pipe read with a byte cap: keeps the first `cap` bytes, notes any excess."""

    def __init__(self, fd, cap):
        self.fd, self.cap, self.data, self.over, self.open = fd, cap, bytearray(), False, True

    def pump(self):
        chunk = os.read(self.fd, 65536)
        if not chunk:
            self.open = False
            os.close(self.fd)
            return
        room = self.cap - len(self.data)
        if len(chunk) > room:
            self.over = True
        self.data += chunk[:max(0, room)]


class NotNamespaceInit(RuntimeError):
    """supervise() was called outside a PID namespace of its own."""


RUNNER = {"container": False}
"""Set by the docker agent once it has checked that it is PID 1 of its container: its per-run
children may then kill every process but PID 1 (they are the container's whole world)."""


def _may_kill_all():
    return os.getpid() == 1 or (RUNNER["container"] and os.getppid() == 1)


def _kill_all():
    """SIGKILL every process this runner may signal: everything in its PID namespace but PID 1
    and itself.

    kill(-1) from anything but the PID 1 of a private namespace (or, in a container, a child
    of that PID 1) would hit every process on the host the caller may signal -- so it is
    refused outright anywhere else.
    """
    if not _may_kill_all():
        raise NotNamespaceInit("refusing kill(-1): not PID 1 of a private PID namespace")
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _pidfd(pid):
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):   # Python < 3.9 or Linux < 5.3: fall back to polling
        return None


def _reap(program_pid, state):
    """Reap every exited child at once (zombies count against RLIMIT_NPROC)."""
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True
        if pid == program_pid:
            state["status"], state["usage"], state["end"] = status, usage, time.monotonic()


class Program:
    """The process a run's program will become, forked BEFORE its request is read.

    Whatever forks it has never held another run's program, files, stdin or output (the agent
    reads requests and results only in per-run children that die after the run), so the memory
    the program inherits holds no other run's bytes: freed heap is never cleared, and a program
    that scans its own memory must find nothing but the agent and itself. It waits on a pipe
    for its spec, then `_child` confines it and starts the program.
    """

    def __init__(self, confine, cgroup_fds=()):
        if not _may_kill_all():     # checked before the program starts, not only at the kill
            raise NotNamespaceInit("a program must run as a child of its namespace's PID 1")
        pipes = [os.pipe() for _ in range(3)]          # stdout, stderr, result channel
        spec_r, self.spec_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self.spec_w)
            for r, _ in pipes:
                os.close(r)
            _child(spec_r, [os.open("/dev/null", 0)] + [w for _, w in pipes], cgroup_fds,
                   confine)
        os.close(spec_r)
        for _, w in pipes:
            os.close(w)
        self.fds = [r for r, _ in pipes]

    def start(self, req, stdin_path=None):
        """Hand the process its spec: argv, limits, uid -- never the program's text."""
        spec = {k: req[k] for k in ("argv", "limits", "uid") if k in req}
        spec.update(warm=bool(req.get("warm")), nproc_slack=req.get("nproc_slack", 0),
                    stdin_path=stdin_path)
        send(self.spec_w, spec)
        os.close(self.spec_w)

    def cancel(self):
        """No run came: the waiting process reads end-of-file and exits."""
        os.close(self.spec_w)
        for fd in self.fds:
            os.close(fd)
        os.waitpid(self.pid, 0)


def supervise(program, req, stdin_path=None):
    """Run the request as `program` (a `Program` of this process); return the result dict
    (never raises for anything the program does)."""
    lim = req["limits"]
    pid = program.pid
    first_pid = _last_pid()
    start = time.monotonic()
    program.start(req, stdin_path)
    streams = [_Stream(r, lim["output_bytes"]) for r in program.fds]
    exited = _pidfd(pid)    # readable the moment the program exits: no polling delay
    state = {"status": None}
    deadline, reason = start + lim["wall_s"], None
    while state["status"] is None:
        _reap(pid, state)
        if state["status"] is not None:
            break
        if time.monotonic() > deadline:
            reason = "timeout"
            break
        watch = [s.fd for s in streams if s.open] + ([exited] if exited is not None else [])
        ready = select.select(watch, [], [], POLL_S)[0]
        for s in streams:
            if s.open and s.fd in ready:
                s.pump()
        if any(s.over for s in streams):
            reason = "output_limit"
            break
    wall = (state.get("end") or time.monotonic()) - start
    if exited is not None:
        os.close(exited)
    _kill_all()                     # the program is done: daemons and setsid children die now
    _drain(streams)
    while state["status"] is None:  # collect the program's own status after the kill
        if not _reap(pid, state):
            break
        time.sleep(0.001)
    while _reap(pid, state):
        time.sleep(0.001)
    result = _result(state, streams, wall, reason)
    last_pid = _last_pid()
    if first_pid is not None and last_pid is not None and last_pid >= first_pid:
        result["tasks_created"] = last_pid - first_pid
    return result


def _last_pid():
    """The last PID allocated in this PID namespace: the difference across a run counts the
    processes and threads it created (one run at a time per namespace). None if unreadable."""
    try:
        with open("/proc/sys/kernel/ns_last_pid") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def _drain(streams, limit_s=2.0):
    """Read what the (now killed) program left in its pipes, to end-of-file. The limit only
    stops a wait on pipes that stay silent: data already there is always read, so a busy host
    that delays this loop can never cut a finished program's output (or its results)."""
    end = time.monotonic() + limit_s
    while any(s.open for s in streams):
        ready = select.select([s.fd for s in streams if s.open], [], [], POLL_S)[0]
        if not ready and time.monotonic() >= end:
            break
        for s in streams:
            if s.open and s.fd in ready:
                s.pump()
    for s in streams:
        if s.open:
            os.close(s.fd)


def _result(state, streams, wall, reason):
    status, usage = state.get("status"), state.get("usage")
    out = {"wall_s": wall, "reason": reason, "exit_code": None, "signal": None,
           "cpu_s": (usage.ru_utime + usage.ru_stime) if usage else None,
           "peak_kb": usage.ru_maxrss if usage else None,
           "truncated": [s.over for s in streams]}
    if status is not None:
        if os.WIFEXITED(status):
            out["exit_code"] = os.WEXITSTATUS(status)
        elif os.WIFSIGNALED(status):
            out["signal"] = os.WTERMSIG(status)
    for key, s in zip(("stdout", "stderr", "channel"), streams):
        out[key] = base64.b64encode(bytes(s.data)).decode()
    return out


# Imported once by the agent so that forked programs find them loaded (warm runs skip both the
# interpreter's start-up and these imports). Nothing here holds state a program could abuse;
# `random` reseeds itself in every forked child.
PRELOAD = ("atexit", "builtins", "io", "threading", "traceback", "types", "subprocess",
           "collections", "itertools", "functools", "math", "re", "heapq", "bisect", "string",
           "random", "typing", "copy", "dataclasses", "fractions", "decimal")
