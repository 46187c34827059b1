"""Sharded training (`parallel = "fsdp"`, FSDP2) under `torchrun --nproc-per-node 2` with gloo
on CPU must train as one unsharded process does on the same global batch, write checkpoints
that resume at another world size, and train LoRA adapters."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from torch.distributed.checkpoint import FileSystemReader

from rlvr.trainer.config import TrainConfig
from rlvr.trainer.parallel.distributed import DistContext
from rlvr.trainer.parallel.fsdp import shard_models
from rlvr.trainer.models.loading import load_policy
from test_distributed import assert_same_metrics, rows, train

FSDP = ["parallel=fsdp", "gradient_checkpointing=true"]


def weights(run: Path, step: int):
    return load_policy(str(run / "checkpoints" / f"step-{step:06d}" / "policy"), "float32", "cpu")


def assert_same_weights(a, b):
    """Equal to float rounding: the ranks' gradients are summed in another order (~1e-6 after
    three AdamW steps of lr 1e-2; a wrong gradient moves weights by ~lr)."""
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-5, atol=1e-5, msg=name)


def test_two_sharded_ranks_train_like_one_process_and_resume_on_one(tiny_model, tmp_path):
    # PPO: policy, reference (KL in the reward) and critic all sharded. "The same run" is the
    # same global batch: 4 prompts x 3 completions, split 2 + 2 prompts over the ranks.
    common = ["preset=ppo", "steps=3", "checkpoint_every=2"]
    train(tiny_model, tmp_path / "one", *common)
    train(tiny_model, tmp_path / "two", *common, *FSDP, nproc=2)
    one, two = rows(tmp_path / "one" / "metrics.jsonl"), rows(tmp_path / "two" / "metrics.jsonl")
    assert_same_metrics(one, two)      # losses, value loss, KL, grad_norm (the summed gradient)
    assert two[0]["world_size"] == 2 and two[0]["samples/count"] == 12
    assert_same_weights(weights(tmp_path / "one", 3), weights(tmp_path / "two", 3))
    ckpt = tmp_path / "two" / "checkpoints" / "step-000002"
    assert not (ckpt / "critic.safetensors").exists()       # the critic is in the shards
    # each rank held (and wrote) half of every weight and AdamW moment: dim 0 split in two
    shards = FileSystemReader(str(ckpt / "sharded")).read_metadata().state_dict_metadata
    for name in ("model.policy.model.layers.0.mlp.up_proj.weight",
                 "optimizer.state.policy.model.layers.0.mlp.up_proj.weight.exp_avg",
                 "model.critic.backbone.layers.1.self_attn.q_proj.weight"):
        assert [c.offsets[0] for c in shards[name].chunks] == [0, shards[name].size[0] // 2], name
    config = json.loads((ckpt / "policy" / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]     # not the FSDP subclass
    # The checkpoint of step 2, written by 2 ranks, resumed by 1 process: step 3 again.
    part = tmp_path / "part"
    shutil.copytree(tmp_path / "two", part)
    (part / "checkpoints" / "latest").write_text("step-000002")
    train(None, None, "steps=3", resume=part)
    assert_same_metrics(one, rows(part / "metrics.jsonl"))
    assert_same_weights(weights(tmp_path / "one", 3), weights(part, 3))


def test_lora_adapters_train_sharded(tiny_model, tmp_path):
    lora = ["steps=2", "lora_rank=4", "lora_dropout=0.0", "beta=0.04"]
    train(tiny_model, tmp_path / "one", *lora)
    train(tiny_model, tmp_path / "two", *lora, *FSDP, nproc=2)
    assert_same_metrics(rows(tmp_path / "one" / "metrics.jsonl"),
                        rows(tmp_path / "two" / "metrics.jsonl"))
    a, b = [load_file(str(tmp_path / run / "checkpoints" / "step-000002" / "policy" /
                          "adapter_model.safetensors")) for run in ("one", "two")]
    assert a.keys() == b.keys() and any("lora_B" in k for k in a)
    for k in a:     # only the adapters are saved, and they moved from lora_B's zero start
        torch.testing.assert_close(b[k], a[k], rtol=1e-5, atol=1e-5, msg=k)
    assert any(a[k].abs().max() > 0 for k in a if "lora_B" in k)


def test_what_fsdp_cannot_run_is_refused_with_the_fix(tiny_model):
    policy = load_policy(tiny_model, "float32", "cpu")
    for bad, fix in [({"dynamic_sampling": True}, "dynamic_sampling=false"),
                     ({"prompts_per_step": 3}, "multiple of the 2 processes"),
                     ({"parallel": "zero3"}, "expected one of"),
                     ({"teacher": tiny_model}, "does not shard a distillation teacher")]:
        with pytest.raises(ValueError, match=fix):       # the config, or the sharding, refuses
            cfg = TrainConfig(model=tiny_model, **{"parallel": "fsdp", **bad})
            shard_models(cfg, DistContext(0, 2, 0), torch.device("cpu"), policy, None, None)
