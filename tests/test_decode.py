"""The sampler's fast paths compute what the plain ones do: the packed decode step over a
grouped cache is the model's forward over its own cache up to float rounding, and the
exponential race is torch.multinomial bit for bit."""
from __future__ import annotations

import warnings

import pytest
import torch

from rlvr.trainer.forwards.decode import PackedDecoder
from rlvr.trainer.forwards.hf_adapter import returned_cache
from rlvr.trainer.sampling.rows import ForwardRows, PackedRows, start_rows
from rlvr.trainer.sampling.draws import draw_tokens, exponential_race


def _llama(**kw):
    from transformers import LlamaForCausalLM
    from rlvr.trainer.models.tiny import _tokenizer, tiny_llama_config
    torch.manual_seed(0)
    cfg = tiny_llama_config(_tokenizer(), layers=3, hidden=48, heads=6, kv_heads=2, **kw)
    return LlamaForCausalLM(cfg).eval()


def _qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=120, hidden_size=48, intermediate_size=80, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)
    model = Qwen2ForCausalLM(cfg).eval()
    with torch.no_grad():                    # biases that matter (q, k, v have them)
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.normal_(0, 0.5)
    return model


def _prefill(model, ids: list[list[int]]):
    """Prompts left-padded and prefilled by the model: (cache, last logits, mask)."""
    width = max(map(len, ids))
    attn = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in ids])
    ids = torch.tensor([[0] * (width - len(p)) + p for p in ids])
    out = model(input_ids=ids, attention_mask=attn, position_ids=(attn.cumsum(-1) - 1).clamp(
        min=0), use_cache=True)
    return returned_cache(out), out.logits[:, -1], attn


def _continue(model, packed: bool) -> list[torch.Tensor]:
    """Two prompts (one left-padded), two rows each, decoded greedily through `start_rows`,
    while rows leave (a group left with one row, then a group with none) and a third prompt's
    rows join, then a fourth's once only the third's are left (the columns written before
    the third joined are dropped): the logits of every step."""
    with torch.no_grad():
        cache, last, attn = _prefill(model, [[7, 8, 9], [3, 4, 5, 6, 7]])
        rows = start_rows(model, cache, attn, 2, 2, packed)   # room 2: the buffers double
        assert type(rows) is (PackedRows if packed else ForwardRows)
        tok, logits = last.argmax(-1).repeat_interleave(2), []
        for t in range(9):
            if t == 2:                          # the first prompt keeps one row of two
                keep = torch.tensor([0, 2, 3])
                rows.select(keep)
                tok = tok[keep]
            if t == 3:                          # a third prompt joins with two rows
                cache, last, attn = _prefill(model, [[11, 12, 13, 14, 15, 16]])
                keep = torch.tensor([0, 1, 2])
                rows.join(keep, cache, attn, 2, 4)
                tok = torch.cat([tok[keep], last.argmax(-1).repeat_interleave(2)])
            if t == 5:                          # the first prompt's last row leaves
                keep = torch.tensor([1, 2, 3, 4])
                rows.select(keep)
                tok = tok[keep]
            if t == 6:                          # only the third prompt's rows, then a fourth
                cache, last, attn = _prefill(model, [[9, 9, 10]])
                keep = torch.tensor([2, 3])
                rows.join(keep, cache, attn, 1, 4)
                tok = torch.cat([tok[keep], last.argmax(-1)])
                if packed:
                    assert rows.cache.fill == 3      # of 6 columns: the 3 before it joined gone
                    assert rows.cache.prompts == 2   # the first two prompts' keys are gone
            logits.append(rows.step(tok))
            tok = logits[-1].argmax(-1)
    return logits


@pytest.mark.parametrize("make", [_llama, _qwen2], ids=["llama-gqa", "qwen2-bias"])
def test_the_packed_decoder_computes_the_models_forward(make, one_torch_thread):
    model = make()
    assert PackedDecoder.build(model) is not None
    plain, fast = _continue(model, packed=False), _continue(model, packed=True)
    assert [t.shape for t in fast] == [t.shape for t in plain]
    for a, b in zip(fast, plain):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    assert not torch.allclose(plain[0][0], plain[-1][0])    # the steps saw different contexts


