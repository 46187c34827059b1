"""`rlvr train-rm` and `rlvr make-prefs`: the reward-model command lines.

    rlvr make-prefs --env arithmetic --completions samples.jsonl -o prefs.jsonl
    rlvr train-rm --model tiny --data prefs.jsonl -o rm/ --max-steps 200
    rlvr score --env reward-model --env-arg path=rm/ --workers 0 rows.jsonl -o scored.jsonl

Both exit 0 on success and 3 when they finished but skipped bad input rows (listed on stderr
with their line numbers), like `rlvr score`.
"""
from __future__ import annotations

import json
from dataclasses import fields

from .preferences import MakePrefsConfig
from .reward_model import TrainRMConfig


def _help(cls, name: str) -> str:
    """A config field's docstring is its CLI help (read from the class source, once)."""
    import ast
    import inspect
    docs, tree = {}, ast.parse(inspect.getsource(cls))
    body = tree.body[0].body
    for a, b in zip(body, body[1:]):
        if isinstance(a, ast.AnnAssign) and isinstance(b, ast.Expr) \
                and isinstance(getattr(b, "value", None), ast.Constant):
            docs[a.target.id] = " ".join(str(b.value.value).split())
    return docs.get(name, "")


def add_parser(sub) -> None:
    _add_train_rm(sub)
    _add_make_prefs(sub)


def _add_train_rm(sub) -> None:
    h = lambda name: _help(TrainRMConfig, name)  # noqa: E731
    p = sub.add_parser("train-rm", help="train a reward model on preference pairs "
                       "(Bradley-Terry)",
                       description="Train a reward model on (prompt, chosen, rejected) rows with "
                       "the Bradley-Terry loss -log sigma(r_chosen - r_rejected - margin).")
    p.add_argument("--model", required=True, help=h("model"))
    p.add_argument("--data", required=True, help=h("data"))
    p.add_argument("-o", "--output-dir", required=True, help=h("output_dir"))
    p.add_argument("--eval-data", help=h("eval_data"))
    defaults = TrainRMConfig(model="", data="", output_dir="")
    for name, typ in (("eval_fraction", float), ("holdout", str), ("split", str),
                      ("kind", str), ("max_length", int), ("batch_size", int), ("lr", float),
                      ("weight_decay", float), ("warmup_steps", int), ("epochs", int),
                      ("max_steps", int), ("margin", float), ("grad_clip", float),
                      ("eval_every", int), ("save_every", int), ("keep_checkpoints", int),
                      ("seed", int), ("device", str), ("dtype", str)):
        p.add_argument("--" + name.replace("_", "-"), type=typ,
                       default=getattr(defaults, name), help=h(name))
    p.add_argument("--no-chat-template", action="store_true", help="render pairs as plain text")
    p.add_argument("--tensorboard", action="store_true", help=h("tensorboard"))
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--no-resume", action="store_true",
                   help="start over: delete output_dir's checkpoints and metrics first")
    p.set_defaults(func=cmd_train_rm)


def cmd_train_rm(args) -> int:
    from rlvr.cli import EXIT_OK, EXIT_ROW_ERRORS, UsageError
    from .reward_model import train_reward_model
    names = {f.name for f in fields(TrainRMConfig)}
    values = {k: v for k, v in vars(args).items() if k in names}
    try:
        cfg = TrainRMConfig(**values, use_chat_template=not args.no_chat_template,
                            progress=not args.no_progress, resume=not args.no_resume)
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
    h = lambda name: _help(MakePrefsConfig, name)  # noqa: E731
    p = sub.add_parser("make-prefs", help="preference pairs (correct over incorrect) labelled "
                       "by an environment's verifier")
    p.add_argument("--env", required=True, help=h("env"))
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="keyword argument for the environment factory (repeatable)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--completions", help=h("completions"))
    src.add_argument("--policy", help=h("policy"))
    p.add_argument("-o", "--output", required=True, help=h("output"))
    defaults = MakePrefsConfig(env="", output="", completions="-")
    for name, typ in (("n_prompts", int), ("samples", int), ("split", str), ("seed", int),
                      ("max_new_tokens", int), ("temperature", float), ("device", str),
                      ("max_pairs_per_prompt", int), ("threshold", float), ("id_field", str),
                      ("completion_field", str), ("answer_field", str)):
        p.add_argument("--" + name.replace("_", "-"), type=typ,
                       default=getattr(defaults, name), help=h(name))
    p.add_argument("--summary-json", help="also write the summary to this JSON file")
    p.set_defaults(func=cmd_make_prefs)


def cmd_make_prefs(args) -> int:
    from rlvr.cli import EXIT_OK, EXIT_ROW_ERRORS, UsageError, parse_kv
    from rlvr.registry import EnvContractError, UnknownEnvError
    from .preferences import make_preferences
    names = {f.name for f in fields(MakePrefsConfig)}
    values = {k: v for k, v in vars(args).items() if k in names}
    try:
        cfg = MakePrefsConfig(**{**values, "env_args": parse_kv(args.env_arg)})
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
