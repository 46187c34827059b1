"""The `process` backend: Linux namespaces + an unprivileged uid + rlimits + cgroups, no daemon.

Each slot is one warm launcher (`_agent.py` in process mode) started from an empty environment,
with its own unprivileged uid (RLIMIT_NPROC does not apply to root, and one uid per slot keeps a
fork bomb in one run from starving a concurrent one) and its own memory/pids cgroups. A run is a
request to a free slot; `run` from several threads uses several slots at once.

Why namespaces through our own launcher rather than bubblewrap: bubblewrap leaves its
intermediate process as a zombie (it counts against RLIMIT_NPROC and made correct programs fail
at ~20 runs/s here), its `--clearenv` still shows the caller's environment at /proc/1/environ, and
a fresh `bwrap` + interpreter per run costs more than forking a warm launcher. The launcher needs
root (CAP_SYS_ADMIN to build namespaces, CAP_SETUID to drop to the slot uid); without it the
backend refuses to start and says so -- it never runs code on the host unconfined.
"""
from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

from .base import RESPONSE_MARGIN_S, SYSTEM_PYTHON, Limits, Sandbox, SandboxUnavailable
from ._framing import read_frame, write_frame
from ._uids import STATE_DIR, claim_uid, try_uid

__all__ = ["ProcessSandbox"]

AGENT = Path(__file__).with_name("_agent.py")
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
ETC_FILES = ("ld.so.cache", "ld.so.conf", "localtime", "nsswitch.conf")
_SPAWNER = ThreadPoolExecutor(1, thread_name_prefix="rlvr-sandbox-spawner")


def _requirements_problem(python: str) -> str | None:
    """Why this host cannot run the process backend, or None when it can."""
    if os.name != "posix" or not Path("/proc/self/ns/pid").exists():
        return "the process sandbox needs Linux with namespaces"
    if os.geteuid() != 0:
        return ("the process sandbox builds mount/PID/network namespaces and drops each program "
                "to its own unprivileged uid, which needs root (CAP_SYS_ADMIN, CAP_SETUID); run "
                "rlvr as root inside a VM or container, or use backend='docker'")
    if not os.access(python, os.X_OK):
        return (f"no interpreter at {python}; install the system Python "
                "(`apt-get install -y python3`) or pass python=...")
    if not str(Path(python).resolve()).startswith("/usr/"):
        return (f"{python} lives outside /usr, which is all the sandbox mounts; "
                "use the system interpreter (/usr/bin/python3)")
    return None


def own_cgroups() -> dict:
    """This process's cgroup per controller ('unified' for v2), from /proc/self/cgroup."""
    out = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        for name in (controllers.split(",") if hierarchy != "0" else ["unified"]):
            out[name] = path
    return out


class _Cgroup:
    """This slot's memory and pids cgroups, nested under the caller's own cgroups, so whatever
    limits a host puts on its caller (a container, a systemd unit) still bind the programs.

    v1: `<caller's memory cgroup>/rlvr-sandbox/<name>`, likewise for pids. v2: the same under the
    caller's unified cgroup, which must be able to delegate memory and pids to a child; where it
    cannot (it holds processes of its own and is not the root: the kernel's no-internal-process
    rule), the slot makes no cgroup and its programs stay in the caller's -- bound by the host's
    limits, with only the rlimits per run. `paths` is empty then.
    """

    def __init__(self, name: str):
        self.paths: dict = {}
        root, own = Path("/sys/fs/cgroup"), own_cgroups()
        try:
            if (root / "cgroup.controllers").exists():
                parent = root / own.get("unified", "/").lstrip("/") / "rlvr-sandbox"
                parent.mkdir(exist_ok=True)
                (parent.parent / "cgroup.subtree_control").write_text("+memory +pids")
                (parent / "cgroup.subtree_control").write_text("+memory +pids")
                leaf = parent / name
                leaf.mkdir(exist_ok=True)
                self.paths = {"cg_memory": str(leaf), "cg_pids": str(leaf), "cg_v2": True}
            else:
                for ctrl in ("memory", "pids"):
                    if (root / ctrl / "tasks").exists():
                        leaf = root / ctrl / own.get(ctrl, "/").lstrip("/") / "rlvr-sandbox" / name
                        leaf.mkdir(parents=True, exist_ok=True)
                        self.paths[f"cg_{ctrl}"] = str(leaf)
        except OSError:
            self.paths = {}

    def dirs(self) -> list[str]:
        return sorted({v for k, v in self.paths.items() if k != "cg_v2"})


def _kill_leftovers(uid: int, cgroup_dirs: Sequence[str]) -> None:
    """SIGKILL every process still in the slot's cgroups or running as its uid (a run whose
    host was killed at its deadline), until none is left."""
    for _ in range(200):
        pids = set()
        for d in cgroup_dirs:
            try:
                pids.update(int(p) for p in Path(d, "cgroup.procs").read_text().split())
            except OSError:
                pass
        pids.update(uid_processes(uid))
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)


