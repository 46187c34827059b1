"""Sampling from any OpenAI-compatible endpoint for `rlvr eval --endpoint URL`.

vLLM (`vllm serve MODEL`), SGLang, llama.cpp's server and hosted APIs all speak the OpenAI
chat/completions protocol, so one client covers them: the official `openai` package
(`pip install 'rlvr[openai]'`), whose retries (exponential backoff on connection errors,
timeouts, 408/409/429 and 5xx answers) and per-request timeout we configure rather than
re-implement. Chat-message prompts go to `/chat/completions`, plain-string prompts (base-model
templates) to `/completions`.

Each task's n samples are one request (`n`, split into several when `n_per_request` is set),
carrying the task's seed: vLLM and SGLang honour it per request, so a task's samples do not
depend on what else is in flight; hosted APIs treat it as best effort. Requests run `concurrency`
at a time. A task whose request still fails after the retries is reported as failed (never as
a wrong answer): `rlvr eval` leaves it out, says so, and a rerun samples it again.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from rlvr.core import Completion
from rlvr.usage import require_extra

__all__ = ["EndpointConfig", "EndpointSampler", "EndpointError"]


class EndpointError(RuntimeError):
    """A request that failed after every retry (server error, timeout, refused connection)."""


@dataclass
class EndpointConfig:
    """Where and how to reach the server."""
    url: str
    """Base URL, e.g. http://localhost:8000/v1."""
    model: str
    """Model name the server serves."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the key; unset = "EMPTY" (local servers need none)."""
    concurrency: int = 8
    """Requests in flight at once."""
    retries: int = 3
    """Retries per request after the first attempt (the client backs off between them)."""
    timeout_s: float = 120.0
    """Deadline per attempt."""
    n_per_request: int = 0
    """Most samples one request asks for (0 = all n in one request)."""

    def __post_init__(self):
        if not self.url:
            raise ValueError("endpoint URL is empty")
        if self.concurrency < 1 or self.retries < 0 or self.timeout_s <= 0:
            raise ValueError("need concurrency >= 1, retries >= 0 and timeout_s > 0")


def _client(cfg: EndpointConfig):
    openai = require_extra("openai", "openai", "--endpoint (an OpenAI-compatible server)")
    key = os.environ.get(cfg.api_key_env) or "EMPTY"
    return openai.OpenAI(base_url=cfg.url, api_key=key, max_retries=cfg.retries,
                         timeout=cfg.timeout_s)


def _finish(reason) -> str:
    return "length" if reason == "length" else "stop"


class EndpointSampler:
    """The sampler interface of trainer/evaluation/evaluate.py over an OpenAI-compatible server."""

    def __init__(self, cfg: EndpointConfig):
        self.cfg = cfg
        self.client = _client(cfg)         # fails here, before any task runs
        self.pool = ThreadPoolExecutor(cfg.concurrency, thread_name_prefix="rlvr-endpoint")

    def tasks_per_call(self, n: int) -> int:
        return self.cfg.concurrency

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        self.client.close()

    def sample(self, tasks, n: int, seeds: list[int] | None, *, max_tokens: int,
               temperature: float = 1.0, top_p: float = 1.0, greedy: bool = False) -> list:
        """n Completions per task, or an EndpointError in place of a task whose request failed."""
        futures = [self.pool.submit(self._task, t.prompt, n, None if seeds is None else seeds[i],
                                    max_tokens, temperature, top_p, greedy)
                   for i, t in enumerate(tasks)]
        out = []
        for f in futures:
            try:
                out.append(f.result())
            except EndpointError as exc:
                out.append(exc)
        return out

    def _task(self, prompt, n, seed, max_tokens, temperature, top_p, greedy) -> list[Completion]:
        per = self.cfg.n_per_request or n
        got: list[Completion] = []
        part = 0
        while len(got) < n:
            want = min(per, n - len(got))
            s = None if seed is None else (seed + part) % (2**31 - 1)   # servers take int32/64
            got += self._request(prompt, want, s, max_tokens, temperature, top_p, greedy)
            part += 1
        return got[:n]

    def _request(self, prompt, n, seed, max_tokens, temperature, top_p, greedy):
        import openai
        kw = dict(model=self.cfg.model, n=n, max_tokens=max_tokens,
                  temperature=0.0 if greedy else temperature, top_p=1.0 if greedy else top_p)
        if seed is not None:
            kw["seed"] = seed
        try:
            if isinstance(prompt, str):
                resp = self.client.completions.create(prompt=prompt, **kw)
                texts = [(c.text, c.finish_reason) for c in resp.choices]
            else:
                resp = self.client.chat.completions.create(messages=prompt, **kw)
                texts = [(c.message.content or "", c.finish_reason) for c in resp.choices]
        except openai.OpenAIError as exc:
            cause = f" ({exc.__cause__})" if exc.__cause__ else ""    # e.g. connection refused
            raise EndpointError(f"{type(exc).__name__} from {self.cfg.url} after "
                                f"{self.cfg.retries} retries: {exc}{cause}") from exc
        if len(texts) != n:
            raise EndpointError(f"asked for {n} samples, the server returned {len(texts)} "
                                "(set n_per_request for servers that cap n)")
        return [Completion(text, None, _finish(reason)) for text, reason in texts]
