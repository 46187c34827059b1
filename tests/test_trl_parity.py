"""rlvr's GRPO update against TRL's GRPOTrainer math, written out here (TRL 1.16, loss_type
"dapo", scale_rewards "group"; no TRL import): on the same rollout, the advantages and the
gradient of the token-mean clipped loss must be the same, whatever the micro-batching and
whether each prompt's KV cache is shared over its group. benchmarks/learning_vs_trl.py compares
the two trainers' learning; this pins what makes that comparison one of equals."""
import pytest
import torch

from rlvr.trainer.config import TrainConfig
from rlvr.trainer.run.loop import Trainer
from rlvr.trainer.run.metrics import UpdateStats
from rlvr.trainer.models.tiny import build_tiny_model

G = 4


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def trainer(model, out, **kw) -> Trainer:
    cfg = TrainConfig.from_preset(
        "grpo", model=model, output_dir=str(out), steps=1, prompts_per_step=3, group_size=G,
        max_completion_length=12, beta=0.0, loss_aggregation="token_mean", progress=False,
        tensorboard=False, checkpoint_every=0, reward_deadline_s=0,
        env_kwargs={"n_terms": 2, "max_value": 9, "prompt_style": "base"}, **kw)
    return Trainer(cfg)


def trl_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """TRL: (r - group mean) / (group std, unbiased + 1e-4)."""
    r = rewards.view(-1, G)
    return ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-4)).flatten()


def trl_loss(model, rollout, adv, pad_id) -> torch.Tensor:
    """TRL's dapo loss on one batch: [left-padded prompt | right-padded completion] rows, no
    position ids, log-probs of the completion tokens, clipped ratio (1 at theta_old), summed
    over every completion token of the batch and divided by their count."""
    P = max(map(len, rollout.prompt_ids))
    C = max(map(len, rollout.completion_ids))
    ids = torch.full((len(rollout), P + C), pad_id)
    attn = torch.zeros_like(ids)
    for k, (p, c) in enumerate(zip(rollout.prompt_ids, rollout.completion_ids)):
        ids[k, P - len(p):P], attn[k, P - len(p):P] = torch.tensor(p), 1
        ids[k, P:P + len(c)], attn[k, P:P + len(c)] = torch.tensor(c), 1
    logits = model(input_ids=ids, attention_mask=attn).logits[:, P - 1:-1].float()
    logp = torch.log_softmax(logits, -1).gather(-1, ids[:, P:, None]).squeeze(-1)
    ratio = torch.exp(logp - logp.detach())
    A = adv[:, None]
    per_token = -torch.min(ratio * A, ratio.clamp(0.8, 1.2) * A)
    mask = attn[:, P:].float()
    return (per_token * mask).sum() / mask.sum()


def grads(model) -> torch.Tensor:
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


@pytest.mark.parametrize("share_prefix,micro", [("true", 4), ("false", 8), ("true", 2)])
def test_token_mean_grpo_gradient_is_trls_dapo_gradient(tiny_model, tmp_path, share_prefix, micro,
                                                        one_torch_thread):
    tr = trainer(tiny_model, tmp_path, share_prefix=share_prefix, micro_batch_size=micro)
    rollout, _ = tr.collect()
    # cut some completions short (a random tiny model rarely stops on its own)
    cuts = [12, 3, 12, 7, 12, 12, 1, 12, 5, 12, 12, 9]
    rollout.completion_ids = [c[:n] for c, n in zip(rollout.completion_ids, cuts)]
    lengths = sorted({len(c) for c in rollout.completion_ids})
    assert len(lengths) > 1, "completions of one length cannot tell the normalisers apart"
    rollout.rewards = torch.tensor([1., 0., 0., 1., 0., 0., 0., 1., 1., 1., 0., 1.])
    batch = tr.prepare(rollout)
    mine = torch.zeros(len(rollout))
    for mb, a in zip(batch.micro, batch.advantages):
        mine[mb.rows] = a[:, 0]
    torch.testing.assert_close(mine, trl_advantages(rollout.rewards))

    tr.policy.zero_grad(set_to_none=True)
    with tr.forward.pass_over(batch.micro):            # Trainer.update's gradient, unstepped
        for i in range(len(batch.micro)):
            tr.learner.micro_loss(batch, i, True, UpdateStats()).backward()
    ours = grads(tr.policy).clone()
    tr.policy.zero_grad(set_to_none=True)
    trl_loss(tr.policy, rollout, trl_advantages(rollout.rewards), tr.tokenizer.pad_token_id).backward()
    theirs = grads(tr.policy)
    assert ours.norm() > 0
    torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-6)
