"""TRL and verl adapters, called the way those trainers call them."""
import json

import pytest

from rlvr import load_env
from rlvr.integrations.trl import reward_funcs, reward_weights, to_trl_dataset
from rlvr.integrations.verl import compute_score


def test_verl_compute_score_dispatches_by_data_source():
    gold = compute_score("arithmetic", "<think>x</think><answer>12</answer>", "12",
                         {"index": 3, "rlvr_env_args": {"format_weight": 0.5}})
    assert gold["score"] == 1.5 and gold["rlvr_failed"] == 0 and gold["rlvr_status"] == "ok"
    assert gold["rlvr/numeric_match"] == 1.0 and gold["rlvr/think_format"] == 1.0
    wrong = compute_score("arithmetic", "<answer>13</answer>", "12", None)
    assert wrong["score"] == 0.0 and wrong["rlvr_failed"] == 0
    bad_gold = compute_score("arithmetic", "<answer>13</answer>", "twelve", {})
    assert bad_gold["rlvr_failed"] == 1 and bad_gold["rlvr_status"] == "gold_unparseable"


def test_trl_reward_funcs_follow_trls_calling_convention():
    env = load_env("arithmetic", format_weight=0.1)
    ds = to_trl_dataset(env, n=4)
    assert ds.column_names == ["prompt", "rlvr_task"]
    assert ds[0]["prompt"][1]["role"] == "user"
    funcs = reward_funcs(env)
    assert [f.__name__ for f in funcs] == ["numeric_match", "think_format"]
    assert reward_weights(env) == [1.0, 0.1]
    rows = [ds[i] for i in range(4)]
    answers = [json.loads(r["rlvr_task"])["answer"] for r in rows]
    # conversational completions, as GRPOTrainer passes them for chat prompts
    completions = [[{"role": "assistant", "content": f"<think>t</think><answer>{a}</answer>"}]
                   for a in answers[:2]] + \
                  [[{"role": "assistant", "content": "<think>never closed"}]] + \
                  [[{"role": "assistant", "content": "<answer>-99999</answer>"}]]
    kwargs = {"rlvr_task": [r["rlvr_task"] for r in rows], "trainer_state": None,
              "completion_ids": None, "log_extra": None, "log_metric": None}
    prompts = [r["prompt"] for r in rows]
    assert funcs[0](prompts=prompts, completions=completions, **kwargs) == [1.0, 1.0, 0.0, 0.0]
    assert funcs[1](prompts=prompts, completions=completions, **kwargs) == [1.0, 1.0, 0.0, 0.0]


def test_trl_reward_funcs_read_plain_dataset_columns_and_skip_failures():
    env = load_env("arithmetic")
    funcs = reward_funcs(env)
    out = funcs[0](prompts=["What is 2+2?"] * 3, completions=["<answer>4</answer>", "5", "4"],
                   answer=["4", "4", "four"])
    assert out == [1.0, 0.0, None]          # a gold that cannot be read is left out (None)


def test_trl_reward_funcs_through_the_pool_match_in_process():
    env = load_env("arithmetic")
    ds = to_trl_dataset(env, n=6)
    comps = ["<answer>1</answer>"] * 3 + [f"<answer>{json.loads(r)['answer']}</answer>"
                                           for r in ds["rlvr_task"][3:]]
    kwargs = {"rlvr_task": ds["rlvr_task"]}
    local = reward_funcs(env)[0](prompts=ds["prompt"], completions=comps, **kwargs)
    pooled = reward_funcs(env, deadline_s=10)[0](prompts=ds["prompt"], completions=comps, **kwargs)
    assert pooled == local and local[3:] == [1.0, 1.0, 1.0]


def test_trl_grpo_trainer_runs_one_step_on_rlvr_rewards(tmp_path):
    import trl   # a test extra (pip install -e .[test]): its absence is a failure, not a skip
    from rlvr.trainer.models.tiny import build_tiny_model
    env = load_env("arithmetic", format_weight=0.1)
    args = trl.GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4,
                          num_generations=4, max_completion_length=8, max_steps=1, use_cpu=True,
                          report_to=[], logging_steps=1, save_strategy="no",
                          reward_weights=reward_weights(env))
    trainer = trl.GRPOTrainer(model=build_tiny_model(tmp_path / "tiny"),
                              reward_funcs=reward_funcs(env), args=args,
                              train_dataset=to_trl_dataset(env, n=8))
    trainer.train()
    logged = trainer.state.log_history[0]
    assert trainer.state.global_step == 1
    # TRL logged each rlvr component under its own name, and the weighted total
    assert {"rewards/numeric_match/mean", "rewards/think_format/mean"} <= set(logged)
    expected = logged["rewards/numeric_match/mean"] + 0.1 * logged["rewards/think_format/mean"]
    assert logged["reward"] == pytest.approx(expected, abs=1e-6)
