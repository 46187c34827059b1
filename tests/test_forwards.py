"""The fast forward equals the reference forward (trainer/forwards/reference.py, log-probs by their
definition) on the same batch: log-probs within 1e-5 and gradients with cosine >= 0.99999,
across presets, LoRA, activation checkpointing, bf16 and multi-turn masks; and the same tiny
run through either path takes the same first steps."""
from __future__ import annotations

import copy

import pytest
import torch

from rlvr.trainer.config import TrainConfig
from rlvr.trainer.forwards.fast import FastForward
from rlvr.trainer.run.loop import Trainer
from rlvr.trainer.forwards.reference import ReferenceForward, Sequences

TINY = {"prompts_per_step": 2, "group_size": 3, "max_completion_length": 16, "overlong_buffer": 8,
        "micro_batch_size": 3, "lr": 1e-2, "progress": False, "checkpoint_every": 0,
        "reward_deadline_s": 0, "tensorboard": False, "steps": 2,
        "env_kwargs": {"n_terms": 2, "max_value": 9, "prompt_style": "base", "format_weight": 1.0}}


def trainer(model, out, preset="grpo", **kw) -> Trainer:
    return Trainer(TrainConfig(**{**TINY, "preset": preset, "model": model,
                                  "output_dir": str(out), **kw}))


def varied(rollout, tokenizer):
    """A shared system turn before every prompt and completions of 1..16 tokens: every fast
    trick (shared prefix, packing, the graph cut) has work to do."""
    system = tokenizer.encode("A careful assistant adds the numbers and states the sum. " * 2)
    r = copy.deepcopy(rollout)
    r.prompt_ids = [system + p for p in r.prompt_ids]
    lengths = [2, 16, 7, 16, 1, 11]
    r.completion_ids = [(c + list(range(3, 20)))[:n] for c, n in zip(r.completion_ids, lengths)]
    r.rewards = torch.tensor([1., 0., 0.5, 1., 1., 0.])
    r.token_entropy = None
    return r


def update(tr: Trainer, rollout):
    """One update on a copy of `rollout` -> (batch, metrics, the gradients stepped with)."""
    params = [p for g in tr.optimizer.param_groups for p in g["params"]]
    grads, step = [], tr.optimizer.step

    def spy(*a, **kw):
        grads.extend(p.grad.detach().clone().flatten() for p in params)
        return step(*a, **kw)
    tr.optimizer.step = spy
    batch = tr.prepare(copy.deepcopy(rollout))
    return batch, tr.update(batch, first=True), torch.cat(grads)


def per_row(batch, values):
    """{rollout row: that row's real-token values} from per-micro-batch [m, C] tensors."""
    out = {}
    for mb, v in zip(batch.micro, values):
        for k, row in enumerate(mb.rows):
            out[row] = v[k][mb.mask[k]]
    return out


def assert_same(a, b, atol=1e-5):
    assert a.keys() == b.keys()
    for row in a:
        torch.testing.assert_close(a[row], b[row], atol=atol, rtol=0)


CASES = [("grpo", {}), ("grpo", {"gradient_checkpointing": True}), ("dr_grpo", {}),
         ("dapo", {"dynamic_sampling": False}), ("gspo", {}), ("rloo", {}), ("reinforce", {}),
         ("reinforce_pp", {}), ("ppo", {}), ("grpo", {"lora_rank": 4}),
         ("grpo", {"lora_rank": 4, "gradient_checkpointing": True}), ("grpo", {"dtype": "bfloat16"})]


