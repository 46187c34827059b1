"""Rough edges a new user hit (issue 18): reward-model scoring of plain prompt/completion rows,
train-rm's progress bar before the first evaluation, `rlvr train` showing evaluations."""
import json

import pytest

torch = pytest.importorskip("torch")

from rlvr.cli import main  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")   # see conftest.py


@pytest.fixture(scope="module")
def reward_model_dir(tmp_path_factory):
    from rlvr.trainer.reward_models.rm_training import build_tiny_reward_model
    return str(build_tiny_reward_model(tmp_path_factory.mktemp("rm"), "classifier", seed=1))


def test_score_reward_model_on_prompt_and_completion_rows(reward_model_dir, tmp_path, capsys):
    """The README's rows: `prompt` and `completion` only (with or without an `id`), no answer."""
    from rlvr.core import Task
    from rlvr.verifiers.reward_model import RewardModel
    rows = [{"id": "r0", "prompt": "What is 2 + 3?", "completion": "5"},
            {"prompt": [{"role": "user", "content": "Say hi"}], "completion": "hi there"},
            {"id": 7, "prompt": "Name a prime.", "completion": "11", "source": "web"}]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    code = main(["score", "--reward-model", reward_model_dir, str(path), "-o", str(out),
                 "--workers", "0", "--no-progress"])
    assert code == 0, capsys.readouterr().err
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["status"] for r in scored] == ["ok"] * 3, [r["reason"] for r in scored]
    expected = RewardModel(reward_model_dir).score_batch(
        [Task("t", prompt=r["prompt"]) for r in rows], [r["completion"] for r in rows])
    assert [r["score"] for r in scored] == pytest.approx([v.score for v in expected], abs=1e-5)
    assert [r["id"] for r in scored if "id" in r] == ["r0", 7]      # the row is kept as given


def test_reward_model_row_without_prompt_or_answer_says_what_to_add(reward_model_dir):
    from rlvr import load_env
    env = load_env("reward-model", path=reward_model_dir, check=False)
    with pytest.raises(KeyError, match="its own 'prompt'"):
        env.task_from_row({"id": "a", "completion": "x"})
    task = env.task_from_row({"id": "a", "prompt": "p", "completion": "x", "answer": "gold"})
    assert (task.id, task.prompt, task.answer) == ("a", "p", "gold")


def test_train_rm_bar_shows_no_nan_before_the_first_eval():
    from rlvr.trainer.reward_models.rm_training import bar_postfix
    before = bar_postfix({"train/loss": 0.6931, "train/accuracy": 0.5}, {})
    assert before == {"loss": "0.693", "batch_acc": "0.50"}
    assert "nan" not in json.dumps(before)
    after = bar_postfix({"train/loss": 0.4}, {"eval/accuracy": 0.8125, "eval/loss": 0.5})
    assert after == {"loss": "0.400", "eval_acc": "0.81"}


def test_rlvr_train_prints_each_evaluation_on_the_console(tmp_path, capsys):
    from rlvr.trainer.models.tiny import build_tiny_model
    model = build_tiny_model(tmp_path / "model")
    out = tmp_path / "run"
    env_kwargs = json.dumps({"n_terms": 2, "max_value": 9, "prompt_style": "base"})
    code = main(["train", f"model={model}", f"output_dir={out}", "steps=2", "eval_every=1",
                 "eval_tasks=2", "eval_k=2", "prompts_per_step=2", "group_size=2",
                 "max_completion_length=8", "progress=false", "tensorboard=false",
                 "checkpoint_every=0", f"env_kwargs={env_kwargs}"])
    assert code == 0
    console = capsys.readouterr().out
    evals = [json.loads(line) for line in (out / "eval.jsonl").read_text().splitlines()]
    assert [e["step"] for e in evals] == [1, 2]
    for e in evals:     # the same numbers as eval.jsonl, one line per evaluation
        assert (f"eval step {e['step']}: pass@1 {e['pass@1']:.3f}  pass@2 {e['pass@2']:.3f}"
                in console), console
