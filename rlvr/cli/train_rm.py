"""`rlvr train-rm` and `rlvr make-prefs`: the reward-model command lines.

    rlvr make-prefs --env arithmetic --completions samples.jsonl -o prefs.jsonl
    rlvr train-rm --model tiny --data prefs.jsonl -o rm/ --max-steps 200
    rlvr score --env reward-model --env-arg path=rm/ --workers 0 rows.jsonl -o scored.jsonl

Both exit 0 on success and 3 when they finished but skipped bad input rows (listed on stderr
with their line numbers), like `rlvr score`.
"""
from __future__ import annotations

import json

from rlvr.trainer.reward_models.preferences import MakePrefsConfig
from rlvr.trainer.reward_models.rm_training import TrainRMConfig
from rlvr.usage import EXIT_OK, EXIT_ROW_ERRORS, UsageError, field_docs, parse_kv

from .options import add_config_options, config_kwargs


def add_parser(sub) -> None:
    _add_train_rm(sub)
    _add_make_prefs(sub)


def _add_train_rm(sub) -> None:
    p = sub.add_parser("train-rm", help="train a reward model on preference pairs "
                       "(Bradley-Terry)",
                       description="Train a reward model on (prompt, chosen, rejected) rows with "
                       "the Bradley-Terry loss -log sigma(r_chosen - r_rejected - margin).")
    add_config_options(p, TrainRMConfig, flags={
        "output_dir": ("-o", "--output-dir"), "use_chat_template": ("--chat-template",)})
    p.set_defaults(func=cmd_train_rm)


def cmd_train_rm(args) -> int:
    from rlvr.trainer.reward_models.rm_training import train_reward_model
    try:
        cfg = TrainRMConfig(**config_kwargs(TrainRMConfig, args))
        result = train_reward_model(cfg)
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    ev = result.eval_metrics
    print(f"step {result.step}: train loss {result.metrics.get('train/loss', float('nan')):.4f}"
          + (f", held-out accuracy {ev['eval/accuracy']:.3f} on {ev['eval/pairs']} pairs, "
             f"loss {ev['eval/loss']:.4f}" if ev else ", no held-out pairs"))
    print(f"pairs: {result.train_pairs} train, {result.eval_pairs} held out; bad rows skipped: "
          f"{len(result.bad_rows)}; texts truncated: {result.truncated_pairs}")
    print(f"model: {result.output_dir}")
    return EXIT_ROW_ERRORS if result.bad_rows else EXIT_OK


def _add_make_prefs(sub) -> None:
    p = sub.add_parser("make-prefs", help="preference pairs (correct over incorrect) labelled "
                       "by an environment's verifier")
    docs = field_docs(MakePrefsConfig)
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                   help=docs.get("env_args", "") + " (repeatable)")
    add_config_options(p, MakePrefsConfig, flags={"output": ("-o", "--output")})
    p.add_argument("--summary-json", help="also write the summary to this JSON file")
    p.set_defaults(func=cmd_make_prefs)


def cmd_make_prefs(args) -> int:
    from rlvr.envs.registry import EnvContractError, UnknownEnvError
    from rlvr.trainer.reward_models.preferences import make_preferences
    from rlvr.rows import has_no_rows
    if (args.completions is None) == (args.policy is None):
        raise UsageError("give exactly one of --completions FILE or --policy MODEL")
    try:
        if args.completions is not None and has_no_rows(args.completions):
            raise ValueError(f"{args.completions}: 0 rows, nothing to pair (the input is empty)")
        cfg = MakePrefsConfig(**config_kwargs(MakePrefsConfig, args,
                                              env_args=parse_kv(args.env_arg)))
        summary = make_preferences(cfg)
    except (ValueError, FileNotFoundError, UnknownEnvError, EnvContractError) as exc:
        raise UsageError(str(exc)) from None
    print(summary.render())
    print(f"output: {cfg.output}")
    if args.summary_json:
        with open(args.summary_json, "w") as f:
            json.dump({"pairs": summary.pairs, "prompts": summary.prompts,
                       "correct": summary.correct, "incorrect": summary.incorrect,
                       "failed": dict(summary.failed), "bad_rows": summary.bad_rows}, f, indent=2)
    return EXIT_ROW_ERRORS if summary.bad_rows else EXIT_OK