@pytest.mark.parametrize("make", [_llama, _qwen2], ids=["llama-gqa", "qwen2-bias"])
def test_a_bfloat16_model_is_probed_in_float32_and_left_bit_for_bit(make, one_torch_thread):
    # a probe in bfloat16 cannot pass at float32's tolerance (its rounding moves these logits
    # by ~2e-3): building at all shows the probe ran upcast, and the weights came back exact
    model = make().to(torch.bfloat16)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert PackedDecoder.build(model) is not None
    after = model.state_dict()
    assert all(torch.equal(after[k], v) and after[k].dtype == v.dtype for k, v in before.items())
    plain, fast = _continue(model, packed=False), _continue(model, packed=True)
    exact = _continue(make(), packed=False)                 # the float32 model
    for a, b, c in zip(fast, plain, exact):
        assert a.dtype == b.dtype == torch.bfloat16
        torch.testing.assert_close(a.float(), b.float(), rtol=0, atol=8e-3)
        torch.testing.assert_close(a.float(), c, rtol=0, atol=8e-3)    # as near as bf16's own


def test_a_probe_that_raises_leaves_a_bfloat16_model_as_it_was(monkeypatch, one_torch_thread):
    model = _llama().to(torch.bfloat16)
    before = {k: v.clone() for k, v in model.state_dict().items()}

    def boom(self, model):
        assert next(model.parameters()).dtype == torch.float32    # upcast while probing
        raise RuntimeError("an internal moved")
    monkeypatch.setattr(PackedDecoder, "_matches", boom)
    with pytest.warns(RuntimeWarning, match="an internal moved"):
        assert PackedDecoder.build(model) is None
    after = model.state_dict()
    assert all(torch.equal(after[k], v) and after[k].dtype == v.dtype for k, v in before.items())


def test_a_decoder_that_differs_from_the_forward_is_not_used(monkeypatch, one_torch_thread):
    # the probe at build time compares with the model's forward: an error of 1e-2 in the
    # logits (a wrong rotary, a missed bias) sends the sampler back to the model
    model = _llama()
    real = PackedDecoder.__call__
    off = lambda self, *a: real(self, *a) + 1e-2 * torch.arange(a[0].numel())[:, None]
    monkeypatch.setattr(PackedDecoder, "__call__", off)
    with pytest.warns(RuntimeWarning, match="packed decode step is off for this "
                                           "LlamaForCausalLM.*differ from the forward"):
        assert PackedDecoder.build(model) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")                   # said once per model, not per call
        cache, _, attn = _prefill(model, [[5, 6, 7]])
        assert type(start_rows(model, cache, attn, 2, 4)) is ForwardRows


