"""Clip-Cov and KL-Cov (Cui et al. 2025) against numbers worked out by hand."""
import math

import pytest
import torch

from rlvr.trainer.objective import algorithms as alg
from rlvr.trainer.objective.entropy import token_covariance

# Five response tokens (the sixth is padding); every log-ratio is 0.1, so rho = e^0.1 < 1.2.
LOGP = [[-1.0, -2.0, -0.5], [-0.1, -3.0, 0.0]]
MASK = torch.tensor([[True, True, True], [True, True, False]])
ADV = torch.tensor([[1.0, 1.0, 1.0], [-1.0, -1.0, 0.0]])
RHO = math.exp(0.1)


def _inputs():
    logp = torch.tensor(LOGP, requires_grad=True)
    return logp, (logp - 0.1).detach()


def test_the_covariance_of_each_token():
    # mean log-prob -6.6 / 5 = -1.32, mean advantage 1 / 5 = 0.2
    cov = token_covariance(torch.tensor(LOGP), ADV, MASK)
    want = [[0.32 * 0.8, -0.68 * 0.8, 0.82 * 0.8], [1.22 * -1.2, -1.68 * -1.2, 0.0]]
    assert torch.allclose(cov, torch.tensor(want), atol=1e-6)


def test_clip_cov_takes_the_candidates_out_of_the_gradient():
    logp, old = _inputs()
    # only token (1, 1) has its covariance (2.016) inside [1, 5]; 0.4 * 5 tokens = 2 wanted,
    # 1 available
    obj, low, high = alg.policy_objective("clip_cov", logp, old, ADV, MASK, 0.2, 0.2,
                                          ratio=0.4, cov_low=1.0, cov_high=5.0)
    want = torch.tensor([[RHO, RHO, RHO], [-RHO, 0.0, 0.0]])
    assert torch.allclose(obj * MASK, want, atol=1e-6)
    (obj * MASK).sum().backward()
    grad = logp.grad
    assert grad[1, 1] == 0                              # restrained: no gradient at all
    assert torch.allclose(grad[0], torch.full((3,), RHO)) and math.isclose(grad[1, 0], -RHO,
                                                                           rel_tol=1e-6)
    assert not low.any() and not high.any()            # rho inside [0.8, 1.2]


def test_clip_cov_rounds_its_share_down_and_keeps_the_clip():
    logp, old = _inputs()
    plain, _, _ = alg.policy_objective("clip", logp, old, ADV, MASK, 0.05, 0.05)
    cov, _, high = alg.policy_objective("clip_cov", logp, old, ADV, MASK, 0.05, 0.05,
                                        ratio=0.1, cov_low=1.0, cov_high=5.0)
    assert torch.equal(plain, cov)                     # floor(0.1 * 5) = 0 tokens restrained
    assert high[0].all()                               # rho = 1.105 > 1.05 with A > 0: clipped


def test_kl_cov_penalises_the_largest_covariances_and_never_clips():
    logp, old = _inputs()
    obj, low, high = alg.policy_objective("kl_cov", logp, old, ADV, MASK, 0.05, 0.05,
                                          ratio=0.2, coef=2.0)
    # floor(0.2 * 5) = 1 token, the largest covariance: (1, 1); rho * A elsewhere, unclipped
    want = torch.tensor([[RHO, RHO, RHO], [-RHO, -RHO - 2.0 * 0.1, 0.0]])
    assert torch.allclose(obj * MASK, want, atol=1e-6)
    assert not low.any() and not high.any()
    (obj * MASK).sum().backward()
    # d/dlogp [rho A - coef |log rho|] = rho A - coef sign(log rho)
    assert math.isclose(logp.grad[1, 1], -RHO - 2.0, rel_tol=1e-6)
    assert math.isclose(logp.grad[1, 0], -RHO, rel_tol=1e-6)


def test_the_knobs_are_the_config_s_and_warned_about_when_unused(recwarn):
    from rlvr.trainer.config import TrainConfig
    from rlvr.trainer.objective.update import loss_knobs
    cfg = TrainConfig(policy_loss="clip_cov", clip_cov_ratio=0.01)
    assert loss_knobs(cfg) == {"ratio": 0.01, "cov_low": 1.0, "cov_high": 5.0}
    assert loss_knobs(TrainConfig(policy_loss="kl_cov", kl_cov_coef=0.5)) == {
        "ratio": 2e-3, "coef": 0.5}
    with pytest.warns(UserWarning, match="kl_cov_coef"):
        TrainConfig(kl_cov_coef=0.5)                   # the clip loss never reads it


def test_a_step_trains_with_each(tiny_model, tmp_path):
    from rlvr.trainer import TrainConfig, train
    import json
    for loss, extra in (("clip_cov", {"clip_cov_ratio": 0.05, "clip_cov_low": -1e9,
                                      "clip_cov_high": 1e9}),
                        ("kl_cov", {"kl_cov_ratio": 0.05})):
        out = tmp_path / loss
        train(TrainConfig(model=tiny_model, output_dir=str(out), steps=1, prompts_per_step=2,
                          group_size=4, max_completion_length=8, policy_loss=loss,
                          reward_deadline_s=0, eval_every=0, progress=False, **extra))
        row = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
        assert math.isfinite(row["loss"])
