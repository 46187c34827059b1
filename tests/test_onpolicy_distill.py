"""On-policy distillation (GKD, Agarwal et al. 2024): the student samples, a frozen teacher
scores each position it visited, and the loss is the token-mean reverse KL(student || teacher)
over the vocabulary. Checked: the KL and its gradient worked by hand on a toy vocabulary; the
block-wise computation equal to the definition; the fast forward equal to the reference one;
the update's gradient equal to the hand-computed loss of a batch; exactly zero loss and
gradient when student = teacher; a student moving toward its teacher; a teacher with another
vocabulary refused in one line; the preset through `rlvr train`."""
from __future__ import annotations

import json
import math
import warnings

import pytest
import torch

from rlvr.cli import main
from rlvr.trainer.objective import algorithms as alg
from rlvr.trainer.config import TrainConfig
from rlvr.trainer.objective.distill import logprobs_and_reverse_kl
from rlvr.trainer.run.loop import Trainer
from rlvr.trainer.models.loading import load_policy
from rlvr.trainer.models.tiny import build_tiny_model
from test_forwards import update, varied     # a shared system turn, completions of 1..16 tokens

TINY = {"prompts_per_step": 2, "group_size": 3, "max_completion_length": 16,
        "micro_batch_size": 3, "lr": 1e-2, "progress": False, "checkpoint_every": 0,
        "reward_deadline_s": 0, "tensorboard": False, "steps": 2, "max_grad_norm": 0.0,
        "env_kwargs": {"n_terms": 2, "max_value": 9, "prompt_style": "base"}}


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """Another random tiny model with the student's tokenizer (seed 1 instead of 0)."""
    return build_tiny_model(tmp_path_factory.mktemp("teacher") / "model", seed=1)


def trainer(model, out, teacher, preset="onpolicy_distill", **kw) -> Trainer:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)       # "most completions hit the limit"
        return Trainer(TrainConfig(**{**TINY, "preset": preset, "model": model,
                                      "teacher": teacher, "output_dir": str(out), **kw}))


# --- the loss, by hand ----------------------------------------------------------------------
def test_reverse_kl_and_its_gradient_worked_by_hand():
    # student logits (0, ln 3): p = (1/4, 3/4); teacher q = (1/2, 1/2)
    # KL = 1/4 ln(1/4 / 1/2) + 3/4 ln(3/4 / 1/2) = -1/4 ln 2 + 3/4 ln(3/2) = 3/4 ln 3 - ln 2
    # dKL/dz_v = p_v (ln p_v - ln q_v - KL):
    #   z_0: 1/4 (ln(1/2) - KL),  z_1: 3/4 (ln(3/2) - KL)    (they sum to 0: softmax is shift-free)
    kl = 0.75 * math.log(3) - math.log(2)
    want_grad = [0.25 * (math.log(0.5) - kl), 0.75 * (math.log(1.5) - kl)]
    z = torch.tensor([[[0.0, math.log(3)]]], requires_grad=True)
    q = torch.log(torch.tensor([[[0.5, 0.5]]]))
    defined = alg.reverse_kl(torch.log_softmax(z, -1), q)
    defined.sum().backward()
    assert float(defined) == pytest.approx(kl, abs=1e-6)
    assert z.grad[0, 0].tolist() == pytest.approx(want_grad, abs=1e-6)
    z2 = z.detach().clone().requires_grad_()
    _, blockwise, _ = logprobs_and_reverse_kl(z2, torch.zeros(1, 1, dtype=torch.long), q)
    blockwise.sum().backward()
    assert float(blockwise) == pytest.approx(kl, abs=1e-6)
    assert z2.grad[0, 0].tolist() == pytest.approx(want_grad, abs=1e-6)


