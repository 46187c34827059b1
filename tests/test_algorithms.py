"""Hand-derived numbers for every advantage estimator, KL estimator and loss aggregation.

Each expected value is worked out in the comment above its assertion; the tests fail when the
math in trainer/objective/algorithms.py changes.
"""
import math

import pytest
import torch

from rlvr.trainer.objective import algorithms as A

T, F = True, False


def t(*rows):
    return torch.tensor(rows, dtype=torch.float64)


def b(*rows):
    return torch.tensor(rows, dtype=torch.bool)


# --- a single-token PPO update worked by hand: "What's 2 + 2?" --------------------------------
def test_seed_note_single_token_ppo_positive_advantage():
    # The policy answers " 4". Old policy prob 0.50, new prob 0.65, reference prob 0.50.
    # Verifier reward 1.0, value head predicted 0.4:
    #   advantage     = 1.0 - 0.4                  = 0.6
    #   ratio         = 0.65 / 0.50                = 1.3
    #   raw_score     = 1.3 * 0.6                  = 0.78
    #   clipped_ratio = clamp(1.3, 0.8, 1.2)       = 1.2
    #   clipped_score = 1.2 * 0.6                  = 0.72
    #   final_score   = min(0.78, 0.72)            = 0.72
    #   KL (k3): w = 0.50/0.65 = 0.769231, log w = -0.262364
    #            k3 = w - 1 - log w = -0.230769 + 0.262364 = 0.031595
    #   loss          = -0.72 + 0.1 * 0.031595     = -0.716840
    logp, old, ref = t([math.log(0.65)]), t([math.log(0.5)]), t([math.log(0.5)])
    mask = b([T])
    adv = t([1.0 - 0.4])
    obj, low, high = A.policy_objective("clip", logp, old, adv, mask, 0.2, 0.2)
    assert obj.item() == pytest.approx(0.72)
    assert high.item() and not low.item()
    kl = A.kl_k3(logp, ref)
    assert kl.item() == pytest.approx(0.031595, abs=1e-6)
    loss = A.aggregate_loss(-obj + 0.1 * kl, mask, "seq_mean_token_mean")
    assert loss.item() == pytest.approx(-0.716840, abs=1e-6)


def test_seed_note_single_token_ppo_negative_advantage():
    # Reward 0.0, value 0.5 -> advantage -0.5. New prob 0.35, old 0.50 -> ratio 0.7.
    #   raw = 0.7 * -0.5 = -0.35; clipped = clamp(0.7, 0.8, 1.2) * -0.5 = 0.8 * -0.5 = -0.40
    #   min(-0.35, -0.40) = -0.40 -> loss = 0.40 (beta = 0): the clip stops the push downward.
    logp, old = t([math.log(0.35)]), t([math.log(0.5)])
    obj, low, high = A.policy_objective("clip", logp, old, t([-0.5]), b([T]))
    assert (-obj).item() == pytest.approx(0.40)
    assert low.item() and not high.item()


def test_first_inner_step_ratio_is_exactly_one():
    # pi == pi_old at inner step 1: rho = exp(0) = 1 exactly, so objective = A, nothing clipped.
    logp = torch.randn(3, 5, dtype=torch.float64)
    adv = torch.randn(3, 5, dtype=torch.float64)
    obj, low, high = A.policy_objective("clip", logp, logp.clone(), adv, torch.ones(3, 5, dtype=torch.bool))
    assert torch.equal(obj, adv) and not low.any() and not high.any()


# --- advantages ------------------------------------------------------------------------------
def test_reinforce_batch_mean_baseline_leaves_out_failed():
    # Valid rewards 1, 0, 0.5 (the 4th sample timed out) -> baseline 0.5.
    # A = [0.5, -0.5, 0.0] and the failed one gets 0.
    adv = A.reinforce_advantages(t(1.0, 0.0, 0.5, 1.0), b(T, T, T, F))
    assert adv.tolist() == pytest.approx([0.5, -0.5, 0.0, 0.0])


