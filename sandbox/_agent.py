"""The sandbox agent: a small supervisor that runs untrusted programs, one request at a time.

Standard library only: it runs under the system interpreter, started with an EMPTY environment
(bubblewrap-style `--clearenv` would still leave the caller's variables readable at
/proc/1/environ), so the memory it forks from holds no secrets. Two modes:

- `process`: started on the host as root by `ProcessSandbox`. Per request it forks a child that
  enters fresh mount, PID, network, IPC and UTS namespaces, builds a private root (tmpfs with the
  host `/usr` bound read-only, a work dir and /tmp, a minimal /dev), pivots into it and forks the
  new namespace's PID 1, which runs `supervise`. When PID 1 exits the kernel SIGKILLs everything
  left in the namespace, so nothing a program starts outlives its run.
- `docker`: PID 1 of a warm container (`DockerSandbox`); it runs `supervise` itself, then kills
  every other process in the container and wipes the writable directories before the next run.

Either way the program runs as an unprivileged uid with no capabilities, no_new_privs, rlimits on
CPU, address space, processes, file size, open files and core dumps, and a wall-clock deadline
that ends in SIGKILL of every process it started. Output streams are read concurrently with a
byte cap. Protocol: 4-byte big-endian length + JSON, both ways.
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

def _child(req, fds, stdin_path, cgroup_fds):
    """In the forked child: wire the streams, apply limits, drop every privilege, exec."""
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        stdin = os.open(stdin_path, os.O_RDONLY) if stdin_path else os.open("/dev/null", 0)
        os.dup2(stdin, 0)
        for fd in cgroup_fds:          # join the slot's cgroups (pid "0" = the writer itself)
            os.write(fd, b"0")
        os.closerange(4, 65536)
        lim = req["limits"]
        cpu = max(1, int(lim["cpu_s"] + 0.999))
        mem = int(lim["memory_mb"]) << 20
        for res, value in ((resource.RLIMIT_CPU, (cpu, cpu + 1)),
                           (resource.RLIMIT_AS, (mem, mem)),
                           (resource.RLIMIT_NPROC, (lim["processes"], lim["processes"])),
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
    interpreter started from an empty environment that never sees a host secret.
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


def _kill_all():
    """SIGKILL every process this PID 1 may signal (everything else in its PID namespace).

    kill(-1) from anything but the PID 1 of a private namespace would hit every process on the
    host the caller may signal -- so it is refused outright anywhere else.
    """
    if os.getpid() != 1:
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


def supervise(req, stdin_path=None, cgroup_fds=()):
    """Run the request's program as PID 1's child; return the result dict (never raises for
    anything the program does)."""
    if os.getpid() != 1:     # checked before the program starts, not only at the kill
        raise NotNamespaceInit("supervise() must run as PID 1 of its own PID namespace")
    lim = req["limits"]
    pipes = [os.pipe() for _ in range(3)]          # stdout, stderr, result channel
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        for r, _ in pipes:
            os.close(r)
        _child(req, [os.open("/dev/null", 0)] + [w for _, w in pipes], stdin_path, cgroup_fds)
    for _, w in pipes:
        os.close(w)
    streams = [_Stream(r, lim["output_bytes"]) for r, _ in pipes]
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
    return _result(state, streams, wall, reason)


def _drain(streams, limit_s=2.0):
    end = time.monotonic() + limit_s
    while any(s.open for s in streams) and time.monotonic() < end:
        ready = select.select([s.fd for s in streams if s.open], [], [], POLL_S)[0]
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


# --------------------------------------------------------------------------- process mode

def _write_files(base, files, uid):
    for name, b64 in files.items():
        path = os.path.join(base, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(b64))
        os.chown(path, uid, uid)


def _bind(src, dst, flags=MS_RDONLY | MS_NOSUID | MS_NODEV):
    mount(src, dst, None, MS_BIND | MS_REC)
    mount(None, dst, None, MS_BIND | MS_REMOUNT | flags)


def _build_template(cfg):
    """Once per launcher: a private mount namespace whose root is a small read-only tmpfs with
    the host's system dirs bound read-only. Each run then copies only these few mounts (not the
    host's whole mount table) and adds its own fresh scratch tmpfs."""
    root, uid = cfg["root"], cfg["uid"]
    _check(_libc.unshare(CLONE_NEWNS), "unshare mount namespace")
    mount(None, "/", None, MS_REC | MS_PRIVATE)        # nothing propagates back to the host
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    for name in cfg["system_dirs"]:
        host, inside = "/" + name, os.path.join(root, name)
        if os.path.islink(host):
            os.symlink(os.readlink(host), inside)
        elif os.path.isdir(host):
            os.makedirs(inside)
            _bind(host, inside)
    os.makedirs(os.path.join(root, "etc"))
    for name in cfg["etc_files"]:
        if os.path.isfile("/etc/" + name):
            open(os.path.join(root, "etc", name), "w").close()
            _bind("/etc/" + name, os.path.join(root, "etc", name))
    with open(os.path.join(root, "etc/passwd"), "w") as f:
        f.write(f"root:x:0:0::/:/bin/false\nsandbox:x:{uid}:{uid}::/work:/bin/sh\n")
    with open(os.path.join(root, "etc/group"), "w") as f:
        f.write(f"root:x:0:\nsandbox:x:{uid}:\n")
    for d, mode in (("work", 0o755), ("tmp", 0o755), ("proc", 0o555), ("dev", 0o755),
                    ("dev/shm", 0o755), (".scratch", 0o700)):
        os.makedirs(os.path.join(root, d), exist_ok=True)
        os.chmod(os.path.join(root, d), mode)
    for dev in DEVICES:
        path = os.path.join(root, "dev", dev)
        open(path, "w").close()
        _bind("/dev/" + dev, path, MS_NOSUID | MS_NOEXEC)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, os.path.join(root, "dev", name))
    _pivot(root)
    mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _pivot(root):
    """Make `root` the filesystem root and detach the host's tree from this namespace."""
    os.chdir(root)
    if SYS_PIVOT_ROOT is not None:
        os.makedirs(".oldroot")
        _check(_libc.syscall(SYS_PIVOT_ROOT, b".", b".oldroot"), "pivot_root")
        os.chdir("/")
        _check(_libc.umount2(b"/.oldroot", MNT_DETACH), "umount old root")
        os.rmdir("/.oldroot")
    else:   # no pivot_root number for this machine: move + chroot (no caps left to escape it)
        mount(root, "/", None, 1 << 13)  # MS_MOVE
        os.chroot(".")
        os.chdir("/")


