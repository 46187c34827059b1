"""Token draws: evaluation's inverse CDF is the categorical law; the trainer keeps multinomial."""
from __future__ import annotations

import pytest
import torch

from rlvr.trainer.sampling.draws import draw_tokens, inverse_cdf


def _wide_range_weights(V: int = 1200) -> torch.Tensor:
    """Tokens ~1e-9 of the largest on both sides of two large ones (below float32's
    resolution of a running sum near 1), some zeros, and a vocabulary that is no multiple of
    the block size."""
    w = torch.rand(V, generator=torch.Generator().manual_seed(0)) * 2e-9
    w[300], w[700] = 1.0, 0.3
    w[[0, 1, 255, 256, 999, V - 1]] = 0.0
    return w


def _interval_lengths(w: torch.Tensor) -> torch.Tensor:
    """[V] the length of the set of uniforms u in [0, 1) that `inverse_cdf` maps to each token,
    found by bisecting every boundary inf{u : token(u) >= k} at once (the map is monotone)."""
    V = w.numel()
    k = torch.arange(V + 1)
    lo, hi = torch.zeros(V + 1, dtype=torch.float64), torch.ones(V + 1, dtype=torch.float64)
    rows = w.expand(V + 1, -1).contiguous()
    for _ in range(64):
        mid = (lo + hi) / 2
        up = inverse_cdf(rows, mid) >= k
        lo, hi = torch.where(up, lo, mid), torch.where(up, mid, hi)
    return hi.diff()


def test_inverse_cdf_gives_every_token_its_probability():
    # Each token's share of [0, 1) is its probability to 1e-6 relative (float32's rounding of
    # the block totals is ~1e-7), the ~1e-9 tokens after the large ones included; zeros get
    # none. A single float32 running sum would give those tiny tokens no share at all.
    w = _wide_range_weights()
    p = w.double() / w.double().sum()
    got = _interval_lengths(w)
    assert ((got - p).abs() <= 1e-6 * p + 1e-15).all()      # (+ ten float64 steps of u near 1)
    assert (got[w == 0] == 0).all()


def test_inverse_cdf_ends_on_a_token_with_weight():
    # A uniform at the top of [0, 1) never lands on the zero-weight entries after the last token.
    w = torch.zeros(2, 600)
    w[:, 10], w[:, 300] = 1.0, 1e-12
    u = torch.tensor([1 - 2 ** -53, 0.0], dtype=torch.float64)
    assert inverse_cdf(w, u).tolist() == [300, 10]


def test_the_inverse_cdf_draw_follows_the_categorical_law():
    # 60,000 draws from a fixed distribution through per-group generators: the frequencies stay
    # within 3 standard errors of each probability (and within the total variation distance
    # sampling noise gives); a draw from the distribution at another temperature does not.
    p = torch.softmax(torch.linspace(0, 6, 40) / 0.7, 0)
    gens = [torch.Generator().manual_seed(s) for s in (5, 6, 7)]
    rows = 2000
    draws = torch.cat([draw_tokens(p.expand(3 * rows, -1), "inverse_cdf",
                                   [r // rows for r in range(3 * rows)], gens)
                       for _ in range(10)])
    freq = torch.bincount(draws, minlength=40).double() / len(draws)
    se = (p.double() * (1 - p.double()) / len(draws)).sqrt()
    assert ((freq - p.double()).abs() <= 3 * se + 1e-12).float().mean() >= 0.97
    assert 0.5 * (freq - p.double()).abs().sum() < 0.01
    other = torch.softmax(torch.linspace(0, 6, 40) / 0.8, 0).double()
    assert 0.5 * (freq - other).abs().sum() > 0.03


def test_each_groups_inverse_cdf_draws_depend_only_on_its_generator():
    p = torch.softmax(torch.randn(2, 300, generator=torch.Generator().manual_seed(0)), -1)
    alone = draw_tokens(p[1:].expand(4, -1), "inverse_cdf", [0] * 4,
                        [torch.Generator().manual_seed(9)])
    together = draw_tokens(torch.cat([p[:1].expand(3, -1), p[1:].expand(4, -1)]), "inverse_cdf",
                           [0, 0, 0, 1, 1, 1, 1], [torch.Generator().manual_seed(3),
                                                   torch.Generator().manual_seed(9)])
    assert torch.equal(together[3:], alone)


def test_an_unknown_draw_or_non_finite_weights_are_refused():
    with pytest.raises(ValueError, match="draw must be one of"):
        draw_tokens(torch.ones(1, 4), "gumbel")
    for bad in (float("nan"), float("inf")):      # never a silent token from broken logits
        w = torch.ones(2, 300)
        w[1, 7] = bad
        with pytest.raises(ValueError, match="not finite"):
            draw_tokens(w, "inverse_cdf")
    with pytest.raises(ValueError, match="not finite"):
        draw_tokens(torch.zeros(1, 300), "inverse_cdf")


def test_the_trainers_rollout_still_draws_torch_multinomials_stream(tmp_path, one_torch_thread):
    # The trainer's first tokens are exactly torch.multinomial(softmax(logits / T)) under the
    # group's seeded generator: its samples (and the main job's results) keep their stream,
    # while `rlvr eval`'s local sampler draws by the inverse CDF (another stream, same law).
    from rlvr.core import Task
    from rlvr.trainer.evaluation.evaluate import LocalSampler
    from rlvr.trainer.models.loading import load_policy, load_tokenizer
    from rlvr.trainer.models.tiny import build_tiny_model
    from rlvr.trainer.sampling.rollout import encode_prompt, generate
    path = build_tiny_model(tmp_path / "m")
    model, tok = load_policy(path, "float32", torch.device("cpu")), load_tokenizer(path)
    task, G, T = Task(id="t", prompt="3 + 4 ="), 64, 0.7
    ids = torch.tensor([encode_prompt(tok, task.prompt)])
    with torch.no_grad():
        p = torch.softmax(model(input_ids=ids).logits[0, -1] / T, -1)
    want = torch.multinomial(p.expand(G, -1), 1, generator=torch.Generator().manual_seed(42))
    got = generate(model, tok, [task], G, 1, T, share_prefix=True, seeds=[42]).completion_ids
    assert [s[0] for s in got] == want.squeeze(-1).tolist()
    evals = LocalSampler(model, tok, 64, continuous=True).sample([task], G, [42], max_tokens=1,
                                                                 temperature=T)
    assert [c.token_ids[0] for c in evals[0]] != [s[0] for s in got]
    with pytest.raises(ValueError, match="shared-prefix"):     # HF generate draws its own way
        generate(model, tok, [task], 2, 1, T, draw="inverse_cdf")
