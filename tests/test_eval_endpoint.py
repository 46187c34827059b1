"""`rlvr eval --endpoint`: the OpenAI-compatible client against a local server this test starts.

The server answers /v1/chat/completions like vLLM would (n choices, seeded), and can be told to
fail: a 500 on a task's first request (the client must retry and succeed), a 500 on every
request, or a reply slower than the client's timeout (both: the task is reported failed and
left out, never scored as wrong).
"""
import json
import re
import threading
import time

import pytest

import rlvr
from server_for_tests import JSONHandler, LocalServer

pytest.importorskip("openai")

import rlvr.envs.arithmetic  # noqa: F401,E402  (registers `arithmetic` without the full discovery)
from rlvr.trainer.evaluation.evaluate import EvalConfig, distinct_tasks, run_eval  # noqa: E402

ENV = {"n_terms": 2, "max_value": 9, "ops": "+"}


class FakeServer(LocalServer):
    """A tiny OpenAI-compatible server. Each task's answer is right for samples whose index is
    below `right` (so the correct counts are known), and the reply depends on the seed sent."""

    def __init__(self, right: int = 2):
        self.right, self.requests, self.lock = right, [], threading.Lock()
        self.fail_first, self.fail_always, self.slow = set(), set(), set()
        self._serve()

    def _handler(self):
        server = self

        class Handler(JSONHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                question = body["messages"][-1]["content"]
                expr = re.search(r"(\d+ \+ \d+)", question).group(1)
                with server.lock:
                    server.requests.append({"expr": expr, **body,
                                            "auth": self.headers.get("Authorization")})
                    attempts = sum(r["expr"] == expr and r.get("temperature") == body.get(
                        "temperature") for r in server.requests)
                if expr in server.slow:
                    time.sleep(3)
                if expr in server.fail_always or (expr in server.fail_first and attempts == 1):
                    return self._send(500, {"error": {"message": "boom", "type": "server_error"}})
                value = eval(expr)             # noqa: S307 (digits and + only, from the test)
                choices = []
                for i in range(body.get("n", 1)):
                    right = body.get("temperature") == 0 or i < server.right
                    answer = value if right else value + 1 + body.get("seed", 0) % 7
                    choices.append({"index": i, "finish_reason": "stop", "message": {
                        "role": "assistant", "content": f"<think>add</think> <answer>{answer}</answer>"}})
                self._send(200, {"id": "x", "object": "chat.completion", "created": 0,
                                 "model": body["model"], "choices": choices,
                                 "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                           "total_tokens": 2}})
        return Handler


def _exprs(n: int) -> list[str]:
    """The sums of the first n tasks `rlvr eval` will run."""
    tasks = distinct_tasks(rlvr.load_env("arithmetic", **ENV), "test", n)
    return [re.search(r"(\d+ \+ \d+)", str(t.prompt)).group(1) for t in tasks]


def _cfg(url, **kw) -> EvalConfig:
    base = dict(env="arithmetic", env_kwargs=ENV, model="fake-model", endpoint=url, tasks=4,
                ks=(1, 2, 4), concurrency=3, retries=2, request_timeout_s=10, bootstrap=50)
    return EvalConfig(**{**base, **kw})


def test_endpoint_samples_are_scored_and_counted(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-test")
    with FakeServer(right=2) as srv:
        result = run_eval(_cfg(srv.url, api_key_env="MY_KEY"), tmp_path / "r.json", progress=False)
    assert result.correct_counts == [2, 2, 2, 2]          # samples 0 and 1 of 4 are right
    assert result.greedy_pass1 == 1.0                      # temperature 0 is always right here
    assert result.pass_at[1] == pytest.approx(0.5)
    assert result.pass_at[4] == pytest.approx(1.0)
    sampled = [r for r in srv.requests if r["temperature"] != 0]
    assert all(r["n"] == 4 and r["model"] == "fake-model" for r in sampled)
    assert len({r["seed"] for r in sampled}) == 4          # one seed per task
    assert {r["auth"] for r in srv.requests} == {"Bearer sk-test"}
    rows = [json.loads(x) for x in (tmp_path / "r.samples.jsonl").read_text().splitlines()]
    assert len(rows) == 4 * 5 and all(r["tokens"] is None for r in rows)


def test_a_server_error_is_retried(tmp_path):
    with FakeServer() as srv:
        first = _exprs(1)[0]
        srv.fail_first.add(first)
        result = run_eval(_cfg(srv.url), tmp_path / "r.json", progress=False)
    assert not result.failed_tasks and result.tasks == 4
    tries = [r for r in srv.requests if r["expr"] == first and r["temperature"] != 0]
    assert len(tries) == 2                                  # the 500, then the retry


def test_persistent_errors_and_timeouts_fail_the_task_not_the_answer(tmp_path):
    exprs = _exprs(2)
    with FakeServer() as srv:
        srv.fail_always.add(exprs[0])
        srv.slow.add(exprs[1])
        cfg = _cfg(srv.url, retries=1, request_timeout_s=0.5)
        result = run_eval(cfg, tmp_path / "r.json", progress=False)
        assert len([r for r in srv.requests if r["expr"] == exprs[0]]) >= 2   # retried once
        # two tasks left out (not scored 0); the others are counted normally
        assert len(result.failed_tasks) == 2 and result.tasks == 2
        assert "InternalServerError" in " ".join(result.failed_tasks.values())
        assert "Timeout" in " ".join(result.failed_tasks.values())
        data = json.loads((tmp_path / "r.json").read_text())
        assert data["complete"] is False
        # the server recovers: a rerun samples only the two missing tasks
        srv.fail_always.clear()
        srv.slow.clear()
        before = len(srv.requests)
        again = run_eval(cfg, tmp_path / "r.json", progress=False)
    assert not again.failed_tasks and again.tasks == 4 and again.resumed_tasks == 2
    assert {r["expr"] for r in srv.requests[before:]} == set(exprs)



def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _eval_cli(url, tmp_path, capsys):
    from rlvr.cli import main
    env_args = [x for k, v in ENV.items() for x in ("--env-arg", f"{k}={v}")]
    code = main(["eval", "--env", "arithmetic", *env_args, "--endpoint", url, "--model", "fake-model", "--tasks", "2", "--k", "1,2",
                 "--retries", "0", "--no-progress", "-o", str(tmp_path / "r.json")])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_every_task_failing_is_reported_with_its_cause_and_exit_3(tmp_path, capsys):
    """Nothing listening, or HTTP 500 on every call: the same FAILED line (with the cause) and
    exit 3 as when some tasks fail -- not a bare 'no tasks to average over'."""
    code, out, err = _eval_cli(f"http://127.0.0.1:{_free_port()}/v1", tmp_path / "a", capsys)
    assert code == 3, err
    assert "FAILED: 2 tasks could not be sampled" in out and "Connection refused" in out
    with FakeServer() as srv:
        srv.fail_always.update(_exprs(2))
        code, out, err = _eval_cli(srv.url, tmp_path / "b", capsys)
    assert code == 3, err
    assert "FAILED: 2 tasks could not be sampled" in out and "InternalServerError" in out


def test_the_console_says_n_a_for_unknown_lengths_and_keeps_slow_rates_readable(tmp_path, capsys):
    with FakeServer() as srv:
        code, out, err = _eval_cli(srv.url, tmp_path, capsys)
    assert code == 0, err
    assert re.search(r"mean length +n/a", out) and "mean length      0.0" not in out
    from rlvr.trainer.evaluation.evaluate import EvalResult
    slow = EvalResult({1: 0.5}, {1: (0.4, 0.6)}, None, None, 4, 4, 5, [2] * 4, list("abcd"),
                      {"ok": 20}, None, 1.0, seconds=434.2, generated=20)
    assert "20 completions in 434 s = 0.046/s" in slow.table()
