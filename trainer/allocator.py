"""Give freed tensor memory back to the OS at once (glibc, CPU training).

PyTorch's CPU tensors come from malloc. glibc serves a request above its mmap threshold with
a fresh mapping that `free` unmaps, and anything smaller from the heap, which `free` keeps for
reuse. The threshold starts at 128 KiB but is *dynamic*: each time a mapped block is freed it
rises to that block's size (up to 32 MiB). After the first few freed activations, every
activation of a small model (a few MiB each) is heap-allocated, and the heap keeps the
high-water mark of each phase as holes the next phase cannot always reuse: measured on
SmolLM2-135M (benchmarks/README.md, "Trainer memory"), 0.8 GiB of a 4.8 GiB peak was memory
already freed by torch but still held by the process.

`release_freed_memory()` pins the threshold (which also switches the dynamic adjustment off),
so tensors of `threshold` bytes or more are mapped and unmapped on their own. The cost is a
page fault per page of each new large tensor (measured: see the README). Not glibc (macOS,
musl) or `MALLOC_MMAP_THRESHOLD_` already set by the user: nothing is changed.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["release_freed_memory", "MMAP_THRESHOLD"]

MMAP_THRESHOLD = 1 << 20
"""Bytes: tensors from 1 MiB up are mapped on their own (a 16 x 64 token micro-batch's
activations are 2-6 MiB each); smaller ones stay on the heap, where reuse is cheap."""

_M_MMAP_THRESHOLD = -3       # glibc's mallopt parameter number (malloc.h)


def release_freed_memory(threshold: int = MMAP_THRESHOLD) -> bool:
    """Pin glibc's mmap threshold at `threshold` bytes for this process; True if it was set."""
    if not sys.platform.startswith("linux") or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(_M_MMAP_THRESHOLD, int(threshold)) == 1
