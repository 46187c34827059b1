"""`rlvr eval`: pass@k of a model on an environment (the work: rlvr.trainer.evaluate)."""
from __future__ import annotations


def add_parser(sub) -> None:
    from rlvr.trainer.evaluate import add_parser as add_eval_parser
    add_eval_parser(sub)
