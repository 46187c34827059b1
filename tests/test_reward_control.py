"""The spurious-reward control (Shao et al. 2025): a coin of the verifier's mean, or the format
reward alone, trained on while the verifier's reward is still what the run logs."""
from __future__ import annotations

import json
import types

import pytest
import torch

from rlvr import Environment, RowSource, Task, register_env
from rlvr.core import Verdict
from rlvr.trainer.objective.control import RewardControl, check_control, format_components


def rollout(scores, valid=None, shaping=0.0, components=None, tag="t"):
    """A scored rollout as the control reads it: verdicts, rewards (score + shaping), valid."""
    n = len(scores)
    comps = components or [{} for _ in scores]
    return types.SimpleNamespace(
        tasks=[types.SimpleNamespace(id=f"{tag}{i // 4}") for i in range(n)],
        completion_ids=[[i, i + 1] for i in range(n)],
        verdicts=[Verdict(s, components=c) for s, c in zip(scores, comps)],
        rewards=torch.tensor(scores, dtype=torch.float32) + shaping,
        valid=torch.tensor(valid if valid is not None else [True] * n))


def coin(r, seed=0, step=0, **kw):
    return RewardControl("random", seed).rewards(r, step, **kw)


def test_the_coin_has_the_verifier_s_mean_on_the_verifier_s_two_levels():
    scores = [1.0, 0, 0, 1, 0, 0, 0, 1] * 4                   # mean 3/8 over 32 rows
    out, stats = coin(rollout(scores))
    assert sorted(set(out.tolist())) == [0.0, 1.0]
    assert out.sum() == 12 and stats["control/reward"] == pytest.approx(0.375)
    assert not torch.equal(out, torch.tensor(scores))         # a different draw than the truth


def test_the_coin_between_uneven_levels_and_only_over_counted_rows():
    # valid scores 0.2, 0.2, 1.0, 0.2, 0.2 (mean 0.36): hi = 1 with share (0.36 - 0.2) / 0.8 = 0.2,
    # so round(5 * 0.2) = 1 row gets 1.0 and 4 rows 0.2; the failed row keeps its reward
    scores = [0.2, 0.2, 1.0, 0.0, 0.2, 0.2]
    r = rollout(scores, valid=[True, True, True, False, True, True])
    out, stats = coin(r)
    kept = out[r.valid]
    assert sorted(kept.tolist()) == pytest.approx([0.2, 0.2, 0.2, 0.2, 1.0])
    assert out[3] == 0.0 and stats["control/reward"] == pytest.approx(0.36)


def test_a_step_whose_rewards_are_all_equal_gets_that_reward():
    out, _ = coin(rollout([0.0] * 8))
    assert torch.equal(out, torch.zeros(8))


def test_the_coin_is_reproducible_with_the_seed_and_changes_with_seed_and_step():
    r = rollout([1.0, 0.0] * 32)
    first = coin(r, seed=3, step=5)[0]
    assert torch.equal(first, coin(r, seed=3, step=5)[0])
    assert not torch.equal(first, coin(r, seed=4, step=5)[0])
    assert not torch.equal(first, coin(r, seed=3, step=6)[0])


def test_shaping_added_to_the_verifier_s_score_stays():
    out, _ = coin(rollout([1.0, 0.0, 0.0, 1.0], shaping=-0.25))    # an overlong penalty, say
    assert sorted(out.tolist()) == [-0.25, -0.25, 0.75, 0.75]


def test_the_coin_is_drawn_over_the_global_batch():
    """Two ranks, each with its half: together the same coin as one process with every row."""
    from rlvr.trainer.objective.control import _row_prints
    a, b = rollout([1.0, 0, 0, 0] * 2, tag="a"), rollout([1.0, 1, 0, 1] * 2, tag="b")
    b.completion_ids = [[k, 7] for k in range(8)]
    both = rollout([1.0, 0, 0, 0] * 2 + [1.0, 1, 0, 1] * 2)
    both.tasks, both.completion_ids = a.tasks + b.tasks, a.completion_ids + b.completion_ids
    share = [(r.rewards.tolist(), _row_prints(r, r.valid)) for r in (a, b)]
    gather = lambda mine: share if isinstance(mine[0], list) else [mine]   # the coin's call
    got = torch.cat([coin(r, gather=gather, rank=k)[0] for k, r in enumerate((a, b))])
    assert got.sum() == 8                                        # 8 of 16 rows right
    assert torch.equal(got, coin(both)[0])


