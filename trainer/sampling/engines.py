"""Rollout engines: what turns prompts into completions for the trainer.

The trainer talks to one small interface, so a faster inference engine can replace the default
without touching the loop:

    rollout = engine.generate(tasks, group_size, max_new_tokens, temperature=..., seeds=...)
    ...                                     # score, update the policy
    engine.sync_weights(policy)             # the next rollout samples from the new weights

- `HFEngine` (default, `rollout_engine = "hf"`): samples from the policy module itself (our
  shared-prefix KV-cache sampler, or Hugging Face `generate`), so syncing weights is a no-op.
  This is the engine the test suite runs.
- `VLLMEngine` (`rollout_engine = "vllm"`, `pip install rlvr[vllm]`): a vLLM `LLM` colocated on
  the trainer's GPU; after every update the policy's weights are loaded into it in place. vLLM
  is imported only when this engine is built. It needs a CUDA GPU and is NOT exercised by the
  test suite (our CI has none); its glue is written against vLLM's documented `LLM.generate`
  (token-id prompts, per-request seeds) and `LLM.apply_model` APIs.
- `ServerEngine` (`rollout_engine = "server"`, trainer/sampling/server_engine.py): an OpenAI-compatible
  completions server (vLLM, SGLang) samples, returning each token's log-prob; every
  `sync_every` steps the policy is written to a shared folder and the server reloads it.
  Tested against a small server the tests start (tests/server_for_tests.py).
"""
from __future__ import annotations

import os
from typing import Protocol, runtime_checkable

from rlvr.core import Completion, Task
from rlvr.usage import require_extra

from rlvr.trainer.sampling.rollout import (Rollout, _hf_generate, _seeded, encode_prompt, eos_ids, generate,
                      sample_continuations)

__all__ = ["RolloutEngine", "HFEngine", "VLLMEngine", "make_engine", "ENGINES"]


@runtime_checkable
class RolloutEngine(Protocol):
    """Samples G completions per task from the current policy."""

    def generate(self, tasks: list[Task], group_size: int, max_new_tokens: int, *,
                 temperature: float = 1.0, top_p: float = 1.0, greedy: bool = False,
                 seeds: list[int] | None = None) -> Rollout:
        """A Rollout with rows g*G .. g*G+G-1 for task g (unscored); `seeds`: one per task."""

    def generate_ids(self, contexts: list[list[int]], max_new: int, *, temperature: float = 1.0,
                     top_p: float = 1.0, greedy: bool = False,
                     seeds: list[int] | None = None) -> list[list[int]]:
        """One continuation per token context (ids, uncut at EOS); `seeds`: one per context.
        Multi-turn episodes continue their conversations through it."""

    def sync_weights(self, policy) -> None:
        """Make the next `generate` sample from `policy`'s current weights."""


class HFEngine:
    """Generation with the training policy module itself (transformers). `with_entropy`: sampled
    rollouts carry each token's sampling entropy (`Rollout.token_entropy`), the policy's own at
    inner step 1, so the update need not run a forward just to measure it."""

    def __init__(self, policy, tokenizer, batch_size: int = 0, share_prefix: bool = True,
                 with_entropy: bool = False):
        self.policy, self.tokenizer = policy, tokenizer
        self.batch_size, self.share_prefix = batch_size, share_prefix
        self.with_entropy = with_entropy
        self.record = None        # a TokenRecord: partial rollouts (trainer/sampling/process_engine.py)

    def generate(self, tasks, group_size, max_new_tokens, *, temperature=1.0, top_p=1.0,
                 greedy=False, seeds=None) -> Rollout:
        return generate(self.policy, self.tokenizer, tasks, group_size, max_new_tokens,
                        temperature, top_p, greedy, batch_size=self.batch_size,
                        share_prefix=self.share_prefix, seeds=seeds,
                        with_entropy=self.with_entropy, record=self.record)

    def generate_ids(self, contexts: list[list[int]], max_new: int, *, temperature=1.0,
                     top_p=1.0, greedy=False, seeds=None) -> list[list[int]]:
        """One continuation per token context (ids, uncut): a multi-turn episode's next turn."""
        model, tok = self.policy, self.tokenizer
        eos, per = eos_ids(tok, model), self.batch_size or len(contexts)
        out = []
        for start in range(0, len(contexts), per):
            chunk = contexts[start:start + per]
            chunk_seeds = None if seeds is None or greedy else seeds[start:start + per]
            if self.share_prefix:
                out += sample_continuations(model, chunk, max_new, eos, tok.pad_token_id,
                                            temperature, top_p, greedy, seeds=chunk_seeds)
            else:
                with _seeded(chunk_seeds[0] if chunk_seeds else None, model):
                    out += _hf_generate(model, chunk, 1, max_new, eos, tok.pad_token_id,
                                        temperature, top_p, greedy)
        return out

    def sync_weights(self, policy) -> None:
        self.policy = policy        # same module object: nothing to copy


