"""Expert iteration / rejection-sampling fine-tuning (STaR, Zelikman et al. 2022; RFT, Yuan et
al. 2023) as a preset: sample from the current policy, keep the completions the verifier
accepts, take SFT steps on them. Checked: the filter by hand; only verified samples carry loss,
the rest exactly zero gradient; the update's gradient equal to the hand-computed NLL of the
kept completions; the loop keeping exactly what a fake verifier marks right; the preset
through `rlvr train`."""
from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path

import pytest
import torch

from rlvr.cli import main
from rlvr.core import Verdict
from rlvr.trainer.objective import algorithms as alg
from rlvr.trainer.config import TrainConfig, load_config
from rlvr.trainer.run.loop import Trainer
from rlvr.trainer.models.loading import load_policy

TINY = {"prompts_per_step": 2, "group_size": 3, "max_completion_length": 12,
        "micro_batch_size": 3, "lr": 1e-2, "progress": False, "checkpoint_every": 0,
        "reward_deadline_s": 0, "tensorboard": False, "steps": 2, "max_grad_norm": 0.0,
        "env_kwargs": {"n_terms": 2, "max_value": 9, "prompt_style": "base"}}
CONFIG = Path(__file__).resolve().parents[1] / "configs" / "expert_iteration_arithmetic.toml"


def trainer(model, out, **kw) -> Trainer:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)       # "most completions hit the limit"
        return Trainer(TrainConfig(**{**TINY, "preset": "expert_iteration", "model": model,
                                      "output_dir": str(out), **kw}))


def answer(score, status="ok", fmt=0.0):
    """A verdict of the arithmetic environment's shape: the answer reward is the primary."""
    return Verdict(score=score + fmt, status=status, primary="numeric_match",
                   components={"numeric_match": score, "think_format": fmt})


# Six completions, two prompts: what the verifier said, and whether expert iteration keeps it.
VERDICTS = [
    (answer(1.0), True),                      # solved
    (answer(0.0), False),                     # wrong
    (answer(1.0, status="error"), False),     # our verifier crashed: not a verdict to learn from
    (answer(1.0, status="unparsed"), False),  # a score without an ok status: not verified
    (answer(1.0, fmt=1.0), True),             # solved, well formatted
    (answer(0.0, fmt=1.0), False),            # format reward 1.0, wrong answer: not solved
]


def test_the_filter_keeps_ok_verdicts_whose_answer_reaches_the_threshold():
    ok = torch.tensor([True, True, False, True])
    scores = torch.tensor([1.0, 0.5, 1.0, 0.9])
    assert alg.filter_advantages(ok, scores, 1.0).tolist() == [1.0, 0.0, 0.0, 0.0]
    assert alg.filter_advantages(ok, scores, 0.5).tolist() == [1.0, 1.0, 0.0, 1.0]


def judged(rollout):
    """`rollout` with the verdicts above, scored as the loop scores (trainer/sampling/rollout.py)."""
    r = copy.deepcopy(rollout)
    r.verdicts = [v for v, _ in VERDICTS]
    r.rewards = torch.tensor([v.score for v in r.verdicts])
    r.valid = torch.tensor([not v.failed for v in r.verdicts])
    return r


def kept_rows():
    return {i for i, (_, keep) in enumerate(VERDICTS) if keep}


@pytest.mark.parametrize("forward", ["fast", "reference"])
def test_only_verified_samples_carry_loss_and_unverified_get_exactly_zero_gradient(
        tiny_model, tmp_path, forward):
    tr = trainer(tiny_model, tmp_path, forward=forward)
    rollout = judged(tr.collect()[0])
    batch = tr.prepare(rollout)
    seen, logps = set(), []
    original = tr.forward.logprobs

    def keep_graph(*a, **kw):          # the log-probs the loss is built from, with their .grad
        logp, entropy = original(*a, **kw)
        if logp.requires_grad:
            logp.retain_grad()
        logps.append((a[1], logp))
        return logp, entropy
    tr.forward.logprobs = keep_graph
    tr.update(batch, first=True)
    n_kept = sum(len(rollout.completion_ids[i]) for i in kept_rows())
    for mb, mask in zip(batch.micro, batch.loss_mask):
        for k, row in enumerate(mb.rows):
            assert bool(mask[k].any()) == (row in kept_rows()), row
    for mb, logp in logps:
        for k, row in enumerate(mb.rows):
            grad = torch.zeros_like(logp[k]) if logp.grad is None else logp.grad[k]
            seen.add(row)
            if row in kept_rows():     # d/d log p of -(sum over kept tokens)/n_kept
                want = torch.where(mb.mask[k], -1.0 / n_kept, 0.0)
                torch.testing.assert_close(grad, want, atol=1e-7, rtol=0)
            else:
                assert not grad.any(), row
    assert seen == set(range(len(rollout)))
    assert batch.stats["samples/kept_frac"] == pytest.approx(2 / 6)


