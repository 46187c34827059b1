"""`rlvr serve`: registered environments behind OpenEnv's server, spoken to by OpenEnv's own
client -- typed verdicts in the metadata, a failed verdict's reward None (never 0.0),
concurrent sessions, clients that vanish mid-episode, and TRL's GRPOTrainer on top."""
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from rlvr import Environment, RowSource, Task, register_env
from rlvr.core import BaseReward
from rlvr.verifiers import NumericMatch

from rlvr.interop.serve import ServeConfig

# openenv (a test extra: its absence is a failure, not a skip) is imported inside the helpers:
# pool workers import this module to rebuild `test-serve`, and need none of it.


class BoomOrHang(BaseReward):
    """Numeric match; 'boom' makes the verifier itself raise, 'hang' makes it stall -- failures a
    policy cannot cause in a real verifier, stand-ins for a verifier's own bugs. 'slow' takes a
    second (a verdict still being computed when its client vanishes)."""
    name = "boom_or_hang"

    def _score(self, task, completion):
        if "slow" in completion.text:
            time.sleep(1.0)
        if "boom" in completion.text:
            raise RuntimeError("verifier bug")
        if "hang" in completion.text:
            time.sleep(30)
        return NumericMatch()._score(task, completion)


@register_env("test-serve", replace=True)
def serve_env():
    tasks = [Task(f"s{i}", prompt=[{"role": "user", "content": f"What is {i}+{i}?"}],
                  answer=str(2 * i)) for i in range(6)]
    return Environment("test-serve", RowSource({"train": tasks}), [(BoomOrHang(), 1.0)],
                       gold=lambda t: f"<answer>{t.answer}</answer>")


class Served:
    """A server on a free local port, in a thread of this process."""

    def __init__(self, cfg: ServeConfig):
        import uvicorn

        from rlvr.interop.serve import build_app
        self.app, self.served = build_app(cfg)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=port,
                                                    log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.02)

    def client(self):
        from openenv import GenericEnvClient
        return GenericEnvClient(base_url=self.url, message_timeout_s=30).sync()

    def close(self):
        self.server.should_exit = True
        self.thread.join(timeout=10)
        pool = getattr(self.served.reward, "_pool", None)
        if pool is not None:
            pool.close()


@pytest.fixture(scope="module")
def server():
    """Verdicts in the server process (fast to start), at most 3 sessions."""
    s = Served(ServeConfig(env="test-serve", workers=0, sessions=3))
    yield s
    s.close()


@pytest.fixture(scope="module")
def pooled():
    """Verdicts in a worker pool under a 2 s deadline, as `rlvr serve` runs by default."""
    s = Served(ServeConfig(env="test-serve", workers=1, deadline_s=2.0))
    yield s
    s.close()


def _episode(client, completion: str, task_id: str = "s3"):
    with client:
        first = client.reset(task_id=task_id)
        return first, client.step({"content": completion})


def test_a_single_turn_episode_returns_the_prompt_then_the_verdict(server):
    first, last = _episode(server.client(), "<answer>6</answer>")
    assert first.observation["messages"] == [{"role": "user", "content": "What is 3+3?"}]
    assert first.observation["task_id"] == "s3" and not first.done and first.reward is None
    assert last.done and last.reward == 1.0
    meta = last.metadata
    assert meta["status"] == "ok" and meta["solved"] and meta["components"] == {"boom_or_hang": 1.0}
    assert meta["turns"] == 1 and meta["end_reason"] == "stop"


def test_what_the_completion_earned_is_a_number_and_a_verifier_failure_is_none(pooled):
    right = _episode(pooled.client(), "<answer>6</answer>")[1]
    wrong = _episode(pooled.client(), "<answer>7</answer>")[1]
    unreadable = _episode(pooled.client(), "no answer here")[1]
    boom = _episode(pooled.client(), "boom <answer>6</answer>")[1]
    hang = _episode(pooled.client(), "hang <answer>6</answer>")[1]
    assert (right.reward, right.metadata["status"]) == (1.0, "ok")
    # the completion's own doing: scored, 0.0 included
    assert (wrong.reward, wrong.metadata["status"]) == (0.0, "ok")
    assert (unreadable.reward, unreadable.metadata["status"]) == (0.0, "unparsed")
    # the verifier's failures: no reward at all (a trainer must not learn 0 from them), the
    # status and the reason said
    assert boom.reward is None and boom.metadata["status"] == "error"
    assert boom.metadata["score"] is None             # nowhere a number to learn from
    assert "RuntimeError: verifier bug" in boom.metadata["reason"]
    assert hang.reward is None and hang.metadata["status"] == "timeout"   # the pool's deadline
    assert "2s" in hang.metadata["reason"]


