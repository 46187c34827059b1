"""`rlvr train [--config FILE.toml] [--FIELD VALUE ...] [FIELD=VALUE ...]` and
`rlvr train --resume RUN_DIR [...]`.

Every option is a TrainConfig field (rlvr.cli.options: the field's type, default and docstring);
a field given as `--field value` or `field=value` (in any order) overrides the TOML file, which
overrides the preset's knobs. The loader, the resume policy and the stop at Ctrl-C are the run
harness's (trainer/run/), shared with `rlvr sft` and the recipes.
"""
from __future__ import annotations

import sys

import argparse
import dataclasses
import typing
from pathlib import Path

from .options import add_config_options, option_type

__all__ = ["add_parser", "add_run_arguments", "run_overrides", "report_run", "console_trainer",
           "eval_line"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "train", help="train a policy with RLVR (grpo, dr_grpo, dapo, gspo, rloo, reinforce, ppo)",
        description="Train a policy on an environment. The TOML file names a preset "
                    "(`preset = \"grpo\"`) and any config fields; KEY=VALUE pairs override it. "
                    "`--help-config` lists every field with its documentation.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    from rlvr.trainer.config import TrainConfig
    add_run_arguments(p, TrainConfig)
    p.set_defaults(func=_run)


def add_run_arguments(p, config_cls) -> None:
    """What every run-folder command takes (`rlvr train`, `rlvr sft`): --config, --resume,
    --help-config, --overwrite, FIELD=VALUE pairs and a flag per config field."""
    p.add_argument("--config", type=Path, help="TOML config file")
    p.add_argument("--resume", type=Path, metavar="RUN_DIR",
                   help="continue a run exactly from its latest checkpoint")
    p.add_argument("--help-config", action="store_true", help="list every config field and exit")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a run already in output_dir (by default it is refused: "
                        "--resume continues it)")
    p.add_argument("overrides", nargs="*", metavar="FIELD=VALUE",
                   help="config field overrides (the same as --field value)")
    add_config_options(p.add_argument_group("config fields"), config_cls, every_field=True,
                       only_given=True)
    from rlvr.trainer.run import ALIASES
    hints = typing.get_type_hints(config_cls)
    fields = {f.name for f in dataclasses.fields(config_cls)}
    for old, new in ALIASES.items():       # old names: read, renamed with a warning
        if new in fields and old not in fields:
            p.add_argument("--" + old.replace("_", "-"), dest=old, default=argparse.SUPPRESS,
                           type=option_type(old, hints[new]), help=argparse.SUPPRESS)


def run_overrides(args, config_cls, command: str, extra=()) -> dict:
    """The typed config fields given on the command line: the flags, then the KEY=VALUE pairs
    (the run harness's loader: an unknown key names its nearest field, an old name warns)."""
    from rlvr.trainer.run import ALIASES, load_fields, parse_pairs
    names = {f.name for f in dataclasses.fields(config_cls)} | set(ALIASES) | set(extra)
    given = {k: v for k, v in vars(args).items() if k in names}
    given.update(parse_pairs(args.overrides))
    return load_fields(config_cls, None, given, extra=extra,
                       help_hint=f"`{command} --help-config`")


def report_run(run_dir) -> None:
    """Say where the run went and draw its pictures (`rlvr plot RUN_DIR` redoes them)."""
    print(f"run written to {run_dir}")
    from rlvr.trainer.run.plots import plot_run
    report = plot_run(run_dir)
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
    if report.files:
        print(f"plots: {report.files[0]}")


def eval_line(step: int, result: dict) -> str:
    """One console line for an evaluation: pass@k rates first, then the rest, as in eval.jsonl."""
    first = sorted(k for k in result if k.startswith("pass@"))
    rest = [k for k in result if k not in first and k != "tasks"]
    parts = [f"{k} {result[k]:.3f}" if isinstance(result[k], float) else f"{k} {result[k]}"
             for k in first + rest]
    tasks = f" ({result['tasks']} tasks)" if "tasks" in result else ""
    return f"eval step {step}: " + "  ".join(parts) + tasks


def console_trainer():
    """The Trainer whose evaluations are printed on the console as they finish, not only
    appended to eval.jsonl (a hook here rather than in the loop, which stays free of output)."""
    from tqdm import tqdm

    from rlvr.trainer.run.loop import Trainer

    class ConsoleEvalTrainer(Trainer):
        def evaluate(self) -> dict:
            result = super().evaluate()
            if self.dist.is_main:      # above the progress bar, not through it
                tqdm.write(eval_line(self.step, result), file=sys.stdout)
            return result
    return ConsoleEvalTrainer


def _run(args) -> int:
    from rlvr.usage import UsageError
    from rlvr.trainer.config import field_docs, load_config
    from rlvr.trainer.parallel.distributed import (end_process, is_main_process,
                                                   is_torchrun_rank, shutdown_distributed)
    if args.help_config:
        for name, typ, default, doc in field_docs():
            print(f"{name} ({typ}, default {default!r})\n    {doc}")
        return 0
    from rlvr.trainer.config import TrainConfig
    from rlvr.trainer.run import start_run
    from rlvr.trainer.sampling.server_engine import ServerError
    try:
        overrides = run_overrides(args, TrainConfig, "rlvr train", extra=("preset", "algorithm"))
        if args.resume:
            if args.config:
                raise UsageError("--resume takes the run's saved config; pass overrides instead")
            overrides.pop("preset", None)
            run_dir = console_trainer().resume(args.resume, **overrides).train()
        else:
            cfg = load_config(args.config, overrides)
            run_dir = start_run(cfg, console_trainer(), args.overwrite, "rlvr train")
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from exc
    except ServerError as exc:        # the rollout server failed past its retries: resumable
        print(f"rlvr train: error: {exc}", file=sys.stderr)
        return 1
    finally:
        shutdown_distributed()
    if is_main_process():            # under torchrun, rank 0 reports and plots
        report_run(run_dir)
    if is_torchrun_rank():
        end_process(0)               # not through teardown: why in end_process
    return 0
