"""`rlvr make-prefs` and `rlvr train-rm` end to end on tiny data: a verifier labels pairs, a tiny
random classifier learns them past chance on held-out prompts, resumes exactly, and bad rows
are reported by line number and skipped."""
import json
import random

import pytest

torch = pytest.importorskip("torch")

from rlvr.cli import main  # noqa: E402
from rlvr.core import Task  # noqa: E402
from rlvr.envs.registry import load_env  # noqa: E402
from rlvr.trainer.reward_models.preferences import MakePrefsConfig, make_preferences  # noqa: E402
from rlvr.trainer.reward_models.rm_training import (TrainRMConfig, read_preferences,  # noqa: E402
                                       split_holdout, to_pair, train_reward_model)
from rlvr.verifiers.reward_model import RewardModel  # noqa: E402

ENV_ARGS = {"n_terms": 2, "max_value": 9, "ops": "+", "parentheses": False}


pytestmark = pytest.mark.usefixtures("one_torch_thread")   # see conftest.py


def simulated_policy_completions(n_prompts: int, seed: int = 0) -> list[dict]:
    """Four samples per arithmetic prompt from a pretend policy: one right, three wrong.

    Its wrong answers look like a weak policy's: an unfinished think block, a wrong number in
    plain prose (no answer tag), a wrong number in the right format. The first two differ
    from a correct answer in form, which a tiny model can learn; the third needs arithmetic.
    """
    env = load_env("arithmetic", **ENV_ARGS)
    rng, rows = random.Random(seed), []
    for task in env.sample(n_prompts):
        expr, a = task.metadata["expression"], int(task.answer)
        w = a + rng.choice([-3, -2, -1, 1, 2, 3])
        for text in (f"<think>{expr} = {a}</think> <answer>{a}</answer>",
                     f"<think>{expr} = {a}, or maybe {w}",
                     f"<think>{expr} = {w}</think> The answer is {w}.",
                     f"<think>{expr} = {w}</think> <answer>{w}</answer>"):
            rows.append({"id": task.id, "completion": text})
    return rows


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def prefs(tmp_path_factory):
    d = tmp_path_factory.mktemp("prefs")
    completions = write_jsonl(d / "completions.jsonl", simulated_policy_completions(80))
    out = d / "prefs.jsonl"
    args = sum((["--env-arg", f"{k}={v}"] for k, v in ENV_ARGS.items()), [])
    assert main(["make-prefs", "--env", "arithmetic", *args, "--completions", str(completions),
                 "-o", str(out)]) == 0
    return out


def test_make_prefs_pairs_correct_over_incorrect(prefs):
    rows = [json.loads(line) for line in prefs.read_text().splitlines()]
    assert len(rows) == 80 * 3                          # 1 correct x 3 incorrect per prompt
    env = load_env("arithmetic", **ENV_ARGS)
    for row in rows[:12]:
        task = env.get_task(row["id"])
        assert row["prompt"] == task.prompt
        assert env.reward.score(task, row["chosen"]).score == 1.0 == row["chosen_score"]
        assert env.reward.score(task, row["rejected"]).score == 0.0 == row["rejected_score"]
    assert {r["rejected_status"] for r in rows} == {"ok", "unparsed"}


