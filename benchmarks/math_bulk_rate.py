"""Single-process rate of the math verifier on math_verifier.py's bulk set, alone (no math-verify).

    taskset -c 0 python benchmarks/math_bulk_rate.py --rows 4000

For comparing two versions of the code side by side: run one copy per core at the same time
(`taskset -c 0` / `-c 1`), then swap the cores; the version scored is whichever `rlvr` the
interpreter imports (print shows its path). The deadline is long (60 s) so that a loaded
machine never turns a slow comparison into a deadline verdict in one run and not the other.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import math_verifier as mv  # noqa: E402  (the bulk set and the fixture loader)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000)
    args = ap.parse_args(argv)
    import rlvr
    import rlvr.verifiers.math.symbolic  # noqa: F401  (imported outside the timed run)
    from rlvr import Task
    from rlvr.verifiers.math import MathReward, parse_gold
    from rlvr.verifiers.math.symbolic import gold_sympy
    bulk = mv.bulk_rows(mv.load_fixtures(), args.rows)
    parse_gold.cache_clear()
    gold_sympy.cache_clear()
    reward = MathReward(symbolic="inline", deadline_s=60)
    reward.score(Task("warm", answer="1"), r"\boxed{\sqrt{1}}")
    t0, scores = time.perf_counter(), []
    for r in bulk:
        scores.append(reward.score(Task(r["id"], answer=r["gold"]), r["completion"]).score)
    secs = time.perf_counter() - t0
    agree = sum(s == r["expected"] for s, r in zip(scores, bulk)) / len(bulk)
    print(json.dumps({"rlvr": os.path.dirname(rlvr.__file__), "rows": len(bulk),
                      "seconds": round(secs, 2), "cases_per_s": round(len(bulk) / secs, 1),
                      "agreement": round(agree, 4), "load_end": os.getloadavg()[0]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
