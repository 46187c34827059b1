"""Shared fixtures for the sandbox and code-verifier tests: one warm sandbox per backend.

Docker tests skip only when the engine is really unreachable (the skip reason says why), and
never in CI, which sets RLVR_REQUIRE_DOCKER=1 after starting the engine.
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from rlvr.sandbox import Limits, SandboxUnavailable, get_sandbox
from rlvr.sandbox._uids import UID_BASE, UID_COUNT

TEST_LIMITS = Limits(wall_s=4.0, cpu_s=3.0, memory_mb=600, processes=48, file_mb=16,
                     disk_mb=32, open_files=128, output_bytes=256 << 10)
CANARY = "rlvr-canary-" + secrets.token_hex(8)
ENV_CANARY = "RLVR_SANDBOX_TEST_SECRET"


def make_sandbox(backend: str, **kwargs):
    """A sandbox for the tests, or a skip that names exactly what is missing. `kwargs` override
    the size (`slots=1` / `pool_size=1`: consecutive runs share one slot)."""
    os.environ[ENV_CANARY] = CANARY   # planted before any launcher starts: it must not leak
    try:
        if backend == "docker":
            from rlvr.sandbox.docker import build_image
            build_image()
            return get_sandbox("docker", **{"limits": TEST_LIMITS, "pool_size": 2, **kwargs})
        return get_sandbox("process", **{"limits": TEST_LIMITS, "slots": 2, **kwargs})
    except SandboxUnavailable as exc:
        if backend == "docker" and not os.environ.get("RLVR_REQUIRE_DOCKER"):
            pytest.skip(f"Docker engine unavailable: {exc}")
        raise   # CI sets RLVR_REQUIRE_DOCKER=1: there a missing engine fails the run   # the process backend is the default: its absence is a failure, not a skip


@pytest.fixture(scope="module", params=["process", "docker"])
def one_slot(request):
    """A sandbox with a single slot (process) or container (docker): every run shares it.
    Import it into a test module to use it there."""
    kwargs = {"slots": 1} if request.param == "process" else {"pool_size": 1}
    sandbox = make_sandbox(request.param, **kwargs)
    yield sandbox
    sandbox.close()


def sandbox_uids(sb) -> set[int]:
    """The uids this sandbox's slots or containers run programs as (other rlvr processes on a
    shared machine hold other uids of the same range)."""
    holders = sb._slots if sb.backend == "process" else list(sb._all)
    return {h.uid for h in holders}


def sandbox_processes(uids=None) -> list[str]:
    """Processes on the host owned by a sandbox uid -- of `uids` only, when given (containment
    check after a run)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        uid_line = next((ln for ln in status.splitlines() if ln.startswith("Uid:")), "")
        uid = int(uid_line.split()[1]) if uid_line else -1
        if UID_BASE <= uid < UID_BASE + UID_COUNT and (uids is None or uid in uids):
            found.append(f"pid {entry.name} uid {uid}: {status.splitlines()[0]}")
    return found


def sandbox_shm_segments() -> list[str]:
    """SysV shared-memory segments on the host owned by a sandbox uid."""
    lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    return [ln for ln in lines
            if UID_BASE <= int(ln.split()[7]) < UID_BASE + UID_COUNT]
