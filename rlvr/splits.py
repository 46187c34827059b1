"""The hash split: which split a task belongs to, decided by a hash of its content.

Stable across runs, machines and Python processes (unlike `hash()`), so a task never lands in
both the training and the held-out split, however the generator's random stream is seeded.
"""
from __future__ import annotations

import hashlib

__all__ = ["hash_split", "SPLITS"]

SPLITS = ("train", "test")


def hash_split(key: str, test_fraction: float) -> str:
    """'test' for about `test_fraction` of keys, else 'train'.

    >>> hash_split("12 + 7", 0.2) == hash_split("12 + 7", 0.2)
    True
    """
    bucket = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")
    return "test" if bucket / 2**64 < test_fraction else "train"