def uid_processes(uid: int) -> list[int]:
    """Host pids whose real uid is `uid`."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/status") as f:
                    line = next(ln for ln in f if ln.startswith("Uid:"))
            except (OSError, StopIteration):
                continue
            if int(line.split()[1]) == uid:
                found.append(int(entry.name))
    return found


def reclaim_slot(uid: int) -> None:
    """Remove what a slot's previous holder left: its processes, cgroups and state directory.
    Call it only while holding the uid's lock (then no live sandbox owns the slot)."""
    state = STATE_DIR / str(uid)
    try:
        cgroup_dirs = json.loads((state / "cgroups.json").read_text())
    except (OSError, ValueError):
        cgroup_dirs = []
    _kill_leftovers(uid, cgroup_dirs)
    for d in cgroup_dirs:
        for _ in range(100):        # a killed process leaves its cgroup a moment later
            try:
                os.rmdir(d)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.01)
    shutil.rmtree(state, ignore_errors=True)


def reclaim_stale_slots() -> list[int]:
    """Reclaim every slot whose holder died without closing it (its uid lock is free)."""
    reclaimed = []
    if not STATE_DIR.is_dir():
        return reclaimed
    for entry in STATE_DIR.iterdir():
        if entry.name.isdigit():
            held = try_uid(int(entry.name))
            if held is not None:
                reclaim_slot(int(entry.name))
                held.close()
                reclaimed.append(int(entry.name))
    return reclaimed


class _Slot:
    """One launcher with its own uid, root mount point and cgroups."""

    def __init__(self, python: str):
        STATE_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.uid, self._lock_file = claim_uid()
        reclaim_slot(self.uid)        # whatever a killed previous holder left behind
        self.dir = STATE_DIR / str(self.uid)
        (self.dir / "root").mkdir(parents=True)
        os.chmod(self.dir, 0o700)
        self.cgroup = _Cgroup(f"uid{self.uid}")
        (self.dir / "cgroups.json").write_text(json.dumps(self.cgroup.dirs()))
        self.python = python
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        cfg = {"mode": "process", "root": str(self.dir / "root"), "uid": self.uid,
               "system_dirs": SYSTEM_DIRS,
               "etc_files": ETC_FILES, **self.cgroup.paths}
        log = open(self.dir / "agent.log", "ab")
        # Started from one long-lived thread: the launcher's parent-death signal fires when the
        # *thread* that forked it exits, and a short-lived caller thread must not take it along.
        # The uid's lock stays with this process only: if it dies, each run's processes die
        # with the launcher (a chain of parent-death signals) and the next holder of the uid
        # reclaims whatever is left (`reclaim_slot`).
        self.proc = _SPAWNER.submit(
            subprocess.Popen, [self.python, "-I", str(AGENT), json.dumps(cfg)], env={}, cwd="/",
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, close_fds=True, bufsize=0,
            start_new_session=True).result()
        log.close()

    def call(self, request: dict, timeout_s: float) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        try:
            write_frame(self.proc.stdin, request)
            return read_frame(self.proc.stdout, timeout_s)
        except (OSError, EOFError, ValueError, TimeoutError) as exc:
            self.kill()
            return {"infra_error": f"sandbox launcher failed ({type(exc).__name__}: {exc}); "
                                   f"see {self.dir / 'agent.log'}"}

    def kill(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout):
                stream.close()
            self.proc = None

    def close(self) -> None:
        self.kill()
        reclaim_slot(self.uid)
        self._lock_file.close()


class ProcessSandbox(Sandbox):
    """Namespaced, unprivileged, resource-limited runs on this machine (the default backend).

    >>> sb = ProcessSandbox()                                    # doctest: +SKIP
    >>> sb.run("print(6 * 7)").stdout                            # doctest: +SKIP
    '42\\n'
    """
    backend = "process"
    startup_s = 40.0
    """The probe run (wall 20 s + the response margin) and the launcher's own start."""

    def __init__(self, limits: Limits | None = None, slots: int | None = None,
                 python: str = SYSTEM_PYTHON, warm: bool = True):
        super().__init__(limits, python, warm)
        problem = _requirements_problem(python)
        if problem:
            raise SandboxUnavailable(problem)
        self.n_slots = max(1, slots or os.cpu_count() or 1)
        self._free: queue.Queue[_Slot] = queue.Queue()
        self._slots: list[_Slot] = []
        reclaim_stale_slots()
        self._probe()

    @property
    def concurrency(self) -> int:
        return self.n_slots

    def _probe(self) -> None:
        """Fail closed at construction: one trivial run must work under full isolation."""
        res = self.run("pass", limits=Limits(wall_s=20))
        if res.status != "ok":
            self.close()
            raise SandboxUnavailable(f"the process sandbox does not work here: {res.status}: "
                                     f"{res.reason or res.stderr[-500:]}")

    def _take(self) -> _Slot:
        try:
            return self._free.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            if self._closed:
                raise SandboxUnavailable("this sandbox is closed")
            if len(self._slots) < self.n_slots:
                slot = _Slot(self.python)
                self._slots.append(slot)
                return slot
        return self._free.get()

    def _execute(self, request: dict, limits: Limits) -> dict:
        slot = self._take()
        try:
            request = {**request, "uid": slot.uid}
            return slot.call(request, limits.wall_s + RESPONSE_MARGIN_S)
        finally:
            self._free.put(slot)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            slots, self._slots = self._slots, []
        for slot in slots:
            slot.close()