# --- format ---------------------------------------------------------------------------------
def test_format_trains_on_the_format_component_alone():
    from rlvr.envs.arithmetic import arithmetic
    env = arithmetic()                         # think_format logged beside the answer, weight 0
    assert format_components(env) == {"think_format": 1.0}
    ctl = RewardControl.of(types.SimpleNamespace(control="format", seed=0,
                                                 dynamic_sampling=False, advantage="grpo"), env)
    comps = [{"numeric_match": 1.0, "think_format": 0.0},
             {"numeric_match": 0.0, "think_format": 1.0},
             {"numeric_match": 1.0, "think_format": 1.0}, {}]        # the last: a failed verdict
    out, stats = ctl.rewards(rollout([1.0, 0.0, 1.0, 0.0], components=comps), 0)
    assert out.tolist() == [0.0, 1.0, 1.0, 0.0]
    assert stats["control/reward"] == 0.5


def test_format_weighs_the_components_as_the_environment_does():
    from rlvr.envs.think_format import think_format
    env = think_format(base="arithmetic", weight=0.2)   # think_format at 0, r1_format at 0.2
    assert format_components(env) == {"r1_format": 1.0}
    from rlvr.verifiers.format import AnswerTag, R1Format, ThinkFormat
    both = lambda w1, w2: Environment("e", RowSource({"train": []}), [
        (_Letters(), 1.0), (ThinkFormat(), w1), (R1Format(), w2), (AnswerTag(), 0.0)])
    assert format_components(both(0.1, 0.3)) == pytest.approx({"think_format": 0.25,
                                                                "r1_format": 0.75})
    assert format_components(both(0.0, 0.0)) == pytest.approx(    # logged only: equal shares
        {"think_format": 1 / 3, "r1_format": 1 / 3, "answer_tag": 1 / 3})


def test_an_environment_without_a_format_reward_is_refused_naming_why():
    env = Environment("plain", RowSource({"train": []}), [(_Letters(), 1.0)])
    cfg = types.SimpleNamespace(control="format", seed=0, dynamic_sampling=False,
                                advantage="grpo")
    with pytest.raises(ValueError) as err:
        RewardControl.of(cfg, env)
    msg = str(err.value)
    assert "\n" not in msg and "no" in msg and "format reward" in msg and "'plain'" in msg
    assert "letters" in msg                                      # its rewards, named
    cfg.control = "random"
    assert RewardControl.of(cfg, env).kind == "random"


@pytest.mark.parametrize("knob,value,why", [("dynamic_sampling", True, "chosen by the verifier"),
                                            ("advantage", "filter", "by their verdict"),
                                            ("control", "coin", "expected one of")])
def test_settings_that_would_leak_the_verifier_are_refused(knob, value, why):
    cfg = types.SimpleNamespace(control="random", dynamic_sampling=False, advantage="grpo")
    setattr(cfg, knob, value)
    with pytest.raises(ValueError, match=why):
        check_control(cfg)


# --- through the trainer ------------------------------------------------------------------
class _Letters:
    """1.0 for a completion with an odd number of letters: a tiny random model earns it about
    half the time."""
    name, version, max_verify_s = "letters", "1", 0.0

    def score(self, task, completion):
        return Verdict(float(sum(c.isalpha() for c in completion.text) % 2))

    def score_batch(self, tasks, completions):
        return [self.score(t, c) for t, c in zip(tasks, completions)]