def test_reinforce_moving_average_baseline():
    # decay 0.9. Batch 1 mean 1.0: baseline starts there -> used 1.0, then 0.9*1 + 0.1*1 = 1.0.
    # Batch 2 mean 0.0: used 1.0 (the value before folding this batch in), then 0.9*1 + 0 = 0.9.
    ma = A.MovingAverageBaseline(0.9)
    assert ma(1.0) == 1.0 and ma.value == pytest.approx(1.0)
    assert ma(0.0) == 1.0 and ma.value == pytest.approx(0.9)
    adv = A.reinforce_advantages(t(1.0, 0.0), b(T, T), baseline=ma(0.5))
    assert adv.tolist() == pytest.approx([0.1, -0.9])   # 1 - 0.9, 0 - 0.9


def test_rloo_one_pass_matches_leave_one_out():
    # K = 4, rewards [1, 0, 0, 1], mean 0.5.
    # One pass: 4/3 * (1 - 0.5) = 2/3 ;  4/3 * (0 - 0.5) = -2/3
    # Leave one out: 1 - mean(0, 0, 1) = 1 - 1/3 = 2/3 ; 0 - mean(1, 0, 1) = -2/3
    adv = A.rloo_advantages(t([1, 0, 0, 1]), b([T, T, T, T]))
    assert adv[0].tolist() == pytest.approx([2 / 3, -2 / 3, -2 / 3, 2 / 3])
    # And on random rewards the two forms agree everywhere.
    r = torch.rand(5, 6, dtype=torch.float64)
    loo = torch.stack([r[:, i] - torch.cat([r[:, :i], r[:, i + 1:]], 1).mean(1)
                       for i in range(6)], 1)
    assert torch.allclose(A.rloo_advantages(r, torch.ones_like(r, dtype=torch.bool)), loo)


def test_rloo_with_a_failed_sample():
    # [1, 0, X, 1] with X failed: K = 3 valid, mean 2/3.
    # 3/2 * (1 - 2/3) = 0.5 (= 1 - mean(0, 1));  3/2 * (0 - 2/3) = -1 (= 0 - mean(1, 1)); X -> 0.
    adv = A.rloo_advantages(t([1, 0, 7, 1]), b([T, T, F, T]))
    assert adv[0].tolist() == pytest.approx([0.5, -1.0, 0.0, 0.5])
    # A group with a single valid sample has no leave-one-out baseline: advantage 0.
    assert A.rloo_advantages(t([1, 0]), b([T, F])).abs().sum() == 0


def test_grpo_and_dr_grpo_advantages():
    # Group [1, 0, 0, 0]: mean 0.25; unbiased std = sqrt((0.75^2 + 3*0.25^2)/3) = sqrt(0.25) = 0.5
    # GRPO: 0.75/(0.5+1e-4) = 1.49970, -0.25/(0.5+1e-4) = -0.49990.  Dr. GRPO: 0.75, -0.25.
    r, v = t([1, 0, 0, 0]), b([T, T, T, T])
    assert A.grpo_advantages(r, v)[0].tolist() == pytest.approx([1.49970, -0.49990, -0.49990, -0.49990], abs=1e-5)
    assert A.grpo_advantages(r, v, scale=False)[0].tolist() == pytest.approx([0.75, -0.25, -0.25, -0.25])
    # All-equal group: zero advantage (and no division blow-up).
    assert A.grpo_advantages(t([1, 1, 1]), b([T, T, T])).abs().sum() == 0


def test_dr_grpo_vs_grpo_two_completions_of_different_lengths():
    # One prompt, two completions: right (reward 1, 2 tokens) and wrong (reward 0, 4 tokens).
    # GRPO (eps=0): mean 0.5, unbiased std = sqrt(0.25+0.25) = 0.70711, A = +-0.70711.
    # Loss = (1/2) sum_i (1/T_i) sum_t -rho_it A_i; at rho = 1, d loss/d log rho_it = -A_i/(2 T_i):
    #   right tokens: -0.70711/(2*2) = -0.17678;  wrong tokens: +0.70711/(2*4) = +0.08839
    #   -> each token of the long wrong answer is punished half as hard: the length bias.
    # Dr. GRPO: A = +-0.5, normaliser L_max = 4: d/d log rho = -A_i/(2*4):
    #   right: -0.0625; wrong: +0.0625 -> equal per-token weight whatever the length.
    rewards, valid = t([1, 0]), b([T, T])
    mask = b([T, T, F, F], [T, T, T, T])

    def token_grads(adv, mode):
        log_ratio = torch.zeros(2, 4, dtype=torch.float64, requires_grad=True)
        obj, _, _ = A.policy_objective("clip", log_ratio, torch.zeros(2, 4, dtype=torch.float64),
                                       adv[0][:, None].expand(2, 4), mask)
        A.aggregate_loss(-obj, mask, mode, max_len=4).backward()
        return log_ratio.grad

    g = token_grads(A.grpo_advantages(rewards, valid, eps=0.0), "seq_mean_token_mean")
    assert g[0, :2].tolist() == pytest.approx([-0.17678] * 2, abs=1e-5)
    assert g[1].tolist() == pytest.approx([0.08839] * 4, abs=1e-5)
    g = token_grads(A.grpo_advantages(rewards, valid, scale=False), "seq_mean_token_sum_norm")
    assert g[0, :2].tolist() == pytest.approx([-0.0625] * 2)
    assert g[1].tolist() == pytest.approx([0.0625] * 4)
    assert g[0, 2:].abs().sum() == 0  # padding gets nothing