def test_shapes_it_does_not_know_run_the_models_forward(one_torch_thread):
    from peft import LoraConfig, get_peft_model
    from transformers import GPT2Config, GPT2LMHeadModel
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=50, n_embd=32, n_layer=1, n_head=2)).eval()
    lora = get_peft_model(_llama(), LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    window = _llama()
    window.config.model_type, window.config.sliding_window = "mistral", 4
    for model in (gpt2, lora, window):
        assert PackedDecoder.build(model) is None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert PackedDecoder.build(_llama()) is None     # autocast: another precision


def test_sampling_draws_the_same_tokens_packed_or_not(one_torch_thread):
    from rlvr.trainer.sampling.batching import sample_refilling
    from rlvr.trainer.sampling.rollout import sample_shared_prefix
    model = _llama()
    assert PackedDecoder.build(model) is not None           # the fast side is the packed one
    prompts = [[5, 6, 7, 8, 9, 10], [5, 6, 7, 11], [5, 6, 12, 13, 14]]
    eos = {2}
    for draw in ("multinomial", "inverse_cdf"):
        run = lambda packed: sample_shared_prefix(model, prompts, 4, 12, eos, 0, 1.3,
                                                  seeds=[1, 2, 3], draw=draw, packed=packed)
        assert run(True) == run(False)
        refill = lambda packed: sample_refilling(model, prompts, 4, 12, eos, 0, 1.3,
                                                 seeds=[1, 2, 3], max_rows=6, draw=draw,
                                                 packed=packed)
        assert refill(True) == refill(False)


def _multinomial(weights, gens, sizes):
    return torch.cat([torch.multinomial(w, 1, generator=g) for w, g in
                      zip(weights.split(sizes), gens)]).squeeze(-1)


@pytest.mark.parametrize("shape", ["peaked", "flat", "zeros"])
def test_the_exponential_race_is_torch_multinomial_bit_for_bit(shape):
    sizes = [8, 3, 1, 5]
    for seed in range(6):
        g = torch.Generator().manual_seed(seed)
        logits = torch.randn(sum(sizes), 3001, generator=g)
        weights = {"peaked": torch.softmax(logits * 6, -1), "flat": torch.softmax(logits, -1),
                   "zeros": torch.softmax(logits, -1) * (logits > 0.5)}[shape]
        mine = [torch.Generator().manual_seed(100 * seed + k) for k in range(len(sizes))]
        theirs = [torch.Generator().manual_seed(100 * seed + k) for k in range(len(sizes))]
        for _ in range(3):            # consecutive draws: the generators stay in step
            assert torch.equal(exponential_race(weights, mine, sizes),
                               _multinomial(weights, theirs, sizes))
        assert all(torch.equal(a.get_state(), b.get_state()) for a, b in zip(mine, theirs))


def test_the_trainers_draw_uses_the_race_and_refuses_what_multinomial_refuses():
    weights = torch.softmax(torch.randn(6, 500), -1)
    groups, gens = [0, 0, 0, 1, 1, 1], [torch.Generator().manual_seed(s) for s in (4, 5)]
    want = _multinomial(weights, [torch.Generator().manual_seed(s) for s in (4, 5)], [3, 3])
    assert torch.equal(draw_tokens(weights, "multinomial", groups, gens), want)
    for bad in (float("nan"), float("inf"), -1.0):
        w = weights.clone()
        w[1, 3] = bad
        with pytest.raises(ValueError):
            exponential_race(w, gens, [3, 3])
    with pytest.raises(ValueError):
        exponential_race(torch.zeros(2, 5), gens[:1], [2])


def test_new_weights_mid_generation_are_packed_again(one_torch_thread):
    # partial rollouts swap the weights in place between tokens (`TokenRecord.refresh`): the
    # packed decoder must repack them, so that each token's log-prob is the one the model's
    # own forward gives under the weights of that moment (norms and embeddings change in
    # place too, so a stale pack would be a mixture of both versions)
    from rlvr.trainer.sampling.rollout import TokenRecord, sample_shared_prefix
    model = _llama()
    old = {k: v.clone() for k, v in model.state_dict().items()}
    new = {k: v + 0.3 * torch.randn_like(v) for k, v in old.items()}

    def run(packed):
        model.load_state_dict(old)
        calls = []

        def refresh():
            calls.append(1)
            if len(calls) == 4:                  # before the forward of token 3's logits
                model.load_state_dict(new)
            return 7 if len(calls) >= 4 else 6
        record = TokenRecord(refresh)
        seqs = sample_shared_prefix(model, [[5, 6, 7, 8], [5, 6, 9]], 3, 8, set(), 0, 1.0,
                                    seeds=[1, 2], record=record, packed=packed)
        return seqs, record.logps
    (seqs, fast), (plain_seqs, plain) = run(True), run(False)
    assert seqs == plain_seqs
    for a, b in zip(fast, plain):
        assert a == pytest.approx(b, abs=1e-4)
