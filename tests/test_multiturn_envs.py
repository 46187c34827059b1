"""The built-in multi-turn environments, played by a scripted policy: code-feedback (tests run
in the sandbox, failures shown without expected outputs) and math-python (sandboxed tool)."""
import re

import pytest

import rlvr.envs.tool_envs  # noqa: F401  (registers the built-in multi-turn environments)
from rlvr.envs.registry import check_env, load_env
from rlvr.pool import WorkerPool
from rlvr.trainer.sampling.episodes import run_episodes
from rlvr.trainer.models.loading import load_tokenizer
from rlvr.trainer.models.tiny import build_tiny_model

from test_multiturn import ScriptedEngine


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return load_tokenizer(build_tiny_model(tmp_path_factory.mktemp("tiny") / "m"))


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(2) as p:
        yield p


WRONG = "<think>Subtract.</think>\n```python\ndef add(a, b):\n    return a - b\n```"
RIGHT = "<think>Fixed.</think>\n```python\ndef add(a, b):\n    return a + b\n```"


def code_env(**kw):
    return load_env("code-feedback", pooled=False, **kw)


def test_contract_checks_pass_for_every_builtin(pool):
    for name in ("tool-arithmetic", "math-python"):
        check_env(load_env(name, check=False))
    check_env(code_env(check=False))


def test_code_feedback_shows_failures_not_expected_outputs_and_scores_the_last_attempt(tok):
    env = code_env(attempt_cost=0.1)
    task = env.get_task("code/add")
    script = lambda ctx, row: RIGHT if "tests passed" in ctx else WRONG
    r = run_episodes(ScriptedEngine(tok, script), env, tok, [task], 1, 400)
    e = r.completions[0]
    assert e.turns == 2 and e.end_reason == "stop" and e.text == RIGHT
    feedback = e.messages[1]["content"]
    assert e.messages[1]["role"] == "user"
    assert "0/3 tests passed" in feedback and "add(2, 3) returned a wrong value: -1" in feedback
    # the hidden expected outputs (5, 0, 1000000000001) stay hidden
    assert [c.output for c in task.answer.cases] == [5, 0, 1000000000001]
    lines = [line for line in feedback.splitlines() if line.startswith("- test")]
    assert len(lines) == 3 and "1000000000001" not in feedback
    for line, case in zip(lines, task.answer.cases):
        shown = line.split("returned a wrong value:")[1]
        assert str(case.output) not in re.findall(r"-?\d+", shown)
    assert "expected" not in feedback
    v = env.reward.score(task, e)
    assert v.score == pytest.approx(0.9) and "2 attempts" in v.reason      # 1.0 - one retry


def test_code_feedback_runs_out_of_attempts(tok):
    env = code_env(max_attempts=3)
    task = env.get_task("code/add")
    r = run_episodes(ScriptedEngine(tok, lambda ctx, row: WRONG), env, tok, [task], 1, 400)
    e = r.completions[0]
    assert e.turns == 3 and e.end_reason == "max_turns"
    assert [m["role"] for m in e.messages] == ["assistant", "user"] * 2 + ["assistant"]
    assert env.reward.score(task, e).score == 0.0
    no_code = run_episodes(ScriptedEngine(tok, lambda ctx, row: "I am not sure."), env, tok,
                           [task], 1, 400).completions[0]
    assert "found no ```python code block" in no_code.messages[1]["content"]


def test_math_python_runs_code_in_the_sandbox_statelessly(tok, pool):
    env = load_env("math-python")
    env.toolbox.pool = pool
    task = env.get_task("builtin/0")

    def script(ctx, row):
        if "tool: " not in ctx:
            return ('<tool_call>{"name": "python", "arguments": {"code": "x = 48 + 24\\n'
                    'print(x)"}}</tool_call>')
        if ctx.count("tool: ") == 1:       # state does not survive between calls
            return '<tool_call>{"name": "python", "arguments": {"code": "print(x)"}}</tool_call>'
        if ctx.count("tool: ") == 2:
            return ('<tool_call>{"name": "python", "arguments": {"code": '
                    '"print(\'9\' * 5000)"}}</tool_call>')
        return "<think>The tool printed 72.</think> <answer>72</answer>"
    r = run_episodes(ScriptedEngine(tok, script), env, tok, [task], 1, 300)
    e = r.completions[0]
    tools = [m["content"] for m in e.messages if m["role"] == "tool"]
    assert tools[0] == "72\n"
    assert "NameError: name 'x' is not defined" in tools[1]
    assert "[stdout truncated, 5001 chars]" in tools[2] and len(tools[2]) < 1100
    assert e.tool_calls == 3 and e.turns == 4 and e.end_reason == "stop"
    assert env.reward.score(task, e).score == 1.0


def test_tool_arithmetic_call_reward_is_a_separate_shaping_component(tok, pool):
    """call_reward adds ToolCallRan: a call that ran earns it (right answer or not), a malformed
    or missing call does not; accuracy stays its own component, and a transcript re-scored
    offline gets the trainer's verdicts."""
    from rlvr.envs.multiturn import episode_from_row, transcript
    from test_multiturn import calc_script, episode_part
    env = load_env("tool-arithmetic", call_reward=0.25)
    env.toolbox.pool = pool

    def script(ctx, row):
        if row == 2:
            return "Answer: 12"                                    # no call
        if row == 3 and "tool: " not in episode_part(ctx):
            return '<tool_call>{"name": "calculator", "arguments": {"expression": "1 +'  # cut
        if row == 1 and "tool: " in episode_part(ctx):
            return "Answer: 12"                                    # called, then wrong
        return calc_script(ctx, row)
    r = run_episodes(ScriptedEngine(tok, script), env, tok, env.sample(1), 4, 200)
    verdicts = env.reward.score_batch(r.tasks, r.completions)
    assert [v.components for v in verdicts] == [
        {"numeric_match": 1.0, "tool_call": 1.0}, {"numeric_match": 0.0, "tool_call": 1.0},
        {"numeric_match": 0.0, "tool_call": 0.0}, {"numeric_match": 0.0, "tool_call": 0.0}]
    assert [v.score for v in verdicts] == [1.25, 0.25, 0.0, 0.0]
    offline = [env.reward.score(*episode_from_row(env, {"id": t.id, "messages": transcript(t, e)}))
               for t, e in zip(r.tasks, r.completions)]
    assert [v.score for v in offline] == [v.score for v in verdicts]
    assert load_env("tool-arithmetic").reward.score(r.tasks[1], r.completions[1]).score == 0.0
    with pytest.raises(ValueError, match="call_reward"):
        load_env("tool-arithmetic", call_reward=1.0)