def _scratch(req, uid):
    """This run's writable state: one fresh tmpfs (the disk limit) behind /work, /tmp, /dev/shm."""
    mount("tmpfs", "/.scratch", "tmpfs", MS_NOSUID | MS_NODEV,
          f"size={req['limits']['disk_mb']}m,mode=700")
    for d, mode, owner, target in (("work", 0o755, uid, "/work"), ("tmp", 0o1777, 0, "/tmp"),
                                   ("shm", 0o1777, 0, "/dev/shm"), ("run", 0o700, 0, None)):
        path = "/.scratch/" + d
        os.mkdir(path)
        os.chmod(path, mode)
        os.chown(path, owner, owner)
        if target:
            mount(path, target, None, MS_BIND)
            mount(None, target, None, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV)
    _write_files("/work", req["files"], uid)
    if req.get("stdin"):
        with open("/.scratch/run/stdin", "wb") as f:
            f.write(base64.b64decode(req["stdin"]))
        return "/.scratch/run/stdin"
    return None


def _namespace_run(req, cfg, out_fd, cgroup_fds):
    """The per-request child W: new namespaces, a fresh scratch tmpfs, then the namespace's
    PID 1. Everything it mounted disappears with the namespace."""
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC
                         | CLONE_NEWUTS), "unshare")
    stdin_path = _scratch(req, cfg["uid"])
    _libc.sethostname(b"sandbox", 7)
    init = os.fork()
    if init == 0:   # PID 1 of the new PID namespace
        try:
            mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            result = supervise(req, stdin_path, cgroup_fds)
        except BaseException as exc:  # noqa: BLE001 -- an agent failure is an infra error
            result = {"infra_error": f"sandbox init failed: {exc!r}"}
        send(out_fd, result)
        os._exit(0)
    _, status = os.waitpid(init, 0)
    os._exit(0 if status == 0 else 1)


