"""The registered strategies: rlvr's own library and every `rlvr.audit_strategies` entry point,
found on first use."""
from __future__ import annotations

from rlvr.plugins import Discovery

from .strategy import Strategy, _strategies

__all__ = ["ENTRY_POINT_GROUP", "list_strategies", "get_strategy", "UnknownStrategyError"]

ENTRY_POINT_GROUP = "rlvr.audit_strategies"
BUILTIN_MODULES = ("answers", "final_answer", "identities", "code", "text", "injection")
"""rlvr's own strategy library (each module registers its strategies on import)."""
_discover = Discovery(__package__, BUILTIN_MODULES, ENTRY_POINT_GROUP)
"""The built-in strategies and every `rlvr.audit_strategies` entry point, once."""


class UnknownStrategyError(KeyError):
    def __str__(self):
        return str(self.args[0])




def list_strategies() -> list[Strategy]:
    """Every registered strategy: the legitimate forms first, then the attacks, by name."""
    _discover()
    return sorted(_strategies.values(), key=lambda s: (not s.legit, s.name))


def get_strategy(name: str) -> Strategy:
    _discover()
    if name not in _strategies:
        raise UnknownStrategyError(f"unknown strategy {name!r}; registered: "
                                   f"{', '.join(sorted(_strategies))}")
    return _strategies[name]
