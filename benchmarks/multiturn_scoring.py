"""Multi-turn scoring throughput: `code-feedback` transcripts vs single-turn `code` rows.

    python benchmarks/multiturn_scoring.py [--rows 240] [--workers 2]

The same programs are scored twice through `rlvr score` (`score_file`, a pool of `--workers`
processes, the sandbox's process backend): once as single-turn `code` rows (`completion`), once
as `code-feedback` transcripts (`messages`: a wrong first attempt, the environment's feedback, the
final attempt -- the program of the single-turn row). Both judge one program per row in the
sandbox, so the ratio measures what reading and judging a transcript adds. Each run is repeated
(`--repeats`) alternating the two, and the best of each is reported with the load average.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from rlvr.envs.code import SAMPLES
from rlvr.scoring import ScoreConfig, score_file

WRONG = "<think>First try.</think>\n```python\ndef {name}(*args):\n    return None\n```"


def rows(n: int) -> tuple[list[dict], list[dict]]:
    """(single-turn rows, transcript rows) over the shipped code samples, alternating a correct
    and a broken final program so both outcomes are measured."""
    samples = [json.loads(x) for x in SAMPLES.read_text().splitlines() if x.strip()]
    samples = [s for s in samples if s.get("entry_point")]
    single, multi = [], []
    for i in range(n):
        s = samples[i % len(samples)]
        final = s["completion"] if i % 2 == 0 else s["completion"].replace("return", "return 0 and", 1)
        base = {k: s[k] for k in ("id", "question", "entry_point", "tests")}
        single.append({**base, "completion": final})
        multi.append({**base, "messages": [
            {"role": "user", "content": s["question"]},
            {"role": "assistant", "content": WRONG.format(name=s["entry_point"])},
            {"role": "user", "content": "0/2 tests passed. Failing: ..."},
            {"role": "assistant", "content": final}]})
    return single, multi


def run(env: str, data: list[dict], workers: int, tmp: Path) -> tuple[float, dict, list]:
    src, out = tmp / f"{env}.jsonl", tmp / f"{env}.out.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in data))
    out.unlink(missing_ok=True)
    t0 = time.perf_counter()
    summary = score_file(ScoreConfig(env=env, input=str(src), output=str(out), workers=workers,
                                     progress=False))
    seconds = time.perf_counter() - t0
    statuses: dict = {}
    scores = []
    for line in out.read_text().splitlines():
        row = json.loads(line)
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
        scores.append((row["line"], row["score"]))
    return seconds, statuses, [s for _, s in sorted(scores)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=240)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    single, multi = rows(args.rows)
    best = {"code": float("inf"), "code-feedback": float("inf")}
    verdicts = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            for env, data in (("code", single), ("code-feedback", multi)):
                seconds, statuses, verdicts[env] = run(env, data, args.workers, Path(tmp))
                best[env] = min(best[env], seconds)
                print(f"{env:14s} {args.rows / seconds:8.1f} rows/s  {seconds:6.2f} s  {statuses}")
    same = verdicts["code"] == verdicts["code-feedback"]
    print(f"same scores row by row: {same} (mean {sum(verdicts['code']) / args.rows:.3f})")
    ratio = best["code"] / best["code-feedback"]
    print(f"best: code {args.rows / best['code']:.1f} rows/s, code-feedback "
          f"{args.rows / best['code-feedback']:.1f} episodes/s -> {ratio:.2f}x the single-turn "
          f"rate; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