@register_env("test-letters-format", replace=True)
def letters_and_format():
    from rlvr.verifiers.format import ThinkFormat
    tasks = [Task(f"l{i}", prompt=f"Say a word {i}.", answer="") for i in range(16)]
    return Environment("test-letters-format", RowSource({"train": tasks, "test": tasks}),
                       [(_Letters(), 1.0), (ThinkFormat(), 0.0)], gold=lambda t: "words",
                       junk=["42", "..."])


@register_env("test-letters", replace=True)
def letters_only():
    tasks = [Task(f"l{i}", prompt=f"Say a word {i}.", answer="") for i in range(16)]
    return Environment("test-letters", RowSource({"train": tasks, "test": tasks}),
                       [(_Letters(), 1.0)], gold=lambda t: "words", junk=["42", "..."])


def test_the_cli_refuses_format_without_a_format_reward_in_one_line(tiny_model, tmp_path,
                                                                     capsys):
    from rlvr.cli import main
    out = tmp_path / "run"
    code = main(["train", f"model={tiny_model}", f"output_dir={out}", "env=test-letters",
                 "control=format", "reward_deadline_s=0"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "needs a format reward" in err and "'test-letters' has none" in err
    assert not out.exists()                                      # nothing half-written


def run_one_step(model, out, control):
    from rlvr.trainer.config import TrainConfig
    from rlvr.trainer.run.loop import Trainer
    tr = Trainer(TrainConfig(model=model, env="test-letters-format", output_dir=str(out),
                             steps=1, prompts_per_step=4, group_size=4, max_completion_length=8,
                             control=control, reward_deadline_s=0, progress=False,
                             tensorboard=False, checkpoint_every=0, log_completions=16))
    seen = []
    prepare = tr.prepare
    tr.prepare = lambda r: seen.append(prepare(r)) or seen[-1]
    tr.train()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return tr, seen[0], rows[0]


def advantages_of(batch):
    """The completion-level advantage of each rollout row, read from the frozen batch."""
    got = torch.zeros(len(batch.rollout))
    for mb, a in zip(batch.micro, batch.advantages):
        got[mb.rows] = a[:, 0]
    return got


def grpo(rewards, valid):
    from rlvr.trainer.objective import algorithms as alg
    return alg.grpo_advantages(rewards.view(-1, 4), valid.view(-1, 4)).flatten()


def test_format_trains_on_the_format_score_and_logs_the_verifier_s(tiny_model, tmp_path):
    tr, batch, row = run_one_step(tiny_model, tmp_path / "fmt", "format")
    r = batch.rollout
    real = torch.tensor([v.score for v in r.verdicts])
    form = torch.tensor([v.components["think_format"] for v in r.verdicts])
    assert 0 < real.mean() < 1 and not torch.equal(real, form)    # the two rewards differ ...
    assert row["reward"] == pytest.approx(float(real.mean()))     # ... `reward` is the verifier's
    assert row["control/reward"] == pytest.approx(float(form.mean()))
    torch.testing.assert_close(advantages_of(batch), grpo(form, r.valid))   # trained on format
    config = json.loads((tmp_path / "fmt" / "config.json").read_text())["config"]
    assert config["control"] == "format"
    samples = [json.loads(line) for line in (tmp_path / "fmt" / "samples.jsonl").read_text()
               .splitlines()]
    assert [s["reward"] for s in samples] == real.tolist()


def test_random_trains_on_the_coin(tiny_model, tmp_path):
    tr, batch, row = run_one_step(tiny_model, tmp_path / "rnd", "random")
    r = batch.rollout
    real = torch.tensor([v.score for v in r.verdicts])
    trained, _ = RewardControl("random", 0).rewards(r, 0)        # seed 0, step 0
    assert row["reward"] == pytest.approx(float(real.mean()))
    assert row["control/reward"] == pytest.approx(float(trained.mean()))
    assert abs(float(trained.mean() - real.mean())) <= 1 / len(real)
    got = advantages_of(batch)
    torch.testing.assert_close(got, grpo(trained, r.valid))
    assert not torch.allclose(got, grpo(real, r.valid))          # not the verifier's advantages
    config = json.loads((tmp_path / "rnd" / "config.json").read_text())["config"]
    assert config["control"] == "random"