def test_the_update_gradient_is_the_nll_of_the_kept_completions(tiny_model, tmp_path):
    tr = trainer(tiny_model, tmp_path)
    rollout = judged(tr.collect()[0])
    params = [p for grp in tr.optimizer.param_groups for p in grp["params"]]
    grads, step = [], tr.optimizer.step
    tr.optimizer.step = lambda *a, **kw: (grads.extend(p.grad.clone().flatten() for p in params),
                                          step(*a, **kw))
    metrics = tr.update(tr.prepare(rollout), first=True)
    # by hand: -(1/N) sum over the kept completions' tokens of log pi(y_t | x, y_<t),
    # N = their token count; one plain model call per unpadded row
    model = load_policy(tiny_model, "float32", "cpu")
    total, n = 0.0, 0
    for row in sorted(kept_rows()):
        p, c = rollout.prompt_ids[row], rollout.completion_ids[row]
        logits = model(input_ids=torch.tensor([p + c])).logits[0, len(p) - 1:-1]
        total = total - torch.log_softmax(logits, -1)[torch.arange(len(c)), torch.tensor(c)].sum()
        n += len(c)
    (total / n).backward()
    want = torch.cat([p.grad.flatten() for p in model.parameters()])
    got = torch.cat(grads)
    assert metrics["loss"] == pytest.approx((total / n).item(), rel=1e-5)
    cos = torch.nn.functional.cosine_similarity(got.double(), want.double(), dim=0)
    assert cos >= 0.99999 and float(got.norm() / want.norm()) == pytest.approx(1.0, rel=1e-4)


def test_the_loop_keeps_exactly_what_the_verifier_marks_right(tiny_model, tmp_path):
    """Whole training steps with a fake verifier that accepts rows 1 and 5 of each batch: the
    kept share is 2/6, the step trains (SFT epochs: inner_steps = 2), and with a verifier that
    accepts nothing, nothing reaches the weights."""
    tr = trainer(tiny_model, tmp_path, inner_steps=2)

    def verifier(accept):
        return lambda tasks, completions: [answer(1.0 if i in accept else 0.0)
                                           for i in range(len(completions))]
    tr.env.reward.score_batch = verifier({1, 5})
    metrics, samples = tr.train_step()
    assert metrics["samples/kept_frac"] == pytest.approx(2 / 6)
    assert metrics["inner_steps"] == 2 and metrics["grad_norm"] > 0 and metrics["loss"] > 0
    assert [s["advantage"] for s in samples] == [0.0, 1.0, 0.0, 0.0]
    tr.env.reward.score_batch = verifier(set())
    before = [p.detach().clone() for p in tr.policy.parameters()]
    tr.optimizer.state.clear()          # no momentum from the first step
    metrics, _ = tr.train_step()
    assert metrics["samples/kept_frac"] == 0 and metrics["grad_norm"] == 0
    assert all(torch.equal(a, b) for a, b in zip(before, tr.policy.parameters()))


def test_configuration_refuses_what_expert_iteration_cannot_mean():
    with pytest.raises(ValueError, match="advantage='filter'"):
        TrainConfig(policy_loss="nll")                     # NLL weighted by GRPO advantages
    with pytest.raises(ValueError, match="kl_in='loss'"):
        TrainConfig(preset="expert_iteration", beta=0.05, kl_estimator="k1", kl_in="reward")
    TrainConfig(preset="expert_iteration", inner_steps=3, strict=True)   # epochs: allowed


def test_expert_iteration_trains_through_the_cli(tiny_model, tmp_path, monkeypatch):
    """The shipped config through `rlvr train`, with a verifier that accepts the first sample
    of each batch (a random model solves nothing on its own)."""
    assert load_config(CONFIG).preset == "expert_iteration"
    from rlvr.core import WeightedSum
    monkeypatch.setattr(WeightedSum, "score_batch", lambda self, tasks, completions: [
        answer(1.0 if i == 0 else 0.0) for i in range(len(completions))])
    out = tmp_path / "run"
    args = ["train", "--config", str(CONFIG), f"model={tiny_model}", f"output_dir={out}",
            "eval_every=0"]
    args += [f"{k}={json.dumps(v) if isinstance(v, dict) else v}" for k, v in TINY.items()]
    assert main(args) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["samples/kept_frac"] == pytest.approx(1 / 6) and r["grad_norm"] > 0 for r in rows)
    assert rows[0]["inner_steps"] == load_config(CONFIG).inner_steps
    assert json.loads((out / "config.json").read_text())["config"]["preset"] == "expert_iteration"
