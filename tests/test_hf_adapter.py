"""The transformers adapter's contract (trainer/forwards/hf_adapter.py): it holds on the installed
transformers, it fails loudly -- naming the version and the internal -- when an internal it
relies on moves (simulated here by taking each one away), and the trainer then falls back to
the reference forward with one warning instead of crashing mid-step."""
from __future__ import annotations

import inspect
import warnings

import pytest
import torch
import transformers
from transformers import cache_utils

from rlvr.trainer.forwards import hf_adapter
from rlvr.trainer.config import TrainConfig
from rlvr.trainer.forwards.fast import FastForward
from rlvr.trainer.run.loop import Trainer
from rlvr.trainer.models.loading import load_policy
from rlvr.trainer.forwards.reference import ReferenceForward


@pytest.fixture
def policy(tiny_model):
    return load_policy(tiny_model, "float32", torch.device("cpu"))


def test_the_contract_holds_on_the_installed_transformers(policy):
    hf_adapter.check_contract(policy)
    assert hf_adapter.contract_holds(policy) is None


def _drop_cache_method(monkeypatch, name):
    for cls in (cache_utils.Cache, cache_utils.DynamicCache):
        if name in vars(cls):
            monkeypatch.delattr(cls, name)


def _layers_renamed(monkeypatch):
    """Simulate a release that stores a cache's layers under another name."""
    real = cache_utils.DynamicCache.__init__

    def init(self, *a, **k):
        real(self, *a, **k)
        self.__dict__["stack"] = self.__dict__.pop("layers")
    monkeypatch.setattr(cache_utils.DynamicCache, "__init__", init)


MOVES = {
    "batch_select_indices": lambda mp, policy: _drop_cache_method(mp, "batch_select_indices"),
    "batch_repeat_interleave": lambda mp, policy: _drop_cache_method(mp, "batch_repeat_interleave"),
    "_attn_implementation": lambda mp, policy: mp.setattr(type(policy.config), "_attn_implementation",
                                                          property(lambda self: None), raising=False),
    "layer_idx": lambda mp, policy: [mp.delattr(layer.self_attn, "layer_idx")
                                     for layer in policy.model.layers],
    "cache.layers": lambda mp, policy: _layers_renamed(mp),
}


@pytest.mark.parametrize("internal", sorted(MOVES))
def test_a_moved_internal_fails_loudly_naming_the_version(policy, monkeypatch, internal):
    MOVES[internal](monkeypatch, policy)
    with pytest.raises(hf_adapter.ContractError) as err:
        hf_adapter.check_contract(policy)
    message = str(err.value)
    assert f"transformers {transformers.__version__}" in message
    assert "reference" in message          # and the way out


def test_the_trainer_falls_back_to_the_reference_forward_with_one_warning(tiny_model, tmp_path,
                                                                          monkeypatch):
    cfg = TrainConfig(model=tiny_model, output_dir=str(tmp_path / "run"), steps=1,
                      prompts_per_step=2, group_size=3, max_completion_length=8,
                      reward_deadline_s=0, progress=False, tensorboard=False,
                      env_kwargs={"n_terms": 2, "max_value": 9, "prompt_style": "base"})
    assert isinstance(Trainer(cfg).forward, FastForward)
    _drop_cache_method(monkeypatch, "batch_select_indices")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tr = Trainer(cfg)
        metrics, _ = tr.train_step()         # a whole step on the public API alone
    moved = [w for w in caught if "batch_select_indices" in str(w.message)]
    assert len(moved) == 1 and "reference" in str(moved[0].message)
    assert isinstance(tr.forward, ReferenceForward) and tr.engine.share_prefix is False
    assert torch.isfinite(torch.tensor(metrics["loss"]))


def _layer_cache_keyword_renamed(monkeypatch, policy):
    """Simulate a release whose decoder layers take the KV cache under a new keyword: the model
    passes it as `kv_cache`, and the layer's forward reads it from there."""
    layer_cls = type(policy.model.layers[0])
    call, forward = layer_cls.__call__, layer_cls.forward
    old = "past_key_values" if "past_key_values" in inspect.signature(forward).parameters \
        else "cache"

    def renamed_call(self, *args, **kwargs):
        if old in kwargs:
            kwargs["kv_cache"] = kwargs.pop(old)
        return call(self, *args, **kwargs)

    def renamed_forward(self, hidden_states, *args, kv_cache=None, **kwargs):
        return forward(self, hidden_states, *args, **{old: kv_cache}, **kwargs)
    monkeypatch.setattr(layer_cls, "__call__", renamed_call)
    monkeypatch.setattr(layer_cls, "forward", renamed_forward)


def test_a_renamed_layer_cache_keyword_fails_the_contract_and_checkpointing_falls_back(
        tiny_model, tmp_path, policy, monkeypatch):
    """Checkpointed layers replay their cache entry through the keyword the layer is called
    with: a release that renames it fails the contract (the replay is part of it), and a run
    with gradient checkpointing trains on the reference forward, public API only."""
    _layer_cache_keyword_renamed(monkeypatch, policy)
    with torch.no_grad():               # the model itself still works under the new keyword
        assert policy(input_ids=torch.tensor([[1, 2, 3]])).logits.shape[1] == 3
    with pytest.raises(hf_adapter.ContractError, match="past_key_values"):
        hf_adapter.check_contract(policy)
    cfg = TrainConfig(model=tiny_model, output_dir=str(tmp_path / "run"), steps=1,
                      prompts_per_step=2, group_size=3, max_completion_length=8,
                      reward_deadline_s=0, progress=False, tensorboard=False,
                      gradient_checkpointing=True,
                      env_kwargs={"n_terms": 2, "max_value": 9, "prompt_style": "base"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tr = Trainer(cfg)
        rollout, _ = tr.collect()
        rollout.rewards = torch.tensor([1.0, 0.0, 0.5, 0.0, 1.0, 0.0])
        metrics = tr.update(tr.prepare(rollout), first=True)
    assert any("checkpointed layers cannot replay" in str(w.message) for w in caught)
    assert isinstance(tr.forward, ReferenceForward) and metrics["grad_norm"] > 0


def test_the_contract_compares_values_not_only_shapes(policy, monkeypatch):
    """A cache internal that keeps every shape but changes what the rows hold (here: a row
    selection that zeroes the values) fails the check."""
    real = cache_utils.DynamicCache.batch_select_indices

    def select_and_spoil(self, indices):
        real(self, indices)
        for layer in self.layers:
            layer.keys = torch.zeros_like(layer.keys)
    monkeypatch.setattr(cache_utils.DynamicCache, "batch_select_indices", select_and_spoil)
    with pytest.raises(hf_adapter.ContractError, match="whole forward's logits"):
        hf_adapter.check_contract(policy)
