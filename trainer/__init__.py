"""The RLVR training loop (sample, verify, update, repeat) with named algorithm presets.

    from rlvr.trainer import TrainConfig, train
    train(TrainConfig.from_preset("grpo", model="smollm2", steps=100))   # packaged SmolLM2-135M-Instruct

Importing this package stays light: torch loads when a trainer is built.

Its rooms:

    config.py, sections.py   the one training config, in sections (the flat names still work)
    objective/    the update and its algorithms: DeepSeekMath eq. 3 term by term, the tables of
                  advantage estimators and policy losses, presets, importance corrections
    forwards/     log-probs for the update: the Forward protocol, the reference forward and the
                  fast one tested equal to it, packing, prefix sharing, the transformers adapter
    sampling/     rollout engines, the rollout batch, multi-turn episodes, prompts
    run/          the run harness (loader, resume policy, run folder, signals), the RL loop,
                  checkpoints, metrics, plots, export
    parallel/     where the model lives: replication under torchrun, FSDP2 sharding
    models/       loading policies, references and critics; SmolLM2; the tiny test model
    evaluation/, sft/, verified_data/, reward_models/, recipes/   the jobs built on these
"""
from importlib import import_module

_EXPORTS = {"TrainConfig": "config", "PRESETS": "config", "load_config": "config",
            "Trainer": "run.loop", "train": "run.loop", "resume": "run.loop",
            "build_tiny_model": "models.tiny"}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
