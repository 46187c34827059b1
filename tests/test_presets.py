"""`preset` names the knobs a run starts from, the same way everywhere: the Python API, a TOML
file, `rlvr train` and a resumed run build the same config; the old field name `algorithm`
loads with a deprecation warning and builds what it names (it used to label a GRPO run "ppo");
a knob the chosen estimator ignores is warned about, or refused under `strict`."""
from __future__ import annotations

import dataclasses
import warnings

import pytest

from rlvr.trainer.config import PRESETS, TrainConfig, load_config


def _quiet(fn, *a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return fn(*a, **kw)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_way_of_naming_a_preset_builds_the_same_config(preset, tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text(f'preset = "{preset}"\n')
    built = [TrainConfig(preset=preset), TrainConfig.from_preset(preset),
             load_config(None, [f"preset={preset}"]), load_config(toml),
             load_config(None, TrainConfig(preset=preset).to_dict())]     # a resumed run
    assert all(c == built[0] for c in built)
    for knob, value in PRESETS[preset].items():
        if knob != "overlong_buffer":          # DAPO's -1 is resolved to a length
            assert getattr(built[0], knob) == value, knob


def test_ppo_is_ppo_and_the_old_field_name_no_longer_trains_grpo():
    ppo = TrainConfig(preset="ppo")
    assert (ppo.advantage, ppo.inner_steps, ppo.whiten_advantages, ppo.kl_in) == \
        ("gae", 4, True, "reward")
    with pytest.warns(DeprecationWarning, match="'algorithm' is now 'preset'"):
        old = TrainConfig(algorithm="ppo")
    assert old == ppo                           # not GRPO labelled "ppo"
    with pytest.warns(DeprecationWarning):
        saved = load_config(None, {**dataclasses.asdict(ppo), "algorithm": "ppo"} | {"preset": "ppo"})
    assert saved == ppo
    old_run = {k: v for k, v in dataclasses.asdict(ppo).items() if k != "preset"}
    with pytest.warns(DeprecationWarning):
        assert load_config(None, {**old_run, "algorithm": "ppo"}) == ppo
    with pytest.warns(DeprecationWarning):
        assert load_config(None, ["algorithm=ppo"]) == ppo


def test_fields_given_beside_a_preset_win():
    cfg = TrainConfig(preset="ppo", inner_steps=2, lr=3e-6)
    assert (cfg.advantage, cfg.inner_steps, cfg.lr) == ("gae", 2, 3e-6)
    assert dataclasses.replace(cfg, lr=1e-5).inner_steps == 2


@pytest.mark.parametrize("preset,knob,value", [
    ("grpo", "gamma", 0.9), ("grpo", "critic_lr", 1e-5), ("rloo", "baseline", "moving_average"),
    ("dr_grpo", "kl_estimator", "k2"), ("grpo", "lora_alpha", 8.0), ("rloo", "clip_eps_high", 0.3),
    ("grpo", "keep_threshold", 0.5), ("grpo", "distill_coef", 0.5),
    ("expert_iteration", "clip_eps_high", 0.3), ("onpolicy_distill", "clip_eps_low", 0.1)])
def test_a_knob_the_estimator_ignores_is_warned_about_or_refused(preset, knob, value):
    with pytest.warns(UserWarning, match=f"ignores {knob} "):
        TrainConfig(preset=preset, **{knob: value})
    with pytest.raises(ValueError, match=f"ignores {knob} .*remove them"):
        TrainConfig(preset=preset, strict=True, **{knob: value})


def test_knobs_the_estimator_reads_or_left_at_their_default_pass_quietly():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TrainConfig(preset="ppo", gamma=0.99, critic_lr=1e-5, strict=True)
        TrainConfig(preset="reinforce", baseline="moving_average", strict=True)
        TrainConfig(preset="grpo", gamma=1.0, strict=True)           # the default: harmless
        TrainConfig(preset="expert_iteration", keep_threshold=0.5, inner_steps=2, strict=True)
        TrainConfig(preset="grpo", teacher="a-teacher", distill_coef=0.5, strict=True)
        for preset in PRESETS:
            TrainConfig(preset=preset, strict=True)


def test_the_knobs_presets_set_are_the_ones_declared_by_preset():
    """A knob a preset sets takes the preset's value unless given, because its section declares
    it `by_preset`: the two lists cannot drift, and the constructor is the dataclass's own."""
    from rlvr.trainer.objective.presets import ByPreset
    from rlvr.trainer.sections import SECTIONS
    declared = {f.name for cls in SECTIONS.values() for f in dataclasses.fields(cls)
                if isinstance(f.default, ByPreset)}
    assert declared == set().union(*PRESETS.values())
    assert "_preset_init" not in TrainConfig.__init__.__qualname__
    for name in declared:       # resolved on every config: no sentinel is ever read
        assert not isinstance(getattr(TrainConfig(preset="dapo"), name), ByPreset)
    assert TrainConfig(preset="dr_grpo", beta=0.04).beta == 0.04   # given = kept, even = default


def test_a_ratio_knob_at_one_gradient_step_per_batch_is_warned_about():
    """With inner_steps=1 the ratio to pi_old is 1 at the only gradient step: clip-higher and
    KL-Cov's penalty cannot act (a GPU run of the main job measured bit-equal curves)."""
    with pytest.warns(UserWarning, match=r"ignores clip_eps_high \(one gradient step per batch"):
        TrainConfig(preset="grpo", clip_eps_high=0.28)
    with pytest.warns(UserWarning, match=r"ignores kl_cov_ratio \(one gradient step per batch"):
        TrainConfig(preset="grpo", policy_loss="kl_cov", kl_cov_ratio=0.02)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TrainConfig(preset="grpo", clip_eps_high=0.28, inner_steps=2, strict=True)
        TrainConfig(preset="grpo", policy_loss="kl_cov", kl_cov_ratio=0.02, inner_steps=2,
                    strict=True)
        TrainConfig(preset="grpo", policy_loss="clip_cov", clip_cov_ratio=0.02, strict=True)


def test_at_the_first_gradient_step_the_clamp_and_kl_cov_leave_the_gradient_alone():
    """The premise of the warning above: with pi_old = pi (detached), clip at any eps and KL-Cov
    at any coefficient give the plain policy gradient A * grad log pi."""
    import torch
    from rlvr.trainer.objective.algorithms import clip_objective
    from rlvr.trainer.objective.entropy import kl_cov_objective
    g = torch.Generator().manual_seed(0)
    base = torch.randn(3, 7, generator=g, dtype=torch.float64)
    adv = torch.randn(3, 1, generator=g, dtype=torch.float64).expand(3, 7)
    mask = torch.ones(3, 7, dtype=torch.bool)
    mask[0, 5:] = False

    def grad(objective, **kw):
        logp = base.clone().requires_grad_(True)
        obj = objective(logp, logp.detach(), adv, mask, 0.2, kw.pop("eps_high", 0.2), **kw)[0]
        obj.masked_fill(~mask, 0.0).sum().backward()
        return logp.grad

    plain = adv * mask
    for g_ in (grad(clip_objective), grad(clip_objective, eps_high=0.28),
               grad(clip_objective, eps_high=0.01), grad(kl_cov_objective, ratio=0.5, coef=10.0)):
        torch.testing.assert_close(g_, plain)
