"""Tools for multi-turn episodes: plain typed Python functions the policy may call.

A tool is a function with type hints and a Google-style docstring; its JSON schema comes from
transformers' `get_json_schema` (the schema `apply_chat_template(..., tools=...)` renders).
Calls are read from the model's text in the Hermes/Qwen style

    <tool_call>{"name": "calculator", "arguments": {"expression": "12*34"}}</tool_call>

(several per turn allowed). Everything the policy can get wrong -- malformed JSON, an unknown
tool, bad arguments, a tool that raises or hangs -- becomes a tool message saying so and is
counted; it never stops the episode or the run. Every call runs in a pool worker under a hard
deadline (a hung tool's worker is killed and replaced); code-executing tools run their code in
rlvr's sandbox on top of that (`python_tool`).
"""
from __future__ import annotations

import ast
import inspect
import json
import operator
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

__all__ = ["ToolCall", "ToolResult", "parse_tool_calls", "strip_calls", "tool_schema", "Toolbox",
           "calculator", "python_tool", "HERMES_OPEN", "HERMES_CLOSE"]

HERMES_OPEN, HERMES_CLOSE = "<tool_call>", "</tool_call>"
_CALL = re.compile(re.escape(HERMES_OPEN) + r"(.*?)(?:" + re.escape(HERMES_CLOSE) + r"|$)",
                   re.DOTALL)


@dataclass
class ToolCall:
    """One call the policy wrote. `error` is set when the call itself is unreadable."""
    name: str = ""
    arguments: dict = field(default_factory=dict)
    raw: str = ""
    error: str = ""
    id: str = ""
    span: tuple = (0, 0)
    """Where the call (tags included) sits in the turn's text."""

    def to_message(self) -> dict:
        """The OpenAI/TRL form of a well-formed call (an assistant message's `tool_calls`)."""
        out = {"type": "function", "function": {"name": self.name, "arguments": self.arguments}}
        if self.id:
            out["id"] = self.id
        return out


@dataclass
class ToolResult:
    """What a call returned (as the tool message's text), and whether it failed."""
    name: str
    content: str
    error: bool = False
    kind: str = ""
    """'' for a good call; else malformed | unknown_tool | bad_arguments | raised | timeout."""

    def to_message(self, call_id: str = "") -> dict:
        msg = {"role": "tool", "name": self.name, "content": self.content}
        if call_id:
            msg["tool_call_id"] = call_id
        return msg


def parse_tool_calls(text: str) -> tuple[str, list[ToolCall]]:
    """(the text outside the calls, the calls in order) from a Hermes/Qwen-style turn.

    An unclosed `<tool_call>` (a turn cut by the token limit) is a malformed call, so is JSON
    that does not parse or lacks a string `name`. `arguments` may be an object or a JSON string
    holding one (OpenAI's wire form)."""
    calls = []
    for m in _CALL.finditer(text or ""):
        raw = m.group(1)
        closed = m.group(0).endswith(HERMES_CLOSE)
        call = _read_call(raw.strip(), closed)
        call.span = m.span()
        calls.append(call)
    return strip_calls(text or "", calls), calls


def strip_calls(text: str, calls: Sequence[ToolCall]) -> str:
    """`text` without the given calls' spans (the message content beside its `tool_calls`)."""
    out, at = [], 0
    for c in sorted(calls, key=lambda c: c.span):
        out.append(text[at:c.span[0]])
        at = max(at, c.span[1])
    out.append(text[at:])
    return "".join(out).strip()


def _read_call(raw: str, closed: bool) -> ToolCall:
    if not closed:
        return ToolCall(raw=raw, error=f"unclosed {HERMES_OPEN} (no {HERMES_CLOSE})")
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        return ToolCall(raw=raw, error=f"the call is not valid JSON ({exc.msg} at char {exc.pos})")
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return ToolCall(raw=raw, error='a call must be a JSON object {"name": ..., "arguments": {...}}')
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            args = None
    if not isinstance(args, dict):
        return ToolCall(name=obj["name"], raw=raw, error="'arguments' must be a JSON object")
    return ToolCall(name=obj["name"], arguments=args, raw=raw, id=str(obj.get("id", "")))


def tool_schema(fn: Callable) -> dict:
    """The function's JSON schema, as chat templates take it (transformers' `get_json_schema`:
    types from the hints, descriptions from the Google-style docstring's Args section)."""
    from transformers.utils import get_json_schema
    return get_json_schema(fn)


_JSON_TYPES = {"integer": (int,), "number": (int, float), "string": (str,), "boolean": (bool,),
               "array": (list,), "object": (dict,), "null": (type(None),)}


def _argument_problem(fn: Callable, schema: dict, args: dict) -> str:
    """'' when `args` fit the function, else what is wrong (host-side, before any call)."""
    try:
        inspect.signature(fn).bind(**args)
    except TypeError as exc:
        return str(exc)
    props = schema["function"].get("parameters", {}).get("properties", {})
    for name, value in args.items():
        want = props.get(name, {}).get("type")
        kinds = want if isinstance(want, list) else [want] if want else []
        ok = not kinds or any(isinstance(value, _JSON_TYPES.get(k, object))
                              and not (k in ("integer", "number") and isinstance(value, bool))
                              for k in kinds)
        if not ok:
            return f"argument {name!r} must be {' or '.join(kinds)}, got {type(value).__name__}"
    return ""


