"""The sampler draws from the policy's own distribution, whichever batching path runs it."""
from __future__ import annotations

import math
from collections import Counter

import pytest
import torch

from rlvr.trainer.models.loading import load_policy, load_tokenizer
from rlvr.trainer.models.tiny import build_tiny_model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "m")
    return load_policy(path, "float32", torch.device("cpu")), load_tokenizer(path)


def _prompts(tok):
    system = tok.encode("You are a careful assistant who adds numbers and states the sum. ")
    return [system + tok.encode(q) for q in ("1 + 2 =", "13 + 4 =", "100 + 250 + 7 =", "5 =",
                                              "6 + 6 =")]


@pytest.mark.parametrize("greedy,draw", [(False, "multinomial"), (False, "inverse_cdf"),
                                        (True, "multinomial")])
def test_a_refilled_batch_samples_what_each_prompt_gets_alone(tiny, greedy, draw,
                                                               one_torch_thread, monkeypatch):
    # 5 prompts x 3 completions through a batch of at most 7 rows (greedy: 1 completion, 2
    # rows): prompts join as rows finish (their caches right-aligned to the running one) and
    # finished rows are dropped in bulk; every prompt's completions are exactly those of
    # decoding it alone with its seed.
    import rlvr.trainer.sampling.batching as B
    from rlvr.trainer.sampling.rollout import eos_ids, sample_shared_prefix
    model, tok = tiny
    prompts, seeds = _prompts(tok), [11, 12, 13, 14, 15]
    eos = eos_ids(tok, model)
    admitted, compacted = [], []
    real_admit, real_compact = B._Batch.admit, B._Batch.compact
    monkeypatch.setattr(B._Batch, "admit", lambda self, groups, *a: (
        admitted.append((list(groups), self.live_count)), real_admit(self, groups, *a))[1])
    monkeypatch.setattr(B._Batch, "compact", lambda self: (
        compacted.append(self.dead_count), real_compact(self))[1])
    G, rows = (1, 2) if greedy else (3, 7)
    joined = B.sample_refilling(model, prompts, G, 24, eos, tok.pad_token_id, 0.9, 0.95, greedy,
                                seeds, max_rows=rows, draw=draw)
    alone = [s for p, seed in zip(prompts, seeds)
             for s in sample_shared_prefix(model, [p], G, 24, eos, tok.pad_token_id, 0.9, 0.95,
                                           greedy, seeds=[seed], draw=draw)]
    assert joined == alone
    assert [g for groups, _ in admitted for g in groups] == [0, 1, 2, 3, 4]
    if not greedy:     # (the random model's greedy rows all run to the limit together)
        assert any(live > 0 for _, live in admitted[1:])   # prompts joined running rows
        assert compacted                                   # finished rows were dropped
        lengths = [len(s) for s in alone]
        assert min(lengths) < 24 and len(set(lengths)) > 2    # rows finished at different steps


def test_refilling_computes_the_shared_prefix_once_for_every_admission(tiny, one_torch_thread,
                                                                        monkeypatch):
    """Prompts admitted one at a time as rows finish continue from one computation of the
    prefix they all share (the system turn): only their own tokens run again."""
    import rlvr.trainer.sampling.batching as B
    from rlvr.trainer.forwards.prefix import MIN_COMMON_PREFIX, common_prefix
    from rlvr.trainer.sampling.rollout import eos_ids
    model, tok = tiny
    prompts = _prompts(tok)
    shared = common_prefix(prompts)
    assert shared >= MIN_COMMON_PREFIX
    widths, real = [], model.forward
    monkeypatch.setattr(model, "forward", lambda *a, **k: (
        widths.append(tuple(k["input_ids"].shape)), real(*a, **k))[1])
    admitted = []
    real_admit = B._Batch.admit
    monkeypatch.setattr(B._Batch, "admit", lambda self, groups, *a: (
        admitted.append(list(groups)), real_admit(self, groups, *a))[1])
    B.sample_refilling(model, prompts, 3, 24, eos_ids(tok, model), tok.pad_token_id, 0.9, 1.0,
                       False, [11, 12, 13, 14, 15], max_rows=7)
    assert len(admitted) >= 3                       # prompts were admitted in several calls
    assert [w for w in widths if w[1] >= shared] == [(1, shared)]


