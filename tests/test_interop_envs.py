"""Environments written for other libraries, loaded by name: `verifiers:<env_id>` (a `verifiers`
environment the tests define: tests/rlvr_vf_tiny.py) and `openenv:<target>` (an OpenEnv
environment the tests define, tests/openenv_tiny.py, run in-process or served). Each loads,
scores with typed statuses -- its exceptions `error`, its timeouts `timeout`, its services down
`infra_error`, never 0.0 -- and runs through `rlvr score`, `rlvr audit`, `rlvr eval` and one
training step unchanged."""
import json
import socket
import threading
import time

import pytest

from rlvr import Environment, FunctionReward, RowSource, ScoreConfig, Task, load_env
from rlvr.envs.registry import UnknownEnvError, register_env_prefix
from rlvr.scoring import score_file

VF = "verifiers:rlvr-vf-tiny"
OE_CLASS = "openenv:openenv_tiny:SumEnvironment"
TINY_TRAIN = {"prompts_per_step": 2, "group_size": 2, "max_completion_length": 8,
              "micro_batch_size": 4, "progress": False, "checkpoint_every": 0,
              "reward_deadline_s": 0, "overlong_buffer": 0, "steps": 1}


@pytest.fixture(scope="module")
def vf_env():
    return load_env(VF, timeout_s=1.0)


def _verdicts(env, task, texts):
    return {t: env.reward.score(task, t) for t in texts}


def test_a_verifiers_environment_loads_its_rows_and_rubric(vf_env):
    assert vf_env.source.splits == ("train", "test")
    task = vf_env.get_task(f"{VF}/train/3")
    assert task.prompt == [{"role": "system", "content": "Answer in <answer> tags."},
                           {"role": "user", "content": "What is 3 + 3?"}]
    assert task.answer == "6"
    # the rubric's functions with its weights; SingleTurnEnv's own num_turns metric included
    assert {r.name: w for r, w in vf_env.rewards} == {"exact": 1.0, "length": 0.0,
                                                      "num_turns": 0.0}


def test_a_verifiers_rubric_failure_is_a_status_not_a_score(vf_env):
    # verifiers' own Rubric.score_rollout would log each of the last three and score it 0.0
    task = vf_env.get_task(f"{VF}/train/3")
    v = _verdicts(vf_env, task, ["<answer>6</answer>", "<answer>7</answer>", "<answer>boom</answer>",
                                 "<answer>down</answer>", "<answer>stall</answer>"])
    assert (v["<answer>6</answer>"].status, v["<answer>6</answer>"].score) == ("ok", 1.0)
    assert v["<answer>6</answer>"].components == {"exact": 1.0, "length": 18.0, "num_turns": 1.0}
    assert (v["<answer>7</answer>"].status, v["<answer>7</answer>"].score) == ("ok", 0.0)
    assert v["<answer>boom</answer>"].status == "error"
    assert "ValueError: reward function bug" in v["<answer>boom</answer>"].reason
    assert v["<answer>down</answer>"].status == "infra_error"
    assert v["<answer>stall</answer>"].status == "timeout"             # past timeout_s = 1 s


def test_rlvr_score_and_audit_run_on_a_verifiers_environment(tmp_path):
    from rlvr.audit import AuditConfig, run_audit
    rows = [{"id": f"{VF}/test/{i}", "completion": c} for i, c in
            enumerate(["<answer>0</answer>", "<answer>3</answer>", "<answer>boom</answer>"])]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = score_file(ScoreConfig(env=VF, input=str(src), output=str(tmp_path / "out.jsonl"),
                                     workers=1, progress=False))       # rebuilt in a worker
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [(r["status"], r["score"]) for r in out] == [("ok", 1.0), ("ok", 0.0), ("error", 0.0)]
    assert summary.error_rows == 1
    report = run_audit(AuditConfig(env=VF, n=2, workers=0))
    assert report.findings == []          # no exploit strategy earns this rubric's reward


def test_rlvr_train_and_eval_run_on_a_verifiers_environment(tiny_model, tmp_path):
    from rlvr.trainer.config import TrainConfig
    from rlvr.trainer.evaluation.evaluate import EvalConfig, run_eval
    from rlvr.trainer.run.loop import Trainer
    Trainer(TrainConfig.from_preset("grpo", model=tiny_model, env=VF, output_dir=str(tmp_path),
                                    **TINY_TRAIN)).train()
    row = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])
    assert row["rewards/exact/mean"] == 0.0 and "rewards/length/mean" in row
    result = run_eval(EvalConfig(env=VF, model=tiny_model, tasks=2, ks=(1, 2), samples=2,
                                 max_completion_length=8, bootstrap=10), None)
    assert result.pass_at == {1: 0.0, 2: 0.0} and result.statuses.get("error", 0) == 0


# --------------------------------------------------------------------------- OpenEnv

def _sum_answer(task) -> int:
    a, b = task.prompt[0]["content"].removeprefix("What is ").rstrip("?").split(" + ")
    return int(a) + int(b)


def test_an_openenv_class_loads_and_scores_by_replaying_the_completion():
    env = load_env(OE_CLASS, tasks=3, test_tasks=2)
    assert env.source.splits == ("train", "test")
    task = env.get_task(f"{OE_CLASS}/train/1")
    assert task.prompt[0]["content"].startswith("What is ") and task.metadata == {
        "reset": {"seed": 1}}
    v = _verdicts(env, task, [f"It is {_sum_answer(task)}.", "It is 7.", "boom"])
    assert [(x.status, x.score) for x in v.values()] == [("ok", 1.0), ("ok", 0.0), ("error", 0.0)]
    assert "ValueError: environment bug" in v["boom"].reason


