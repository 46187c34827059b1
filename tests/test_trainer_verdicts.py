"""Issue 13's rule inside training: a program past its limits is scored 0 (status ok, the limit
named), never a `timeout` left out of the baselines -- so stalling when unsure costs the policy
its reward. The trainer's pool deadline is derived from the environment's declared longest
verification, and one that would undercut it is refused."""
import json
from pathlib import Path

import pytest

from rlvr import Task
from rlvr.core import OK
from rlvr.trainer import TrainConfig
from rlvr.trainer.run.loop import Trainer

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from rlvr.trainer import build_tiny_model
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny")))


def _config(model, out, **kw) -> TrainConfig:
    return TrainConfig.from_preset("grpo", **{"model": model, "output_dir": str(out),
                                              "env": "humaneval", "steps": 1,
                                              "tensorboard": False, "progress": False, **kw})


def test_the_trainer_derives_its_deadline_from_the_sandbox_limits(tiny_model, tmp_path):
    trainer = Trainer(_config(tiny_model, tmp_path / "a"))
    declared = trainer.env.reward.max_verify_s
    assert declared > 10          # a sandbox run of up to 10 s wall, plus start-up and clean-up
    assert trainer.env.reward.deadline_s > declared
    with pytest.raises(ValueError, match="undercut"):
        Trainer(_config(tiny_model, tmp_path / "b", reward_deadline_s=10.0))


def test_bad_programs_in_a_training_step_are_ok_0_with_their_limit(tiny_model, tmp_path):
    trainer = Trainer(_config(tiny_model, tmp_path / "c"))
    rows = [json.loads(line)
            for line in (FIXTURES / "humaneval_attacks.jsonl").read_text().splitlines()]
    tasks: list[Task] = [trainer.env.get_task(r["task_id"]) for r in rows]
    verdicts = trainer.env.reward.score_batch(tasks, [r["completion"] for r in rows])
    for r, v in zip(rows, verdicts):
        if r["kind"] == "canonical":
            assert (v.status, v.score) == (OK, 1.0), (r["task_id"], v.reason)
        else:
            assert (v.status, v.score) == (OK, 0.0), (r["kind"], v.status, v.reason)
            assert "limit" in v.reason, (r["kind"], v.reason)
