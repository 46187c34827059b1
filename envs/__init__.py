"""Environments: task sources + prompt templates + rewards, registered by name.

Importing this package registers rlvr's built-in environments.
"""
from .base import Environment, RowSource, TaskSource, r1_base_prompt, r1_chat_prompt
from . import arithmetic  # noqa: F401  (registers "arithmetic")
from . import reward_model  # noqa: F401  (registers "reward-model")
from . import formatting  # noqa: F401  (registers "ifeval-style", "json-schema", "think-format")
from . import code  # noqa: F401  (registers "code", "humaneval", "code-stdio")
from . import math  # noqa: F401  (registers "math", "math-arithmetic", "countdown")

__all__ = ["Environment", "RowSource", "TaskSource", "r1_base_prompt", "r1_chat_prompt"]
