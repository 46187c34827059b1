"""The agent's `docker` mode: PID 1 of a warm container, cleaning up between runs.

Per run it forks a runner that forks the program's process before reading the request, runs
`supervise`, then kills every other process in the container and removes what the run left in
the writable directories, POSIX message queues and SysV IPC -- as the program's own uid, which can
always undo what that uid made -- before answering. PID 1 never holds a run's bytes.
"""
import base64
import os
import resource
import time

from _agent_core import (AGENT_TASKS, PR_SET_CHILD_SUBREAPER, RUNNER, NotNamespaceInit, Program,
                         _kill_all, _libc, _reap, cgroup_first_slack, flat_counter, prctl, recv,
                         send, supervise)
from _agent_process import _write_files

WRITABLE = ("/work", "/tmp", "/dev/shm", "/dev/mqueue")
"""Where a run can leave state: the tmpfs scratch dirs and the IPC namespace's POSIX message
queues (the container keeps its IPC namespace between runs; SysV objects are removed too)."""

PIDS_DIRS = ("/sys/fs/cgroup/pids/", "/sys/fs/cgroup/")
"""Where the container sees its own pids cgroup: cgroup v1's pids hierarchy, or v2's root (the
container's private cgroup namespace)."""


def _pids_cgroup():
    """(pids.max, path of pids.events) of the container's pids cgroup; None where unreadable or
    unlimited."""
    for d in PIDS_DIRS:
        try:
            with open(d + "pids.max") as f:
                return int(f.read()), d + "pids.events"
        except (OSError, ValueError):
            continue
    return None


def _counter(paths, key):
    """`key`'s count in the first of the flat-keyed cgroup files `paths` that has it."""
    for path in paths:
        try:
            with open(path) as f:
                value = flat_counter(f.read(), key)
        except OSError:
            continue
        if value is not None:
            return value
    return None


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


def _empty_dir(top_fd):
    """Remove everything inside the directory open at `top_fd`, however the program left it.

    Runs as the program's uid, which owns everything the program made and so may always chmod a
    directory it left at mode 000 before entering it. Works through directory file descriptors,
    without recursion, so neither depth nor path length can stop it.
    """
    frames = [[top_fd, None, None]]        # [dir fd, its name in the parent, subdirs left]
    while frames:
        frame = frames[-1]
        dfd = frame[0]
        if frame[2] is None:
            frame[2] = []
            for entry in list(os.scandir(dfd)):
                if entry.is_dir(follow_symlinks=False):
                    frame[2].append(entry.name)
                else:
                    os.unlink(entry.name, dir_fd=dfd)
        if frame[2]:
            name = frame[2].pop()
            os.chmod(name, 0o700, dir_fd=dfd)      # a plain directory: no symlink to follow
            frames.append([os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                                   dir_fd=dfd), name, None])
            continue
        frames.pop()
        if frames:
            os.close(dfd)
            os.rmdir(frame[1], dir_fd=frames[-1][0])


def _wipe(dirs):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))   # one fd per directory level
    for d in dirs:
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        try:
            _empty_dir(fd)
        finally:
            os.close(fd)


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


def _left_behind(dirs):
    """What survived the clean-up (as seen by the agent): the program's doing, scored against it."""
    return [os.path.join(d, p) for d in dirs for p in os.listdir(d)] + _sysv_left()


OOM_COUNTERS = ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events")
"""The container's own memory cgroup (v1, v2), mounted read-only: its `oom_kill` counter tells a
kill by the container's memory limit from any other SIGKILL."""


def _oom_kills():
    return _counter(OOM_COUNTERS, "oom_kill")


def _prepare(req):
    """Write the request's stdin and files (as the program's uid) before the run."""
    stdin_path = None
    if req.get("stdin"):
        stdin_path = "/run/stdin"
        with open(stdin_path, "wb") as f:
            f.write(base64.b64decode(req["stdin"]))
    if not _as_sandbox_user(req["uid"], _write_files, "/work", req["files"], req["uid"]):
        raise RuntimeError("could not write the program's files")
    return stdin_path


def serve_docker(cfg, in_fd, out_fd, confine):
    """PID 1 of a warm container: one runner child per run, started before its request exists.

    PID 1 never reads a request or a result: each runner (a subreaper, so the program's
    orphans are its own) forks the program's process first, then reads its request, runs it,
    cleans up and answers (`_run_one`). Every program is thus forked from memory that no other
    run touched. A one-byte progress pipe tells PID 1 whether a runner took a request and
    answered it; one that died in between gets a retiring `infra_error`.
    """
    if os.getpid() != 1:
        raise NotNamespaceInit("the docker agent must be PID 1 of its container")
    RUNNER["container"] = True
    writable = [d for d in WRITABLE if os.path.isdir(d)]
    while True:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                prctl(PR_SET_CHILD_SUBREAPER, 1)
                _run_one(Program(confine), (in_fd, out_fd, w), writable)
            except BaseException as exc:  # noqa: BLE001 -- to the container's log
                os.write(2, f"rlvr agent: a run failed: {exc!r}\n".encode())
            finally:
                os._exit(0)
        os.close(w)
        while True:                 # PID 1 reaps every orphan until the runner is done
            if os.waitpid(-1, 0)[0] == pid:
                break
        _kill_all()                 # nothing a run started survives its runner
        while _reap(-1, {}):
            time.sleep(0.001)
        progress = os.read(r, 2)
        os.close(r)
        if progress == b"r":
            send(out_fd, {"infra_error": "the sandbox agent's runner died", "retire": True})
        elif not progress:          # end of input, or a runner that could not even start
            return


def _run_one(program, io, writable):
    """A runner's one run: read the request, run it, kill the rest, clean up, answer.

    A failure before the program ran is the agent's (`infra_error`, and the container is
    retired). Once it has run, whatever the clean-up cannot remove was left by the program: the
    result says so (`left_state`, scored against the program) and the container is retired,
    so the next run still starts clean.
    """
    in_fd, out_fd, progress = io
    req = recv(in_fd)
    if req is None:
        program.cancel()
        return
    os.write(progress, b"r")
    try:
        stdin_path = _prepare(req)
        pids = _pids_cgroup()
        processes = req["limits"]["processes"]
        if pids and processes >= pids[0] - AGENT_TASKS:    # the container's limit is the run's
            req["nproc_slack"] = cgroup_first_slack(processes)
        events = (pids[1],) if pids else ()
        refused = _counter(events, "max")
        oom_before = _oom_kills()
        result = supervise(program, req, stdin_path)
        if refused is not None and (_counter(events, "max") or 0) > refused:
            result["cg_pids_max"] = True
        if oom_before is not None and (_oom_kills() or 0) > oom_before:
            result["cg_oom"] = True
        if stdin_path:
            os.unlink(stdin_path)
    except BaseException as exc:  # noqa: BLE001 -- the container is now suspect
        send(out_fd, {"infra_error": f"agent failed: {exc!r}", "retire": True})
        os.write(progress, b"s")
        return
    cleaned = _as_sandbox_user(req["uid"], _clean, writable)
    try:
        left = _left_behind(writable)
    except OSError as exc:
        left = [f"{exc!r}"]
    if left or not cleaned:
        result["left_state"] = left or ["the clean-up failed (see the container's log)"]
        result["retire"] = True
    send(out_fd, result)
    os.write(progress, b"s")
