"""The sampler-trainer correction menu (trainer/objective/importance.py), each row against a hand
computation on one small batch; masked tokens get exactly zero gradient; bad names and knobs
are refused in one line."""
import math

import pytest
import torch

from rlvr.trainer import TrainConfig
from rlvr.trainer.objective import algorithms as alg
from rlvr.trainer.objective.importance import (CORRECTIONS, Knobs, check_settings, correction_weights,
                                     mismatch_metrics)

# Four completions (rows), up to two tokens each; pi_old / pi_s = r per token:
#   row 0: pi_old (0.5, 0.2)  pi_s (0.25, 0.4)  r (2.0, 0.5)   R = 1.0  G = 1.0        A = -1
#   row 1: pi_old (0.9)       pi_s (0.3)        r (3.0)        R = 3.0  G = 3.0        A = +1
#   row 2: pi_old (0.3, 0.6)  pi_s (0.4, 0.5)   r (0.75, 1.2)  R = 0.9  G = sqrt(0.9)  A = -0.5
#   row 3: pi_old (0.2)       pi_s (0.4)        r (0.5)        R = 0.5  G = 0.5        A = +1
# (R = prod_t r, G = exp(mean_t log r); padding slots hold probability 1 under both)
TRAINER = torch.tensor([[0.5, 0.2], [0.9, 1.0], [0.3, 0.6], [0.2, 1.0]]).log()
SAMPLER = torch.tensor([[0.25, 0.4], [0.3, 1.0], [0.4, 0.5], [0.4, 1.0]]).log()
MASK = torch.tensor([[True, True], [True, False], [True, True], [True, False]])
ADV = torch.tensor([-1.0, 1.0, -0.5, 1.0])[:, None].expand(4, 2) * MASK
# C = 2.5; token/sequence masks keep [0.6, 2.5]; the geometric mask [0.95, 1.05]; ICEPOP
# [0.6, 2.5]; delta = 0.01
KNOBS = Knobs(threshold=2.5, mask_low=0.6, mask_high=2.5, geo_low=0.95, geo_high=1.05,
              icepop_low=0.6, icepop_high=2.5, kl_threshold=0.01)

EXPECTED = {
    # min(r, 2.5): only row 1's 3.0 is cut
    "token": [[2.0, 0.5], [2.5, 0.0], [0.75, 1.2], [0.5, 0.0]],
    # min(R, 2.5) on each token
    "sequence": [[1.0, 1.0], [2.5, 0.0], [0.9, 0.9], [0.5, 0.0]],
    # r outside [0.6, 2.5] dropped: 0.5 (row 0), 3.0 (row 1), 0.5 (row 3)
    "token_mask": [[1.0, 0.0], [0.0, 0.0], [1.0, 1.0], [0.0, 0.0]],
    # R outside [0.6, 2.5] dropped: rows 1 (3.0) and 3 (0.5)
    "sequence_mask": [[1.0, 1.0], [0.0, 0.0], [1.0, 1.0], [0.0, 0.0]],
    # G outside [0.95, 1.05] dropped: 3.0, 0.9487 (sqrt 0.9), 0.5; row 0's G = 1 stays
    "geometric_mask": [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]],
    # r inside [0.6, 2.5] kept as r, outside 0
    "icepop": [[2.0, 0.0], [0.0, 0.0], [0.75, 1.2], [0.0, 0.0]],
    # mean log(pi_s/pi_old) per row: 0, -ln 3, -ln(0.9)/2 = 0.0527, ln 2 = 0.693; above 0.01
    # are rows 2 (A < 0: dropped) and 3 (A > 0: kept)
    "offpolicy_mask": [[1.0, 1.0], [1.0, 0.0], [0.0, 0.0], [1.0, 0.0]],
    "none": [[1.0, 1.0], [1.0, 0.0], [1.0, 1.0], [1.0, 0.0]],
}
TRUNCATED = {"token": [[0, 0], [1, 0], [0, 0], [0, 0]],
             "sequence": [[0, 0], [1, 0], [0, 0], [0, 0]]}


