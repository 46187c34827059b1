"""benchmarks/kl_estimators.py: the exact KL and each estimator's conditional bias and variance
(k1, k2, k3; Schulman 2020, "Approximating KL Divergence") against sums worked by hand on small
distribution pairs, the per-token and per-completion summary against the same sums over a
two-completion rollout, and the --tiny pipeline end to end."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "kl_estimators.py"


def by_hand(p: list[float], q: list[float]) -> dict:
    """Plain-float sums over the vocabulary, token by token: KL(p || q), and for each estimator
    (r = log q_v - log p_v: k1 = -r, k2 = r^2/2, k3 = e^r - 1 - r) its mean, variance, chance of
    a negative value and second moment under v ~ p."""
    r = [math.log(qv) - math.log(pv) for pv, qv in zip(p, q)]
    out = {"kl": sum(pv * math.log(pv / qv) for pv, qv in zip(p, q))}
    for name, f in (("k1", lambda x: -x), ("k2", lambda x: x * x / 2),
                    ("k3", lambda x: math.exp(x) - 1 - x)):
        k = [f(x) for x in r]
        mean = sum(pv * kv for pv, kv in zip(p, k))
        second = sum(pv * kv * kv for pv, kv in zip(p, k))
        out[name] = {"mean": mean, "var": second - mean * mean, "second": second,
                     "p_negative": sum(pv for pv, kv in zip(p, k) if kv < 0), "values": k}
    return out


def moments_of(mod, p, q):
    logp = torch.tensor(p, dtype=torch.float64).log()
    logq = torch.tensor(q, dtype=torch.float64).log()
    return mod.estimator_moments(logp, logq)


def test_a_coin_against_a_biased_coin_worked_by_hand(benchmark_script):
    """p = (1/2, 1/2), q = (1/4, 3/4): KL = log(4/3) / 2; k1 and k3 unbiased, k2 over by
    (log^2 2 + log^2 1.5) / 4 - KL; k1 negative on the second token (half the draws)."""
    mod = benchmark_script("kl_estimators")
    m = moments_of(mod, [0.5, 0.5], [0.25, 0.75])
    kl = 0.5 * math.log(4 / 3)                                            # 0.143841
    assert float(m["kl"]) == pytest.approx(kl, rel=1e-12)
    ln2, ln15 = math.log(2), math.log(1.5)
    k1_var = 0.5 * (ln2 ** 2 + ln15 ** 2) - kl ** 2                        # 0.301737
    k2_mean = 0.25 * (ln2 ** 2 + ln15 ** 2)                               # 0.161214
    k2_var = 0.5 * ((ln2 ** 2 / 2) ** 2 + (ln15 ** 2 / 2) ** 2) - k2_mean ** 2
    k3 = (ln2 - 0.5, 0.5 - ln15)                                          # 0.193147, 0.094535
    k3_var = 0.5 * (k3[0] ** 2 + k3[1] ** 2) - kl ** 2
    assert float(m["k1"]["mean"]) == pytest.approx(kl, rel=1e-12)
    assert float(m["k1"]["var"]) == pytest.approx(k1_var, rel=1e-12)
    assert float(m["k1"]["p_negative"]) == pytest.approx(0.5)
    assert float(m["k2"]["mean"]) - kl == pytest.approx(k2_mean - kl, rel=1e-12)   # +0.017373
    assert float(m["k2"]["mean"]) - kl == pytest.approx(0.017373, abs=1e-6)
    assert float(m["k2"]["var"]) == pytest.approx(k2_var, rel=1e-12)
    assert float(m["k3"]["mean"]) == pytest.approx(sum(k3) / 2, rel=1e-12)
    assert float(m["k3"]["mean"]) == pytest.approx(kl, rel=1e-12)               # unbiased
    assert float(m["k3"]["var"]) == pytest.approx(k3_var, rel=1e-12)
    assert float(m["k2"]["p_negative"]) == float(m["k3"]["p_negative"]) == 0.0
    assert float(m["k1"]["second_rare"]) == 0.0                     # no token under 1e-3


def test_a_token_the_policy_has_ruled_out_carries_k3s_second_moment(benchmark_script):
    """Three positions at once ([3, V]): each against its own hand sums; on the last, a token
    with p = 1e-4 that the reference gives 0.4 holds almost all of k3's E[k^2] (w = 4000)."""
    mod = benchmark_script("kl_estimators")
    pairs = [([0.6, 0.3, 0.1], [0.2, 0.3, 0.5]),
             ([0.25, 0.25, 0.5], [0.25, 0.25, 0.5]),
             ([0.6, 0.3999, 0.0001], [0.3, 0.3, 0.4])]
    logp = torch.tensor([p for p, _ in pairs], dtype=torch.float64).log()
    logq = torch.tensor([q for _, q in pairs], dtype=torch.float64).log()
    m = mod.estimator_moments(logp, logq)
    for i, (p, q) in enumerate(pairs):
        h = by_hand(p, q)
        assert float(m["kl"][i]) == pytest.approx(h["kl"], rel=1e-10, abs=1e-15)
        for name in ("k1", "k2", "k3"):
            for field in ("mean", "var", "second", "p_negative"):
                assert float(m[name][field][i]) == pytest.approx(h[name][field], rel=1e-9,
                                                                 abs=1e-12), (i, name, field)
    assert float(m["kl"][1]) == 0.0 and float(m["k1"]["var"][1]) == 0.0       # p == q
    rare_k3 = 1e-4 * (0.4 / 1e-4 - 1 - math.log(0.4 / 1e-4)) ** 2              # 1592.6
    assert float(m["k3"]["second_rare"][2]) == pytest.approx(rare_k3, rel=1e-9)
    assert float(m["k3"]["second_rare"][2]) / float(m["k3"]["second"][2]) > 0.999
    assert float(m["k3"]["var"][2]) > 1000 * float(m["k2"]["var"][2])


