"""`rlvr eval`: pass@k of a model or endpoint on an environment (the work: rlvr.trainer.evaluation.evaluate).

Options come from `EvalConfig`'s fields and docstrings (rlvr.cli.options); only the k list, the
environment arguments, the progress bar and the output path are declared here. A run folder is
evaluated on the environment and arguments it trained on unless told otherwise (`resolve_env`).
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from rlvr.usage import EXIT_ROW_ERRORS, UsageError, field_docs, parse_kv

from .options import add_config_options, config_kwargs


def add_parser(subparsers) -> None:
    from rlvr.trainer.evaluation.evaluate import EvalConfig
    docs = field_docs(EvalConfig)
    p = subparsers.add_parser(
        "eval", help="pass@k of a model on an environment's held-out split, with bootstrap CIs",
        description="Sample n completions per held-out task (seeded per task) and report greedy "
                    "pass@1 and unbiased pass@k = mean over tasks of 1 - C(n-c,k)/C(n,k), with "
                    "bootstrap confidence intervals over tasks. A run folder (--model RUN_DIR, "
                    "or --env-from RUN_DIR for any model) is evaluated on the environment and "
                    "arguments it trained on; --env/--env-arg override them. With -o, "
                    "per-sample rows go to OUT.samples.jsonl and rerunning the command resumes.")
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                   help=docs["env_kwargs"] + " (repeatable), e.g. n_terms=2")
    p.add_argument("--k", default=",".join(map(str, EvalConfig.ks)),
                   help=docs["ks"] + " Comma-separated (default: %(default)s).")
    add_config_options(p, EvalConfig, flags={
        "samples": ("--n", "--samples"), "max_completion_length": ("--max-tokens",),
        "request_timeout_s": ("--request-timeout",)})
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar with tasks/s on stderr (default: when it is a terminal)")
    p.add_argument("-o", "--out", type=Path,
                   help="results JSON (per-sample rows in OUT.samples.jsonl; rerun to resume)")
    p.set_defaults(func=_run)


def _parse_ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(k) for k in text.split(",") if k.strip())
    except ValueError:
        raise UsageError(f"--k expects comma-separated integers, got {text!r}") from None
    if not ks:
        raise UsageError("--k needs at least one value")
    return ks


def _run(args) -> int:
    from rlvr.trainer.evaluation.eval_records import ResumeMismatch
    from rlvr.trainer.evaluation.evaluate import EvalConfig, run_eval, samples_path
    try:
        cfg = EvalConfig(**config_kwargs(EvalConfig, args, ks=_parse_ks(args.k),
                                         env_kwargs=parse_kv(args.env_arg)))
        progress = sys.stderr.isatty() if args.progress is None else args.progress
        result = run_eval(cfg, args.out, progress=progress,      # says which tasks it used
                          announce=lambda line: print(line, file=sys.stderr, flush=True))
    except (ValueError, KeyError, FileNotFoundError, ModuleNotFoundError, ResumeMismatch) as exc:
        raise UsageError(str(exc)) from exc
    print(result.table())
    if args.out:
        print(f"results: {args.out}; samples: {samples_path(args.out)}")
    failed = sum(c for s, c in result.statuses.items() if s in ("error", "infra_error"))
    if result.failed_tasks:
        return EXIT_ROW_ERRORS
    if failed:
        print(f"{failed} samples ended in error/infra_error (counted as not correct)",
              file=sys.stderr)
        return EXIT_ROW_ERRORS
    return 0 if all(math.isfinite(v) for v in result.pass_at.values()) else 1
