"""Give freed tensor memory back to the OS at once (glibc, CPU training).

PyTorch's CPU tensors come from malloc. glibc serves a request above its mmap threshold with
a fresh mapping that `free` unmaps, and anything smaller from the heap, which `free` keeps for
reuse. The threshold starts at 128 KiB but is *dynamic*: each time a mapped block is freed it
rises to that block's size (up to 32 MiB). After the first few freed activations, every
activation of a small model (a few MiB each) is heap-allocated, and the heap keeps the
high-water mark of each phase as holes the next phase cannot always reuse: a sizeable share
of the trainer's peak is memory torch has freed but the process still holds (measured in
benchmarks/README.md, "Trainer memory").

`release_freed_memory()` pins the threshold (which also switches the dynamic adjustment off),
so tensors of `threshold` bytes or more are mapped and unmapped on their own. The cost is a
page fault per page of each new large tensor. Not glibc (macOS, musl) or
`MALLOC_MMAP_THRESHOLD_` already set by the user: nothing is changed. It changes the whole
process's malloc settings, so the trainer does it only with `tune_allocator = true`.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import sys

__all__ = ["release_freed_memory", "heap_reuse", "MMAP_THRESHOLD"]

MMAP_THRESHOLD = 1 << 20
"""Bytes: tensors from 1 MiB up are mapped on their own (a 16 x 64 token micro-batch's
activations are 2-6 MiB each); smaller ones stay on the heap, where reuse is cheap."""

HEAP_THRESHOLD = 32 << 20
"""Bytes: glibc's largest mmap threshold; below it, sampling's tensors come from the heap."""

TRIM_THRESHOLD = 128 << 10
"""Bytes: glibc's default; free memory above this at the heap's top goes back to the OS."""

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3       # glibc's mallopt parameter number (malloc.h)
_pinned: int | None = None   # the threshold release_freed_memory set, if it did


def release_freed_memory(threshold: int = MMAP_THRESHOLD) -> bool:
    """Pin glibc's mmap threshold at `threshold` bytes for this process; True if it was set."""
    if not sys.platform.startswith("linux") or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        mallopt = _libc().mallopt
    except (OSError, AttributeError):
        return False
    global _pinned
    ok = mallopt(_M_MMAP_THRESHOLD, int(threshold)) == 1
    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)      # known, so heap_reuse can restore it
    _pinned = int(threshold) if ok else None
    return ok


@functools.cache
def _libc():
    """glibc, loaded once (heap_reuse runs twice a training step)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return libc


@contextlib.contextmanager
def heap_reuse(threshold: int = HEAP_THRESHOLD):
    """Serve tensors below `threshold` from the heap for a block, then hand the freed heap back.

    Token-by-token sampling allocates the same MiB-sized tensors at every token (the logits,
    the KV cache grown by concatenation), and so do the no-grad reference and old-policy
    passes; with the threshold pinned each is a fresh mapping whose pages fault in one by one
    (a large share of the main job's CPU as system time). Inside this block they are reused
    from the heap; at its end `malloc_trim` hands the freed heap back to the OS, so the update
    does not inherit the block's high-water mark as holes. Where the pin stays: around the
    update's forward and backward heap reuse costs peak memory, and in a large evaluation batch
    the KV cache grown by concatenation leaves its last size as holes in the heap
    (benchmarks/README.md, "Trainer memory", has both). The trainer uses it for the step's
    sampling and the no-grad passes only.
    The trim gives back the pages of freed heap but not its address range when a live block
    sits above it: later tensors of any size can be served from those holes and keep their
    pages until the next trim, at most the block's high-water mark.
    A no-op unless `release_freed_memory` pinned the threshold in this process."""
    if _pinned is None:
        yield
        return
    libc = _libc()
    libc.mallopt(_M_MMAP_THRESHOLD, int(threshold))
    libc.mallopt(_M_TRIM_THRESHOLD, 2 * int(threshold))   # no giving back between tokens
    try:
        yield
    finally:
        libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
        libc.mallopt(_M_MMAP_THRESHOLD, _pinned)
        libc.malloc_trim(0)