class TableModel(torch.nn.Module):
    """A 'language model' whose next-token logits depend only on the current token:
    logits[b, s] = T * log dist[input_ids[b, s]], so softmax(logits / T) is exactly dist[...]."""

    def __init__(self, dists: list[list[float]], temperature: float):
        super().__init__()
        self.table = temperature * torch.tensor(dists, dtype=torch.float64).log()

    def forward(self, input_ids, attention_mask, position_ids, use_cache):
        return SimpleNamespace(logits=self.table[input_ids])


def test_measure_and_summary_match_the_hand_sums_over_a_rollout(benchmark_script):
    """Two completions from prompt [0]: tokens [1, 2] and [2] (padded with 0). The positions
    are predicted after tokens 0, 1 and 0, so the per-token records are three hand-computed
    pairs, and the summary is their means (token) and per-completion sums (sequence)."""
    mod = benchmark_script("kl_estimators")
    T = 0.7
    pol = [[0.5, 0.3, 0.2], [0.1, 0.1, 0.8], [1 / 3, 1 / 3, 1 / 3]]
    ref = [[0.2, 0.3, 0.5], [0.4, 0.4, 0.2], [1 / 3, 1 / 3, 1 / 3]]
    rollout = SimpleNamespace(prompt_ids=[[0], [0]], completion_ids=[[1, 2], [2]])
    records = mod.measure(TableModel(pol, T), TableModel(ref, T), rollout, pad_id=0, chunk=2,
                          temperature=T)
    s = mod.summary(records)
    prev = [0, 1, 0]                        # the token before each completion position
    drawn = [1, 2, 2]                       # the token drawn at it
    seq_of = [0, 0, 1]
    h = [by_hand(pol[t], ref[t]) for t in prev]
    kls = [x["kl"] for x in h]
    mean_kl = sum(kls) / 3
    assert s["tokens"] == 3 and s["sequences"] == 2 and s["mean_length"] == 1.5
    assert s["mean_kl_token"] == pytest.approx(mean_kl, rel=1e-12)
    assert s["mean_kl_sequence"] == pytest.approx((kls[0] + kls[1] + kls[2]) / 2, rel=1e-12)
    for name in ("k1", "k2", "k3"):
        tok, seq = s["estimators"][name]["token"], s["estimators"][name]["sequence"]
        bias = [x[name]["mean"] - x["kl"] for x in h]
        var = [x[name]["var"] for x in h]
        err = [x[name]["values"][y] - x["kl"] for x, y in zip(h, drawn)]
        assert tok["bias"] == pytest.approx(sum(bias) / 3, rel=1e-9, abs=1e-15), name
        assert tok["rel_bias"] == pytest.approx(sum(bias) / 3 / mean_kl, rel=1e-9, abs=1e-14)
        assert tok["std"] == pytest.approx(math.sqrt(sum(var) / 3), rel=1e-9), name
        assert tok["rel_std"] == pytest.approx(math.sqrt(sum(var) / 3) / mean_kl, rel=1e-9)
        assert tok["p_negative"] == pytest.approx(sum(x[name]["p_negative"] for x in h) / 3)
        assert tok["sampled_mean_error"] == pytest.approx(sum(err) / 3, rel=1e-9), name
        assert tok["sampled_rmse"] == pytest.approx(math.sqrt(sum(e * e for e in err) / 3),
                                                    rel=1e-9)
        seq_bias = [sum(b for b, j in zip(bias, seq_of) if j == k) for k in (0, 1)]
        seq_var = [sum(v for v, j in zip(var, seq_of) if j == k) for k in (0, 1)]
        seq_err = [sum(e for e, j in zip(err, seq_of) if j == k) for k in (0, 1)]
        assert seq["bias"] == pytest.approx(sum(seq_bias) / 2, rel=1e-9, abs=1e-15), name
        assert seq["std"] == pytest.approx(math.sqrt(sum(seq_var) / 2), rel=1e-9), name
        assert seq["sampled_mean_error"] == pytest.approx(sum(seq_err) / 2, rel=1e-9), name
    assert abs(s["estimators"]["k1"]["token"]["bias"]) < 1e-15
    assert s["estimators"]["k2"]["token"]["bias"] > 0


def test_the_tiny_pipeline_runs_end_to_end(tmp_path):
    """--tiny trains a tiny random model two steps, samples, measures and writes the JSON, the
    table and the plot (here into tmp_path: the committed results stay as they are)."""
    code = ("import importlib.util, sys; from pathlib import Path; "
            f"spec = importlib.util.spec_from_file_location('kl', {str(SCRIPT)!r}); "
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
            f"m.OUT = Path({str(tmp_path)!r}); "
            "sys.exit(m.main(['--tiny', '--steps', '2', '--eval-prompts', '4', "
            "'--eval-group', '2', '--name', 't']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "KL_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = json.loads((tmp_path / "t.json").read_text())
    assert (tmp_path / "t.md").read_text().startswith(f"{s['tokens']} completion tokens")
    assert (tmp_path / "t.png").stat().st_size > 0
    assert s["sequences"] == 8 and s["tokens"] > 0 and s["mean_kl_token"] > 0
    e = s["estimators"]
    assert abs(e["k1"]["token"]["rel_bias"]) < 1e-9 and abs(e["k3"]["token"]["rel_bias"]) < 1e-9
    assert e["k2"]["token"]["rel_bias"] > 0
    assert e["k2"]["token"]["p_negative"] == e["k3"]["token"]["p_negative"] == 0.0
    assert len(s["train"]["rewards"]) == 2
