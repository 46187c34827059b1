"""Unprivileged uids for sandbox slots, one per slot across every rlvr process on the machine.

RLIMIT_NPROC counts the processes of a real uid machine-wide and does not apply to root, so each
concurrent run needs its own non-root uid, or a fork bomb in one run starves its neighbours.
A uid is held by an exclusive lock on a file; the kernel releases it when its holder dies.
"""
from __future__ import annotations

import fcntl
from pathlib import Path

from .base import SandboxUnavailable

__all__ = ["STATE_DIR", "UID_BASE", "UID_COUNT", "claim_uid", "try_uid"]

STATE_DIR = Path("/run/rlvr-sandbox")
UID_BASE, UID_COUNT = 61000, 1000


def try_uid(uid: int):
    """The uid's open, locked lock file, or None when someone holds it."""
    locks = STATE_DIR / "uids"
    locks.mkdir(mode=0o700, parents=True, exist_ok=True)
    f = open(locks / f"{uid}.lock", "w")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return f
    except BlockingIOError:
        f.close()
        return None


def claim_uid():
    """(uid, open lock file): keep the file open for as long as the uid is in use."""
    for uid in range(UID_BASE, UID_BASE + UID_COUNT):
        f = try_uid(uid)
        if f is not None:
            return uid, f
    raise SandboxUnavailable(f"all {UID_COUNT} sandbox uids from {UID_BASE} are in use")