def test_steps_outside_an_episode_are_refused_with_a_message(server):
    with server.client() as client:
        with pytest.raises(Exception, match="call reset before step"):
            client.step({"content": "<answer>6</answer>"})
        client.reset(task_id="s1")
        assert client.step({"content": "<answer>2</answer>"}).reward == 1.0
        with pytest.raises(Exception, match="episode is over"):
            client.step({"content": "<answer>2</answer>"})
        # the session still serves: a new episode on the same socket
        client.reset(task_id="s2")
        assert client.step({"content": "<answer>4</answer>"}).reward == 1.0


def test_concurrent_sessions_keep_their_own_episodes(server):
    # three sessions at once (the server's limit), each on its own task, interleaved: a shared
    # episode would score one session's answer against another's task.
    def play(i):
        with server.client() as client:
            client.reset(task_id=f"s{i}")
            time.sleep(0.2)                  # all three are open before any answers
            return client.step({"content": f"<answer>{2 * i}</answer>"}).reward
    with ThreadPoolExecutor(3) as ex:
        assert list(ex.map(play, [1, 4, 5])) == [1.0, 1.0, 1.0]


def _drop(ws) -> None:
    """Vanish like a killed client: the TCP connection goes, no WebSocket close frame."""
    ws.socket.shutdown(socket.SHUT_RDWR)
    ws.socket.close()


def test_clients_vanishing_mid_episode_free_their_sessions(server):
    from websockets.sync.client import connect
    ws_url = server.url.replace("http", "ws") + "/ws"
    # all 3 session slots taken by clients that vanish: one right after reset, one while its
    # verdict is being computed, one idle mid-episode
    dropped = [connect(ws_url) for _ in range(3)]
    for ws in dropped:
        ws.send(json.dumps({"type": "reset", "data": {"task_id": "s2"}}))
        assert json.loads(ws.recv(timeout=10))["type"] == "observation"
    dropped[1].send(json.dumps({"type": "step", "data": {"content": "slow"}}))
    time.sleep(0.1)
    for ws in dropped:
        _drop(ws)
    # the slots come back (a leaked session would refuse this client with CAPACITY_REACHED)
    deadline = time.monotonic() + 15
    while True:
        try:
            assert _episode(server.client(), "<answer>4</answer>", "s2")[1].reward == 1.0
            break
        except Exception as exc:
            assert "CAPACITY" in str(exc).upper() and time.monotonic() < deadline, exc
            time.sleep(0.2)


def test_a_tool_environment_is_played_over_the_socket():
    s = Served(ServeConfig(env="tool-arithmetic", workers=0))
    try:
        with s.client() as client:
            first = client.reset(split="train", index=0)
            assert [t["function"]["name"] for t in first.observation["tools"]] == ["calculator"]
            task = s.served.env.get_task(first.observation["task_id"])
            call = {"type": "function", "function": {
                "name": "calculator", "arguments": {"expression": task.metadata["expression"]}}}
            tool = client.step({"content": "", "tool_calls": [call]})
            assert not tool.done and tool.reward is None
            assert tool.observation["messages"] == [
                {"role": "tool", "name": "calculator", "content": task.answer}]
            # a Hermes call in the text is read too; a bad one is the policy's error, reported
            bad = client.step({"content": '<tool_call>{"name": "nope"}</tool_call>'})
            assert "unknown tool 'nope'" in bad.observation["messages"][0]["content"]
            last = client.step({"content": f"Answer: {task.answer}"})
            assert last.done and last.reward == 1.0
            assert (last.metadata["turns"], last.metadata["tool_calls"],
                    last.metadata["tool_errors"]) == (3, 2, 1)
        _trl_factory_plays_the_same_episode(s, first.observation, task)
    finally:
        s.close()


