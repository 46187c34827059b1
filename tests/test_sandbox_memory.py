"""No run sees a byte of another run: a thief scans its own memory for a previous run's marker.

A program's process inherits the memory of whatever forked it. If that process ever held an
earlier request (its program text, files, stdin) or an earlier result (stdout, stderr, the
result channel), freed heap still carries those bytes, and a wrong program that scans its heap
can find a sibling's solution and run it. Both backends must start each program from a process
that never held another program's text. The thief reads every readable region listed in
/proc/self/maps through /proc/self/mem (its own memory: no ptrace needed) and reports every
marker it finds (after making itself dumpable again: a process that changed uid is not, and its
/proc files are root's), raw or base64-encoded (requests carry files in base64); it also plants
one of each of its own, so a scan that sees nothing cannot pass.
"""
from __future__ import annotations

import json
import secrets
import textwrap


from sandbox_support import one_slot  # noqa: F401 -- the fixture

PREFIX = "rlvr-prev-run-"
"""A marker is PREFIX + 16 hex digits. The thief's source names the prefix only in hex, so the
only whole markers in its memory are the ones planted by runs (its own included)."""

PLANTER = textwrap.dedent('''
    import os, sys
    MARK = "{mark}"
    kept = [MARK * 4 for _ in range({copies})]   # in this run's heap until it exits
    sys.stdout.write(MARK + "\\n" + "x" * {out_bytes} + "\\n")
    sys.stderr.write(MARK + "\\n")
    os.write(3, (MARK + "\\n").encode())         # the result channel
    # {padding}
''')

THIEF = textwrap.dedent('''
    import base64, ctypes, json, re
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)   # PR_SET_DUMPABLE: /proc/self/mem becomes ours
    prefix = bytes.fromhex("{hex_prefix}")
    own = "".join([prefix.decode(), "{own}"])                    # a raw marker in this heap
    own_b64 = base64.b64encode(b"a" + prefix + b"{own_b64}")      # and one in base64
    pattern = re.compile(re.escape(prefix) + rb"[0-9a-f]{{16}}")
    B64 = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
    needles = [base64.b64encode(bytes(r) + prefix)[(0, 2, 3)[r]:((len(prefix) + r) // 3) * 4]
               for r in range(3)]                                # the prefix at each alignment

    def decoded_markers(chunk):
        for needle, skipped in zip(needles, (0, 2, 3)):
            at = chunk.find(needle)
            while at >= 0:
                hi = at + len(needle)
                while hi < len(chunk) and chunk[hi] in B64:
                    hi += 1
                run = chunk[max(at - skipped, 0):hi]  # from the needle's 4-character group
                try:
                    yield from pattern.findall(base64.b64decode(run + b"=" * (-len(run) % 4)))
                except ValueError:
                    pass
                at = chunk.find(needle, hi)

    found, scanned = set(), 0
    with open("/proc/self/maps") as f:
        regions = [line.split() for line in f]
    with open("/proc/self/mem", "rb", buffering=0) as mem:
        for fields in regions:
            if not fields[1].startswith("r") or fields[-1] in ("[vvar]", "[vsyscall]"):
                continue
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            for at in range(lo, hi, 1 << 22):
                try:
                    mem.seek(at)
                    chunk = mem.read(min(hi - at, (1 << 22) + 64))
                except OSError:
                    break
                scanned += len(chunk)
                found.update(m.decode() for m in pattern.findall(chunk))
                found.update(m.decode() for m in decoded_markers(chunk))
    print(json.dumps({{"found": sorted(found), "scanned": scanned}}))
''')


def _planter(mark: str, size: int) -> str:
    return PLANTER.format(mark=mark, copies=max(1, size // 256), out_bytes=min(size, 200_000),
                          padding=(mark + " ") * max(1, size // 64))


def _thief(own: str, own_b64: str) -> str:
    return THIEF.format(hex_prefix=PREFIX.encode().hex(), own=own, own_b64=own_b64)


SIZES = (64, 3_000, 40_000, 300_000, 1_500_000, 700, 120_000, 9_000)
"""Program, output and heap sizes of the planting runs: small strings live in the allocator's
arenas, large ones in their own mappings, and each size lands a marker in different places."""


def test_no_run_finds_a_previous_runs_text_or_output_in_its_memory(one_slot):
    planted = []
    for size in SIZES:
        mark = PREFIX + secrets.token_hex(8)
        res = one_slot.run(_planter(mark, size), stdin=mark + "\n",
                           files={"data.txt": mark * 8})
        assert res.status == "ok" and mark in res.stdout and mark.encode() in res.channel, \
            (res.status, res.reason, res.stderr)
        planted.append(mark)
        own, own_b64 = secrets.token_hex(8), secrets.token_hex(8)
        res = one_slot.run(_thief(own, own_b64))
        assert res.status == "ok", (res.status, res.reason, res.stderr[-2000:])
        seen = json.loads(res.stdout.strip().splitlines()[-1])
        assert {PREFIX + own, PREFIX + own_b64} <= set(seen["found"]), \
            f"the scan missed the thief's own markers: {seen}"
        stolen = sorted(set(seen["found"]) & set(planted))
        assert not stolen, (f"after a {size}-byte run, the next run read earlier runs' markers "
                            f"{stolen} in its own memory ({seen['scanned']} bytes scanned)")