# --- KL estimators ---------------------------------------------------------------------------
def test_kl_estimators_by_hand():
    # pi = 0.5, ref = 0.25: log w = log(0.25/0.5) = -0.693147
    #   k1 = -log w = 0.693147;  k2 = 0.5 * 0.693147^2 = 0.240227;  k3 = (0.5 - 1) + 0.693147 = 0.193147
    lp, rp = t([math.log(0.5)]), t([math.log(0.25)])
    assert A.kl_k1(lp, rp).item() == pytest.approx(0.693147, abs=1e-6)
    assert A.kl_k2(lp, rp).item() == pytest.approx(0.240227, abs=1e-6)
    assert A.kl_k3(lp, rp).item() == pytest.approx(0.193147, abs=1e-6)
    with pytest.raises(ValueError, match="k1"):
        A.kl_estimate("k4", lp, rp)


def test_kl_estimator_bias_and_sign():
    # Exact expectation under pi over a 3-token vocabulary: k1 and k3 are unbiased for
    # KL(pi||ref); k2 is not; k3 is never negative while k1 is on some tokens.
    p = torch.tensor([0.7, 0.2, 0.1], dtype=torch.float64)
    q = torch.tensor([0.3, 0.3, 0.4], dtype=torch.float64)
    exact = (p * (p / q).log()).sum()
    expect = {k: (p * A.kl_estimate(k, p.log(), q.log())).sum() for k in ("k1", "k2", "k3")}
    assert expect["k1"] == pytest.approx(exact.item())
    assert expect["k3"] == pytest.approx(exact.item())
    assert abs(expect["k2"] - exact) > 1e-3
    assert (A.kl_k3(p.log(), q.log()) >= 0).all() and (A.kl_k1(p.log(), q.log()) < 0).any()


# --- PPO returns and GAE ---------------------------------------------------------------------
def test_kl_shaped_token_rewards():
    # beta 0.5, per-token KL [0.1, -0.2, 0.3], outcome 1 on the last token:
    #   [-0.05, +0.1, -0.15 + 1] = [-0.05, 0.1, 0.85]; row 2 ends at t=1 (mask), outcome 0.5 there.
    r = A.kl_shaped_token_rewards(t(1.0, 0.5), t([0.1, -0.2, 0.3], [0.0, 0.0, 9.0]),
                                  b([T, T, T], [T, T, F]), 0.5)
    assert r.tolist() == [pytest.approx([-0.05, 0.1, 0.85]), pytest.approx([0.0, 0.5, 0.0])]