def test_train_rm_beats_chance_on_held_out_prompts(prefs, tmp_path, capsys):
    out = tmp_path / "rm"
    code = main(["train-rm", "--model", "tiny", "--data", str(prefs), "-o", str(out),
                 "--max-steps", "40", "--batch-size", "16", "--lr", "3e-4",
                 "--max-length", "96", "--eval-fraction", "0.2", "--eval-every", "20",
                 "--save-every", "20", "--tensorboard", "--no-progress"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    summary = json.loads((out / "train_rm.json").read_text())["result"]
    accuracy = summary["eval_metrics"]["eval/accuracy"]
    # 48 held-out pairs from 16 prompts never trained on; chance is 0.5. The seeded run
    # reaches 0.83 (seeds 1 and 2: 0.72, 0.75); the in-format wrong numbers stay near chance,
    # as no arithmetic is learned in 40 steps, which caps accuracy near 5/6.
    assert summary["eval_pairs"] == 48 and accuracy >= 0.65, accuracy
    assert f"held-out accuracy {accuracy:.3f}" in printed
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == list(range(1, 41))
    assert [m["step"] for m in metrics if "eval/accuracy" in m] == [20, 40]
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-00000020",
                                                                         "step-00000040"]
    # The saved model, served as a RewardModel, reproduces the held-out accuracy it reported:
    # what is trained is what is scored (same rendering, truncation and pooling).
    rm = RewardModel(str(out), max_length=96)
    _, held = split_holdout(read_preferences(str(prefs))[0], 0.2, "prompt", seed=0)
    tasks = [Task("t", prompt=p.prompt) for p in held]
    chosen = rm.score_batch(tasks, [p.chosen for p in held])
    rejected = rm.score_batch(tasks, [p.rejected for p in held])
    served = sum(c.score > r.score for c, r in zip(chosen, rejected)) / len(held)
    assert served == pytest.approx(accuracy, abs=1.5 / len(held))


def test_resume_continues_exactly_where_it_stopped(prefs, tmp_path):
    def cfg(out, steps):
        return TrainRMConfig(model="tiny", data=str(prefs), output_dir=str(out), max_steps=steps,
                             batch_size=4, lr=3e-4, max_length=64, eval_every=4, save_every=4,
                             progress=False)
    straight = train_reward_model(cfg(tmp_path / "a", 8))
    first = train_reward_model(cfg(tmp_path / "b", 4))
    resumed = train_reward_model(cfg(tmp_path / "b", 8))      # a rerun with a higher budget
    assert first.step == 4 and resumed.resumed_from == 4 and resumed.step == 8
    assert resumed.metrics["train/loss"] == pytest.approx(straight.metrics["train/loss"], abs=1e-5)
    assert resumed.eval_metrics == pytest.approx(straight.eval_metrics, abs=1e-5)
    steps = [json.loads(line)["step"] for line in (tmp_path / "b" / "metrics.jsonl").open()]
    assert steps == list(range(1, 9))                        # every step logged exactly once
    with pytest.raises(ValueError, match="different run"):
        train_reward_model(TrainRMConfig(**{**cfg(tmp_path / "b", 8).__dict__, "lr": 1e-3}))
    # starting over removes the old run's checkpoints, so a later resume cannot pick them up
    over = train_reward_model(TrainRMConfig(**{**cfg(tmp_path / "b", 4).__dict__,
                                               "resume": False, "lr": 1e-3}))
    assert over.resumed_from is None
    assert [p.name for p in (tmp_path / "b" / "checkpoints").iterdir()] == ["step-00000004"]


BAD_ROWS = [
    {"prompt": "2+2?", "chosen": "4", "rejected": "5"},                        # 1 good
    '{"prompt": "2+3?", "chosen": "5", ',                                      # 2 bad JSON
    {"prompt": "2+4?", "chosen": "6"},                                         # 3 no rejected
    {"prompt": "2+5?", "chosen": "7", "rejected": "7"},                        # 4 identical
    {"prompt": "2+6?", "chosen": "   ", "rejected": "9"},                      # 5 empty chosen
    ["not", "an", "object"],                                                   # 6
    {"chosen": "8", "rejected": "9"},                                          # 7 no prompt
    {"prompt": "2+7?", "chosen": "9", "rejected": "1", "margin": "big"},       # 8 bad margin
    {"prompt": [{"role": "user", "content": "1+1?"}],                          # 9 good (chat)
     "chosen": [{"role": "assistant", "content": "2"}],
     "rejected": [{"role": "assistant", "content": "3"}]},
    {"chosen": [{"role": "user", "content": "1+2?"}, {"role": "assistant", "content": "3"}],
     "rejected": [{"role": "user", "content": "1+2?"},                         # 10 good
                  {"role": "assistant", "content": "4"}], "margin": 2},
]


def test_bad_rows_are_reported_with_line_numbers_and_skipped(tmp_path, capsys):
    data = write_jsonl(tmp_path / "prefs.jsonl", BAD_ROWS)
    pairs, problems = read_preferences(str(data))
    assert [p.line for p in pairs] == [1, 9, 10]
    assert [p.split(":")[0] for p in problems] == [f"line {n}" for n in (2, 3, 4, 5, 6, 7, 8)]
    assert "bad JSON" in problems[0] and "rejected" in problems[1]
    assert "identical" in problems[2] and "empty chosen" in problems[3]
    assert pairs[2].prompt == [{"role": "user", "content": "1+2?"}]   # implicit prompt
    assert (pairs[2].chosen, pairs[2].rejected, pairs[2].margin) == ("3", "4", 2.0)
    code = main(["train-rm", "--model", "tiny", "--data", str(data), "-o", str(tmp_path / "rm"),
                 "--max-steps", "1", "--eval-fraction", "0", "--no-progress"])
    assert code == 3                             # finished, but rows were skipped
    err = capsys.readouterr().err
    assert "line 2: bad JSON" in err and "line 8: margin" in err


def test_preference_rows_from_parquet_and_datasets(tmp_path):
    import datasets
    rows = [{"prompt": "a?", "chosen": "yes", "rejected": "no"},
            {"prompt": "b?", "chosen": "yes", "rejected": "yes"}]
    ds = datasets.Dataset.from_list(rows)
    ds.to_parquet(str(tmp_path / "p.parquet"))
    ds.save_to_disk(str(tmp_path / "ds"))
    for source in (tmp_path / "p.parquet", tmp_path / "ds"):
        pairs, problems = read_preferences(str(source))
        assert [(p.prompt, p.line) for p in pairs] == [("a?", 1)]
        assert problems == ["line 2: chosen and rejected are identical"]
    with pytest.raises(ValueError, match="final assistant turn"):
        to_pair({"chosen": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
                            {"role": "user", "content": "more"}],
                 "rejected": [{"role": "user", "content": "q"},
                              {"role": "assistant", "content": "b"}]})


