"""Environments: task sources + prompt templates + rewards, registered by name.

The built-in environments register themselves when their module is imported. The registry
imports them all on first lookup of an unknown name (`rlvr.list_envs()`, `load_env`), and a
pool worker rebuilding one environment imports only that one's module -- a worker scoring
arithmetic never pays for sympy or the sandbox.
"""
import importlib

from .base import Environment, RowSource, TaskSource, r1_base_prompt, r1_chat_prompt
from .reasoning_gym_names import ENV_NAMES as _REASONING_GYM

# module -> the environments it registers
BUILTIN_MODULES = {
    "arithmetic": ("arithmetic",),
    "learned_reward": ("reward-model",),
    "ifeval": ("ifeval-style",),
    "json_schema": ("json-schema",),
    "think_format": ("think-format",),
    "code": ("code", "humaneval", "code-stdio"),
    "math": ("math", "math-arithmetic", "countdown"),
    "tool_envs": ("tool-arithmetic", "math-python", "code-feedback"),
    "benchmarks": ("gsm8k", "math500", "hendrycks-math", "aime", "mbpp"),
    "reasoning_gym": _REASONING_GYM,       # reasoning-gym/<dataset> for each of its datasets
}


def register_builtins() -> None:
    """Import every built-in environment module (each registers its environments)."""
    for module in BUILTIN_MODULES:
        importlib.import_module(f"{__name__}.{module}")


__all__ = ["Environment", "RowSource", "TaskSource", "r1_base_prompt", "r1_chat_prompt",
           "BUILTIN_MODULES", "register_builtins"]