def test_gae_by_hand_and_lambda_one_is_monte_carlo():
    # rewards [0, 0, 1], V = [0.2, 0.5, 0.9], gamma = 1.
    # Monte Carlo: G = [1, 1, 1]; A = G - V = [0.8, 0.5, 0.1].
    # deltas: [0 + 0.5 - 0.2, 0 + 0.9 - 0.5, 1 + 0 - 0.9] = [0.3, 0.4, 0.1]
    # lam = 0.5: A2 = 0.1; A1 = 0.4 + 0.5*0.1 = 0.45; A0 = 0.3 + 0.5*0.45 = 0.525
    # returns = A + V = [0.725, 0.95, 1.0]
    r, v, m = t([0, 0, 1.0]), t([0.2, 0.5, 0.9]), b([T, T, T])
    assert A.returns_to_go(r, m).tolist() == [pytest.approx([1.0, 1.0, 1.0])]
    adv1, ret1 = A.gae(r, v, m, gamma=1.0, lam=1.0)
    assert adv1.tolist() == [pytest.approx([0.8, 0.5, 0.1])] and ret1.tolist() == [pytest.approx([1, 1, 1])]
    adv, ret = A.gae(r, v, m, gamma=1.0, lam=0.5)
    assert adv.tolist() == [pytest.approx([0.525, 0.45, 0.1])]
    assert ret.tolist() == [pytest.approx([0.725, 0.95, 1.0])]
    adv0, _ = A.gae(r, v, m, gamma=1.0, lam=0.0)
    assert adv0.tolist() == [pytest.approx([0.3, 0.4, 0.1])]
    # Random padded batch, gamma 0.9: lam=1 equals return-to-go minus V, zero past each end.
    r, v = torch.randn(4, 7, dtype=torch.float64), torch.randn(4, 7, dtype=torch.float64)
    m = torch.arange(7)[None, :] < torch.tensor([7, 3, 5, 1])[:, None]
    adv, ret = A.gae(r, v, m, gamma=0.9, lam=1.0)
    assert torch.allclose(adv, (A.returns_to_go(r, m, 0.9) - v).masked_fill(~m, 0.0))


# --- GSPO ------------------------------------------------------------------------------------
def test_gspo_sequence_ratio_and_clip():
    # Token ratios 1.1, 0.9, 1.2: s = (1.1 * 0.9 * 1.2)^(1/3) = 1.188^(1/3) = 1.059105.
    # With A = 1 and eps_high = 0.04: min(1.059105, 1.04) = 1.04 on every token; clipped high.
    log_ratio = t([math.log(1.1), math.log(0.9), math.log(1.2)])
    mask = b([T, T, T])
    s = A.gspo_sequence_log_ratio(log_ratio, mask).exp()
    assert s.tolist() == [pytest.approx([1.059105] * 3, abs=1e-6)]
    obj, low, high = A.policy_objective("gspo", log_ratio, torch.zeros_like(log_ratio),
                                        torch.ones_like(log_ratio), mask, 0.03, 0.04)
    assert obj.tolist() == [pytest.approx([1.04] * 3)] and high.all() and not low.any()
    # Padding does not enter the geometric mean.
    padded = torch.cat([log_ratio, t([5.0])], 1)
    s2 = A.gspo_sequence_log_ratio(padded, b([T, T, T, F])).exp()
    assert s2[0, 0].item() == pytest.approx(1.059105, abs=1e-6)


# --- loss aggregation ------------------------------------------------------------------------
def test_loss_aggregations_by_hand():
    # per-token [[1, 2, pad], [3, 4, 5]]:
    #   seq_mean_token_mean     = ((1+2)/2 + (3+4+5)/3) / 2 = (1.5 + 4) / 2 = 2.75
    #   seq_mean_token_sum      = (3 + 12) / 2              = 7.5
    #   seq_mean_token_sum_norm = (3 + 12) / (4 * 2)        = 1.875   (L_max = 4)
    #   token_mean              = 15 / 5                     = 3.0
    x, m = t([1, 2, 99], [3, 4, 5]), b([T, T, F], [T, T, T])
    got = {k: A.aggregate_loss(x, m, k, max_len=4).item() for k in A.LOSS_AGGREGATIONS}
    assert got == {"seq_mean_token_mean": 2.75, "seq_mean_token_sum": 7.5,
                   "seq_mean_token_sum_norm": 1.875, "token_mean": 3.0}
    with pytest.raises(ValueError, match="token_mean"):
        A.aggregate_loss(x, m, "sum")


@pytest.mark.parametrize("mode", A.LOSS_AGGREGATIONS)
def test_micro_batches_sum_to_the_full_batch(mode):
    # Splitting a batch and passing the whole batch's counts gives the same loss (so gradient
    # accumulation is exact for every aggregation).
    x = torch.randn(6, 5, dtype=torch.float64)
    m = torch.arange(5)[None, :] < torch.tensor([5, 2, 4, 1, 3, 5])[:, None]
    full = A.aggregate_loss(x, m, mode, max_len=5)
    parts = sum(A.aggregate_loss(x[i:i + 1], m[i:i + 1], mode, max_len=5, num_seqs=6,
                                 num_tokens=float(m.sum())) for i in range(6))
    assert parts.item() == pytest.approx(full.item())


