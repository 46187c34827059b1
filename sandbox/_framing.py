"""Length-prefixed JSON frames over a pipe or socket (the host side of the agent protocol)."""
from __future__ import annotations

import json
import select
import struct
import time

__all__ = ["write_frame", "read_frame", "MAX_FRAME"]

MAX_FRAME = 64 << 20     # an agent answer carries at most three capped streams, base64-encoded


def write_frame(stream, obj) -> None:
    data = json.dumps(obj).encode()
    stream.write(struct.pack(">I", len(data)) + data)
    stream.flush()


def _read_exact(fd_read, fileno: int, n: int, deadline: float) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fileno], [], [], left)[0]:
            raise TimeoutError("no answer from the sandbox agent in time")
        chunk = fd_read(n - len(buf))
        if not chunk:
            raise EOFError("the sandbox agent closed its channel")
        buf += chunk
    return bytes(buf)


def read_frame(stream, timeout_s: float, reader=None) -> dict:
    """Read one frame; `reader(n)` overrides how bytes are read (sockets)."""
    deadline = time.monotonic() + timeout_s
    fd_read = reader or stream.read      # an unbuffered pipe: read(n) returns what is there
    fileno = stream.fileno()
    (size,) = struct.unpack(">I", _read_exact(fd_read, fileno, 4, deadline))
    if size > MAX_FRAME:
        raise ValueError(f"agent frame of {size} bytes is larger than {MAX_FRAME}")
    return json.loads(_read_exact(fd_read, fileno, size, deadline))
