"""TRL's `GRPOTrainer` trained against an `rlvr serve` server.

    from trl import GRPOConfig, GRPOTrainer
    from rlvr.interop.trl import served_dataset, served_environment, served_reward

    url = "http://127.0.0.1:8000"                       # rlvr serve arithmetic --port 8000
    trainer = GRPOTrainer(model=..., args=GRPOConfig(...),
                          train_dataset=served_dataset(url, n=256),
                          environment_factory=served_environment(url),
                          reward_funcs=[served_reward])

TRL makes one environment instance per rollout and calls its `reset(**row)` before generating;
the instance opens its own WebSocket session and starts an episode on the row's `task_id` (so
the G rollouts of a group play the same task). The environment's tools become the instance's
methods, each call one `step` on the server (which runs the tool there, under its deadline).
`served_reward` sends the final assistant message as the last `step` and returns the server's
reward -- `None` when rlvr's verdict failed (TRL leaves `None` out of its baselines and losses)
or when the environment wants more turns than TRL's tool loop can give it (feedback
environments such as `code-feedback`).
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

__all__ = ["ServedEpisode", "served_environment", "served_reward", "served_dataset"]

_JSON_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool,
               "object": dict, "array": list}


def _client(url: str):
    from openenv import GenericEnvClient
    client = GenericEnvClient(base_url=url).sync()
    client.connect()
    return client


class ServedEpisode:
    """One rollout's session on the server (TRL's environment-factory protocol: `reset`, and
    tool methods added by `served_environment`). Every other public method would be offered to
    the model as a tool, so the rest is private."""

    def __init__(self, url: str):
        self.url = url
        self._client = _client(url)
        self.verdict: dict | None = None
        self.done = False

    def reset(self, task_id: str | None = None, **row: Any) -> None:
        """Start an episode on `task_id` (the row's); the prompt is the row's own."""
        self.verdict, self.done = None, False
        self._client.reset(task_id=task_id)
        return None

    def _step(self, content: str, tool_calls: list[dict] | None = None):
        result = self._client.step({"content": content, "tool_calls": tool_calls or []})
        if result.done:
            self.done, self.verdict = True, result.metadata or {}
        return result

    def _call_tool(self, name: str, arguments: dict) -> str:
        if self.done:
            return "Error: the episode is over."
        result = self._step("", [{"type": "function",
                                  "function": {"name": name, "arguments": arguments}}])
        messages = result.observation.get("messages") or []
        return "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "tool")

    def _finish(self, completion) -> float | None:
        """Send the final assistant message; the episode's reward, or None (failed verdict, or
        an episode the server did not end)."""
        if not self.done:
            result = self._step(_last_assistant_text(completion))
            if not result.done:
                return None
            return None if result.reward is None else float(result.reward)
        return None

    def _close(self) -> None:
        self._client.close()


def _last_assistant_text(completion) -> str:
    if isinstance(completion, str):
        return completion
    turns = [m for m in completion if m.get("role") == "assistant"]
    content = turns[-1].get("content") if turns else ""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def _tool_method(schema: dict) -> Callable:
    """A method that forwards one call to the server, with the signature and Google-style
    docstring transformers' `get_json_schema` reads back into `schema`."""
    fn = schema["function"]
    params = fn.get("parameters", {}).get("properties", {})
    required = set(fn.get("parameters", {}).get("required", params))
    name = fn["name"]

    def method(self, **arguments):
        return self._call_tool(name, arguments)
    annotations = {k: _JSON_TYPES.get(p.get("type"), str) for k, p in params.items()}
    method.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] + [
            inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, annotation=annotations[k],
                              default=inspect.Parameter.empty if k in required else None)
            for k in params], return_annotation=str)
    method.__annotations__ = {**annotations, "return": str}
    args = "\n".join(f"    {k}: {p.get('description', k)}" for k, p in params.items())
    method.__doc__ = f"{fn.get('description', name)}\n\nArgs:\n{args}\n" if params else \
        fn.get("description", name)
    method.__name__ = method.__qualname__ = name
    return method


def served_environment(url: str) -> Callable[[], ServedEpisode]:
    """TRL's `environment_factory` for the server at `url`: a class whose methods are the served
    environment's tools (read from one `reset`)."""
    probe = _client(url)
    try:
        tools = probe.reset().observation.get("tools") or []
    finally:
        probe.close()
    methods = {s["function"]["name"]: _tool_method(s) for s in tools}
    cls = type("RlvrServedEpisode", (ServedEpisode,), methods)
    return lambda: cls(url)


def served_reward(completions, environments, **kwargs) -> list[float | None]:
    """TRL reward function: each rollout's episode finished on the server, its reward (None for
    a failed verdict)."""
    return [env._finish(c) for c, env in zip(completions, environments)]


served_reward.__name__ = "rlvr"


def served_dataset(url: str, n: int, split: str = "train"):
    """A `datasets.Dataset` of the first `n` tasks of `split` on the server: `prompt` (chat
    messages) and `task_id` (which `ServedEpisode.reset` receives)."""
    import datasets
    client = _client(url)
    try:
        rows = []
        for i in range(n):
            obs = client.reset(split=split, index=i).observation
            rows.append({"prompt": obs["messages"], "task_id": obs["task_id"]})
    finally:
        client.close()
    return datasets.Dataset.from_list(rows)
