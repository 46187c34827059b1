"""Small helpers the formatting environments share: the hash split and a one-turn prompt."""
from __future__ import annotations

import hashlib

__all__ = ["SPLITS", "split_of", "user_turn"]

SPLITS = ("train", "test")


def split_of(key: str, test_fraction: float) -> str:
    """'test' for about `test_fraction` of keys, by a hash of the key (stable across runs and
    machines, unlike `hash()`), so a request never lands in both splits.

    >>> split_of("Write a poem about tea.", 0.2) == split_of("Write a poem about tea.", 0.2)
    True
    """
    bucket = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")
    return "test" if bucket / 2**64 < test_fraction else "train"


def user_turn(text: str) -> list[dict]:
    """A chat prompt of one user message."""
    return [{"role": "user", "content": text}]