class _Cgroups:
    """The slot's memory and pids cgroups (v1 or v2), held open as file descriptors because
    the launcher's own root no longer shows /sys."""

    def __init__(self, cfg):
        self.v2 = bool(cfg.get("cg_v2"))
        self.fds, self.procs = {}, []
        for key in ("cg_memory", "cg_pids"):
            path = cfg.get(key)
            if not path:
                continue
            names = (["memory.max", "memory.swap.max", "memory.events"] if self.v2 else
                     ["memory.limit_in_bytes", "memory.max_usage_in_bytes", "memory.failcnt"]) \
                if key == "cg_memory" else ["pids.max"]
            for name in names:
                self.fds[name] = os.open(os.path.join(path, name), os.O_RDWR if not
                                         name.endswith(".events") else os.O_RDONLY)
            self.procs.append(os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY))
        self.oom_before = 0

    def _write(self, name, value):
        if name in self.fds:
            os.pwrite(self.fds[name], str(value).encode(), 0)

    def _read(self, name):
        return os.pread(self.fds[name], 4096, 0).decode() if name in self.fds else ""

    def prepare(self, lim):
        limit = int(lim["memory_mb"] + lim["disk_mb"]) << 20   # tmpfs pages are charged too
        if self.v2:
            self._write("memory.max", limit)
            self._write("memory.swap.max", 0)
            self.oom_before = self._oom_v2()
        else:
            self._write("memory.limit_in_bytes", limit)
            self._write("memory.max_usage_in_bytes", 0)
            self._write("memory.failcnt", 0)
        self._write("pids.max", lim["processes"])

    def _oom_v2(self):
        for line in self._read("memory.events").splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        return 0

    def report(self):
        if self.v2:    # memory.peak cannot be reset between runs on most kernels: use rusage
            return {"cg_oom": self._oom_v2() > self.oom_before} if self.fds else {}
        if "memory.max_usage_in_bytes" not in self.fds:
            return {}
        peak = self._read("memory.max_usage_in_bytes").strip()
        fail = self._read("memory.failcnt").strip()
        return {"cg_peak_bytes": int(peak) if peak else None, "cg_oom": bool(fail and int(fail))}


def serve_process(cfg, in_fd, out_fd):
    """The launcher loop: one request -> one namespace child, waited for and reaped at once."""
    cgroups = _Cgroups(cfg)
    _build_template(cfg)
    while True:
        req = recv(in_fd)
        if req is None:
            return
        r, w = os.pipe()
        try:
            cgroups.prepare(req["limits"])
        except OSError as exc:
            send(out_fd, {"infra_error": f"cgroup set-up failed: {exc}"})
            continue
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                _namespace_run(req, cfg, w, cgroups.procs)
            except BaseException as exc:  # noqa: BLE001
                send(w, {"infra_error": f"sandbox set-up failed: {exc!r}"})
                os._exit(1)
        os.close(w)
        result = recv(r) or {"infra_error": "the sandbox exited without a result"}
        os.close(r)
        os.waitpid(pid, 0)
        while _reap(-1, {}):        # subreaper: nothing may linger as a zombie
            time.sleep(0.001)
        result.update(cgroups.report())
        send(out_fd, result)


# --------------------------------------------------------------------------- docker mode