def test_reinforce_loss_is_minus_mean_of_advantage_times_sequence_logprob():
    # A = [2, -1]; sum log-probs: [-0.5 - 0.5, -1] = [-1, -1]
    # loss = -(2*(-1) + (-1)*(-1)) / 2 = -(-2 + 1)/2 = 0.5
    logp, m = t([-0.5, -0.5], [-1.0, 0.0]), b([T, T], [T, F])
    adv = t(2.0, -1.0)[:, None].expand(2, 2)
    obj, _, _ = A.policy_objective("pg", logp, logp, adv, m)
    assert A.aggregate_loss(-obj, m, "seq_mean_token_sum").item() == pytest.approx(0.5)


def test_failed_sequences_count_for_nothing():
    # A row with an all-false mask (failed verdict) is not in N: ((1+2)/2)/1 = 1.5.
    x, m = t([1, 2], [50, 60]), b([T, T], [F, F])
    assert A.aggregate_loss(x, m, "seq_mean_token_mean").item() == 1.5


# --- critic, entropy, controllers, DAPO, pass@k ----------------------------------------------
def test_value_loss_and_explained_variance():
    # V = [0.5, 1.0], G = [1.0, 1.0]: squared errors [0.25, 0]; EV = 1 - Var[0.5, 0]/Var[1, 1]
    # Var[G] = 0 -> undefined (nan). With G = [0, 1], V = [0, 1]: perfect critic, EV = 1.
    m = b([T, T])
    assert A.value_loss(t([0.5, 1.0]), t([1.0, 1.0]), m).tolist() == [[0.25, 0.0]]
    assert math.isnan(A.explained_variance(t([0.5, 1.0]), t([1.0, 1.0]), m))
    assert A.explained_variance(t([0.0, 1.0]), t([0.0, 1.0]), m) == 1.0
    # G = [0, 2], V = [0, 0]: Var[G - V] = Var[G] -> EV = 0.
    assert A.explained_variance(t([0.0, 0.0]), t([0.0, 2.0]), m) == 0.0


def test_adaptive_kl_controller():
    # beta 0.1, target 6, horizon 10:
    #   KL 12  -> e = clip(12/6 - 1) = clip(1.0) = 0.2  -> beta = 0.1 * (1 + 0.2/10) = 0.102
    #   KL 3   -> e = clip(-0.5) = -0.2                 -> 0.102 * 0.98 = 0.09996
    #   KL 6.6 -> e = 0.1                               -> 0.09996 * 1.01 = 0.1009596
    c = A.AdaptiveKLController(0.1, target=6.0, horizon=10.0)
    assert c.update(12.0) == pytest.approx(0.102)
    assert c.update(3.0) == pytest.approx(0.09996)
    assert c.update(6.6) == pytest.approx(0.1009596)
    c2 = A.AdaptiveKLController(1.0, 1.0)
    c2.load_state_dict(c.state_dict())
    assert c2.beta == c.beta and A.FixedKLController(0.3).update(100.0) == 0.3


def test_overlong_penalty():
    # L_max 10, buffer 4 -> free up to 6: L=6 -> 0; L=8 -> (6-8)/4 = -0.5; L=10 -> -1; L=11 -> -1
    got = A.overlong_penalty(torch.tensor([6, 8, 10, 11]), 10, 4).tolist()
    assert got == pytest.approx([0.0, -0.5, -1.0, -1.0])
    with pytest.raises(ValueError):
        A.overlong_penalty(torch.tensor([1]), 10, 0)


def test_dynamic_sampling_filter():
    # Rows: mixed -> keep; all 1 -> drop; [1, X] with X failed -> only one valid -> drop.
    keep = A.groups_with_signal(t([1, 0], [1, 1], [1, 0]), b([T, T], [T, T], [T, F]))
    assert keep.tolist() == [True, False, False]


def test_equal_weighted_rewards_are_a_zero_variance_group():
    # 0.2 * tool_call + 1.0 * accuracy: eight 1.2s. In float32, sum/8 != 1.2, so without the
    # exact mean the std was ~1.3e-7, GRPO advantages ~1e-3 and DAPO kept the group.
    r = torch.full((2, 8), 1.2)
    r[1, 0] = 0.2                                         # a second group with signal
    valid = torch.ones(2, 8, dtype=torch.bool)
    mean, std = A.group_mean_std(r, valid)
    assert (mean[0].item(), std[0].item()) == (r[0, 0].item(), 0.0)
    assert A.groups_with_signal(r, valid).tolist() == [False, True]
    adv = A.grpo_advantages(r, valid)
    assert torch.count_nonzero(adv[0]) == 0 and adv[1, 0] < 0 < adv[1, 1]
    # an invalid slot does not break equality of the valid ones
    valid[0, 3] = False
    r[0, 3] = 5.0
    assert A.group_mean_std(r, valid)[1][0].item() == 0.0



