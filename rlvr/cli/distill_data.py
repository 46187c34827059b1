"""`rlvr distill-data`: a dataset of verified teacher completions (the work:
rlvr.trainer.verified_data).

Options come from `DistillDataConfig`'s fields and docstrings (rlvr.cli.options); only the
environment arguments are declared here.
"""
from __future__ import annotations

import sys

from rlvr.usage import EXIT_OK, EXIT_ROW_ERRORS, UsageError, field_docs, parse_kv

from .options import add_config_options, config_kwargs


def add_parser(subparsers) -> None:
    from rlvr.trainer.verified_data import DistillDataConfig
    docs = field_docs(DistillDataConfig)
    p = subparsers.add_parser(
        "distill-data", help="build a dataset of teacher completions the environment verified",
        description="Sample k completions per task from a teacher (the environment's solver, a "
                    "local model or run, or an OpenAI-compatible endpoint), score them with the "
                    "environment's rewards as `rlvr score` does, and keep the solved ones as "
                    "prompt-completion rows with their verdicts. Rerun the same command to "
                    "resume; exit 3 when a task could not be sampled or a row failed to score.")
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                   help=docs["env_args"] + " (repeatable), e.g. n_terms=2")
    add_config_options(p, DistillDataConfig, flags={
        "output": ("-o", "--output"), "max_completion_length": ("--max-tokens",),
        "request_timeout_s": ("--request-timeout",)})
    p.set_defaults(func=_run)


def _run(args) -> int:
    from rlvr.envs.registry import EnvArgumentError, EnvContractError, UnknownEnvError
    from rlvr.trainer.evaluation.eval_records import ResumeMismatch
    from rlvr.trainer.verified_data import DistillDataConfig, build, side_paths
    try:
        cfg = DistillDataConfig(**config_kwargs(DistillDataConfig, args,
                                                env_args=parse_kv(args.env_arg)))
        summary = build(cfg)
    except (ValueError, KeyError, FileNotFoundError, ModuleNotFoundError, ResumeMismatch,
            UnknownEnvError, EnvContractError, EnvArgumentError) as exc:
        raise UsageError(str(exc).strip("'\"")) from exc
    print(summary.render())
    print(f"output: {cfg.output} (summary: {side_paths(cfg.output).summary})")
    if summary.failed_tasks or summary.error_rows:
        print(f"{len(summary.failed_tasks)} tasks not sampled, {summary.error_rows} rows failed "
              "to score: rerun the same command to retry the tasks", file=sys.stderr)
        return EXIT_ROW_ERRORS
    return EXIT_OK
