"""The run harness: what `rlvr train`, `rlvr sft` and the recipes share around their loops,
and the RL loop itself (loop.py) with its checkpoints, metrics, plots and export.

    loader      TOML file, then KEY=VALUE pairs and --flags in any order -> a checked config;
                an unknown key names its nearest field, a TOML mistake its file and line, and
                a renamed field still loads under its old name with a DeprecationWarning
    resume      which fields a resumed run may change (the same for every driver); any other
                change is refused, naming the field and --overwrite
    folder      the run folder: config.json, a new run refused where one exists, the step loop
                with its checkpoints
    interrupts  Ctrl-C / SIGTERM: finish the step, write a checkpoint, print the resume command

The run folder (every driver): config.json (the config and versions), metrics.jsonl,
eval.jsonl, samples.jsonl, tensorboard/, plots/, checkpoints/step-N/ and checkpoints/latest.
"""
from rlvr.trainer.run.folder import run_steps, start_run, write_run_config
from rlvr.trainer.run.interrupts import RunInterrupted, resume_command
from rlvr.trainer.run.loader import ALIASES, load_fields, parse_pairs, read_toml, unknown_key
from rlvr.trainer.run.resume import RESUMABLE, resume_config

__all__ = ["ALIASES", "RESUMABLE", "RunInterrupted", "load_fields", "parse_pairs", "read_toml",
           "resume_command", "resume_config", "run_steps", "start_run", "unknown_key",
           "write_run_config"]