def test_adaptive_kl_horizon_counts_samples():
    # Ziegler et al.: beta <- beta * (1 + e * n / horizon) with n the samples in the step.
    # 1000 steps of 64 samples at 10x the target (e = 0.2), horizon 10000:
    #   beta = 0.05 * (1 + 0.2 * 64 / 10000)^1000 = 0.05 * 1.00128^1000 = 0.05 * 3.5937 = 0.17968
    c = A.AdaptiveKLController(0.05, target=1.0, horizon=10000.0)
    for _ in range(1000):
        c.update(10.0, n_steps=64)
    assert c.beta == pytest.approx(0.05 * (1 + 0.2 * 64 / 10000) ** 1000) == pytest.approx(0.17968, rel=1e-4)


def test_scale_rewards_group_batch_none():
    # rewards [[1, 0], [1, 1]]: group means 0.5, 1 -> r - mean = [0.5, -0.5, 0, 0]
    #   none : [0.5, -0.5, 0, 0]
    #   group: group stds (n-1) sqrt(0.5) = 0.707107 and 0 -> [0.5/0.707207, -.., 0, 0]
    #   batch: std of [1, 0, 1, 1] (n-1): mean .75, var (3*.0625 + .5625)/3 = .25, std .5
    #          -> [0.5/0.5001, -0.5/0.5001, 0, 0]
    rewards, valid = torch.tensor([1.0, 0.0, 1.0, 1.0]), torch.ones(4, dtype=torch.bool)
    adv = {s: A.outcome_advantages("grpo", A.AdvantageInputs(rewards, valid, 2, s))
           for s in ("none", "group", "batch")}
    assert adv["none"].tolist() == [0.5, -0.5, 0.0, 0.0]
    assert adv["group"].tolist() == pytest.approx([0.5 / 0.707207, -0.5 / 0.707207, 0, 0], rel=1e-5)
    assert adv["batch"].tolist() == pytest.approx([0.5 / 0.5001, -0.5 / 0.5001, 0, 0], rel=1e-6)


def test_scale_rewards_old_booleans_still_load(tmp_path):
    from rlvr.trainer.config import TrainConfig, load_config
    toml = tmp_path / "old.toml"
    toml.write_text('preset = "grpo"\nscale_rewards = false\n')
    assert load_config(toml).scale_rewards == "none"
    assert load_config(None, ["scale_rewards=true"]).scale_rewards == "group"
    assert TrainConfig(scale_rewards=False).scale_rewards == "none"
    with pytest.raises(ValueError, match="scale_rewards"):
        TrainConfig(scale_rewards="sometimes")


def test_gspo_token_has_gspos_value_and_per_token_gradients():
    # One sequence of 2 tokens, pi_old = pi (log s = 0, s = 1), eps wide enough not to clip.
    #   GSPO:       obj_t = s * A_t with s = exp((lp1 + lp2)/2): d(sum obj)/d lp1 = (A1 + A2)/2
    #   GSPO-token: obj_t = sg[s] * pi_t/sg[pi_t] * A_t:       d(sum obj)/d lp_t = A_t
    # A = [1, 3]: GSPO gives [2, 2], GSPO-token [1, 3]; A = [2, 2]: both [2, 2].
    mask = b([T, T])
    for adv, want_gspo, want_token in (([1.0, 3.0], [2.0, 2.0], [1.0, 3.0]),
                                       ([2.0, 2.0], [2.0, 2.0], [2.0, 2.0])):
        grads, values = {}, {}
        for kind in ("gspo", "gspo_token"):
            logp = t([0.0, 0.0]).requires_grad_()
            obj, _, _ = A.policy_objective(kind, logp, t([0.0, 0.0]), t(adv), mask, 0.5, 0.5)
            obj.sum().backward()
            grads[kind], values[kind] = logp.grad[0].tolist(), obj.detach()
        assert grads["gspo"] == pytest.approx(want_gspo) and grads["gspo_token"] == pytest.approx(want_token)
        assert torch.equal(values["gspo"], values["gspo_token"])


