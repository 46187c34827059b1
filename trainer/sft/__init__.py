"""Supervised fine-tuning of a student on verified completions (`rlvr sft`; docs/sft.md).

    from rlvr.trainer.sft import SFTConfig, sft
    run_dir = sft(SFTConfig(data="verified.jsonl", model="smollm2", steps=200))

Importing this package stays light: torch loads when a trainer is built.
"""
from importlib import import_module

_EXPORTS = {"SFTConfig": "config", "load_sft_config": "config", "SFTTrainer": "trainer",
            "sft": "trainer", "resume_sft": "trainer", "encode_row": "data"}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