def _trl_factory_plays_the_same_episode(s, first, task):
    """What TRL does with `served_environment`: the server's tools as methods (with the schema
    TRL renders for the model), each call a step; the final message scored by `served_reward`."""
    from transformers.utils import get_json_schema

    from rlvr.interop.trl import served_environment, served_reward
    episode = served_environment(s.url)()
    schema = get_json_schema(type(episode).calculator)
    assert schema["function"]["name"] == "calculator"
    assert schema["function"]["parameters"] == first["tools"][0]["function"]["parameters"]
    episode.reset(task_id=task.id, prompt=first["messages"])
    assert episode.calculator(expression=task.metadata["expression"]) == task.answer
    final = [{"role": "assistant", "content": f"Answer: {task.answer}"}]
    assert served_reward(completions=[final], environments=[episode]) == [1.0]
    assert episode.verdict["tool_calls"] == 1 and episode.verdict["status"] == "ok"


def test_rlvr_serve_command_line(tmp_path):
    from rlvr.cli import build_parser, main
    args = build_parser().parse_args(["serve", "arithmetic", "--port", "9", "--env-arg",
                                      "n_terms=3", "--sessions", "4", "--deadline", "5"])
    assert (args.env, args.port, args.sessions, args.deadline_s) == ("arithmetic", 9, 4, 5.0)
    assert main(["serve", "arithmetic", "--sessions", "0"]) == 2
    assert main(["serve", "no-such-env", "--port", "0"]) == 2


def _tool_template_tokenizer(path):
    """The tiny model's tokenizer with a chat template TRL can parse tool calls from (TRL's
    environment factories require one)."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen3_chat_template
    tok = AutoTokenizer.from_pretrained(path)
    tok.chat_template = qwen3_chat_template
    return tok


def test_trl_grpo_trainer_trains_against_rlvr_serve(tmp_path, tiny_model, monkeypatch):
    import trl
    from rlvr.interop.trl import served_dataset, served_environment, served_reward
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    s = Served(ServeConfig(env="arithmetic", workers=0))
    try:
        args = trl.GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4,
                              num_generations=4, max_completion_length=8, max_steps=2,
                              use_cpu=True, report_to=[], logging_steps=1, save_strategy="no")
        trainer = trl.GRPOTrainer(model=tiny_model, args=args,
                                  processing_class=_tool_template_tokenizer(tiny_model),
                                  train_dataset=served_dataset(s.url, n=4),
                                  environment_factory=served_environment(s.url),
                                  reward_funcs=[served_reward])
        trainer.train()
    finally:
        s.close()
    assert trainer.state.global_step == 2
    logged = [h for h in trainer.state.log_history if "rewards/rlvr/mean" in h]
    assert len(logged) == 2
    # 8-character random completions answer nothing: every rollout was scored by the server
    # (a None would have made the mean NaN), and scored 0
    assert all(h["rewards/rlvr/mean"] == 0.0 for h in logged)


def test_the_rlvr_serve_command_serves_until_stopped(tmp_path):
    import signal
    import subprocess
    import sys
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "rlvr", "serve", "arithmetic", "--port",
                             str(port), "--workers", "1"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith(f"serving arithmetic at ws://127.0.0.1:{port}")
        from openenv import GenericEnvClient
        deadline = time.monotonic() + 60
        while True:        # uvicorn binds the port right after the line is printed
            try:
                with GenericEnvClient(base_url=f"http://127.0.0.1:{port}").sync() as client:
                    first = client.reset(split="train", index=0)
                    break
            except ConnectionError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        with GenericEnvClient(base_url=f"http://127.0.0.1:{port}").sync() as client:
            task_id = first.observation["task_id"]
            client.reset(task_id=task_id)
            from rlvr import load_env
            answer = load_env("arithmetic").get_task(task_id).answer
            last = client.step({"content": f"<think>x</think> <answer>{answer}</answer>"})
            assert last.reward == 1.0 and last.metadata["status"] == "ok"
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) in (0, 130, -signal.SIGINT)
