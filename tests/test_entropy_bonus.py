"""The entropy bonus (entropy_coef): the entropy's value and gradient by hand and through the
block-wise log-softmax, the fast forward equal to the reference one with the bonus in the
loss, work-skipping rules that account for it, and entropy_coef = 0 leaving the update as it
was, bit for bit."""
from __future__ import annotations

import math
import types

import pytest
import torch

from rlvr.trainer.forwards.logprobs import selective_log_softmax
from rlvr.trainer.objective.update import PolicyUpdate

LN2 = math.log(2.0)


def formula(logits, targets, temperature):
    """The definitions, by autograd: log p_y and H = -sum p log p of softmax(z / T), in the
    logits' precision (at least float32)."""
    z = logits if logits.dtype == torch.float64 else logits.float()
    logp_all = torch.log_softmax(z / temperature, -1)
    logp = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return logp, -(logp_all.exp() * logp_all).sum(-1)


def case(m=3, C=5, V=97, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(m, C, V, generator=g) * 3
    targets = torch.randint(0, V, (m, C), generator=g)
    return logits, targets, torch.randn(m, C, generator=g), torch.randn(m, C, generator=g)


def grads(fn, logits, targets, w_logp, w_ent, temperature):
    leaf = logits.clone().requires_grad_(True)
    logp, entropy = fn(leaf.clone(), targets, temperature)    # a non-leaf, as a model's logits
    loss = (logp * w_logp).sum() if w_logp is not None else 0.0
    loss = loss + (entropy * w_ent).sum() if w_ent is not None else loss
    loss.backward()
    return logp.detach(), entropy.detach(), leaf.grad


def test_the_entropy_and_its_gradient_by_hand():
    # Row 0: z = (0, 0, ln 2), so p = (1/4, 1/4, 1/2) and H = 2 (1/4) ln 4 + (1/2) ln 2 = 1.5 ln 2;
    # dH/dz_v = -p_v (log p_v + H): -(1/4)(-2 ln 2 + 1.5 ln 2) = ln 2 / 8 twice, and
    # -(1/2)(-ln 2 + 1.5 ln 2) = -ln 2 / 4. Row 1: uniform, H = ln 3 and a zero gradient.
    # At T = 2 the same p comes from z = (0, 0, 2 ln 2), and the gradient halves.
    for T in (1.0, 2.0):
        logits = torch.tensor([[[0.0, 0.0, T * LN2]], [[1.0, 1.0, 1.0]]], requires_grad=True)
        _, h = selective_log_softmax(logits * 1.0, torch.zeros(2, 1, dtype=torch.long), T,
                                     with_entropy=True)
        torch.testing.assert_close(h, torch.tensor([[1.5 * LN2], [math.log(3.0)]]),
                                   atol=1e-6, rtol=0)
        h.sum().backward()
        want = torch.tensor([[[LN2 / 8, LN2 / 8, -LN2 / 4]], [[0.0, 0.0, 0.0]]]) / T
        torch.testing.assert_close(logits.grad, want, atol=1e-6, rtol=0)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("block", [10_000, 97 * 2, 40])    # whole rows, parts of rows, < V
@pytest.mark.parametrize("which", ["both", "entropy"])
def test_block_wise_entropy_gradient_equals_the_formula(temperature, block, which):
    logits, targets, w_logp, w_ent = case()
    w_logp = w_logp if which == "both" else None
    ours = lambda x, t, T: selective_log_softmax(x, t, T, with_entropy=True, block=block)
    lp, h, g = grads(ours, logits, targets, w_logp, w_ent, temperature)
    # the definition in float64: ours (float32 arithmetic) within float32 rounding of it
    lp0, h0, g0 = grads(formula, logits.double(), targets, None if w_logp is None else
                        w_logp.double(), w_ent.double(), temperature)
    torch.testing.assert_close(lp.double(), lp0, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(h.double(), h0, rtol=0, atol=1e-5)
    torch.testing.assert_close(g.double(), g0, rtol=0, atol=2e-6)


def test_bfloat16_logits_get_the_entropy_gradient_too():
    logits, targets, w_logp, w_ent = case()
    _, _, g = grads(lambda x, t, T: selective_log_softmax(x, t, T, with_entropy=True),
                    logits.bfloat16(), targets, w_logp, w_ent, 0.7)
    _, _, g0 = grads(formula, logits.bfloat16(), targets, w_logp, w_ent, 0.7)
    assert g.dtype == torch.bfloat16
    torch.testing.assert_close(g.float(), g0.float(), rtol=0, atol=2e-2)


def test_an_unused_entropy_leaves_the_log_prob_gradient_bit_for_bit():
    logits, targets, w_logp, _ = case()
    with_h = grads(lambda x, t, T: selective_log_softmax(x, t, T, with_entropy=True),
                   logits, targets, w_logp, None, 0.7)[2]
    without = grads(lambda x, t, T: (selective_log_softmax(x, t, T)[0], torch.zeros(())),
                    logits, targets, w_logp, None, 0.7)[2]
    assert torch.equal(with_h, without)


def test_the_distillation_forward_carries_the_entropy_gradient():
    from rlvr.trainer.objective.distill import logprobs_and_reverse_kl
    logits, targets, w_logp, w_ent = case()
    teacher = torch.log_softmax(torch.randn_like(logits), -1)
    w_kl = torch.randn_like(w_logp)

    def run(fn, dtype=torch.float32):
        leaf = logits.detach().to(dtype).clone().requires_grad_(True)
        logp, kl, h = fn(leaf * 1.0)
        w = [x.to(dtype) for x in (w_logp, w_kl * use_kl, w_ent)]
        ((logp * w[0]).sum() + (kl * w[1]).sum() + (h * w[2]).sum()).backward()
        return leaf.grad

    def by_definition(x):           # in float64
        logp_all = torch.log_softmax(x / 0.7, -1)
        return (logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1),
                (logp_all.exp() * (logp_all - teacher.double())).sum(-1),
                -(logp_all.exp() * logp_all).sum(-1))
    # without and with the KL (whose float32 gradient alone is ~5e-6 off the float64 one)
    for use_kl, atol in ((0.0, 2e-6), (1.0, 1e-5)):
        ours = run(lambda x: logprobs_and_reverse_kl(x, targets, teacher, 0.7,
                                                     with_entropy=True))
        torch.testing.assert_close(ours.double(), run(by_definition, torch.float64), rtol=0,
                                   atol=atol)


# --- the loss term ------------------------------------------------------------------------------
H = torch.tensor([[1.0, 2.0, 3.0], [0.5, 0.5, 9.0]])
MASK = torch.tensor([[True, True, True], [True, True, False]])


@pytest.mark.parametrize("mode,want", [
    ("seq_mean_token_mean", (2.0 + 0.5) / 2),          # per-sequence means 2 and 0.5, over 2
    ("token_mean", (6.0 + 1.0) / 5),                    # every token alike
    ("seq_mean_token_sum", (6.0 + 1.0) / 2),
    ("seq_mean_token_sum_norm", (6.0 + 1.0) / (4 * 2)),  # Dr. GRPO: L_max = 4
])
def test_the_bonus_is_the_coefficient_times_the_entropy_with_the_surrogate_s_normaliser(mode,
                                                                                        want):
    from rlvr.trainer.run.metrics import UpdateStats
    cfg = types.SimpleNamespace(entropy_coef=0.1, loss_aggregation=mode)
    acc = UpdateStats()
    h = H.clone().requires_grad_(True)
    bonus = PolicyUpdate.entropy_bonus(types.SimpleNamespace(cfg=cfg), h, MASK,
                                       {"num_seqs": 2.0, "num_tokens": 5.0, "max_len": 4}, acc)
    assert bonus.item() == pytest.approx(0.1 * want)
    assert acc.sums["loss/entropy_bonus"] == pytest.approx(0.1 * want)
    bonus.backward()
    assert h.grad[1, 2] == 0                            # padding carries nothing


# --- through the trainer ------------------------------------------------------------------------
TINY = {"prompts_per_step": 2, "group_size": 3, "max_completion_length": 12,
        "micro_batch_size": 3, "lr": 1e-2, "progress": False, "checkpoint_every": 0,
        "reward_deadline_s": 0, "tensorboard": False, "steps": 1, "beta": 0.0,
        "env_kwargs": {"n_terms": 2, "max_value": 9, "prompt_style": "base"}}


def trainer(model, out, **kw):
    from rlvr.trainer.config import TrainConfig
    from rlvr.trainer.run.loop import Trainer
    return Trainer(TrainConfig(**{**TINY, "model": model, "output_dir": str(out), **kw}))


def update(tr, rollout, steps=1):
    """`steps` inner steps on a copy of `rollout` -> (batch, metrics of each, gradients of each)."""
    import copy
    params = [p for g in tr.optimizer.param_groups for p in g["params"]]
    grads, step = [], tr.optimizer.step

    def spy(*a, **kw):
        grads.append(torch.cat([p.grad.detach().clone().flatten() for p in params]))
        return step(*a, **kw)
    tr.optimizer.step = spy
    batch = tr.prepare(copy.deepcopy(rollout))
    metrics = [tr.update(batch, first=(k == 0)) for k in range(steps)]
    return batch, metrics, grads


@pytest.fixture(scope="module")
def shared_rollout(tiny_model, tmp_path_factory):
    tr = trainer(tiny_model, tmp_path_factory.mktemp("r"))
    rollout, _ = tr.collect()
    return rollout


def flat(rollout, rewards):
    import copy
    r = copy.deepcopy(rollout)
    r.rewards = torch.tensor(rewards, dtype=torch.float32)
    r.token_entropy = None
    return r


@pytest.mark.parametrize("preset", ["grpo", "dapo"])
def test_fast_equals_reference_with_the_bonus_at_every_inner_step(tiny_model, tmp_path,
                                                                 shared_rollout, preset):
    rollout = flat(shared_rollout, [1., 0., 0., 1., 1., 1.])   # group 2 has no signal
    got = {}
    for fwd in ("fast", "reference"):
        tr = trainer(tiny_model, tmp_path / fwd, preset=preset, forward=fwd, entropy_coef=0.5,
                     inner_steps=2, dynamic_sampling=False)
        got[fwd] = update(tr, rollout, steps=2)
    (bf, mf, gf), (_, mr, gr) = got["fast"], got["reference"]
    assert not any(mb.silent for mb in bf.micro)        # the bonus reaches every group
    for k in range(2):                                   # inner step 2 has the bonus as well
        assert mf[k]["loss/entropy_bonus"] > 0
        assert mf[k]["loss/entropy_bonus"] == pytest.approx(mr[k]["loss/entropy_bonus"], rel=1e-5)
        cos = torch.nn.functional.cosine_similarity(gf[k].double(), gr[k].double(), dim=0)
        assert cos >= 0.99999, float(cos)


def test_a_group_without_signal_trains_on_the_bonus_alone(tiny_model, tmp_path, shared_rollout):
    rollout = flat(shared_rollout, [1.] * 6)         # every advantage 0
    off = update(trainer(tiny_model, tmp_path / "off"), rollout)
    on = update(trainer(tiny_model, tmp_path / "on", entropy_coef=0.5), rollout)
    ref = update(trainer(tiny_model, tmp_path / "ref", entropy_coef=0.5, forward="reference"),
                 rollout)
    assert all(mb.silent for mb in off[0].micro) and off[2][0].abs().sum() == 0
    assert not any(mb.silent for mb in on[0].micro) and on[2][0].abs().sum() > 0
    cos = torch.nn.functional.cosine_similarity(on[2][0].double(), ref[2][0].double(), dim=0)
    assert cos >= 0.99999, float(cos)
    # the bonus alone: the gradient of -coef * H, which raises the entropy
    assert on[1][0]["loss"] == pytest.approx(-on[1][0]["loss/entropy_bonus"], rel=1e-6)


@pytest.mark.parametrize("fwd", ["fast", "reference"])
def test_entropy_coef_zero_is_the_update_without_it_bit_for_bit(tiny_model, tmp_path,
                                                                shared_rollout, fwd):
    """With entropy_coef = 0 the gradients are those of a forward that never computed the
    entropy (the entropy is computed at inner step 1 for the metric only)."""
    rollout = flat(shared_rollout, [1., 0., 0., 1., 0., 1.])
    base = update(trainer(tiny_model, tmp_path / "a", forward=fwd), rollout)[2][0]
    tr = trainer(tiny_model, tmp_path / "b", forward=fwd)
    plain = tr.forward.logprobs
    tr.forward.logprobs = lambda model, mb, T=1.0, with_entropy=False: (plain(model, mb, T)[0],
                                                                         None)
    blind = update(tr, rollout)[2][0]
    assert torch.equal(base, blind)
    assert "loss/entropy_bonus" not in update(trainer(tiny_model, tmp_path / "c", forward=fwd),
                                              rollout)[1][0]
