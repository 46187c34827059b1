"""Multi-turn episodes: the runner, its limits, the env-token mask and transcript scoring.

A scripted engine plays the policy (its turns are a function of the context so far), so every
path of the episode loop is exercised deterministically with a real tokenizer and template."""
import json
import re
import time

import pytest
import torch

import rlvr.envs.tool_envs  # noqa: F401  (registers the built-in multi-turn environments)
from rlvr.core import Completion, Task
from rlvr.envs.multiturn import (Episode, MultiTurnEnvironment, Reply, ToolEnvironment,
                                 TranscriptError, episode_from_row, transcript)
from rlvr.envs.base import RowSource
from rlvr.envs.registry import load_env
from rlvr.pool import WorkerPool
from rlvr.trainer.sampling.episodes import (env_token_ids, episode_metrics, policy_tokens, run_episodes,
                                   tool_prompt)
from rlvr.trainer.forwards.fast import completion_logprobs, pack
from rlvr.trainer.models.loading import load_tokenizer
from rlvr.trainer.sampling.rollout import Rollout
from rlvr.trainer.models.tiny import build_tiny_model
from rlvr.verifiers.numeric import NumericMatch
from rlvr.verifiers.tools import Toolbox, calculator


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "m")


@pytest.fixture(scope="module")
def tok(tiny):
    return load_tokenizer(tiny)


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(2) as p:
        yield p


class ScriptedEngine:
    """Plays the policy: `script(context_text, row)` -> the next turn's text (EOS appended)."""

    def __init__(self, tokenizer, script):
        self.tokenizer, self.script, self.calls = tokenizer, script, []

    def _ids(self, context_ids, row, max_new):
        text = self.script(self.tokenizer.decode(context_ids), row)
        ids = self.tokenizer(text, add_special_tokens=False).input_ids + [self.tokenizer.eos_token_id]
        return ids[:max_new]

    def generate(self, tasks, group_size, max_new_tokens, *, temperature=1.0, top_p=1.0,
                 greedy=False, seeds=None):
        out = Rollout([], [], [], [], group_size=group_size)
        for g, t in enumerate(tasks):
            prompt, kw = tool_prompt(self.tokenizer, t.prompt, t.metadata.get("tools"))
            text = self.tokenizer.apply_chat_template(prompt, add_generation_prompt=True,
                                                      tokenize=False, **kw)
            pids = self.tokenizer(text, add_special_tokens=False).input_ids
            for j in range(group_size):
                ids = self._ids(pids, g * group_size + j, max_new_tokens)
                stop = ids[-1] == self.tokenizer.eos_token_id
                out.tasks.append(t)
                out.prompt_ids.append(pids)
                out.completion_ids.append(ids)
                out.completions.append(Completion(
                    self.tokenizer.decode(ids[:-1] if stop else ids, skip_special_tokens=True),
                    ids, "stop" if stop else "length"))
        return out

    def generate_ids(self, contexts, max_new, *, temperature=1.0, top_p=1.0, greedy=False,
                     seeds=None):
        self.calls.append(len(contexts))
        return [self._ids(c, k, max_new) for k, c in enumerate(contexts)]


def episode_part(context):
    """The context from the task's own question on (the prompt's worked example left out)."""
    return context[context.rindex("user: "):]


def calc_script(context, row):
    """Call the calculator on the question, then answer with what it returned."""
    context = episode_part(context)
    results = re.findall(r"tool: (-?\d+)\n", context)
    if results:
        return f"Answer: {results[-1]}"
    expr = re.findall(r"What is ([\d +*-]+)\?", context)[-1]
    return ('I will use the tool.<tool_call>{"name": "calculator", "arguments": '
            f'{{"expression": "{expr}"}}}}</tool_call>')


def calc_env(pool, **kw):
    env = load_env("tool-arithmetic", **kw)
    env.toolbox.pool = pool
    return env


def test_single_turn_env_is_the_one_turn_case(tok):
    env = load_env("arithmetic", n_terms=2)
    engine = ScriptedEngine(tok, lambda ctx, row: "<answer>3</answer>")
    tasks = env.sample(2)
    direct = engine.generate(tasks, 2, 32)
    via = run_episodes(engine, env, tok, tasks, 2, 32)
    assert engine.calls == []                         # no second turn was ever sampled
    assert via.completion_ids == direct.completion_ids
    assert [c.text for c in via.completions] == [c.text for c in direct.completions]
    assert not any(isinstance(c, Episode) for c in via.completions)
    assert episode_metrics(via) == {}


