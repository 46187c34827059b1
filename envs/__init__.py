"""Environments: task sources + prompt templates + rewards, registered by name.

Importing this package registers rlvr's built-in environments.
"""
from .base import Environment, RowSource, TaskSource, r1_base_prompt, r1_chat_prompt
from . import arithmetic  # noqa: F401  (registers "arithmetic")

__all__ = ["Environment", "RowSource", "TaskSource", "r1_base_prompt", "r1_chat_prompt"]
