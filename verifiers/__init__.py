"""Verifiers and reward models: every one a `rlvr.Reward`.

Nothing here imports `rlvr.trainer`: data flows envs -> verifiers/sandbox -> trainer.
"""
from .format import AnswerTag, BoxedPresent, ThinkFormat
from .numeric import NumericMatch
from .parser import Parsed, ThinkParser, all_boxed, last_boxed, parse

__all__ = ["AnswerTag", "BoxedPresent", "ThinkFormat", "NumericMatch", "Parsed", "ThinkParser",
           "all_boxed", "last_boxed", "parse"]