@pytest.mark.parametrize("preset,extra", CASES, ids=[f"{p}-{'-'.join(e) or 'plain'}" for p, e in CASES])
def test_fast_forward_equals_the_reference(tiny_model, tmp_path, preset, extra):
    fast = trainer(tiny_model, tmp_path / "f", preset, **extra)
    ref = trainer(tiny_model, tmp_path / "r", preset, **extra, forward="reference")
    assert isinstance(fast.forward, FastForward) and isinstance(ref.forward, ReferenceForward)
    rollout, _ = fast.collect()
    rollout = varied(rollout, fast.tokenizer)
    start = weights(fast)
    (bf, mf, gf), (br, mr, gr) = update(fast, rollout), update(ref, rollout)
    assert any(mb.prefix is not None for mb in bf.micro)          # the fast tricks ran
    assert all(isinstance(mb, Sequences) for mb in br.micro)
    bf16 = extra.get("dtype") == "bfloat16"
    atol = 2e-2 if bf16 else 1e-5       # bf16: different reduction orders under autocast
    pi_old = lambda tr, b: per_row(b, tr.learner.inner_steps(b).old_logp)    # taken at step 1
    assert_same(pi_old(fast, bf), pi_old(ref, br), atol)     # pi_old = pi
    if bf.ref_logp[0] is not None:
        assert_same(per_row(bf, bf.ref_logp), per_row(br, br.ref_logp), atol)
    if bf.old_values[0] is not None:
        assert_same(per_row(bf, bf.old_values), per_row(br, br.old_values), atol)
    assert_same(per_row(bf, bf.advantages), per_row(br, br.advantages), 1e-4 if not bf16 else 5e-2)
    cos = torch.nn.functional.cosine_similarity(gf.double(), gr.double(), dim=0)
    assert gf.abs().sum() > 0 and cos >= (0.999 if bf16 else 0.99999), float(cos)
    assert mf["loss"] == pytest.approx(mr["loss"], rel=1e-3 if not bf16 else 5e-2, abs=1e-6)
    assert mf["entropy"] == pytest.approx(mr["entropy"], rel=1e-4 if not bf16 else 2e-2)
    assert_same_step(start, fast, ref, 1e-3 if not bf16 else 0.2)


def weights(tr: Trainer) -> dict:
    return {name: p.detach().clone() for name, p in tr.policy.named_parameters()}


def assert_same_step(start: dict, a: Trainer, b: Trainer, share: float):
    """The two steps (weights now minus `start`) differ by at most `share` of the step, in
    norm. Not element by element: AdamW's first step is lr * g / (|g| + eps) per element, so
    where a gradient element is near 0 its rounding alone can move it by ~lr."""
    for (name, p), q in zip(a.policy.named_parameters(), b.policy.parameters()):
        da, db = (p - start[name]).detach().double(), (q - start[name]).detach().double()
        gap = float((da - db).norm() / da.norm().clamp_min(1e-12))
        assert gap <= share, (name, gap)


def test_the_same_run_takes_the_same_first_steps(tiny_model, tmp_path):
    """Two whole training steps, each path sampling its own rollouts (the reference one with
    plain `generate`): the same draws from the same weights, so the same rewards, losses and
    weights after each step."""
    runs = {name: trainer(tiny_model, tmp_path / name, "grpo", forward=name,
                          share_prefix="false", beta=0.1)
            for name in ("fast", "reference")}
    start = weights(runs["fast"])
    for _ in range(2):
        got = {name: tr.train_step()[0] for name, tr in runs.items()}
        for key in ("reward", "loss", "grad_norm", "kl", "entropy"):
            assert got["fast"][key] == pytest.approx(got["reference"][key], rel=1e-4, abs=1e-7), key
        assert_same_step(start, runs["fast"], runs["reference"], 1e-3)


def test_multi_turn_masks_give_the_same_update(tiny_model, tmp_path):
    """An episode's environment tokens (tool results) sit inside the completion and carry no
    loss: both forwards read the same policy-token mask and give the same gradients."""
    from rlvr.envs.multiturn import Episode
    fast = trainer(tiny_model, tmp_path / "f", "grpo", beta=0.1)
    ref = trainer(tiny_model, tmp_path / "r", "grpo", beta=0.1, forward="reference")
    rollout, _ = fast.collect()
    rollout = varied(rollout, fast.tokenizer)
    for i, ids in enumerate(rollout.completion_ids):
        ep = Episode("")
        ep.token_ids, ep.token_mask = list(ids), [k % 3 != 1 for k in range(len(ids))]
        rollout.completions[i] = ep
    (bf, _, gf), (br, _, gr) = update(fast, rollout), update(ref, rollout)
    assert_same(per_row(bf, bf.loss_mask), per_row(br, br.loss_mask), 0)
    assert any((~m & mb.mask).any() for m, mb in zip(bf.loss_mask, bf.micro))   # masked tokens
    cos = torch.nn.functional.cosine_similarity(gf.double(), gr.double(), dim=0)
    assert cos >= 0.99999, float(cos)


