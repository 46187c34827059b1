"""`rlvr score --env NAME INPUT -o OUTPUT`: score a file of completions (rlvr.scoring).

Options are built from `ScoreConfig`'s fields and docstrings (rlvr.cli.options), so the command
line and the library cannot disagree about a default.
"""
from __future__ import annotations

import json
from pathlib import Path

from rlvr.scoring import ScoreConfig, score_file
from rlvr.scoring.run import empty_input
from rlvr.usage import EXIT_OK, EXIT_ROW_ERRORS, UsageError, field_docs, parse_kv

from .options import add_config_options, config_kwargs


def add_parser(sub) -> None:
    docs = field_docs(ScoreConfig)
    p = sub.add_parser("score", help="score a file of completions with an environment's rewards",
                       description="Score a file of (task, completion) rows with an "
                                   "environment's rewards; exit 3 when any row failed.")
    p.add_argument("input", help=docs["input"])
    p.add_argument("--env", help=docs["env"])
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                   help=docs["env_args"] + " (repeatable)")
    add_config_options(p, ScoreConfig, skip=("env", "input"), flags={
        "output": ("-o", "--output"), "deadline_s": ("--deadline",)})
    p.add_argument("--reward-model", metavar="PATH",
                   help="score with a learned reward model (local path or hub id); with --env, "
                        "it is added to that environment's rewards")
    p.add_argument("--rm-weight", type=float, default=1.0, help="the reward model's weight")
    p.add_argument("--rm-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="RewardModel option, e.g. normalize=sigmoid (repeatable)")
    p.add_argument("--summary-json", help="also write the summary to this JSON file")
    p.set_defaults(func=cmd_score)


def _resolve_env(args) -> tuple[str, dict]:
    """--env and/or --reward-model -> (environment name, factory arguments)."""
    if not args.env and not args.reward_model:
        raise UsageError("give --env NAME, --reward-model PATH, or both")
    env_args = parse_kv(args.env_arg)
    if not args.reward_model:
        return args.env, env_args
    rm_args = {"path": args.reward_model, "weight": args.rm_weight, **parse_kv(args.rm_arg)}
    if args.env:   # the environment's own rewards keep their weights beside the model
        rm_args.update(base_env=args.env, base_env_args=env_args, verifier_weight=1.0)
    return "reward-model", rm_args


def cmd_score(args) -> int:
    from rlvr.envs.registry import EnvArgumentError, EnvContractError, UnknownEnvError
    if args.workers < 0 or (args.deadline_s is not None and args.deadline_s <= 0) \
            or args.block_rows < 1 or (args.batch_rows is not None and args.batch_rows < 1):
        raise UsageError("--workers must be >= 0, --deadline > 0, --block-rows and "
                         "--batch-rows >= 1")
    env_name, env_args = _resolve_env(args)
    cfg = ScoreConfig(**config_kwargs(ScoreConfig, args, env=env_name, env_args=env_args))
    if cfg.backend == "ray":
        try:
            from rlvr.ray_backend import require_ray
            require_ray()
        except ImportError as exc:
            raise UsageError(str(exc)) from None
    try:
        summary = score_file(cfg)
    except (UnknownEnvError, EnvContractError, FileExistsError, FileNotFoundError,
            EnvArgumentError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if summary.rows == 0:             # a dataset with no rows (local files are refused earlier)
        raise UsageError(empty_input(cfg.input))
    print(summary.render())
    print(f"output: {cfg.output}")
    if args.summary_json:
        Path(args.summary_json).write_text(json.dumps(summary.to_dict(), indent=2))
    return EXIT_ROW_ERRORS if summary.error_rows else EXIT_OK