class VLLMEngine:
    """vLLM colocated with the trainer: fast batched sampling, weights pushed after each update.

    `VLLM_ENABLE_V1_MULTIPROCESSING=0` keeps vLLM's engine in this process, so `sync_weights`
    hands it the policy's tensors without serialising them (the same colocated set-up TRL uses).
    """

    def __init__(self, model: str, tokenizer, dtype: str = "bfloat16",
                 gpu_memory_utilization: float = 0.3, max_model_len: int = 4096, seed: int = 0):
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        vllm = require_extra("vllm", "vllm", "rollout_engine='vllm' (needs a CUDA GPU)",
                             "or use rollout_engine='hf'")
        self.vllm, self.tokenizer = vllm, tokenizer
        self.llm = vllm.LLM(model=model, dtype=dtype, seed=seed, enable_prefix_caching=True,
                            gpu_memory_utilization=gpu_memory_utilization,
                            max_model_len=max_model_len)

    def _params(self, n: int, max_new: int, temperature: float, top_p: float, greedy: bool,
                seed: int | None):
        return self.vllm.SamplingParams(
            n=n, max_tokens=max_new, temperature=0.0 if greedy else temperature,
            top_p=1.0 if greedy else top_p, top_k=-1, seed=seed, skip_special_tokens=True)

    def generate(self, tasks, group_size, max_new_tokens, *, temperature=1.0, top_p=1.0,
                 greedy=False, seeds=None) -> Rollout:
        # the environment's tool schemas in the prompt, as the HF engine renders them
        prompts = [encode_prompt(self.tokenizer, t.prompt, t.metadata.get("tools")) for t in tasks]
        params = [self._params(group_size, max_new_tokens, temperature, top_p, greedy,
                               None if seeds is None else seeds[i]) for i in range(len(tasks))]
        outputs = self.llm.generate([{"prompt_token_ids": p} for p in prompts], params,
                                    use_tqdm=False)
        out = Rollout([], [], [], [], group_size=group_size)
        for task, ids, result in zip(tasks, prompts, outputs):
            for sample in result.outputs:
                stop = sample.finish_reason == "stop"
                token_ids = list(sample.token_ids)       # ends with EOS when it stopped
                out.tasks.append(task)
                out.prompt_ids.append(ids)
                out.completion_ids.append(token_ids)
                out.completions.append(Completion(sample.text, token_ids,
                                                  "stop" if stop else "length"))
        return out

    def generate_ids(self, contexts: list[list[int]], max_new: int, *, temperature=1.0,
                     top_p=1.0, greedy=False, seeds=None) -> list[list[int]]:
        """One continuation per token context (ids, uncut): a multi-turn episode's next turn."""
        params = [self._params(1, max_new, temperature, top_p, greedy,
                               None if seeds is None else seeds[i]) for i in range(len(contexts))]
        outs = self.llm.generate([{"prompt_token_ids": c} for c in contexts], params,
                                 use_tqdm=False)
        return [list(o.outputs[0].token_ids) for o in outs]

    def sync_weights(self, policy) -> None:
        weights = [(name, p.detach()) for name, p in policy.state_dict().items()]
        self.llm.apply_model(lambda model: model.load_weights(weights))
        self.llm.reset_prefix_cache()     # cached prefixes were computed by the old weights


ENGINES = ("hf", "vllm", "server")


def make_engine(name: str, policy, tokenizer, cfg, share_prefix: bool | None = None) -> RolloutEngine:
    """The engine a TrainConfig asks for (`rollout_engine`); `share_prefix` overrides the
    config's (the trainer turns it off where the fast path's internals are unavailable)."""
    if name == "hf":
        if share_prefix is None:
            share_prefix = cfg.prefix_sharing(next(policy.parameters()).device.type)
        return HFEngine(policy, tokenizer, cfg.generation_batch_size, share_prefix,
                        with_entropy=True)
    if name == "vllm":
        from rlvr.trainer.models.loading import resolve_model
        engine = VLLMEngine(resolve_model(cfg.model), tokenizer, dtype=cfg.dtype,
                            gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
                            seed=cfg.seed)
        engine.sync_weights(policy)       # a resumed run's policy differs from cfg.model
        return engine
    if name == "server":
        from rlvr.trainer.sampling.server_engine import ServerEngine
        engine = ServerEngine(cfg, policy, tokenizer)
        engine.push(policy)               # the server starts from the trainer's policy
        return engine
    raise ValueError(f"unknown rollout_engine {name!r}; choose from {', '.join(ENGINES)}")
