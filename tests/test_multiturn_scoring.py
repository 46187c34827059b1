"""`rlvr score` on transcripts: rows holding `messages` get the verdicts the trainer gave the
same episodes, and a malformed `messages` field is an error row naming its line."""
import json

import pytest

import rlvr.envs.tool_envs  # noqa: F401
from rlvr.envs.multiturn import transcript
from rlvr.envs.registry import load_env
from rlvr.scoring import ScoreConfig, score_file
from rlvr.trainer.sampling.episodes import run_episodes
from rlvr.trainer.models.loading import load_tokenizer
from rlvr.trainer.models.tiny import build_tiny_model

from test_multiturn import ScriptedEngine, calc_script, episode_part


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    tok = load_tokenizer(build_tiny_model(tmp_path_factory.mktemp("tiny") / "m"))
    env = load_env("tool-arithmetic")
    script = lambda ctx, row: "Answer: 12" if row % 2 and "tool: " in episode_part(ctx) \
        else calc_script(ctx, row)
    r = run_episodes(ScriptedEngine(tok, script), env, tok, env.sample(3), 2, 200)
    return env, r, env.reward.score_batch(r.tasks, r.completions)


@pytest.mark.parametrize("workers", [0, 1])
def test_rlvr_score_on_messages_gives_the_trainers_verdicts(tmp_path, episodes, workers):
    env, r, trained = episodes
    src, out = tmp_path / "episodes.jsonl", tmp_path / "scored.jsonl"
    rows = [{"id": t.id, "messages": transcript(t, e)} for t, e in zip(r.tasks, r.completions)]
    lines = [json.dumps(row) for row in rows]
    lines.insert(2, json.dumps({"id": r.tasks[0].id, "messages": [{"role": "user"}]}))
    src.write_text("\n".join(lines) + "\n")
    score_file(ScoreConfig(env="tool-arithmetic", input=str(src), output=str(out),
                           workers=workers, progress=False))
    got = [json.loads(x) for x in out.read_text().splitlines()]
    bad = got.pop(2)
    assert bad["status"] == "error" and "line 3" in bad["reason"] \
        and "no assistant message" in bad["reason"]
    assert [(g["score"], g["status"]) for g in got] == [(v.score, v.status) for v in trained]
    assert [v.score for v in trained] == [1.0, 0.0] * 3


def test_trainer_sample_rows_holding_completion_and_messages_are_scored_as_episodes(tmp_path):
    """samples.jsonl rows carry the final text and the transcript: `rlvr score` must judge the
    transcript (an episode-aware reward reads the tool messages), and a row whose `messages`
    is only the prompt is still scored by its completion."""
    tok = load_tokenizer(build_tiny_model(tmp_path / "m"))
    env = load_env("tool-arithmetic", call_reward=0.25)
    broken = lambda ctx, row: "Answer: 12" if "tool: " in episode_part(ctx) else \
        '<tool_call>{"name": "calculator", "arguments": {"expression": 1}}</tool_call>'
    script = lambda ctx, row: calc_script(ctx, row) if row == 0 else broken(ctx, row)
    r = run_episodes(ScriptedEngine(tok, script), env, tok, env.sample(2), 1, 200)
    trained = env.reward.score_batch(r.tasks, r.completions)
    assert [v.score for v in trained] == [1.25, 0.0]   # the worked example's call is not theirs
    rows = [{"task_id": t.id, "answer": t.answer, "completion": e.text,
             "messages": transcript(t, e)} for t, e in zip(r.tasks, r.completions)]
    rows.append({"task_id": r.tasks[0].id, "completion": f"Answer: {r.tasks[0].answer}",
                 "messages": [{"role": "user", "content": "What is it?"}]})
    src, out = tmp_path / "samples.jsonl", tmp_path / "scored.jsonl"
    src.write_text("".join(json.dumps(row) + "\n" for row in rows))
    score_file(ScoreConfig(env="tool-arithmetic", env_args={"call_reward": 0.25},
                           input=str(src), output=str(out), workers=0, progress=False,
                           id_field="task_id"))
    got = [json.loads(x) for x in out.read_text().splitlines()]
    assert [g["score"] for g in got[:2]] == [1.25, 0.0]
    assert got[2]["status"] == "ok" and got[2]["score"] == 1.0     # the completion, no call