@pytest.mark.parametrize("temperature,block", [(1.0, 1 << 22), (0.7, 5), (1.3, 10)])
def test_blockwise_kl_and_logprobs_equal_the_definition_on_a_vocabulary_of_5(temperature, block):
    """sum_v p_s(v) (log p_s(v) - log p_t(v)) and log p_s(y) from autograd on the definition,
    against the block-wise function (block = 5 entries: one position per block), with an
    upstream gradient on both outputs at once."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 3, 5, generator=g, dtype=torch.float64)
    teacher = torch.log_softmax(torch.randn(2, 3, 5, generator=g, dtype=torch.float64), -1)
    targets = torch.randint(0, 5, (2, 3), generator=g)
    up_logp, up_kl = torch.randn(2, 3, generator=g), torch.randn(2, 3, generator=g)

    z = logits.clone().requires_grad_()
    p_log = torch.log_softmax(z / temperature, -1)
    kl = (p_log.exp() * (p_log - teacher)).sum(-1)                  # by hand
    logp = p_log.gather(-1, targets[..., None]).squeeze(-1)
    ((logp * up_logp).sum() + (kl * up_kl).sum()).backward()

    z2 = logits.float().requires_grad_()
    logp2, kl2, ent2 = logprobs_and_reverse_kl(z2, targets, teacher.float(), temperature,
                                               with_entropy=True, block=block)
    ((logp2 * up_logp).sum() + (kl2 * up_kl).sum()).backward()
    torch.testing.assert_close(kl2.double(), kl.detach(), atol=1e-6, rtol=0)
    torch.testing.assert_close(logp2.double(), logp.detach(), atol=1e-6, rtol=0)
    torch.testing.assert_close(ent2.double(), -(p_log.exp() * p_log).sum(-1).detach(),
                               atol=1e-6, rtol=0)
    torch.testing.assert_close(z2.grad.double(), z.grad, atol=1e-6, rtol=0)


# --- through the trainer --------------------------------------------------------------------
def hand_loss(student, teacher, rollout, temperature):
    """The loss by its definition: one plain model call per unpadded row, the reverse KL over
    the vocabulary at each completion token, summed and divided by the number of tokens."""
    total, tokens = 0.0, 0
    for p, c in zip(rollout.prompt_ids, rollout.completion_ids):
        ids = torch.tensor([p + c])
        s = torch.log_softmax(student(input_ids=ids).logits[0, len(p) - 1:-1] / temperature, -1)
        with torch.no_grad():
            t = torch.log_softmax(teacher(input_ids=ids).logits[0, len(p) - 1:-1] / temperature, -1)
        total = total + (s.exp() * (s - t)).sum()
        tokens += len(c)
    return total / tokens


@pytest.mark.parametrize("forward", ["fast", "reference"])
def test_the_update_gradient_is_the_hand_computed_reverse_kl(tiny_model, teacher, tmp_path, forward):
    tr = trainer(tiny_model, tmp_path, teacher, forward=forward, temperature=0.8)
    rollout = varied(tr.collect()[0], tr.tokenizer)
    _, metrics, grad = update(tr, rollout)
    student = load_policy(tiny_model, "float32", "cpu")        # the same starting weights
    loss = hand_loss(student, load_policy(teacher, "float32", "cpu"), rollout, 0.8)
    loss.backward()
    want = torch.cat([p.grad.flatten() for p in student.parameters()])
    assert metrics["kl/teacher"] == pytest.approx(float(loss), rel=1e-4)
    assert metrics["loss"] == pytest.approx(float(loss), rel=1e-4)
    cos = torch.nn.functional.cosine_similarity(grad.double(), want.double(), dim=0)
    assert want.norm() > 0 and cos >= 0.99999, float(cos)
    assert float(grad.norm() / want.norm()) == pytest.approx(1.0, rel=1e-3)


def test_fast_forward_equals_the_reference_for_the_teachers_logprobs_and_the_kl(
        tiny_model, teacher, tmp_path):
    fast = trainer(tiny_model, tmp_path / "f", teacher)
    ref = trainer(tiny_model, tmp_path / "r", teacher, forward="reference")
    rollout = varied(fast.collect()[0], fast.tokenizer)
    out = {}
    for name, tr in (("fast", fast), ("reference", ref)):
        rows, micro = {}, tr.forward.micro_batches(rollout, 3)
        with tr.forward.pass_over(micro):       # the shared prefix's gradient goes through at its end
            for mb in micro:
                q = tr.forward.vocab_logprobs(tr.teacher, mb, 0.9)
                logp, kl, _ = tr.forward.logprobs_and_kl(tr.policy, mb, q, 0.9)
                (kl * mb.mask).sum().backward()
                for k, row in enumerate(mb.rows):
                    rows[row] = (q[k][mb.mask[k]], logp[k][mb.mask[k]].detach(),
                                 kl[k][mb.mask[k]].detach())
        out[name] = (rows, torch.cat([p.grad.flatten() for p in tr.policy.parameters()]))
    (fr, fg), (rr, rg) = out["fast"], out["reference"]
    assert any(mb.prefix is not None for mb in fast.forward.micro_batches(rollout, 3))
    assert fr.keys() == rr.keys() == set(range(len(rollout)))
    for row in fr:
        for a, b in zip(fr[row], rr[row]):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    cos = torch.nn.functional.cosine_similarity(fg.double(), rg.double(), dim=0)
    assert fg.norm() > 0 and cos >= 0.99999, float(cos)


@pytest.mark.parametrize("forward", ["fast", "reference"])
def test_student_equal_to_teacher_has_exactly_zero_loss_and_gradient(tiny_model, tmp_path, forward):
    tr = trainer(tiny_model, tmp_path, tiny_model, forward=forward)
    _, metrics, grad = update(tr, varied(tr.collect()[0], tr.tokenizer))
    assert metrics["kl/teacher"] == 0.0 and metrics["loss"] == 0.0
    if forward == "fast":     # its gradient is p (log p - log q - KL) / T: 0 * anything
        assert metrics["grad_norm"] == 0.0 and not grad.any()
    else:                     # autograd through log_softmax leaves p - p * sum(p): rounding
        assert metrics["grad_norm"] < 1e-6


def test_a_few_steps_move_the_student_toward_the_teacher(tiny_model, teacher, tmp_path):
    """Three updates on one batch: the reverse KL at the current weights (measured at the
    start of each update) falls each time."""
    tr = trainer(tiny_model, tmp_path, teacher, lr=3e-3)
    batch = tr.prepare(tr.collect()[0])
    kls = [tr.update(batch, first=True)["kl/teacher"] for _ in range(4)]
    assert all(b < a for a, b in zip(kls, kls[1:])), kls
    assert kls[-1] < 0.8 * kls[0], kls


def test_distillation_adds_to_the_rewards_policy_gradient(tiny_model, teacher, tmp_path):
    """grpo with a teacher: loss = GRPO's policy loss + distill_coef * reverse KL."""
    tr = trainer(tiny_model, tmp_path, teacher, preset="grpo", beta=0.0, distill_coef=0.5,
                 env_kwargs={**TINY["env_kwargs"], "format_weight": 1.0})
    rollout = tr.collect()[0]
    rollout.rewards = torch.tensor([1.0, 0.0, 0.5, 0.0, 1.0, 1.0])     # signal in both groups
    m = tr.update(tr.prepare(rollout), first=True)
    assert m["loss/distill"] == pytest.approx(0.5 * m["kl/teacher"], rel=1e-6)
    assert m["loss"] == pytest.approx(m["loss/policy"] + m["loss/distill"], rel=1e-5, abs=1e-7)
    assert m["kl/teacher"] > 0 and m["loss/policy"] != 0.0