def test_make_prefs_from_completions_file_counts_and_bad_lines(tmp_path):
    env = load_env("arithmetic", **ENV_ARGS)
    t1, t2 = env.sample(2)
    rows = [{"id": t1.id, "completion": f"<answer>{t1.answer}</answer>"},
            {"id": t1.id, "completion": "<answer>-1</answer>"},
            "{oops",
            {"id": t1.id, "completion": "no answer here"},
            {"id": t2.id, "completion": f"<answer>{t2.answer}</answer>"},   # t2: no wrong one
            {"completion": "orphan"},                                       # no id, no answer
            {"id": t1.id, "completion": 5}]
    data = write_jsonl(tmp_path / "c.jsonl", rows)
    out = tmp_path / "p.jsonl"
    s = make_preferences(MakePrefsConfig(env="arithmetic", env_args=ENV_ARGS,
                                         completions=str(data), output=str(out)))
    assert (s.prompts, s.completions, s.correct, s.incorrect, s.pairs) == (2, 4, 2, 2, 2)
    assert s.prompts_without_pair == 1
    assert [m.split(":")[0] for m in s.bad_rows] == ["line 3", "line 6", "line 7"]
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["rejected"] for r in written} == {"<answer>-1</answer>", "no answer here"}
    assert {r["chosen"] for r in written} == {f"<answer>{t1.answer}</answer>"}


def test_make_prefs_samples_from_a_policy(tmp_path):
    from rlvr.trainer.reward_models.rm_training import build_tiny_reward_model
    policy = build_tiny_reward_model(tmp_path / "policy", causal_lm=True)
    s = make_preferences(MakePrefsConfig(env="arithmetic", env_args=ENV_ARGS, policy=str(policy),
                                         n_prompts=2, samples=3, max_new_tokens=4,
                                         output=str(tmp_path / "p.jsonl")))
    # a random policy writes gibberish: every sample is scored, none is right, so no pairs
    assert (s.prompts, s.completions, s.correct, s.incorrect) == (2, 6, 0, 6)
    assert s.pairs == 0 and s.prompts_without_pair == 2


@pytest.mark.parametrize("preset", ["ppo", "grpo"])
def test_trainer_optimises_a_verifier_plus_reward_model_mix(preset, tmp_path):
    """PPO as in Ouyang et al. 2022 (InstructGPT): the reward model scores finished responses, the critic predicts
    that score from partial ones; every component is logged per step."""
    from rlvr.trainer.config import TrainConfig
    from rlvr.trainer.run.loop import Trainer
    from rlvr.trainer.reward_models.rm_training import build_tiny_reward_model
    from rlvr.trainer.models.tiny import build_tiny_model
    rm = build_tiny_reward_model(tmp_path / "rm", seed=1)
    cfg = TrainConfig.from_preset(
        preset, model=str(build_tiny_model(tmp_path / "policy")), output_dir=str(tmp_path / "run"),
        steps=1, prompts_per_step=2, group_size=3, max_completion_length=8, micro_batch_size=6,
        progress=False, checkpoint_every=0, tensorboard=False, env="reward-model",
        env_kwargs={"path": str(rm), "base_env": "arithmetic", "verifier_weight": 1.0,
                    "weight": 0.5, "normalize": "sigmoid",
                    "base_env_args": {**ENV_ARGS, "prompt_style": "base"}})
    Trainer(cfg).train()
    row = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    rm_mean = row["rewards/reward_model/mean"]
    assert 0.0 < rm_mean < 1.0
    assert row["reward"] == pytest.approx(row["rewards/numeric_match/mean"] + 0.5 * rm_mean,
                                          abs=1e-5)
