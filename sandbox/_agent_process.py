"""The agent's `process` mode: a launcher on the host that builds each run's namespaces.

Per run it forks a child that enters fresh mount, PID, network, IPC and UTS namespaces (in a
private root built once: tmpfs with the host `/usr` bound read-only, a minimal /dev) and forks the
new namespace's PID 1. PID 1 forks the program's process, then reads the request, mounts the
run's scratch (/work, /tmp) and runs `supervise`. The launcher never reads a request or a result,
so no program inherits memory that held another run. When PID 1 exits the kernel SIGKILLs
everything left in the namespace, so nothing a program starts outlives its run.
"""
import base64
import os
import signal
import time

from _agent_core import (CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUTS,
                         DEVICES, MNT_DETACH, MS_BIND, MS_NODEV, MS_NOEXEC, MS_NOSUID, MS_PRIVATE,
                         MS_RDONLY, MS_REC, MS_REMOUNT, PR_SET_PDEATHSIG, SYS_PIVOT_ROOT, _check,
                         Program, _libc, _reap, cgroup_first_slack, flat_counter, inode_cap, mount,
                         prctl, recv, send, supervise)


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
          f"size={req['limits']['disk_mb']}m,nr_inodes={inode_cap(req['limits'])},mode=700")
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


def _namespace_run(cfg, io, cgroups, confine):
    """The per-run child W: new namespaces, then the namespace's PID 1, which forks the
    program's process and only then reads the request (`Program`). Everything it mounted
    disappears with the namespace; what it read dies with it."""
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC
                         | CLONE_NEWUTS), "unshare")
    _libc.sethostname(b"sandbox", 7)
    init = os.fork()
    if init == 0:   # PID 1 of the new PID namespace
        try:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)   # W dies -> this init -> the whole namespace
            mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            _init(cfg, io, cgroups, Program(confine, cgroups.procs))
        except BaseException as exc:  # noqa: BLE001 -- to the slot's agent.log
            os.write(2, f"rlvr sandbox: a run's init failed: {exc!r}\n".encode())
        finally:      # the launcher may be gone (its host was killed): never run on in a fork
            os._exit(0)
    _, status = os.waitpid(init, 0)
    os._exit(0 if status == 0 else 1)


def _init(cfg, io, cgroups, program):
    """PID 1's one run: read the request, build the scratch, run, answer."""
    in_fd, out_fd, progress = io
    req = recv(in_fd)
    if req is None:
        program.cancel()
        return
    os.write(progress, b"r")                  # a request is taken: it gets one answer
    try:
        req["uid"] = cfg["uid"]
        req["nproc_slack"] = cgroup_first_slack(req["limits"]["processes"]) \
            if cgroups.has_pids else 0
        try:
            cgroups.prepare(req["limits"])
        except OSError as exc:
            raise RuntimeError(f"cgroup set-up failed: {exc}") from exc
        stdin_path = _scratch(req, cfg["uid"])
        result = supervise(program, req, stdin_path)
        result.update(cgroups.report())
    except BaseException as exc:  # noqa: BLE001 -- an agent failure is an infra error; the
        result = {"infra_error": f"sandbox init failed: {exc!r}"}   # waiting program dies
    send(out_fd, result)                                            # with the namespace
    os.write(progress, b"s")


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
                if key == "cg_memory" else ["pids.max", "pids.events"]
            for name in names:
                self.fds[name] = os.open(os.path.join(path, name), os.O_RDWR if not
                                         name.endswith(".events") else os.O_RDONLY)
            self.procs.append(os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY))
        self.oom_before = self.pids_before = 0
        self.has_pids = "pids.max" in self.fds

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
        self.pids_before = self._count("pids.events", "max")

    def _count(self, name, key):
        """A counter from a flat-keyed cgroup file (memory.events, pids.events)."""
        return flat_counter(self._read(name), key) or 0

    def _oom_v2(self):
        return self._count("memory.events", "oom_kill")

    def report(self):
        out = {"cg_pids_max": self._count("pids.events", "max") > self.pids_before} \
            if self.has_pids else {}
        if self.v2:    # memory.peak cannot be reset between runs on most kernels: use rusage
            if "memory.events" in self.fds:
                out["cg_oom"] = self._oom_v2() > self.oom_before
            return out
        if "memory.max_usage_in_bytes" not in self.fds:
            return out
        peak = self._read("memory.max_usage_in_bytes").strip()
        fail = self._read("memory.failcnt").strip()
        out.update(cg_peak_bytes=int(peak) if peak else None, cg_oom=bool(fail and int(fail)))
        return out


def serve_process(cfg, in_fd, out_fd, confine):
    """The launcher loop: one namespace child per run, started before the run's request exists.

    The launcher itself never reads a request or a result: each run's PID 1 reads its own
    request from `in_fd` and writes its own result to `out_fd`, so every program process is
    forked from memory that no other run touched. A one-byte progress pipe tells the launcher
    whether a run took a request and answered it.
    """
    cgroups = _Cgroups(cfg)
    _build_template(cfg)
    while True:
        r, w = os.pipe()
        launcher = os.getpid()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)   # the launcher dies -> so does this run
            if os.getppid() != launcher:
                os._exit(1)
            try:
                _namespace_run(cfg, (in_fd, out_fd, w), cgroups, confine)
            except BaseException as exc:  # noqa: BLE001 -- to the slot's agent.log
                os.write(2, f"rlvr sandbox: a run could not start: {exc!r}\n".encode())
            finally:
                os._exit(1)
        os.close(w)
        os.waitpid(pid, 0)
        while _reap(-1, {}):        # subreaper: nothing may linger as a zombie
            time.sleep(0.001)
        progress = os.read(r, 2)
        os.close(r)
        if progress == b"r":        # took a request and died before answering it
            send(out_fd, {"infra_error": "the sandbox exited without a result"})
        elif not progress:          # end of input, or a run that could not even start
            return
