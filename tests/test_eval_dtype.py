"""`rlvr eval --dtype bfloat16`: opt-in, labelled, kept apart from float32 runs, and close to
the float32 policy's distribution."""
from __future__ import annotations

import pytest
import torch

import rlvr
import rlvr.envs.arithmetic  # noqa: F401  (registers `arithmetic` without the full discovery)
from rlvr.cli import main
from rlvr.trainer.evaluation.evaluate import EvalConfig, _sampler, run_eval

ENV_ARGS = {"n_terms": 2, "max_value": 9, "ops": "+"}
LOGP_TOLERANCE = 0.02
"""Largest |log p_bf16 - log p_fp32| allowed on a sampled token of the tiny model (nats)."""


def _cfg(model, **kw) -> EvalConfig:
    return EvalConfig(**{"env": "arithmetic", "env_kwargs": ENV_ARGS, "model": model,
                         "tasks": 2, "ks": (1, 4), "max_completion_length": 8, "bootstrap": 0,
                         "greedy": False, **kw})


def _token_logps(model, prompt: list[int], completion: list[int]) -> torch.Tensor:
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + completion])).logits[0].float()
    logp = torch.log_softmax(logits[len(prompt) - 1:-1], -1)
    return logp.gather(-1, torch.tensor(completion)[:, None])[:, 0]


def test_float32_is_the_default_and_bfloat16_runs_close_to_it(tiny_model, one_torch_thread):
    from rlvr.trainer.evaluation.evaluate import distinct_tasks
    from rlvr.trainer.sampling.rollout import encode_prompt
    assert EvalConfig().dtype == "float32"
    fp32, ident32 = _sampler(_cfg(tiny_model))
    bf16, ident16 = _sampler(_cfg(tiny_model, dtype="bfloat16"))
    assert next(fp32.model.parameters()).dtype == torch.float32 and "dtype" not in ident32
    assert next(bf16.model.parameters()).dtype == torch.bfloat16
    assert ident16["dtype"] == "bfloat16" and ident16["label"].endswith("(bfloat16)")
    env = rlvr.load_env("arithmetic", **ENV_ARGS)
    tasks = distinct_tasks(env, "test", 2)
    sampled = bf16.sample(tasks, 4, [1, 2], max_tokens=8, temperature=1.0)
    worst = 0.0
    for task, comps in zip(tasks, sampled):
        prompt = encode_prompt(bf16.tokenizer, task.prompt)
        for c in comps:
            diff = _token_logps(bf16.model, prompt, c.token_ids) - \
                _token_logps(fp32.model, prompt, c.token_ids)
            worst = max(worst, float(diff.abs().max()))
    assert 0 < worst < LOGP_TOLERANCE      # another numeric format: close, not equal


def test_a_float32_run_is_not_resumed_in_bfloat16(tiny_model, tmp_path, one_torch_thread):
    out = tmp_path / "e.json"
    run_eval(_cfg(tiny_model, tasks=1), out, progress=False)
    with pytest.raises(ValueError, match="other settings"):
        run_eval(_cfg(tiny_model, tasks=1, dtype="bfloat16"), out, progress=False)
    assert "dtype" not in EvalConfig().identity()       # runs from before the option resume


def test_an_unknown_dtype_or_one_for_an_endpoint_is_a_usage_error(tiny_model, capsys):
    assert main(["eval", "--model", tiny_model, "--dtype", "float16"]) == 2
    assert "dtype must be float32 or bfloat16" in capsys.readouterr().err
    with pytest.raises(ValueError, match="local models"):
        EvalConfig(endpoint="http://127.0.0.1:1", dtype="bfloat16")
