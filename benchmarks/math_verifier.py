"""Our math verifier vs math-verify, side by side in one process run.

    python benchmarks/math_verifier.py                 # fixture table + public set + 10k bulk
    python benchmarks/math_verifier.py --bulk 2000     # a quicker bulk pass

Prints, for both: agreement with the expected verdicts per fixture-table category (on the score,
which is all math-verify reports; our status agreement separately), the same on the public
regression set when ../shared/data/math_equiv_public.jsonl exists, cases/s single-process on the
bulk set (ours also with a 2-worker pool), and hangs/timeouts.

How math-verify is called: its documented default -- `verify(parse(gold), parse(completion))`
in the main thread, with its own signal-based timeouts (5 s) -- golds wrapped in `$...$` when
they carry no delimiters, as its README advises. A case that takes longer than `--hang-s` counts
as a hang; its own timeouts are counted from its log warnings.

The bulk set is the fixture table without its `pathological` rows (those are timed above; in
bulk they would only measure how long math-verify waits on its own timeouts) and without the
`math_verify_suite` rows (Math-Verify's own tests, so the bulk mix stays the policy's), repeated with
verdict-preserving variations (think blocks, prose before, a sign-off after) to 10k rows.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "math_cases.jsonl"
PUBLIC = ROOT.parent / "shared" / "data" / "math_equiv_public.jsonl"


def expand(text) -> str:
    return text if isinstance(text, str) else "".join(p * n for p, n in text)


def load_fixtures() -> list[dict]:
    rows = [json.loads(line) for line in FIXTURES.read_text().splitlines() if line.strip()]
    return [dict(r, gold=expand(r["gold"]), completion=expand(r["completion"])) for r in rows]


def load_public(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [dict(r, expected=int(r["expected"]), status=None) for r in rows]


# --------------------------------------------------------------------------- math-verify

class _Timeouts(logging.Handler):
    count = 0

    def emit(self, record):
        if "Timeout" in record.getMessage():
            _Timeouts.count += 1


def math_verify_score(gold: str, completion: str) -> float:
    from math_verify import parse, verify
    g = gold if ("$" in gold or "\\boxed" in gold or "\\(" in gold) else f"${gold}$"
    return float(bool(verify(parse(g), parse(completion))))


# --------------------------------------------------------------------------- runs

def run(scorer, rows, hang_s):
    """Score rows one by one; returns (scores, seconds, hangs)."""
    scores, hangs, t0 = [], 0, time.perf_counter()
    for r in rows:
        t = time.perf_counter()
        scores.append(scorer(r))
        hangs += time.perf_counter() - t > hang_s
    return scores, time.perf_counter() - t0, hangs


def ours_scorer():
    from rlvr import Task
    from rlvr.verifiers.math import MathReward
    reward = MathReward(symbolic="inline")
    verdicts = []

    def score(r):
        v = reward.score(Task(r["id"], answer=r["gold"]), r["completion"])
        verdicts.append(v)
        return v.score
    return score, verdicts


def per_category(rows, ours, theirs):
    table = defaultdict(lambda: [0, 0, 0])
    for r, a, b in zip(rows, ours, theirs):
        t = table[r["category"]]
        t[0] += 1
        t[1] += a == r["expected"]
        t[2] += b == r["expected"]
    return table


def print_table(title, rows, ours, theirs, status_ok=None):
    table = per_category(rows, ours, theirs)
    print(f"\n## {title}: agreement with expected verdicts (score)")
    print(f"{'category':28s} {'n':>4s} {'ours':>7s} {'math-verify':>12s}")
    for cat in sorted(table):
        n, a, b = table[cat]
        flag = "" if a >= b else "   <-- ours below math-verify"
        print(f"{cat:28s} {n:4d} {a / n:7.1%} {b / n:12.1%}{flag}")
    n = len(rows)
    a, b = sum(x == r["expected"] for r, x in zip(rows, ours)), \
        sum(x == r["expected"] for r, x in zip(rows, theirs))
    print(f"{'overall':28s} {n:4d} {a / n:7.1%} {b / n:12.1%}   ({a} vs {b} right)")
    if status_ok is not None:
        print(f"ours, score and status both as expected: {status_ok}/{n}")


def bulk_rows(fixtures, n):
    """Policy fixture rows (not `pathological`, not Math-Verify's own suite) with
    verdict-preserving variations, n in all."""
    base = [r for r in fixtures if r["category"] not in ("pathological", "math_verify_suite")]
    variations = [
        lambda c: c,
        lambda c: c if "think>" in c else "<think>Let me work through this carefully.</think>\n" + c,
        lambda c: "Let me solve this step by step.\nFirst I restate the problem.\n" + c
        if "\\boxed" in c and "think>" not in c else c,
        lambda c: c + "\n\nI hope it is correct." if "\\boxed" in c else c,
    ]
    out, k = [], 0
    while len(out) < n:
        for r in base:
            out.append(dict(r, id=f"{r['id']}/{k}",
                            completion=variations[k % len(variations)](r["completion"])))
            if len(out) == n:
                break
        k += 1
    return out


def pooled_rate(rows, workers, deadline_s):
    """Two ways to use a pool, each timed cold (fresh workers: parser tables, gold caches) and
    warm: the whole reward in the workers (`PooledReward`, how `rlvr score` runs), and the
    default `MathReward` -- fast path in this process, only symbolic comparisons in the pool
    (how a trainer's `score_batch` runs)."""
    from rlvr import PooledReward, Task, WorkerPool
    from rlvr.verifiers.math import MathReward
    tasks = [Task(r["id"], answer=r["gold"]) for r in rows]
    completions = [r["completion"] for r in rows]
    out = {}
    for mode in ("whole reward in the pool", "symbolic only in the pool"):
        with WorkerPool(workers) as pool:
            reward = (PooledReward(MathReward(), deadline_s=deadline_s, pool=pool)
                      if mode.startswith("whole") else
                      MathReward(pool=pool, symbolic="pool", deadline_s=deadline_s))
            t0 = time.perf_counter()
            reward.score_batch([Task("warm", answer="1")] * workers * 2,
                               [r"\boxed{\sqrt{1}}"] * workers * 2)   # start workers, import sympy
            start_s = time.perf_counter() - t0
            times = []
            for _ in range(2):
                t0 = time.perf_counter()
                verdicts = reward.score_batch(tasks, completions)
                times.append(time.perf_counter() - t0)
        out[mode] = (times, start_s, verdicts)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bulk", type=int, default=10_000, help="rows in the bulk set")
    ap.add_argument("--hang-s", type=float, default=10.0, help="a case slower than this hangs")
    ap.add_argument("--public", default=str(PUBLIC), help="public regression set (JSONL)")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    logging.getLogger("math_verify").addHandler(_Timeouts())
    logging.getLogger("math_verify").setLevel(logging.WARNING)
    logging.getLogger("math_verify").propagate = False
    print(f"# math verifier benchmark  (cpus={os.cpu_count()}, load={os.getloadavg()[0]:.1f}, "
          f"python {sys.version.split()[0]})")

    fixtures = load_fixtures()
    import math_verify  # noqa: F401  (imports outside the timed runs, for both)
    import rlvr.verifiers.math.symbolic  # noqa: F401
    ours, verdicts = ours_scorer()
    o_scores, o_s, o_hang = run(ours, fixtures, args.hang_s)
    _Timeouts.count = 0
    m_scores, m_s, m_hang = run(lambda r: math_verify_score(r["gold"], r["completion"]),
                                fixtures, args.hang_s)
    m_timeouts = _Timeouts.count
    status_ok = sum(v.score == r["expected"] and v.status == r["status"]
                    for v, r in zip(verdicts, fixtures))
    print_table(f"fixture table ({len(fixtures)} cases)", fixtures, o_scores, m_scores,
                status_ok)
    print(f"time: ours {o_s:.2f}s, math-verify {m_s:.2f}s; hangs (> {args.hang_s:g}s): "
          f"ours {o_hang}, math-verify {m_hang}; timeouts: ours "
          f"{sum(v.status == 'timeout' for v in verdicts)}, math-verify {m_timeouts}")
    slow = max(zip((v.latency_s for v in verdicts), (r["id"] for r in fixtures)))
    print(f"slowest of ours: {slow[1]} {slow[0]:.2f}s")

    public = Path(args.public)
    if public.exists():
        prow = load_public(public)
        ours, _ = ours_scorer()
        po, _, _ = run(ours, prow, args.hang_s)
        pm, _, _ = run(lambda r: math_verify_score(r["gold"], r["completion"]), prow,
                       args.hang_s)
        print_table(f"public regression set ({len(prow)} cases)", prow, po, pm)

    bulk = bulk_rows(fixtures, args.bulk)
    from rlvr.verifiers.math import parse_gold
    from rlvr.verifiers.math.symbolic import gold_sympy
    parse_gold.cache_clear()       # the bulk run pays for parsing each gold once, as in training
    gold_sympy.cache_clear()
    ours, _ = ours_scorer()
    bo, bo_s, bo_hang = run(ours, bulk, args.hang_s)
    _Timeouts.count = 0
    bm, bm_s, bm_hang = run(lambda r: math_verify_score(r["gold"], r["completion"]), bulk,
                            args.hang_s)
    pooled = pooled_rate(bulk, args.workers, deadline_s=10.0)
    agree = lambda xs: sum(x == r["expected"] for x, r in zip(xs, bulk)) / len(bulk)
    print(f"\n## bulk set ({len(bulk)} rows)")
    print(f"ours, single process:      {len(bulk) / bo_s:8.1f} cases/s  (agreement "
          f"{agree(bo):.1%}, hangs {bo_hang})")
    print(f"math-verify, single proc.: {len(bulk) / bm_s:8.1f} cases/s  (agreement "
          f"{agree(bm):.1%}, hangs {bm_hang}, timeouts {_Timeouts.count})")
    print(f"ratio ours / math-verify:  {bm_s / bo_s:8.2f}x")
    for mode, ((cold, warm), start_s, pv) in pooled.items():
        print(f"ours, {args.workers} workers, {mode}: {len(bulk) / cold:.1f} cases/s cold, "
              f"{len(bulk) / warm:.1f} warm  (agreement {agree([v.score for v in pv]):.1%}, "
              f"timeouts {sum(v.status == 'timeout' for v in pv)}, statuses "
              f"{dict(Counter(v.status for v in pv))}; pool start {start_s:.1f}s not counted)")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
