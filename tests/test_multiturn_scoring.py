"""`rlvr score` on transcripts: rows holding `messages` get the verdicts the trainer gave the
same episodes, and a malformed `messages` field is an error row naming its line."""
import json

import pytest

import rlvr.envs.tool_envs  # noqa: F401
from rlvr.envs.multiturn import transcript
from rlvr.envs.registry import load_env
from rlvr.scoring import ScoreConfig, score_file
from rlvr.trainer.episodes import run_episodes
from rlvr.trainer.models import load_tokenizer
from rlvr.trainer.tiny import build_tiny_model

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
