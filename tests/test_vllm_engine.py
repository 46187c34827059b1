"""The colocated vLLM engine's glue, against a fake `vllm` module (vLLM needs a CUDA GPU).

The fake `LLM` records what the engine asks of it and plays the policy with a script, so the
test checks what is ours: the environment's tool schemas in the first turn's token-id prompt,
later turns through `generate_ids`, EOS handling, seeds, and the weight push after an update.
What vLLM itself does with these calls is not exercised here (see docs/rollout_server.md).
"""
import sys
import types

import pytest
import torch

from rlvr.envs.multiturn import Episode
from rlvr.trainer import TrainConfig
from rlvr.trainer.sampling.engines import RolloutEngine, VLLMEngine, make_engine
from rlvr.trainer.sampling.episodes import episode_engine
from rlvr.trainer.models.loading import load_policy
from rlvr.trainer.sampling.rollout import encode_prompt

from test_multiturn import calc_env, calc_script, pool, tiny, tok  # noqa: F401  (fixtures)


class FakeLLM:
    """vllm.LLM's generate / apply_model / reset_prefix_cache, playing `script`."""
    script = None

    def __init__(self, **kw):
        self.kw, self.prompts, self.params, self.loaded, self.resets = kw, [], [], [], 0
        self.tokenizer = kw.pop("_tokenizer")

    def generate(self, prompts, params, use_tqdm=True):
        self.prompts += [p["prompt_token_ids"] for p in prompts]
        self.params += params
        outs = []
        for p, sp in zip(prompts, params):
            text = FakeLLM.script(self.tokenizer.decode(p["prompt_token_ids"]), 0)
            ids = self.tokenizer(text, add_special_tokens=False).input_ids
            ids = (ids + [self.tokenizer.eos_token_id])[:sp.max_tokens]
            stop = ids[-1] == self.tokenizer.eos_token_id
            sample = types.SimpleNamespace(text=text, token_ids=ids,
                                           finish_reason="stop" if stop else "length")
            outs.append(types.SimpleNamespace(outputs=[sample] * sp.n))
        return outs

    def apply_model(self, fn):
        fn(types.SimpleNamespace(load_weights=self.loaded.append))

    def reset_prefix_cache(self):
        self.resets += 1


@pytest.fixture
def fake_vllm(monkeypatch, tok):
    module = types.ModuleType("vllm")
    module.LLM = lambda **kw: FakeLLM(**kw, _tokenizer=tok)
    module.SamplingParams = lambda **kw: types.SimpleNamespace(**kw)
    monkeypatch.setitem(sys.modules, "vllm", module)
    FakeLLM.script = staticmethod(calc_script)
    return module


def test_vllm_engine_runs_tool_episodes_with_the_schemas_in_the_prompt(fake_vllm, tiny, tok,
                                                                       pool):
    env = calc_env(pool)
    engine = VLLMEngine(tiny, tok)
    assert isinstance(engine, RolloutEngine)           # the one interface (tests only check it)
    tasks = env.sample(2)
    r = episode_engine(engine, env, tok).generate(tasks, 2, 200, seeds=[11, 12])
    first = engine.llm.prompts[:2]
    schemas = [encode_prompt(tok, t.prompt, env.tool_schemas) for t in tasks]
    assert first == schemas and schemas[0] != encode_prompt(tok, tasks[0].prompt)
    assert '"name": "calculator"' in tok.decode(first[0])
    assert [p.seed for p in engine.llm.params[:2]] == [11, 12]
    assert all(p.n == 2 for p in engine.llm.params[:2])
    assert len(engine.llm.prompts) == 2 + 4          # then one later turn per episode
    for task, e in zip([t for t in tasks for _ in range(2)], r.completions):
        assert isinstance(e, Episode) and e.turns == 2 and e.end_reason == "stop"
        assert e.text == f"Answer: {task.answer}" and env.reward.score(task, e).score == 1.0


def test_vllm_engine_pushes_every_weight_and_drops_its_prefix_cache(fake_vllm, tiny, tok):
    cfg = TrainConfig(model=tiny, rollout_engine="vllm")
    policy = load_policy(tiny, "float32", "cpu")
    engine = make_engine("vllm", policy, tok, cfg)       # synced at construction
    assert engine.llm.resets == 1
    (weights,) = engine.llm.loaded
    names = dict(weights)
    assert set(names) == set(policy.state_dict())
    with torch.no_grad():
        next(policy.parameters()).add_(1.0)
    engine.sync_weights(policy)
    name, first = next(iter(policy.state_dict().items()))
    assert torch.equal(dict(engine.llm.loaded[-1])[name], first) and engine.llm.resets == 2
    FakeLLM.script = staticmethod(lambda context, row: "abcdef")
    out = engine.generate_ids([[5, 6, 7]], 4, greedy=True)
    assert out == [tok("abcd", add_special_tokens=False).input_ids]
    assert engine.llm.params[-1].temperature == 0.0 and engine.llm.params[-1].seed is None
