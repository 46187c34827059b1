"""`rlvr audit` on every built-in environment: the tables of docs/audit.md.

    python benchmarks/audit_builtins.py                  # rewrites the tables in docs/audit.md
    python benchmarks/audit_builtins.py --print          # prints them instead

The environments, their offline arguments (benchmark fixtures, a 2 s wall for stalling
programs) and the number of tasks are those tests/test_audit.py audits in CI, read from it so
the two cannot differ; the findings it prints are what that test's EXPECTED_FINDINGS must list.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- audit-table: begin -->", "<!-- audit-table: end -->"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--print", action="store_true", help="print the tables, leave the docs")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from test_audit import BUILTIN_ARGS, EXPECTED_FINDINGS, N_TASKS, NOT_AUDITED, audited

    from rlvr.audit import AuditConfig, run_audit
    from rlvr.pool import WorkerPool
    summary = ["| environment | kind | strategies run | findings |", "|---|---|---:|---|"]
    details = []
    with WorkerPool(args.workers) as pool:
        for env in sorted(EXPECTED_FINDINGS):
            start = time.perf_counter()
            report = run_audit(AuditConfig(audited(env), env_args=BUILTIN_ARGS.get(env, {}),
                                           n=N_TASKS), pool=pool)
            ran = sum(r.result != "skipped" for r in report.results)
            found = ", ".join(f"`{f}`" for f in report.findings) or "none"
            summary.append(f"| `{env}` | {report.kind} | {ran} | {found} |")
            details.append(f"#### `{env}`\n\nTasks: {', '.join(report.task_ids)}\n\n"
                           f"{report.markdown()}\n")
            print(f"{env}: {report.findings} ({time.perf_counter() - start:.1f} s)",
                  file=sys.stderr)
    for env, why in sorted(NOT_AUDITED.items()):
        summary.append(f"| `{env}` | - | - | not audited: {why} |")
    table = "\n".join(summary) + "\n\n" + "\n".join(details)
    if args.print:
        print(table)
        return 0
    docs = ROOT / "docs" / "audit.md"
    text = docs.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    docs.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
