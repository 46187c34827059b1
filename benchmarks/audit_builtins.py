"""`rlvr audit` on every built-in environment: the tables of docs/audit.md.

    python benchmarks/audit_builtins.py                  # rewrites the tables in docs/audit.md
    python benchmarks/audit_builtins.py --print          # prints them instead
    python benchmarks/audit_builtins.py --tables reasoning-gym   # one row per reasoning-gym dataset

The environments, their offline arguments (benchmark fixtures, a 2 s wall for stalling
programs) and the number of tasks are those tests/test_audit.py audits in CI, read from it so
the two cannot differ; the findings it prints are what that test's EXPECTED_FINDINGS (accepted,
with a reason in docs/audit.md) and OPEN_HOLES (holes not closed yet) must list together. Rerun
it after a reader changes and update both.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- audit-table: begin -->", "<!-- audit-table: end -->"
RG_BEGIN, RG_END = "<!-- audit-reasoning-gym: begin -->", "<!-- audit-reasoning-gym: end -->"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--print", action="store_true", help="print the tables, leave the docs")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tables", default="builtins",
                    help="comma-separated: builtins (the environments CI audits), "
                         "reasoning-gym (every reasoning-gym dataset, a summary row each)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from rlvr.pool import WorkerPool
    with WorkerPool(args.workers) as pool:
        blocks = {}
        if "builtins" in args.tables:
            blocks[(BEGIN, END)] = _builtins(pool)
        if "reasoning-gym" in args.tables:
            blocks[(RG_BEGIN, RG_END)] = _reasoning_gym(pool)
    if args.print:
        print("\n\n".join(blocks.values()))
        return 0
    docs = ROOT / "docs" / "audit.md"
    text = docs.read_text()
    for (begin, end), table in blocks.items():
        head, _, rest = text.partition(begin)
        _, _, tail = rest.partition(end)
        text = f"{head}{begin}\n{table}\n{end}{tail}"
    docs.write_text(text)
    return 0


def _builtins(pool) -> str:
    """The summary and a table per environment tests/test_audit.py audits."""
    from test_audit import (BUILTIN_ARGS, EXPECTED_FINDINGS, N_TASKS, NOT_AUDITED, TASKS_FOR,
                            audited)

    from rlvr.audit import AuditConfig, run_audit
    summary = ["| environment | kind | strategies run | open holes | accepted |",
               "|---|---|---:|---|---|"]
    details = []
    for env in sorted(EXPECTED_FINDINGS):
        start = time.perf_counter()
        report = run_audit(AuditConfig(audited(env), env_args=BUILTIN_ARGS.get(env, {}),
                                       n=TASKS_FOR.get(env, N_TASKS)), pool=pool)
        ran = sum(r.result != "skipped" for r in report.results)
        accepted = [f for f in report.findings if f in EXPECTED_FINDINGS[env]]
        open_ = [f for f in report.findings if f not in accepted]
        summary.append(f"| `{env}` | {report.kind} | {ran} | {_names(open_)} | "
                       f"{_names(accepted)} |")
        details.append(f"#### `{env}`\n\nTasks: {', '.join(report.task_ids)}\n\n"
                       f"{report.markdown()}\n")
        print(f"{env}: {report.findings} ({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    for env, why in sorted(NOT_AUDITED.items()):
        summary.append(f"| `{env}` | - | - | not audited: {why} | |")
    return "\n".join(summary) + "\n\n" + "\n".join(details)


def _names(findings: list[str]) -> str:
    return ", ".join(f"`{f}`" for f in findings) or "none"


def _reasoning_gym(pool) -> str:
    """One row per reasoning-gym dataset (its first N_TASKS train tasks): the wrong strategies
    that solved a task, those that earned partial credit only, the other findings, and whether
    the control (a perturbed gold) solved its task: then the findings may be right answers."""
    from test_audit import N_TASKS

    from rlvr.audit import AuditConfig, run_audit
    from rlvr.envs.reasoning_gym_names import DATASETS
    rows = ["| dataset | wrong answers solved | partial credit only | escaped / refused | "
            "accepts more than the gold |", "|---|---|---|---|---|"]
    for name in DATASETS:
        start = time.perf_counter()
        try:
            report = run_audit(AuditConfig(f"reasoning-gym/{name}", n=N_TASKS), pool=pool)
        except Exception as exc:     # a dataset that cannot be built here is named, not hidden
            why = " ".join(str(exc).split())[:100].replace("|", "/")
            rows.append(f"| `{name}` | not audited: {type(exc).__name__}: {why} "
                        "| | | |")
            continue
        found = [r for r in report.results if r.finding]
        cells = [[r.name for r in found if r.result == "REWARDED" and r.solved],
                 [r.name for r in found if r.result == "REWARDED" and not r.solved],
                 [f"{r.name} ({r.result})" for r in found if r.result != "REWARDED"]]
        rows.append(f"| `{name}` | " + " | ".join(", ".join(c) or "-" for c in cells)
                    + f" | {'yes' if report.caveats else '-'} |")
        print(f"reasoning-gym/{name}: {rows[-1]} ({time.perf_counter() - start:.1f} s)",
              file=sys.stderr)
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