def test_every_correction_has_a_hand_computed_row():
    assert set(EXPECTED) == set(CORRECTIONS)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_correction_against_the_hand_computation(name):
    marks = correction_weights(TRAINER, SAMPLER, MASK, name, KNOBS, ADV)
    assert torch.allclose(marks.weights, torch.tensor(EXPECTED[name]), atol=1e-6)
    assert marks.clipped.int().tolist() == TRUNCATED.get(name, [[0, 0]] * 4)
    if name in ("token", "sequence", "none"):
        assert not marks.masked.any()
    else:       # masked exactly where a real token's weight is 0 (icepop: where r is outside)
        zero = (torch.tensor(EXPECTED[name]) == 0) & MASK
        assert torch.equal(marks.masked, zero)


def test_icepop_metrics_by_hand():
    m = mismatch_metrics(TRAINER, SAMPLER, MASK, "icepop", KNOBS, ADV)
    # six tokens, sum of log r = ln(2 * 0.5 * 3 * 0.75 * 1.2 * 0.5) = ln 1.35
    assert m["mismatch/kl_k1"] == pytest.approx(-math.log(1.35) / 6)
    # sorted r: 0.5 0.5 0.75 1.2 2 3; linear quantiles at ranks 0.25, 2.5, 4.75
    assert m["mismatch/ratio_p05"] == pytest.approx(0.5)
    assert m["mismatch/ratio_p50"] == pytest.approx(0.975)
    assert m["mismatch/ratio_p95"] == pytest.approx(2.75)
    # ESS of the ratios: 7.95^2 / (6 * 15.5025); of the weights (2, 0.75, 1.2 kept):
    # 3.95^2 / (6 * 6.0025); three of six tokens masked, none truncated
    assert m["mismatch/ess_raw"] == pytest.approx(7.95 ** 2 / (6 * 15.5025))
    assert m["mismatch/ess"] == pytest.approx(3.95 ** 2 / (6 * 6.0025))
    assert m["mismatch/masked_frac"] == pytest.approx(0.5)
    assert m["mismatch/truncated_frac"] == 0.0


def test_sequence_level_metrics_count_sequences_by_hand():
    seq = mismatch_metrics(TRAINER, SAMPLER, MASK, "sequence", KNOBS)
    # R = (1, 3, 0.9, 0.5): median 0.95; weights (1, 2.5, 0.9, 0.5), one of four truncated
    assert seq["mismatch/ratio_p50"] == pytest.approx(0.95)
    assert seq["mismatch/ess"] == pytest.approx(4.9 ** 2 / (4 * 8.31))
    assert seq["mismatch/truncated_frac"] == pytest.approx(0.25)
    assert seq["mismatch/masked_frac"] == 0.0
    geo = mismatch_metrics(TRAINER, SAMPLER, MASK, "geometric_mask", KNOBS)
    # G = (1, 3, 0.9487, 0.5): median (0.9487 + 1) / 2; only row 0 kept: ESS 1/4
    assert geo["mismatch/ratio_p50"] == pytest.approx((math.sqrt(0.9) + 1) / 2)
    assert geo["mismatch/ess"] == pytest.approx(0.25)
    assert geo["mismatch/masked_frac"] == pytest.approx(0.75)
    off = mismatch_metrics(TRAINER, SAMPLER, MASK, "offpolicy_mask", KNOBS, ADV)
    assert off["mismatch/masked_frac"] == pytest.approx(0.25)          # row 2 of four


@pytest.mark.parametrize("name", ["token_mask", "sequence_mask", "geometric_mask", "icepop",
                                  "offpolicy_mask"])
def test_masked_tokens_get_exactly_zero_gradient(name):
    """The update's per-token loss, -min(rho A, clip(rho) A) * w, aggregated as GRPO does:
    d loss / d log pi_theta is exactly 0 on the masked tokens and not on the kept ones."""
    marks = correction_weights(TRAINER, SAMPLER, MASK, name, KNOBS, ADV)
    logp = (TRAINER + 0.01).clone().requires_grad_(True)      # theta a little past theta_old
    obj, _, _ = alg.policy_objective("clip", logp, TRAINER, ADV, MASK)
    loss = alg.aggregate_loss(-obj * marks.weights, MASK, "seq_mean_token_mean",
                              num_seqs=4, num_tokens=6, max_len=2)
    loss.backward()
    assert marks.masked.any()
    assert torch.equal(logp.grad[marks.masked], torch.zeros(int(marks.masked.sum())))
    kept = MASK & ~marks.masked
    assert (logp.grad[kept] != 0).all()


SERVER = {"rollout_engine": "server", "server_url": "http://127.0.0.1:9/v1"}


