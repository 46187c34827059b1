"""The transformers adapter's contract (trainer/hf_adapter.py): it holds on the installed
transformers, it fails loudly -- naming the version and the internal -- when an internal it
relies on moves (simulated here by taking each one away), and the trainer then falls back to
the reference forward with one warning instead of crashing mid-step."""
from __future__ import annotations

import warnings

import pytest
import torch
import transformers
from transformers import cache_utils

from rlvr.trainer import hf_adapter
from rlvr.trainer.config import TrainConfig
from rlvr.trainer.fast import FastForward
from rlvr.trainer.loop import Trainer
from rlvr.trainer.models import load_policy
from rlvr.trainer.reference import ReferenceForward


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
