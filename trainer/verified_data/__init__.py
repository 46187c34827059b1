"""Verified datasets from any teacher: sample k completions per task, keep the ones the
environment's rewards verify, write them as prompt-completion rows for SFT.

    from rlvr.trainer.verified_data import DistillDataConfig, build_verified_dataset
    build_verified_dataset(DistillDataConfig(output="traces.jsonl", env="arithmetic",
                                             env_args={"n_terms": 2, "ops": "*"},
                                             teacher="program", k=1))

The teacher is the environment's own solver ('program'), a local transformers model or rlvr
run, or an OpenAI-compatible endpoint (`teachers`); scoring goes through `rlvr score`'s path, so
a kept row's verdict is the one `rlvr score` gives it (`build`).
"""
from rlvr.trainer.verified_data.build import build, build_verified_dataset, select, side_paths, training_row
from rlvr.trainer.verified_data.config import PROGRAM, DistillDataConfig
from rlvr.trainer.verified_data.summary import DistillSummary
from rlvr.trainer.verified_data.teachers import (EndpointTeacher, LocalTeacher, NoProgramTeacher, ProgramTeacher, Teacher,
                       make_teacher)

__all__ = ["DistillDataConfig", "DistillSummary", "PROGRAM", "Teacher", "ProgramTeacher",
           "LocalTeacher", "EndpointTeacher", "NoProgramTeacher", "make_teacher", "build",
           "build_verified_dataset", "select", "side_paths", "training_row"]