# --- configuration --------------------------------------------------------------------------
def test_the_preset_without_a_teacher_is_refused_naming_the_field(tiny_model, tmp_path):
    with pytest.raises(ValueError, match="set teacher="):
        trainer(tiny_model, tmp_path, "")


def test_a_teacher_with_another_vocabulary_is_refused_in_one_line(tiny_model, tmp_path, capsys):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    other = tmp_path / "other"
    tok = AutoTokenizer.from_pretrained(tiny_model)
    tok.add_tokens(["<extra>"])
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    model.resize_token_embeddings(len(tok))
    model.save_pretrained(other)
    tok.save_pretrained(other)
    capsys.readouterr()
    code = main(["train", "preset=onpolicy_distill", f"model={tiny_model}", f"teacher={other}",
                 f"output_dir={tmp_path / 'run'}", "steps=1", "reward_deadline_s=0",
                 "progress=false"])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert code == 2 and "Traceback" not in err
    assert len(errors) == 1 and "another vocabulary" in errors[0] and "tokenizer" in errors[0], err
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_onpolicy_distill_trains_through_the_cli(tiny_model, teacher, tmp_path):
    from rlvr.trainer.config import load_config
    from pathlib import Path
    config = Path(__file__).resolve().parents[1] / "configs" / "onpolicy_distill_arithmetic.toml"
    assert load_config(config).preset == "onpolicy_distill"
    out = tmp_path / "run"
    args = ["train", "--config", str(config), f"model={tiny_model}", f"teacher={teacher}",
            f"output_dir={out}", "steps=2", "eval_every=0"]
    args += [f"{k}={json.dumps(v) if isinstance(v, dict) else v}" for k, v in TINY.items()
             if k != "steps"]
    assert main(args) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["kl/teacher"] > 0 and r["loss"] == pytest.approx(r["loss/distill"]) for r in rows)
    assert rows[0]["grad_norm"] > 0 and rows[0]["loss/policy"] == 0.0
    saved = json.loads((out / "config.json").read_text())["config"]
    assert saved["teacher"] == teacher and saved["preset"] == "onpolicy_distill"
