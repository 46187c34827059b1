"""The sandbox agent's entry point: a small supervisor that runs untrusted programs, one request
at a time (the code lives in `_agent_core`, `_agent_confine`, `_agent_process`, `_agent_docker`).

Standard library only (and libseccomp's bindings): it runs under the system interpreter, started
with an EMPTY environment (bubblewrap-style `--clearenv` would still leave the caller's variables
readable at /proc/1/environ), so the memory it forks from holds no secrets. Two modes:

- `process`: started on the host as root by `ProcessSandbox`. Per run it forks a child that
  enters fresh mount, PID, network, IPC and UTS namespaces (in a private root: tmpfs with the host
  `/usr` bound read-only, a minimal /dev) and forks the new namespace's PID 1, which forks the
  program's process, then reads the request, mounts the run's scratch (/work, /tmp) and runs
  `supervise`. When PID 1 exits the kernel SIGKILLs everything left in the namespace, so nothing
  a program starts outlives its run.
- `docker`: PID 1 of a warm container (`DockerSandbox`). Per run it forks a runner that forks the
  program's process, then reads the request and runs `supervise`, kills every other process in
  the container and wipes the writable directories before answering.

Either way the launcher / PID 1 never reads a request or a result: the program's process is
forked before its request is read, from memory that never held another run's program, files,
stdin or output (a program that scans its own heap finds nothing of its siblings).

In both modes the program runs as an unprivileged uid with no capabilities, no_new_privs, a fresh
session keyring and a seccomp filter (`_agent_confine`), rlimits on
CPU, address space, processes, file size, open files and core dumps, and a wall-clock deadline
that ends in SIGKILL of every process it started. Output streams are read concurrently with a
byte cap. Protocol: 4-byte big-endian length + JSON, both ways.
"""
import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # -I leaves the script dir out

import _agent_core as core  # noqa: E402
from _agent_confine import Confinement, ConfinementUnavailable  # noqa: E402


def refuse(in_fd, out_fd, why):
    """Answer every request with the reason this agent cannot run programs safely."""
    while core.recv(in_fd) is not None:
        core.send(out_fd, {"infra_error": why})


def main():
    for name in core.PRELOAD:
        __import__(name)
    cfg = json.loads(sys.argv[1])
    in_fd, out_fd = os.dup(0), os.dup(1)
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    if cfg["mode"] == "process":
        core.prctl(core.PR_SET_PDEATHSIG, signal.SIGKILL)    # the launcher dies with its host
        core.prctl(core.PR_SET_CHILD_SUBREAPER, 1)
    try:
        confine = Confinement(keyrings_required=cfg["mode"] == "process")
    except ConfinementUnavailable as exc:
        return refuse(in_fd, out_fd, str(exc))
    if cfg["mode"] == "process":
        from _agent_process import serve_process
        serve_process(cfg, in_fd, out_fd, confine)
    else:
        from _agent_docker import serve_docker
        serve_docker(cfg, in_fd, out_fd, confine)


if __name__ == "__main__":
    main()
