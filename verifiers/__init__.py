"""Verifiers and reward models: every one a `rlvr.Reward`.

The parser and format rewards load with this package; the heavier verifiers (math, code,
instructions, structured output, reward models) load when first named, so that importing
`rlvr.verifiers` stays light (no sympy, jsonschema or torch until used).
Nothing here imports `rlvr.trainer`: data flows envs -> verifiers/sandbox -> trainer.
"""
from importlib import import_module

from .format import AnswerTag, BoxedPresent, R1Format, ThinkFormat
from .numeric import NumericMatch
from .parser import Parsed, ThinkParser, all_boxed, last_boxed, parse

_LAZY = {
    "MathReward": ".math",
    "CodeReward": ".code",
    "InstructionFollowing": ".instructions",
    "JsonValid": ".structured", "JsonSchemaMatch": ".structured", "CsvTable": ".structured",
    "RewardModel": ".reward_model",
}

__all__ = ["AnswerTag", "BoxedPresent", "R1Format", "ThinkFormat", "NumericMatch", "Parsed",
           "ThinkParser", "all_boxed", "last_boxed", "parse", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'rlvr.verifiers' has no attribute {name!r}")