@pytest.mark.parametrize("overrides, fragment", [
    ({"importance_correction": "tokens"}, "importance_correction='tokens'; choose from token"),
    ({"importance_threshold": 0.0}, "importance_threshold must be > 0"),
    ({"importance_mask_low": 2.0, "importance_mask_high": 1.0},
     "need 0 <= importance_mask_low < importance_mask_high"),
    ({"importance_geo_low": -0.1}, "need 0 <= importance_geo_low < importance_geo_high"),
    ({"importance_icepop_high": 0.5}, "importance_icepop_low < importance_icepop_high"),
    ({"importance_kl_threshold": -1.0}, "importance_kl_threshold must be >= 0"),
])
def test_bad_names_and_knobs_are_refused(overrides, fragment):
    with pytest.raises(ValueError, match="importance") as err:
        check_settings(TrainConfig(**SERVER, **overrides))
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_old_names_still_load():
    for name in ("token", "sequence", "none"):
        check_settings(TrainConfig(**SERVER, importance_correction=name))


def test_rlvr_train_refuses_a_bad_correction_in_one_line(capsys):
    from rlvr.cli import main
    rc = main(["train", "rollout_engine=server", "server_url=http://127.0.0.1:9/v1",
               "importance_correction=icepopp", "progress=false"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "importance_correction='icepopp'" in err[0], err


def test_the_update_applies_the_chosen_correction(tiny_model, tmp_path):
    """A sampler that gave every token half the trainer's probability (every r = 2): at inner
    step 1 (rho = 1, nothing clipped, no KL) ICEPOP's weight 2 doubles the uncorrected
    gradient and a token mask whose band ends at 1.5 zeroes it; with a sampler that gave twice
    the probability (mean KL ln 2 > delta) DeepSeek-V3.2's mask drops exactly the completions
    with negative advantage."""
    from rlvr.trainer.run.loop import Trainer
    from rlvr.trainer.run.metrics import UpdateStats
    from test_server_rollouts import TINY, TextSum
    cfg = TrainConfig(**{**TINY, "model": tiny_model, "output_dir": str(tmp_path / "run"),
                         "steps": 1})
    trainer = Trainer(cfg)
    trainer.env.reward = TextSum()
    rollout, _ = trainer.collect()
    plain = trainer.prepare(rollout)
    own = []
    for p, c in zip(rollout.prompt_ids, rollout.completion_ids):
        with torch.no_grad():
            logits = trainer.policy(input_ids=torch.tensor([p + c])).logits[0, len(p) - 1:-1]
        own.append(torch.log_softmax(logits, -1).gather(-1, torch.tensor(c)[:, None]).squeeze(-1))
    rollout.sampler_logp = [(lp - math.log(2)).tolist() for lp in own]

    def gradient(batch):
        trainer.policy.zero_grad()
        trainer.learner.micro_loss(batch, 0, True, UpdateStats()).backward()
        return torch.cat([p.grad.flatten() for p in trainer.policy.parameters()])

    base = gradient(plain)
    assert base.abs().sum() > 0
    trainer.cfg.importance_correction = "icepop"
    icepop_batch = trainer.prepare(rollout)
    assert icepop_batch.stats["mismatch/masked_frac"] == 0.0
    assert torch.allclose(gradient(icepop_batch), 2 * base, rtol=1e-4, atol=1e-8)
    trainer.cfg.importance_correction, trainer.cfg.importance_mask_high = "token_mask", 1.5
    masked = trainer.prepare(rollout)
    assert masked.stats["mismatch/masked_frac"] == 1.0 and masked.stats["mismatch/ess"] == 0.0
    assert torch.equal(gradient(masked), torch.zeros_like(base))
    trainer.cfg.importance_correction = "offpolicy_mask"      # now r = 1/2: KL = ln 2
    rollout.sampler_logp = [(lp + math.log(2)).tolist() for lp in own]
    off = trainer.prepare(rollout)
    negative = torch.cat([(a < 0).any(-1) for a in off.advantages])
    assert 0 < negative.sum() < len(negative)
    assert off.stats["mismatch/masked_frac"] == pytest.approx(float(negative.double().mean()))
    w = off.is_weights[0]
    assert torch.equal(w[negative[:len(w)]], torch.zeros_like(w[negative[:len(w)]]))