def test_tool_episode_tokens_messages_and_reward(tok, pool):
    env = calc_env(pool)
    tasks = env.sample(2)
    r = run_episodes(ScriptedEngine(tok, calc_script), env, tok, tasks, 2, 200)
    for i, e in enumerate(r.completions):
        task = r.tasks[i]
        assert isinstance(e, Episode) and e.end_reason == "stop" and e.turns == 2
        assert [m["role"] for m in e.messages] == ["assistant", "tool", "assistant"]
        call = e.messages[0]["tool_calls"][0]["function"]
        assert call == {"name": "calculator", "arguments": {"expression": task.metadata["expression"]}}
        assert e.messages[0]["content"] == "I will use the tool."
        assert e.messages[1]["content"] == task.answer
        assert e.text == f"Answer: {task.answer}"
        # the environment's tokens are exactly the template's tool turn + the next header
        env_ids = [t for t, m in zip(e.token_ids, e.token_mask) if m == 0]
        assert tok.decode(env_ids) == f"\ntool: {task.answer}\nassistant: "
        assert r.completion_ids[i] == e.token_ids and len(e.token_mask) == len(e.token_ids)
        assert env.reward.score(task, e).score == 1.0
    m = episode_metrics(r)
    assert m["turns/mean"] == 2 and m["tool_calls/mean"] == 1 and m["tool_calls/error_rate"] == 0
    share = sum(e.env_tokens for e in r.completions) / sum(map(len, r.completion_ids))
    assert m["episode/env_token_share"] == pytest.approx(share) and 0 < share < 1


def test_tools_reach_the_prompt(tok):
    env = load_env("tool-arithmetic")
    prompt, kw = tool_prompt(tok, env.sample(1)[0].prompt, env.tool_schemas)
    assert kw == {} and '"name": "calculator"' in prompt[0]["content"]   # no `tools` in template

    class Templated:                                  # a template that renders tools itself
        chat_template = "{% for t in tools %}{{ t }}{% endfor %}"
    assert tool_prompt(Templated(), [{"role": "user", "content": "hi"}], env.tool_schemas)[1] == \
        {"tools": env.tool_schemas}


def test_an_episode_that_never_stops_calling_tools_ends_at_max_turns(tok, pool):
    env = calc_env(pool, max_turns=3, max_tokens=4000)
    always = lambda ctx, row: ('<tool_call>{"name": "calculator", "arguments": '
                               '{"expression": "1 + 1"}}</tool_call>')
    r = run_episodes(ScriptedEngine(tok, always), env, tok, env.sample(1), 2, 100)
    for e in r.completions:
        assert e.end_reason == "max_turns" and e.turns == 3
        assert e.tool_calls == 2      # the third turn's call never ran: no turn left to read it
        assert [m["role"] for m in e.messages] == ["assistant", "tool"] * 2 + ["assistant"]
        assert env.reward.score(r.tasks[0], e).score == 0.0


def test_the_token_budget_ends_an_episode(tok, pool):
    env = calc_env(pool, max_turns=10, max_tokens=150)
    always = lambda ctx, row: ('<tool_call>{"name": "calculator", "arguments": '
                               '{"expression": "1 + 1"}}</tool_call>')
    r = run_episodes(ScriptedEngine(tok, always), env, tok, env.sample(1), 1, 100)
    e = r.completions[0]
    assert e.end_reason == "max_tokens" and e.turns < 10 and len(e.token_ids) <= 150


def test_a_cut_turn_is_shown_to_the_policy_as_a_malformed_call(tok, pool):
    env = calc_env(pool, max_turns=2, max_tokens=4000)
    r = run_episodes(ScriptedEngine(tok, calc_script), env, tok, env.sample(1), 1, 40)
    e = r.completions[0]
    assert e.messages[0]["content"].startswith("I will use the tool.<tool_call>")  # kept as written
    assert e.messages[1]["content"].startswith("Error: malformed tool call: unclosed")
    assert e.tool_errors == 1 and episode_metrics(r)["tool_calls/error_rate"] == 1.0


