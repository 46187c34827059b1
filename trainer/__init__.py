"""The RLVR training loop (sample, verify, update, repeat) with named algorithm presets.

    from rlvr.trainer import TrainConfig, train
    train(TrainConfig.from_preset("grpo", model="smollm2", steps=100))   # packaged SmolLM2-135M-Instruct

Importing this package stays light: torch loads when a trainer is built.
"""
from importlib import import_module

_EXPORTS = {"TrainConfig": "config", "PRESETS": "config", "load_config": "config",
            "Trainer": "loop", "train": "loop", "resume": "loop",
            "build_tiny_model": "tiny"}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
