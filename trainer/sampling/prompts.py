"""How a prompt reaches the model's chat template, tools included.

A leaf module (json only): the rollout encodes prompts with it and the episode runner renders
the environment's turns with it, so neither imports the other for it.
"""
from __future__ import annotations

import json

__all__ = ["tool_prompt"]

_HERMES_TOOLS = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    "{tools}\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>')


def _template_takes_tools(tokenizer) -> bool:
    template = getattr(tokenizer, "chat_template", None) or ""
    return "tools" in (template if isinstance(template, str) else json.dumps(template))


def tool_prompt(tokenizer, prompt, tools: list[dict] | None):
    """(prompt, apply_chat_template kwargs) that show `tools` to the model: through the
    template's own `tools=` when it renders them, else as Hermes-style instructions in the
    system message (or before a plain-text prompt)."""
    if not tools:
        return prompt, {}
    if isinstance(prompt, list) and _template_takes_tools(tokenizer):
        return prompt, {"tools": tools}
    text = _HERMES_TOOLS.format(tools="\n".join(json.dumps(t) for t in tools))
    if isinstance(prompt, str):
        return f"{text}\n\n{prompt}", {}
    if prompt and prompt[0].get("role") == "system":
        return [{**prompt[0], "content": f"{prompt[0]['content']}\n\n{text}"}, *prompt[1:]], {}
    return [{"role": "system", "content": text}, *prompt], {}
