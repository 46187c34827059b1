"""Rollouts from an inference server (`rollout_engine = "server"`).

The trainer samples through an OpenAI-compatible `/v1/completions` endpoint -- vLLM's
(`vllm serve`) or SGLang's (`python -m sglang.launch_server`) -- sending the prompt as token ids
and asking for the sampled token ids (`return_token_ids`) and each token's log-prob
(`logprobs`), so the update trains on exactly the tokens the server drew and can compare the
server's probabilities with its own. One request per prompt (n = G samples, the group's seed),
`server_concurrency` in flight; many replicas behind one URL are the server's business.

Every `sync_every` steps the policy is written to `server_weights_dir` (a transformers folder:
safetensors and config) and the server is told to reload it through its own API: a named
strategy in `SYNC_STRATEGIES` ('sglang', 'vllm', 'none'; add one by adding a row). Between syncs
the samples are up to `sync_every - 1` updates stale; the update corrects for it with truncated
importance sampling (trainer/objective/importance.py).

Failures: the client retries each request (`server_retries`, with backoff, on connection errors,
timeouts, 408/409/429 and 5xx answers: the `openai` package's own retries). A request that still
fails refuses the whole step with one `ServerError` line naming the URL and the fix: nothing of
the step is trained, and the run folder resumes from its last checkpoint.
"""
from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rlvr.core import Completion
from rlvr.usage import require_extra

from rlvr.trainer.objective import importance
from rlvr.trainer.sampling.episodes import Continuation
from rlvr.trainer.sampling.rollout import Rollout, encode_prompt, eos_ids

__all__ = ["ServerEngine", "ServerError", "SYNC_STRATEGIES", "SGLangSync", "VLLMSync", "NoSync"]

_TOKEN_ID = re.compile(r"token_id:(\d+)")


class ServerError(RuntimeError):
    """The rollout server failed a request after every retry, or refused a weight sync."""


def _post(url: str, body: dict, timeout: float) -> dict:
    """POST a JSON body to the server's own (non-OpenAI) API; its JSON answer, or ServerError."""
    import httpx
    try:
        r = httpx.post(url, json=body, timeout=timeout)
    except httpx.HTTPError as exc:
        raise ServerError(f"{url}: {type(exc).__name__} ({exc}); is the server up and "
                          "server_timeout_s long enough for a reload?") from exc
    if r.status_code >= 400:
        raise ServerError(f"{url} answered {r.status_code}: {' '.join(r.text[:300].split())}; "
                          "the weights were not synced (resume the run from its last checkpoint)")
    return r.json() if r.content and "json" in r.headers.get("content-type", "") else {}


class SGLangSync:
    """SGLang: `POST /update_weights_from_disk {"model_path": DIR}` loads the folder in place
    (the server pauses generation while it loads)."""

    def check(self, root: str, weights_dir: Path, served_root: str | None) -> None:
        pass                                 # any folder the server can read

    def reload(self, root: str, weights_dir: Path, timeout: float) -> None:
        answer = _post(f"{root}/update_weights_from_disk", {"model_path": str(weights_dir)},
                       timeout)
        if answer.get("success") is False:
            raise ServerError(f"{root}/update_weights_from_disk refused {weights_dir}: "
                              f"{answer.get('message', answer)}")


class VLLMSync:
    """vLLM: the server must serve `server_weights_dir` itself (`vllm serve DIR`) with
    `VLLM_SERVER_DEV_MODE=1`; a sync calls `POST /collective_rpc {"method": "reload_weights"}`
    (each worker re-reads its model folder in place) and `POST /reset_prefix_cache` (cached
    prefixes were computed by the old weights)."""

    def check(self, root: str, weights_dir: Path, served_root: str | None) -> None:
        if served_root is not None and Path(served_root).resolve() != weights_dir.resolve():
            raise ServerError(f"server_sync='vllm' reloads the folder the server was started on, "
                              f"but {root} serves {served_root}: start `vllm serve {weights_dir}` "
                              "or set server_weights_dir to that folder")

    def reload(self, root: str, weights_dir: Path, timeout: float) -> None:
        _post(f"{root}/collective_rpc", {"method": "reload_weights", "timeout": timeout}, timeout)
        _post(f"{root}/reset_prefix_cache", {}, timeout)


class NoSync:
    """Never push weights: the server keeps sampling from what it loaded (the correction then
    measures, and truncates, the whole drift)."""

    def check(self, root: str, weights_dir: Path, served_root: str | None) -> None:
        pass

    def reload(self, root: str, weights_dir: Path, timeout: float) -> None:
        pass


