"""`rlvr sft [--config FILE.toml] [--FIELD VALUE ...] [FIELD=VALUE ...]` and
`rlvr sft --resume RUN_DIR [...]`: supervised fine-tuning on verified completions.

Every option is an SFTConfig field (rlvr.cli.options: the field's type, default and docstring);
a field given as `--field value` or `field=value` overrides the TOML file.
"""
from __future__ import annotations

import argparse
import time

from .train import add_run_arguments, report_run, run_overrides

__all__ = ["add_parser"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "sft", help="supervised fine-tuning of a student on (verified) completions",
        description="Fine-tune a model on prompt/completion, messages or text rows (TRL's "
                    "formats; `rlvr distill-data` writes prompt/completion rows), with the loss "
                    "on completion tokens only. KEY=VALUE pairs override the TOML file. "
                    "`--help-config` lists every field with its documentation.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    from rlvr.trainer.sft.config import SFTConfig
    add_run_arguments(p, SFTConfig)
    p.set_defaults(func=_run)


def _run(args) -> int:
    from rlvr.trainer.sft.config import SFTConfig, sft_field_docs
    from rlvr.usage import UsageError
    if args.help_config:
        for name, typ, default, doc in sft_field_docs():
            print(f"{name} ({typ}, default {default!r})\n    {doc}")
        return 0
    from rlvr.trainer.sft.trainer import SFTTrainer, sft, summary_line
    t0 = time.perf_counter()
    try:
        overrides = run_overrides(args, SFTConfig, "rlvr sft")
        if args.resume:
            if args.config:
                raise UsageError("--resume takes the run's saved config; pass overrides instead")
            run_dir = SFTTrainer.resume(args.resume, **overrides).train()
        else:
            run_dir = sft(args.config, overwrite=args.overwrite, **overrides)
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from exc
    report_run(run_dir)
    print(summary_line(run_dir, time.perf_counter() - t0))
    return 0
