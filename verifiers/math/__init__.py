"""Math answer verification: extraction, normalisation, layered equivalence (docs/math.md).

`MathReward` is the Reward; `find_final`, `split_answer` and `decide` are the layers, exposed
for reuse (another environment's answer reader, a benchmark, a debugging session).
"""
from .compare import Decision, decide
from .extract import Found, find_final
from .normalize import Answer, Item, normalize, split_answer
from .reward import MathReward, parse_gold

__all__ = ["MathReward", "parse_gold", "Decision", "decide", "Found", "find_final", "Answer",
           "Item", "normalize", "split_answer"]