def test_gspo_token_clips_per_sequence():
    # log ratios [0.2, 0.4] -> log s = 0.3, s = 1.34986 > 1 + 0.2: with A > 0 every token of the
    # sequence is clipped (value 1.2 * A) and carries no gradient, as in GSPO.
    logp = t([0.2, 0.4]).requires_grad_()
    obj, low, high = A.policy_objective("gspo_token", logp, t([0.0, 0.0]), t([1.0, 1.0]),
                                        b([T, T]), 0.2, 0.2)
    obj.sum().backward()
    assert obj[0].tolist() == pytest.approx([1.2, 1.2]) and high.tolist() == [[T, T]]
    assert logp.grad.abs().sum() == 0


def test_value_clipping_by_hand():
    # V_old = 0, return G = 2, clip 0.2:
    #   V = 1.0: unclipped (1 - 2)^2 = 1; V_clip = 0 + clamp(1, -.2, .2) = 0.2 -> (0.2 - 2)^2 = 3.24
    #            max = 3.24, and its gradient in V is 0 (the clamp is saturated)
    #   V = 0.1: inside the band, V_clip = V -> (0.1 - 2)^2 = 3.61, gradient 2 (V - G) = -3.8
    values = t([1.0, 0.1]).requires_grad_()
    loss = A.value_loss(values, t([2.0, 2.0]), b([T, T]), t([0.0, 0.0]), clip=0.2)
    loss.sum().backward()
    assert loss[0].tolist() == pytest.approx([3.24, 3.61])
    assert values.grad[0].tolist() == pytest.approx([0.0, -3.8])
    assert A.value_loss(t([1.0]), t([2.0]), b([T])).tolist() == [[1.0]]     # clip 0: plain MSE


def test_whitening_by_hand():
    # [1, 2, 3] (4th masked out): mean 2, unbiased std 1 -> [-1, 0, 1, 0]
    x, m = t([1.0, 2.0, 3.0, 9.0]), b([T, T, T, F])
    assert A.whiten(x, m)[0].tolist() == pytest.approx([-1.0, 0.0, 1.0, 0.0], abs=1e-7)
    # two micro-batches whitened with the whole batch's statistics equal the whole at once
    stats = A.whitening_stats(torch.cat([torch.tensor([1.0, 2.0]), torch.tensor([3.0])]))
    assert stats == pytest.approx((2.0, 1.0))


def test_reinforce_pp_advantages_by_hand():
    # Token KL [1, 2, 3], beta 0.1, outcome 1: token rewards [-0.1, -0.2, -0.3 + 1 = 0.7]
    # returns-to-go G = [0.4, 0.5, 0.7]; whitened: mean 0.533333, unbiased std 0.152753
    #   -> [(0.4-.533333)/.152753, (0.5-.533333)/.152753, (0.7-.533333)/.152753]
    #    = [-0.872872, -0.218218, 1.091089]
    mask = b([T, T, T])
    token_r = A.kl_shaped_token_rewards(torch.tensor([1.0]), t([1.0, 2.0, 3.0]), mask, 0.1)
    adv, ret = A.TOKEN_ADVANTAGES["reinforce_pp"](token_r, None, mask, 1.0, 0.95)
    assert ret[0].tolist() == pytest.approx([0.4, 0.5, 0.7])
    assert A.whiten(adv, mask)[0].tolist() == pytest.approx([-0.872872, -0.218218, 1.091089], rel=1e-5)


def test_tables_name_every_estimator_and_loss():
    # Adding one is one function and one table row; the config's choices come from the tables.
    from rlvr.trainer.config import TrainConfig
    assert set(A.ADVANTAGES) == {"reinforce", "rloo", "grpo", "gae", "reinforce_pp", "filter"}
    assert set(A.POLICY_LOSSES) == {"pg", "clip", "gspo", "gspo_token", "nll", "none",
                                     "clip_cov", "kl_cov"}
    with pytest.raises(ValueError, match="policy_loss"):
        TrainConfig(policy_loss="nope")
    with pytest.raises(ValueError, match="unknown policy loss"):
        A.policy_objective("nope", t([0.0]), t([0.0]), t([0.0]), b([T]))
