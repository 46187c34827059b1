"""The trainer on multi-turn episodes (tiny random model): every preset, the loss mask that keeps
environment tokens out of training, the episode metrics, tools in the prompt, exact resume."""
import json
import math
from pathlib import Path

import pytest
import torch

from rlvr.core import Task
from rlvr.envs.base import RowSource
from rlvr.envs.multiturn import Episode, MultiTurnEnvironment, Reply
from rlvr.envs.registry import register_env
from rlvr.core import FunctionReward
from rlvr.trainer.config import PRESETS, TrainConfig
from rlvr.trainer.sampling.episodes import policy_tokens
from rlvr.trainer.run.loop import Trainer
from rlvr.trainer.models.tiny import build_tiny_model


class Nagging(MultiTurnEnvironment):
    """Answers every turn with 'More digits.' until max_turns."""

    def respond(self, task, episode):
        return Reply([{"role": "user", "content": "More digits."}])


def digits(text):
    """Up to 1.0 for three digits in the final message (a random model's rewards vary)."""
    return min(1.0, sum(ch.isdigit() for ch in text) / 3)


@register_env("test-multiturn-nag", replace=True)
def nag_env(max_turns: int = 3, max_tokens: int = 200) -> Nagging:
    tasks = [Task(f"nag/{i}", [{"role": "user", "content": f"Say {i}{i}{i}."}], str(i) * 3)
             for i in range(6)]
    return Nagging(name="test-multiturn-nag", source=RowSource({"train": tasks, "test": tasks}),
                   rewards=[(FunctionReward(digits, name="digits"), 1.0)],
                   gold=lambda t: t.answer, max_turns=max_turns, max_tokens=max_tokens)


TINY = {"prompts_per_step": 2, "group_size": 2, "max_completion_length": 8,
        "micro_batch_size": 4, "lr": 1e-2, "progress": False, "checkpoint_every": 0,
        "reward_deadline_s": 0, "env": "test-multiturn-nag", "overlong_buffer": 0}
VOLATILE = ("timing/", "throughput/", "memory/", "verifier/test-multiturn-nag/latency")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def config(model, out, preset="grpo", **kw):
    return TrainConfig.from_preset(preset, **{**TINY, "model": model, "output_dir": str(out),
                                              "steps": 1, **kw})


def read_jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


# (a random model solves nothing for expert iteration to keep; distillation needs a teacher:
# both are tested in their own files)
@pytest.mark.parametrize("preset", sorted(set(PRESETS) - {"expert_iteration", "onpolicy_distill"}))
def test_every_preset_trains_on_episodes(preset, tiny_model, tmp_path):
    evals = {"eval_every": 1, "eval_tasks": 2, "eval_k": 2} if preset == "grpo" else {}
    Trainer(config(tiny_model, tmp_path, preset, **evals)).train()
    if evals:                                         # evaluation samples episodes too
        ev = read_jsonl(tmp_path / "eval.jsonl")[0]
        assert 0.0 <= ev["pass@1"] <= 1.0 and "pass@2" in ev
    row = read_jsonl(tmp_path / "metrics.jsonl")[0]
    assert row["turns/mean"] == 3 and row["episode/end/max_turns_rate"] == 1.0
    assert row["tool_calls/mean"] == 0 and row["tool_calls/error_rate"] == 0
    assert 0 < row["episode/env_token_share"] < 1
    assert math.isfinite(row["loss"]) and row["grad_norm"] > 0
    sample = read_jsonl(tmp_path / "samples.jsonl")[0]
    assert [m["role"] for m in sample["messages"]] == ["user"] + ["assistant", "user"] * 2 + \
        ["assistant"]
    assert sample["turns"] == 3
    assert sample["end_reason"] == "max_turns"


def test_the_trainers_loss_mask_leaves_out_every_environment_token(tiny_model, tmp_path):
    trainer = Trainer(config(tiny_model, tmp_path))
    rollout, _ = trainer.collect()
    batch = trainer.prepare(rollout)
    env_total = 0
    for mb, mask in zip(batch.micro, batch.loss_mask):
        for k, row in enumerate(mb.rows):
            e = rollout.completions[row]
            assert isinstance(e, Episode)
            own = torch.tensor(e.token_mask, dtype=torch.bool)
            assert torch.equal(mask[k, :len(own)], own & rollout.valid[row])
            assert not mask[k, len(own):].any()
            env_total += int((~own).sum())
        assert torch.equal(policy_tokens(rollout, mb) & rollout.valid[mb.rows, None], mask)
    assert env_total > 0
    # the update's gradient of the loss w.r.t. env-token log-probs is exactly zero
    from rlvr.trainer.forwards.fast import completion_logprobs
    mb, mask = batch.micro[0], batch.loss_mask[0]
    logp, _ = completion_logprobs(trainer.policy, mb)
    logp.retain_grad()
    (-(logp * batch.advantages[0] * mask).sum()).backward()
    assert torch.count_nonzero(logp.grad[mb.mask & ~mask]) == 0


def test_tools_reach_the_prompt_in_the_trainer(tiny_model, tmp_path):
    import rlvr.envs.tool_envs  # noqa: F401
    trainer = Trainer(config(tiny_model, tmp_path, env="tool-arithmetic",
                             env_kwargs={"max_tokens": 24}))
    rollout, metrics = trainer.collect()
    prompt = trainer.tokenizer.decode(rollout.prompt_ids[0])
    assert '<tools>\n{"type": "function", "function": {"name": "calculator"' in prompt
    assert metrics["turns/mean"] >= 1 and "tool_calls/error_rate" in metrics


def test_multiturn_resume_is_exact(tiny_model, tmp_path):
    kw = dict(inner_steps=2, kl_target=0.01, kl_horizon=10.0, warmup_steps=3)
    full, part = tmp_path / "full", tmp_path / "part"
    Trainer(config(tiny_model, full, steps=3, **kw)).train()
    Trainer(config(tiny_model, part, steps=2, **kw)).train()
    Trainer.resume(part, steps=3).train()
    a, b = read_jsonl(full / "metrics.jsonl"), read_jsonl(part / "metrics.jsonl")
    stable = lambda r: {k: v for k, v in r.items() if not k.startswith(VOLATILE)}
    assert [r["step"] for r in b] == [1, 2, 3]
    assert stable(a[2]) == stable(b[2]) and a[2]["turns/mean"] == 3
    assert read_jsonl(full / "samples.jsonl")[-1] == read_jsonl(part / "samples.jsonl")[-1]


def test_a_multiturn_run_plots_its_tool_use_and_a_single_turn_run_does_not(tmp_path):
    from rlvr.trainer.run.plots import plot_run
    rows = [{"step": s, "reward": 0.1 * s, "tool_calls/mean": 0.5 + 0.1 * s,
             "tool_calls/error_rate": 0.5 - 0.05 * s, "turns/mean": 1.5} for s in range(1, 6)]
    for name, keep in (("multi", None), ("single", {"step", "reward"})):
        run = tmp_path / name
        run.mkdir()
        (run / "metrics.jsonl").write_text("".join(
            json.dumps({k: v for k, v in r.items() if keep is None or k in keep}) + "\n"
            for r in rows))
        report = plot_run(run)
        names = {p.name for p in report.files}
        assert ("tool_use.png" in names) == (keep is None), names
        assert not any("tool_use" in n for n in report.notes)