def _as_sandbox_user(uid, fn, *args):
    """Run fn in a child that has become the sandbox uid (file writes land with its owner)."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            fn(*args)
        except BaseException as exc:  # noqa: BLE001
            os.write(2, f"rlvr agent: {exc!r}\n".encode())
            code = 1
        os._exit(code)
    return os.waitpid(pid, 0)[1] == 0


def _wipe(dirs):
    for d in dirs:
        for dirpath, dirnames, filenames in os.walk(d, topdown=False):
            for name in filenames + [n for n in dirnames if os.path.islink(os.path.join(dirpath, n))]:
                try:
                    os.unlink(os.path.join(dirpath, name))
                except OSError:
                    pass
            if dirpath != d:
                try:
                    os.rmdir(dirpath)
                except OSError:
                    pass


IPC_RMID = 0
SYSV_IPC = (("shm", "shmctl"), ("sem", "semctl"), ("msg", "msgctl"))


def _remove_sysv_ipc():
    """Remove the SysV IPC objects a run left: they outlive processes, and a warm container's
    IPC namespace is shared by its consecutive runs."""
    for kind, ctl in SYSV_IPC:
        with open(f"/proc/sysvipc/{kind}") as f:
            ids = [int(line.split()[1]) for line in f.read().splitlines()[1:]]
        for ipc_id in ids:
            if kind == "sem":
                _libc.semctl(ipc_id, 0, IPC_RMID)
            else:
                getattr(_libc, ctl)(ipc_id, IPC_RMID, None)


def _sysv_left():
    left = []
    for kind, _ in SYSV_IPC:
        with open(f"/proc/sysvipc/{kind}") as f:
            left += [f"{kind} {line.split()[1]}" for line in f.read().splitlines()[1:]]
    return left


def _clean(dirs):
    _wipe(dirs)
    _remove_sysv_ipc()


def serve_docker(cfg, in_fd, out_fd):
    """PID 1 of a warm container: run, kill the rest, wipe the writable dirs, answer."""
    writable = ("/work", "/tmp", "/dev/shm")
    while True:
        req = recv(in_fd)
        if req is None:
            return
        try:
            stdin_path = None
            if req.get("stdin"):
                stdin_path = "/run/stdin"
                with open(stdin_path, "wb") as f:
                    f.write(base64.b64decode(req["stdin"]))
            if not _as_sandbox_user(req["uid"], _write_files, "/work", req["files"], req["uid"]):
                raise RuntimeError("could not write the program's files")
            result = supervise(req, stdin_path)
            if stdin_path:
                os.unlink(stdin_path)
            if not _as_sandbox_user(req["uid"], _clean, writable):
                raise RuntimeError("could not clean the work directories")
            leftovers = [p for d in writable for p in os.listdir(d)] + _sysv_left()
            if leftovers:
                raise RuntimeError(f"state survived the clean-up: {leftovers[:5]}")
        except BaseException as exc:  # noqa: BLE001 -- the container is now suspect
            send(out_fd, {"infra_error": f"agent failed: {exc!r}", "retire": True})
            continue
        send(out_fd, result)


# Imported once by the agent so that forked programs find them loaded (warm runs skip both the
# interpreter's start-up and these imports). Nothing here holds state a program could abuse;
# `random` reseeds itself in every forked child.
PRELOAD = ("atexit", "builtins", "io", "threading", "traceback", "types", "subprocess",
           "collections", "itertools", "functools", "math", "re", "heapq", "bisect", "string",
           "random", "typing", "copy", "dataclasses", "fractions", "decimal")


def main():
    for name in PRELOAD:
        __import__(name)
    cfg = json.loads(sys.argv[1])
    in_fd, out_fd = os.dup(0), os.dup(1)
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    if cfg["mode"] == "process":
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)    # the launcher dies with its host
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        serve_process(cfg, in_fd, out_fd)
    else:
        serve_docker(cfg, in_fd, out_fd)


if __name__ == "__main__":
    main()