def _run_tool(tools: dict, item: tuple[str, dict]) -> str:
    """Inside a pool worker: call one tool, its result as text."""
    name, args = item
    out = tools[name](**args)
    return out if isinstance(out, str) else json.dumps(out, default=str)


class Toolbox:
    """The tools of an environment: their schemas, and their calls run under a deadline.

    Calls go to `pool` (default: rlvr's process-wide worker pool) in one batch, so the tool
    calls of a whole rollout run in parallel; a call past `deadline_s` is `timeout` and its worker
    is killed. `max_result_chars` truncates what a tool returns (the context is finite)."""

    def __init__(self, tools: Sequence[Callable], deadline_s: float = 10.0,
                 max_result_chars: int = 2000, pool=None):
        self.tools = {fn.__name__: fn for fn in tools}
        if len(self.tools) != len(tools):
            raise ValueError(f"tool names must be unique, got {[f.__name__ for f in tools]}")
        self.deadline_s, self.max_result_chars, self.pool = deadline_s, max_result_chars, pool
        self._schemas: list[dict] | None = None

    @property
    def schemas(self) -> list[dict]:
        """JSON schemas, built on first use (scoring workers that never render a prompt skip
        importing transformers)."""
        if self._schemas is None:
            self._schemas = [tool_schema(fn) for fn in self.tools.values()]
        return self._schemas

    @property
    def _schema(self) -> dict:
        return {s["function"]["name"]: s for s in self.schemas}

    def __getstate__(self):       # a pool holds processes; a copy uses the receiver's own
        return {**self.__dict__, "pool": None}

    def check(self, call: ToolCall) -> ToolResult | None:
        """The error result for a call that cannot run, or None when it may."""
        if call.error:
            return ToolResult(call.name or "?", f"Error: malformed tool call: {call.error}.",
                              True, "malformed")
        if call.name not in self.tools:
            return ToolResult(call.name, f"Error: unknown tool {call.name!r}; available: "
                                         f"{', '.join(self.tools)}.", True, "unknown_tool")
        problem = _argument_problem(self.tools[call.name], self._schema[call.name],
                                    call.arguments)
        if problem:
            return ToolResult(call.name, f"Error: bad arguments for {call.name}: {problem}.",
                              True, "bad_arguments")
        return None

    def run(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """Every call's result, in order (checked on the host, run in the pool)."""
        results: list[ToolResult | None] = [self.check(c) for c in calls]
        todo = [i for i, r in enumerate(results) if r is None]
        if todo:
            from rlvr.pool import Factory, default_pool
            pool = self.pool or default_pool()
            outcomes = pool.map(_run_tool, [(calls[i].name, calls[i].arguments) for i in todo],
                                deadline_s=self.deadline_s, context=Factory.of(self.tools))
            for i, o in zip(todo, outcomes):
                results[i] = self._result(calls[i].name, o)
        return results  # type: ignore[return-value]

    def _result(self, name: str, outcome) -> ToolResult:
        if outcome.status == "ok":
            text = outcome.value
            if len(text) > self.max_result_chars:
                text = text[:self.max_result_chars] + f"... [truncated, {len(text)} chars]"
            return ToolResult(name, text)
        if outcome.status == "timeout":
            return ToolResult(name, f"Error: {name} did not finish within {self.deadline_s:g} s "
                                    "and was stopped.", True, "timeout")
        return ToolResult(name, f"Error: {name} raised {outcome.error[:500]}", True, "raised")


# --------------------------------------------------------------------------- built-in tools

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.USub: operator.neg,
        ast.UAdd: operator.pos}
_MAX_DIGITS = 1000


def _eval_node(node) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _eval_node(node.left), _eval_node(node.right)
        if isinstance(node.op, ast.Mult) and \
                abs(left).bit_length() + abs(right).bit_length() > _MAX_DIGITS * 3.33:
            raise ValueError("result too large")
        return _OPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval_node(node.operand))
    raise ValueError(f"unsupported expression element {type(node).__name__}")


def calculator(expression: str) -> str:
    """Evaluate an integer arithmetic expression exactly.

    Args:
        expression: Integers combined with + - * // % and parentheses, e.g. "(12 + 3) * 4".
    """
    # Our own AST walk, not eval(): the expression is model text.
    tree = ast.parse(expression.strip(), mode="eval")
    return str(_eval_node(tree.body))


PYTHON_LIMITS = {"wall_s": 5.0, "cpu_s": 5.0, "memory_mb": 512}
PYTHON_STDOUT_CHARS = 1000


def python_tool(code: str) -> str:
    """Run a Python program in a fresh sandbox and return what it printed.

    Args:
        code: A complete Python program; print the values you need. Nothing persists between calls.
    """
    from rlvr.sandbox.base import Limits
    from rlvr.verifiers.code import shared_sandbox
    res = shared_sandbox("process").run(code, limits=Limits(**PYTHON_LIMITS))
    if res.status == "infra_error":
        raise RuntimeError(f"sandbox unavailable: {res.reason}")
    out = res.stdout
    if len(out) > PYTHON_STDOUT_CHARS:
        out = out[:PYTHON_STDOUT_CHARS] + f"\n... [stdout truncated, {len(res.stdout)} chars]"
    if res.status != "ok" or res.exit_code:
        tail = res.stderr.strip().splitlines()[-3:]
        why = res.reason or res.status
        return (out + "\n" if out else "") + f"[{why}] " + " | ".join(tail)[-500:]
    return out or "(no output; print the values you need)"


python_tool.__name__ = "python"     # the name the model sees and calls