class _Server:
    """tests/openenv_tiny.py's environment behind OpenEnv's own server, in a thread."""

    def __init__(self):
        import uvicorn
        from openenv.core.env_server import create_fastapi_app
        from openenv_tiny import SumAction, SumEnvironment, SumObservation
        app = create_fastapi_app(SumEnvironment, SumAction, SumObservation, max_concurrent_envs=4)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.url = f"http://127.0.0.1:{s.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1",
                                                    port=int(self.url.rsplit(":", 1)[1]),
                                                    log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)

    def stop(self):
        self.server.should_exit = True
        self.thread.join(timeout=10)


def test_an_openenv_server_is_scored_by_url_and_a_dead_server_is_infra_error():
    server = _Server()
    try:
        name = f"openenv:{server.url}"
        env = load_env(name, tasks=2, test_tasks=1, timeout_s=1.0)
        task = env.get_task(f"{name}/train/0")
        v = _verdicts(env, task, [str(_sum_answer(task)), "0", "boom", "stall"])
        assert [(x.status, x.score) for x in v.values()] == [
            ("ok", 1.0), ("ok", 0.0), ("error", 0.0), ("timeout", 0.0)]
        assert "EXECUTION_ERROR" in v["boom"].reason
    finally:
        server.stop()
    down = env.reward.score(task, str(_sum_answer(task)))
    assert down.status == "infra_error" and "unreachable" in down.reason
    with pytest.raises(ValueError, match="cannot reach"):
        load_env(name, tasks=1, test_tasks=1)


def test_rlvr_score_and_train_run_on_an_openenv_environment(tiny_model, tmp_path):
    from rlvr.trainer.config import TrainConfig
    from rlvr.trainer.run.loop import Trainer
    env = load_env(OE_CLASS, tasks=4, test_tasks=2)
    task = env.get_task(f"{OE_CLASS}/test/0")
    rows = [{"id": task.id, "completion": c} for c in (str(_sum_answer(task)), "nope", "boom")]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    score_file(ScoreConfig(env=OE_CLASS, env_args={"tasks": 4, "test_tasks": 2}, input=str(src),
                           output=str(tmp_path / "out.jsonl"), workers=1, progress=False))
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [(r["status"], r["score"]) for r in out] == [("ok", 1.0), ("ok", 0.0), ("error", 0.0)]
    run = tmp_path / "run"
    Trainer(TrainConfig.from_preset("grpo", model=tiny_model, env=OE_CLASS,
                                    env_kwargs={"tasks": 4, "test_tasks": 2},
                                    output_dir=str(run), **TINY_TRAIN)).train()
    row = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    assert row["rewards/openenv/mean"] == 0.0


def test_prefixed_names_that_name_nothing_say_what_exists():
    with pytest.raises(UnknownEnvError, match=r"unknown environment prefix 'nope'.*openenv"):
        load_env("nope:thing")
    with pytest.raises(ValueError, match="give a server URL"):
        load_env("openenv:just_a_module")


@register_env_prefix("echo-test")
def _echo_loader(rest: str, n: int = 2):
    """Tasks whose answer is the name's rest."""
    tasks = [Task(f"echo-test:{rest}/{i}", "Repeat the name.", rest) for i in range(n)]
    same = FunctionReward(lambda text, answer: float(text == answer), name="same")
    return Environment(f"echo-test:{rest}", RowSource({"train": tasks}), [(same, 1.0)],
                       gold=lambda t: t.answer)


def test_a_prefix_loader_of_ones_own_builds_environments_by_name():
    from rlvr.envs.registry import EnvArgumentError, build_env, env_info, env_module
    env = load_env("echo-test:hello", n=3)           # contract-checked: gold 1, junk 0
    assert env.name == "echo-test:hello" and len(env.sample(5)) == 3
    assert env.reward.score(env.sample(1)[0], "hello").score == 1.0
    # a pool worker rebuilds it from the name and the loader's module
    assert env_module("echo-test:x") == __name__
    assert build_env("echo-test:x", {"n": 1}, env_module("echo-test:x")).sample(5)[0].answer == "x"
    assert env_info("echo-test:x")["doc"] == "Tasks whose answer is the name's rest."
    with pytest.raises(EnvArgumentError, match="unexpected keyword argument 'm'"):
        load_env("echo-test:hello", m=1)


def test_an_openenv_environment_of_several_steps_is_played_and_scored_by_replay():
    from rlvr.envs.multiturn import Episode
    name = "openenv:openenv_tiny:GuessEnvironment"
    env = load_env(name, tasks=2, test_tasks=1, max_turns=3)
    task = env.get_task(f"{name}/train/0")
    assert task.prompt == [{"role": "user", "content": "Guess my number from 1 to 9."}]
    secret = __import__("random").Random(0).randint(1, 9)
    low = 1 if secret > 1 else 2
    episode = Episode(text="", token_ids=[])
    episode.add_turn(str(low), [], [], "stop")
    reply = env.respond(task, episode)            # the replayed session's last observation
    assert not reply.done and reply.messages == [{"role": "user", "content":
                                                  "higher" if low < secret else "lower"}]
    episode.add_environment(reply.messages, [])
    episode.add_turn(str(secret), [], [], "stop")
    assert env.respond(task, episode).done
    assert env.reward.score(task, episode).score == 1.0            # both turns replayed
    assert env.reward.score(task, str(low)).score == 0.0           # one wrong guess: not over
    assert "not over" in env.reward.score(task, str(low)).reason
