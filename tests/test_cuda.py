"""The trainer on a CUDA GPU. CI has no GPU, so these skip there; the first three were run on an
H200 (see docs/trainer.md); the mixed-precision / LoRA / checkpointing test has not run on a GPU
yet. Tiny random models: the point is device placement, dtypes and the seeded sampler on the
GPU, not speed."""
from __future__ import annotations

import json
import math

import pytest
import torch

from rlvr.core import Task
from rlvr.trainer.config import TrainConfig
from rlvr.trainer.parallel.distributed import group_seeds
from rlvr.trainer.run.loop import Trainer
from rlvr.trainer.models.loading import load_policy, load_tokenizer
from rlvr.trainer.sampling.rollout import generate
from rlvr.trainer.models.tiny import build_tiny_model

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

TINY = {"prompts_per_step": 4, "group_size": 4, "max_completion_length": 16,
        "micro_batch_size": 8, "lr": 1e-2, "progress": False, "checkpoint_every": 0,
        "reward_deadline_s": 0, "tensorboard": False, "beta": 0.04,
        "env_kwargs": {"n_terms": 2, "max_value": 9, "prompt_style": "base", "format_weight": 1.0}}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def config(model, out, **kw) -> TrainConfig:
    return TrainConfig.from_preset("grpo", **{**TINY, "model": model, "output_dir": str(out),
                                              "steps": 2, **kw})


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_trains_and_resumes_on_the_gpu(tiny_model, tmp_path, dtype):
    tr = Trainer(config(tiny_model, tmp_path / "run", device="cuda", dtype=dtype))
    assert next(tr.policy.parameters()).device.type == "cuda"
    assert next(tr.policy.parameters()).dtype == torch.float32     # bf16 = mixed precision
    assert tr.share_prefix is False                  # share_prefix = "auto": off on CUDA
    tr.train()
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    for key in ("loss", "kl", "entropy", "grad_norm", "reward"):
        assert math.isfinite(rows[-1][key]), key
    assert rows[-1]["memory/peak_gib"] > 0          # torch.cuda.max_memory_allocated
    again = Trainer.resume(tmp_path / "run", steps=3)
    assert next(again.policy.parameters()).device.type == "cuda"
    again.train()


def test_gpu_update_matches_cpu_update_on_the_same_rollout(tiny_model, tmp_path):
    # Same weights, same rollout: loss, KL and gradient norm agree across devices (float32),
    # so nothing in prepare/update silently stays on (or moves to) the wrong device.
    cpu = Trainer(config(tiny_model, tmp_path / "cpu", device="cpu"))
    gpu = Trainer(config(tiny_model, tmp_path / "gpu", device="cuda"))
    rollout, _ = cpu.collect()
    a, b = cpu.update(cpu.prepare(rollout), True), gpu.update(gpu.prepare(rollout), True)
    for key in ("loss", "loss/policy", "kl", "entropy", "grad_norm"):
        assert b[key] == pytest.approx(a[key], rel=2e-3, abs=1e-5), key


def test_seeded_sampling_is_batch_independent_on_the_gpu(tiny_model):
    policy, tok = load_policy(tiny_model, "float32", torch.device("cuda")), load_tokenizer(tiny_model)
    tasks = [Task(f"t{i}", f"{i} + {i} =", str(2 * i)) for i in range(4)]
    seeds = group_seeds(0, 1, 1, count=4)
    whole = generate(policy, tok, tasks, 3, 12, share_prefix=True, seeds=seeds)
    half = generate(policy, tok, tasks[2:], 3, 12, share_prefix=True, seeds=seeds[2:])
    assert whole.completion_ids[6:] == half.completion_ids


@pytest.mark.parametrize("kw", [dict(dtype="bfloat16", lora_rank=8),
                                dict(dtype="bfloat16", gradient_checkpointing=True),
                                dict(lora_rank=8, gradient_checkpointing=True, share_prefix="true")])
def test_mixed_precision_lora_and_checkpointing_on_the_gpu(tiny_model, tmp_path, kw):
    if kw.get("lora_rank"):
        pytest.importorskip("peft")
    tr = Trainer(config(tiny_model, tmp_path / "run", device="cuda", lr=1e-6, **kw))
    before = {n: p.detach().clone() for n, p in tr.policy.named_parameters() if p.requires_grad}
    tr.train()
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    for key in ("loss", "kl", "grad_norm"):
        assert math.isfinite(rows[-1][key]), key
    moved = sum(int((p.detach() != before[n]).sum()) for n, p in tr.policy.named_parameters()
                if n in before)
    assert moved > 0.5 * sum(v.numel() for v in before.values())   # small-lr updates survive
    Trainer.resume(tmp_path / "run", steps=3).train()