def slow_calculator(expression: str) -> str:
    """A calculator that hangs.

    Args:
        expression: Ignored.
    """
    time.sleep(600)
    return "0"


def test_a_hanging_tool_is_stopped_and_the_episode_continues(tok, pool):
    env = calc_env(pool)
    env.toolbox = Toolbox([slow_calculator], deadline_s=1.0, pool=pool)
    script = lambda ctx, row: ("Answer: 1" if "tool: " in episode_part(ctx) else
                               '<tool_call>{"name": "slow_calculator", "arguments": '
                               '{"expression": "1"}}</tool_call>')
    r = run_episodes(ScriptedEngine(tok, script), env, tok, env.sample(1), 1, 100)
    e = r.completions[0]
    assert "did not finish within 1 s and was stopped" in e.messages[1]["content"]
    assert e.turns == 2 and e.text == "Answer: 1" and e.tool_errors == 1


class Nagging(MultiTurnEnvironment):
    """Answers every turn with 'Again.' (until max_turns)."""

    def respond(self, task, episode):
        return Reply([{"role": "user", "content": "Again."}])


def test_env_tokens_get_exactly_zero_gradient(tiny, tok):
    torch.manual_seed(0)
    env = Nagging(name="nag", source=RowSource({"train": [Task("t", [
        {"role": "user", "content": "Say 7."}], "7")]}), rewards=[(NumericMatch(), 1.0)],
        max_turns=3, max_tokens=500)
    engine = ScriptedEngine(tok, lambda ctx, row: f"<answer>{row}</answer>")
    r = run_episodes(engine, env, tok, env.sample(1), 2, 50)
    assert all(e.turns == 3 and e.end_reason == "max_turns" for e in r.completions)
    from rlvr.trainer.models.loading import load_policy
    model = load_policy(tiny, "float32", torch.device("cpu"))
    for share in (True, False):
        mb = pack([[0, 1]], r.prompt_ids, r.completion_ids, tok.pad_token_id, "cpu", share)
        own = policy_tokens(r, mb)
        assert own.sum() < mb.mask.sum()              # env tokens are in the context...
        logp, _ = completion_logprobs(model, mb)
        logp.retain_grad()
        (-(logp * own).sum() / own.sum()).backward()
        env_pos = mb.mask & ~own
        assert torch.count_nonzero(logp.grad[env_pos]) == 0    # ...and never trained on
        assert torch.count_nonzero(logp.grad[own]) == int(own.sum())
        model.zero_grad()


def test_transcript_rows_score_like_the_trainer(tok, pool):
    env = calc_env(pool)
    wrong = lambda ctx, row: "Answer: 12" if row % 2 == 1 and "tool: " in episode_part(ctx) \
        else calc_script(ctx, row)
    r = run_episodes(ScriptedEngine(tok, wrong), env, tok, env.sample(2), 2, 200)
    trained = env.reward.score_batch(r.tasks, r.completions)
    assert [v.score for v in trained] == [1.0, 0.0, 1.0, 0.0]
    rows = [json.loads(json.dumps({"id": t.id, "messages": transcript(t, e)}))
            for t, e in zip(r.tasks, r.completions)]
    pairs = [episode_from_row(env, row, line=k + 1) for k, row in enumerate(rows)]
    offline = env.reward.score_batch([t for t, _ in pairs], [e for _, e in pairs])
    assert [(v.score, v.status, v.extracted) for v in offline] == \
        [(v.score, v.status, v.extracted) for v in trained]
    for (t, e), orig in zip(pairs, r.completions):
        assert (e.turns, e.tool_calls, e.text) == (orig.turns, orig.tool_calls, orig.text)


@pytest.mark.parametrize("messages,why", [
    ("hello", "non-empty list"), ([], "non-empty list"), ([{"role": "user", "content": "q"}],
                                                          "no assistant message"),
    ([{"role": "robot", "content": "x"}], "role 'robot'"), ([["assistant", "x"]], "not an object"),
    ([{"role": "assistant", "content": 5}], "content is int"),
    ([{"role": "assistant", "content": "", "tool_calls": [{"function": {"arguments": {}}}]}],
     "tool_calls must be"),
])
def test_a_malformed_messages_field_names_its_line(pool, messages, why):
    env = calc_env(pool)
    with pytest.raises(TranscriptError, match=f"line 7: .*{re.escape(why)}"):
        episode_from_row(env, {"id": "tool-arithmetic/train/0/0", "messages": messages}, line=7)


