"""`rlvr export RUN_DIR -o DIR [--merge]`: a run's latest policy as a transformers folder (the
work: rlvr.trainer.run.export; with LoRA, --merge folds the adapters into the base weights)."""
from __future__ import annotations

from pathlib import Path

from rlvr.usage import UsageError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "export", help="write a run's latest policy as a transformers folder (--merge for LoRA)",
        description="Copy RUN_DIR's latest checkpointed policy to DIR. A LoRA run's checkpoint "
                    "holds adapters only: --merge loads the base model, adds the adapters and "
                    "merges them, so DIR loads with AutoModelForCausalLM alone.")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a `rlvr train` run folder")
    p.add_argument("-o", "--out", type=Path, required=True, metavar="DIR",
                   help="folder to write (new or empty)")
    p.add_argument("--merge", action="store_true",
                   help="merge LoRA adapters into the base model's weights")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from rlvr.trainer.run.export import export_run
    try:
        out = export_run(args.run_dir, args.out, merge=args.merge)
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from exc
    print(f"policy written to {out}")
    return 0