def test_reference_logprobs_are_the_definition(tiny_model, tmp_path):
    """The reference forward's log-prob of token t is log_softmax of the logits at the
    position before it, divided by the temperature: checked against one model call per row
    on the unpadded sequence."""
    tr = trainer(tiny_model, tmp_path / "d", "grpo", forward="reference", temperature=0.7)
    rollout, _ = tr.collect()
    mb = tr.forward.micro_batches(rollout, 6)[0]
    with torch.no_grad():
        logp, ent = tr.forward.logprobs(tr.policy, mb, 0.7, with_entropy=True)
        for k, row in enumerate(mb.rows):
            p, c = rollout.prompt_ids[row], rollout.completion_ids[row]
            logits = tr.policy(input_ids=torch.tensor([p + c])).logits[0, len(p) - 1:-1] / 0.7
            want = torch.log_softmax(logits, -1)[torch.arange(len(c)), torch.tensor(c)]
            torch.testing.assert_close(logp[k, :len(c)], want, atol=1e-5, rtol=0)
            probs = torch.softmax(logits, -1)
            torch.testing.assert_close(ent[k, :len(c)], -(probs * probs.log()).sum(-1),
                                       atol=1e-5, rtol=0)


def test_both_forwards_meet_the_protocol_the_update_reads(tiny_model, tmp_path):
    """The update reads a forward only through `Forward` and its micro-batches only through
    `Micro` (rows, mask, silent): no path-specific attribute probed with getattr."""
    from rlvr.trainer.forwards.protocol import Forward, Micro
    for forward in ("fast", "reference"):
        tr = trainer(tiny_model, tmp_path / forward, forward=forward)
        assert isinstance(tr.forward, Forward)
        rollout, _ = tr.collect()
        batch = tr.prepare(rollout)
        assert batch.micro and all(isinstance(mb, Micro) for mb in batch.micro)
        assert all(mb.silent is False for mb in batch.micro) or forward == "fast"


def test_the_batch_is_frozen_and_pi_old_lives_with_the_inner_steps(tiny_model, tmp_path):
    """`prepare` hands out a batch the inner steps cannot change: pi_old, taken at inner step 1
    from the policy's own log-probs, lives in `InnerSteps`, and a second batch starts afresh."""
    import dataclasses
    tr = trainer(tiny_model, tmp_path / "run", "grpo", inner_steps=2)
    rollout, _ = tr.collect()
    batch = tr.prepare(varied(rollout, tr.tokenizer))
    with pytest.raises(dataclasses.FrozenInstanceError):
        batch.old_logp = ()
    assert isinstance(batch.old_logp, tuple) and isinstance(batch.advantages, tuple)
    with pytest.raises(TypeError):
        batch.stats["loss"] = 0.0
    first = tr.update(batch, first=True)
    assert all(o is None for o in batch.old_logp)             # untouched by the inner step
    taken = [o.clone() for o in tr.learner.inner_steps(batch).old_logp]
    second = tr.update(batch, first=False)
    assert all(torch.equal(a, b) for a, b in zip(taken, tr.learner.inner_steps(batch).old_logp))
    assert second["loss/policy"] != first["loss/policy"]     # theta moved, pi_old did not
    again = tr.prepare(varied(rollout, tr.tokenizer))
    assert all(o is None for o in tr.learner.inner_steps(again).old_logp)
