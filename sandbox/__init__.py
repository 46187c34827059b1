"""Isolated execution of untrusted code: `get_sandbox(backend).run(program, ...) -> RunResult`.

Backends: `process` (the default: namespaces, an unprivileged uid, rlimits, cgroups) and
`docker` (a warm pool of locked-down containers). Both fail closed: when the isolation they need
is missing they raise `SandboxUnavailable` saying what to install; neither ever runs a program on
the host unconfined. See docs/sandbox.md.
"""
from .base import (LANGUAGES, LIMIT_STATUSES, RUN_STATUSES, Job, Limits, RunResult, Sandbox,
                   SandboxUnavailable)

__all__ = ["LANGUAGES", "LIMIT_STATUSES", "RUN_STATUSES", "Job", "Limits", "RunResult", "Sandbox",
           "SandboxUnavailable", "get_sandbox", "sandbox_class", "BACKENDS"]

BACKENDS = ("process", "docker")


def sandbox_class(backend: str) -> type[Sandbox]:
    """The class of a backend, without constructing it (for its declared bounds)."""
    if backend == "process":
        from .process import ProcessSandbox
        return ProcessSandbox
    if backend == "docker":
        from .docker import DockerSandbox
        return DockerSandbox
    raise ValueError(f"unknown sandbox backend {backend!r}; choose one of {BACKENDS}")


def get_sandbox(backend: str = "process", **kwargs) -> Sandbox:
    """A sandbox of the named backend (raises SandboxUnavailable, naming what is missing)."""
    return sandbox_class(backend)(**kwargs)