SYNC_STRATEGIES = {"sglang": SGLangSync, "vllm": VLLMSync, "none": NoSync}


def _is_main() -> bool:
    import torch.distributed as dist
    return not dist.is_initialized() or dist.get_rank() == 0


def _barrier() -> None:
    import torch.distributed as dist
    if dist.is_initialized():
        dist.barrier()


def check_settings(cfg) -> None:
    """Refuse server settings that cannot work, naming the fix (ValueError: exit 2 in the CLI)."""
    if not cfg.server_url:
        raise ValueError("rollout_engine='server' needs server_url, e.g. "
                         "server_url=http://localhost:8000/v1")
    if cfg.server_sync not in SYNC_STRATEGIES:
        raise ValueError(f"server_sync={cfg.server_sync!r}; choose from "
                         f"{', '.join(SYNC_STRATEGIES)}")
    importance.check_settings(cfg)
    if cfg.sync_every < 1 or cfg.server_concurrency < 1 or cfg.server_retries < 0 \
            or cfg.server_timeout_s <= 0:
        raise ValueError("need sync_every >= 1, server_concurrency >= 1, server_retries >= 0 "
                         "and server_timeout_s > 0")
    if cfg.lora_rank:
        raise ValueError("LoRA with rollout_engine='server' is not supported: the server "
                         "reloads whole models; use full fine-tuning or rollout_engine='hf'")


