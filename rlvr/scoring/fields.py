"""Reading the fields of an input row the way other tools write them.

- **Nested fields**: `--completion-field resps.0.0` reads `row["resps"][0][0]` (lm-evaluation-
  harness keeps each sample as `resps: [[text]]`); a dotted name is used as a plain key first, so
  a flat field that contains a dot still works.
- **Chat-format completions**: a list of messages (as TRL logs completions, or an OpenAI
  response's `messages`) is scored on its last assistant turn; content given as a list of parts
  is joined from its text parts.
"""
from __future__ import annotations

from typing import Any

__all__ = ["get_field", "completion_text", "with_fields"]

_MISSING = object()


def get_field(row: dict, name: str) -> Any:
    """`row[name]`, or the value at a dotted path (`a.0.b`: dict keys and list indices);
    KeyError naming the field when it is absent."""
    if name in row:
        return row[name]
    value: Any = row
    for part in name.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, (list, tuple)) and part.lstrip("-").isdigit() \
                and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            raise KeyError(f"missing field {name!r}")
    return value


def with_fields(row: dict, names: tuple[str, ...]) -> dict:
    """The row, plus each dotted field name that resolves, as a flat key (so environments that
    read `row[id_field]` see nested ids and golds too)."""
    if not names:
        return row
    extra = {}
    for name in names:
        if "." in name and name not in row:
            try:
                extra[name] = get_field(row, name)
            except KeyError:
                pass
    return {**row, **extra} if extra else row


def completion_text(value: Any, name: str) -> str:
    """The text to score: a string as it is, or the last assistant turn of a chat."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(m, dict) for m in value):
        turns = [m for m in value if m.get("role") == "assistant"]
        if not turns:
            raise ValueError(f"field {name!r} holds chat messages but no assistant turn")
        return _content_text(turns[-1].get("content"), name)
    path = _path_to_text(value)
    hint = f"; its first text is at --completion-field {name}.{path}" if path else ""
    raise ValueError(f"field {name!r} must be a string or a list of chat messages, got "
                     f"{_shape(value)}{hint}")


def _path_to_text(value: Any, depth: int = 3) -> str | None:
    """The dotted path to the first string inside nested lists (lm-evaluation-harness keeps
    its samples as `resps: [[text]]`, so `resps.0.0`), or None."""
    if depth and isinstance(value, list) and value:
        if isinstance(value[0], str):
            return "0"
        inner = _path_to_text(value[0], depth - 1)
        return f"0.{inner}" if inner else None
    return None


def _shape(value: Any) -> str:
    """'a list of lists' / 'a list of str' / 'int': what a field holds, in words."""
    if isinstance(value, list) and value:
        return f"a list of {'lists' if isinstance(value[0], list) else type(value[0]).__name__}"
    return "an empty list" if value == [] else type(value).__name__


def _content_text(content: Any, name: str) -> str:
    if content is None:
        return ""     # an assistant turn that only called tools wrote no text
    if isinstance(content, str):
        return content
    if isinstance(content, list):     # OpenAI content parts: [{"type": "text", "text": ...}]
        return "".join(p.get("text", "") for p in content
                       if isinstance(p, dict) and p.get("type", "text") == "text")
    raise ValueError(f"field {name!r}: the last assistant turn's content is "
                     f"{type(content).__name__}, not text")