def _exact_two_token_law(model, prompt, temperature):
    """p(t1) and the marginal p(t2) = sum_t1 p(t1) p(t2 | t1), from plain full forwards."""
    with torch.no_grad():
        ids = torch.tensor([prompt])
        p1 = torch.softmax(model(input_ids=ids).logits[0, -1].double() / temperature, -1)
        both = torch.cat([ids.repeat(p1.numel(), 1), torch.arange(p1.numel())[:, None]], 1)
        p2 = torch.softmax(model(input_ids=both).logits[:, -1].double() / temperature, -1)
    return p1, p1 @ p2


def _tv(counts: Counter, p: torch.Tensor, n: int) -> float:
    return 0.5 * sum(abs(counts.get(v, 0) / n - float(p[v])) for v in range(p.numel()))


def _noise(p: torch.Tensor, n: int) -> float:
    """The total variation distance sampling noise alone gives, in expectation (each count is
    ~normal with variance n p (1 - p): E|x| = sqrt(2 var / pi))."""
    return 0.5 * sum(math.sqrt(2 * float(q) * (1 - float(q)) / (math.pi * n)) for q in p)


def test_every_sampler_draws_the_policys_distribution(tiny, one_torch_thread):
    # 1,500 two-token samples from each path -- `rlvr eval`'s continuous batching (its inverse
    # CDF draw), the trainer's shared-prefix rollout (torch.multinomial), plain HF `generate` --
    # against the exact law of the
    # first token and the marginal of the second (through the KV cache) from full forwards at
    # T = 0.1. Each stays within 2.2x the distance sampling noise alone gives; a sampler off by
    # a temperature of 0.12 instead of 0.1 is well outside it (the test can fail).
    from rlvr.core import Task
    from rlvr.trainer.sampling.batching import sample_refilling
    from rlvr.trainer.sampling.rollout import encode_prompt, eos_ids, generate
    model, tok = tiny
    T, n = 0.1, 1500
    prompt = encode_prompt(tok, "7 + 8 =")
    p1, p2 = _exact_two_token_law(model, prompt, T)
    eos = eos_ids(tok, model)
    no_eos = set()                     # two tokens whatever they are: the law stays simple
    task = Task(id="t", prompt="7 + 8 =")
    paths = {
        "eval (continuous batching)": lambda: sample_refilling(
            model, [prompt] * 5, n // 5, 2, no_eos, tok.pad_token_id, T, seeds=[1, 2, 3, 4, 5],
            max_rows=400, draw="inverse_cdf"),
        "trainer rollout": lambda: generate(model, tok, [task] * 5, n // 5, 2, T,
                                            share_prefix=True, seeds=[1, 2, 3, 4, 5]
                                            ).completion_ids,
        "HF generate": lambda: _seeded(lambda: generate(model, tok, [task], n, 2, T,
                                                        share_prefix=False).completion_ids),
    }
    bound1, bound2 = 2.2 * _noise(p1, n), 2.2 * _noise(p2, n)
    for name, run in paths.items():
        seqs = run()
        firsts = Counter(s[0] for s in seqs)
        seconds = Counter(s[1] for s in seqs if len(s) > 1 and s[0] not in eos)
        assert len(seqs) == n
        assert _tv(firsts, p1, n) < bound1, name
        if not eos & set(firsts):          # every first token continued: the marginal applies
            assert _tv(seconds, p2, n) < bound2, name
    wrong, _ = _exact_two_token_law(model, prompt, 0.12)
    assert _tv(Counter(s[0] for s in paths["eval (continuous batching)"]()), wrong, n) > bound1


def _seeded(fn):
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return fn()


def test_rlvr_eval_samples_the_same_with_continuous_batching(tiny, one_torch_thread):
    from rlvr.core import Task
    from rlvr.trainer.evaluation.evaluate import LocalSampler
    model, tok = tiny
    tasks = [Task(id=str(i), prompt=f"{i} + {i} =") for i in range(5)]
    seeds = [7, 8, 9, 10, 11]
    texts = lambda sampler: [[c.text for c in comps] for comps in sampler.sample(
        tasks, 3, seeds, max_tokens=12, temperature=0.9)]
    assert texts(LocalSampler(model, tok, 6)) == texts(LocalSampler(model, tok, 7, continuous=True))