class ServerEngine:
    """The rollout-engine interface (trainer/sampling/engines.py) over an OpenAI-compatible server."""

    def __init__(self, cfg, policy, tokenizer):
        check_settings(cfg)
        openai = require_extra("openai", "openai", "rollout_engine='server'")
        self.cfg, self.policy, self.tokenizer = cfg, policy, tokenizer
        self.url = cfg.server_url.rstrip("/")
        self.root = self.url[:-3] if self.url.endswith("/v1") else self.url
        self.weights_dir = Path(cfg.server_weights_dir or Path(cfg.output_dir) / "server_weights")
        self.sync = SYNC_STRATEGIES[cfg.server_sync]()
        self.client = openai.OpenAI(base_url=self.url, api_key=os.environ.get(
            "OPENAI_API_KEY") or "EMPTY", max_retries=cfg.server_retries,
            timeout=cfg.server_timeout_s)
        self.pool = ThreadPoolExecutor(cfg.server_concurrency, thread_name_prefix="rlvr-server")
        self.eos = eos_ids(tokenizer, policy)
        self.model, served_root = self._served_model()
        self.sync.check(self.root, self.weights_dir, served_root)
        self.steps = 0

    def _served_model(self) -> tuple[str, str | None]:
        """(model name to send, the folder the server loaded when it says so)."""
        models = self._call(self.client.models.list).data
        listed = {m.id: getattr(m, "root", None) for m in models}
        name = self.cfg.server_model or next(iter(listed), "")
        if not name:
            raise ServerError(f"{self.url}/models lists no model: set server_model")
        return name, listed.get(name)

    def _call(self, fn, *args, **kw):
        """One client call; the client's exceptions, once its retries are spent, as one line."""
        import openai
        try:
            return fn(*args, **kw)
        except openai.APITimeoutError as exc:
            raise ServerError(f"{self.url} did not answer within server_timeout_s="
                              f"{self.cfg.server_timeout_s} after {self.cfg.server_retries} "
                              "retries: raise server_timeout_s or check the server; this step "
                              "was not trained (resume the run from its last checkpoint)") from exc
        except openai.APIConnectionError as exc:
            raise ServerError(f"cannot reach {self.url} after {self.cfg.server_retries} retries "
                              f"({exc.__cause__ or exc}): is the server running at server_url?"
                              ) from exc
        except openai.APIStatusError as exc:
            code = exc.status_code
            retried = code in (408, 409, 429) or code >= 500    # the client's retried answers
            after = f" after {self.cfg.server_retries} retries" if retried else ""
            raise ServerError(f"{self.url} answered {code}{after}: {' '.join(exc.message.split())}"
                              "; this step was not trained (resume the run from its last "
                              "checkpoint)") from exc

    # --- sampling ----------------------------------------------------------------------------
    def _request(self, prompt: list[int], n: int, max_new: int, temperature: float,
                 top_p: float, greedy: bool, seed: int | None) -> list[tuple]:
        """n samples of one prompt: [(token ids, their log-probs, finish reason)]."""
        kw = dict(model=self.model, prompt=prompt, n=n, max_tokens=max_new, logprobs=1,
                  temperature=0.0 if greedy else temperature, top_p=1.0 if greedy else top_p,
                  # the rest of the sampler off, whatever the server's defaults: samples must
                  # come from softmax(logits / T) for the ratio to the trainer's to hold
                  extra_body={"return_token_ids": True, "return_tokens_as_token_ids": True,
                              "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0,
                              "skip_special_tokens": False})
        if seed is not None:
            kw["seed"] = seed % (2**31 - 1)
        resp = self._call(self.client.completions.create, **kw)
        if len(resp.choices) != n:
            raise ServerError(f"{self.url} returned {len(resp.choices)} samples for n={n}")
        return [self._sample(c) for c in sorted(resp.choices, key=lambda c: c.index)]

    def _sample(self, choice) -> tuple[list[int], list[float], str]:
        lp = choice.logprobs
        ids = getattr(choice, "token_ids", None)
        if ids is None and lp is not None:      # vLLM before return_token_ids: "token_id:N"
            found = [_TOKEN_ID.fullmatch(t or "") for t in lp.tokens]
            ids = [int(m.group(1)) for m in found] if all(found) else None
        if ids is None or lp is None or lp.token_logprobs is None:
            raise ServerError(f"{self.url} returned no token ids or log-probs: it needs "
                              "return_token_ids and logprobs (vLLM >= 0.10.2, SGLang with "
                              "return_token_ids)")
        logps = [float(x) for x in lp.token_logprobs]
        if len(logps) != len(ids):
            raise ServerError(f"{self.url} returned {len(logps)} log-probs for {len(ids)} tokens")
        return list(ids), logps, "length" if choice.finish_reason == "length" else "stop"

    def _all(self, jobs: list[tuple]) -> list:
        """Run `_request(*job)` for every job, `server_concurrency` at a time; the first failure
        cancels the rest and refuses the batch (never a partial rollout)."""
        futures = [self.pool.submit(self._request, *job) for job in jobs]
        try:
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            raise

    def generate(self, tasks, group_size, max_new_tokens, *, temperature=1.0, top_p=1.0,
                 greedy=False, seeds=None) -> Rollout:
        prompts = [encode_prompt(self.tokenizer, t.prompt, t.metadata.get("tools")) for t in tasks]
        results = self._all([(p, group_size, max_new_tokens, temperature, top_p, greedy,
                              None if seeds is None or greedy else seeds[i])
                             for i, p in enumerate(prompts)])
        out = Rollout([], [], [], [], group_size=group_size, sampler_logp=[])
        for task, prompt, samples in zip(tasks, prompts, results):
            for ids, logps, finish in samples:
                stop = next((i for i, t in enumerate(ids) if t in self.eos), None)
                if stop is not None:                  # cut after the first EOS, kept
                    ids, logps, finish = ids[:stop + 1], logps[:stop + 1], "stop"
                ids, logps = ids[:max_new_tokens], logps[:max_new_tokens]
                text = self.tokenizer.decode(ids[:-1] if stop is not None else ids,
                                             skip_special_tokens=True)
                out.tasks.append(task)
                out.prompt_ids.append(prompt)
                out.completion_ids.append(ids)
                out.completions.append(Completion(text, ids, finish))
                out.sampler_logp.append(logps)
        return out

    def generate_ids(self, contexts: list[list[int]], max_new: int, *, temperature=1.0,
                     top_p=1.0, greedy=False, seeds=None) -> list[Continuation]:
        """One continuation per token context: a multi-turn episode's next turn, its ids with
        the server's log-prob of each."""
        results = self._all([(c, 1, max_new, temperature, top_p, greedy,
                              None if seeds is None or greedy else seeds[i])
                             for i, c in enumerate(contexts)])
        return [Continuation(ids, logps) for (ids, logps, _), *_ in results]

    # --- weights -----------------------------------------------------------------------------
    def sync_weights(self, policy) -> None:
        """Called after every update: every `sync_every`-th call pushes the policy."""
        self.steps += 1
        if self.steps % self.cfg.sync_every == 0:
            self.push(policy)

    def push(self, policy) -> None:
        """Write the policy to `server_weights_dir` and have the server reload it (rank 0;
        the other ranks wait, so no rank samples from half-loaded weights)."""
        self.policy = policy
        if _is_main():
            self.weights_dir.mkdir(parents=True, exist_ok=True)
            policy.save_pretrained(self.weights_dir, safe_serialization=True)
            if not (self.weights_dir / "tokenizer_config.json").exists():
                self.tokenizer.save_pretrained(self.weights_dir)
            self.sync.reload(self.root, self.weights_dir, self.cfg.server_timeout_s)
        _barrier()

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        self.client.close()