def test_env_token_ids_refuse_a_template_that_rewrites_history(tok):
    class Rewriting:
        eos_token = "</s>"

        def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False, **kw):
            return f"{len(messages)} messages"           # earlier text changes every turn
    with pytest.raises(ValueError, match="not prefix-preserving"):
        env_token_ids(Rewriting(), [{"role": "user", "content": "q"}],
                      [{"role": "tool", "content": "1"}], None, True)


# --------------------------------------------------------------------------- later-turn sampler

def _conversations(tok, n=5):
    """Contexts like turn 2's: a long shared prompt, then each episode's own tokens."""
    base = tok("system: be brief. " * 6, add_special_tokens=False).input_ids
    return [base + tok(f"user: {'ab' * k} q{k}", add_special_tokens=False).input_ids
            for k in range(n)]


@pytest.mark.parametrize("greedy", [True, False])
def test_later_turns_sample_as_if_each_context_were_prefilled_alone(tiny, tok, greedy):
    """The common-prefix sampler (prefix prefilled once) gives the tokens the per-context
    sampler gives: same positions and attention, so the same logits and, seeded, the same draws."""
    from rlvr.trainer.sampling.rollout import sample_continuations
    from rlvr.trainer.forwards.prefix import common_prefix
    from rlvr.trainer.models.loading import load_policy
    from rlvr.trainer.sampling.rollout import sample_shared_prefix
    model = load_policy(tiny, "float32", torch.device("cpu"))
    contexts = _conversations(tok)
    assert common_prefix(contexts) > 20
    seeds = [11, 12, 13, 14, 15]
    eos = {tok.eos_token_id}
    shared = sample_continuations(model, contexts, 24, eos, tok.pad_token_id, greedy=greedy,
                                  seeds=seeds)
    alone = [sample_shared_prefix(model, [c], 1, 24, eos, tok.pad_token_id, greedy=greedy,
                                  seeds=[s])[0] for c, s in zip(contexts, seeds)]
    assert shared == alone
    assert len({tuple(s) for s in shared}) > 1          # the rows really differ


def test_later_turn_prefill_gives_each_contexts_own_logits(tiny, tok):
    """Prefix run once, suffixes after it: the next-token logits of every row are those of the
    context run alone (a wrong position offset moves them by ~1e-3 on this model)."""
    from rlvr.trainer.models.loading import load_policy
    from rlvr.trainer.sampling.rollout import prefill
    model = load_policy(tiny, "float32", torch.device("cpu"))
    contexts = _conversations(tok)
    _, logits, attn = prefill(model, contexts, tok.pad_token_id)
    with torch.no_grad():
        alone = torch.stack([model(input_ids=torch.tensor([c])).logits[0, -1] for c in contexts])
    assert torch.allclose(logits, alone, atol=1e-5, rtol=0)
    assert attn.sum(-1).tolist() == [len(c) for c in contexts]


def test_common_prefix_sampler_handles_no_shared_prefix_and_identical_contexts(tiny, tok):
    from rlvr.trainer.sampling.rollout import sample_continuations
    from rlvr.trainer.forwards.prefix import common_prefix
    from rlvr.trainer.models.loading import load_policy
    from rlvr.trainer.sampling.rollout import sample_shared_prefix
    model = load_policy(tiny, "float32", torch.device("cpu"))
    a, b = tok("xyz abc", add_special_tokens=False).input_ids, \
        tok("abc xyz", add_special_tokens=False).input_ids
    assert common_prefix([a, b]) == 0 and common_prefix([a, a]) == len(a) - 1
    eos = {tok.eos_token_id}
    for contexts in ([a, b], [a, a]):
        got = sample_continuations(model, contexts, 8, eos, tok.pad_token_id, greedy=True)
        want = [sample_shared_prefix(model, [c], 1, 8, eos, tok.pad_token_id, greedy=True)[0]
                for c in contexts]
        assert got == want
