"""Issue 15 on a tiny random model: the five bugs (each test fails on the code before the fix),
the algorithm options the loop applies (overlong filtering, KL refusals), mixed precision,
activation checkpointing, LoRA (reference = adapters off, adapter checkpoints, exact resume,
merged export), the `smollm2` alias and the one-line error for a hub id that cannot be reached.
The options' math is checked by hand in tests/test_algorithms.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rlvr.trainer.config import TrainConfig, load_config
from rlvr.trainer.run.loop import Trainer
from rlvr.trainer.forwards.fast import completion_logprobs
from rlvr.trainer.models.tiny import build_tiny_model

ROOT = Path(__file__).resolve().parents[1]
TINY = {"prompts_per_step": 2, "group_size": 3, "max_completion_length": 16, "overlong_buffer": 8,
        "micro_batch_size": 4, "lr": 1e-2, "progress": False, "checkpoint_every": 0,
        "reward_deadline_s": 0, "tensorboard": False,
        "env_kwargs": {"n_terms": 2, "max_value": 9, "prompt_style": "base", "format_weight": 1.0}}
VOLATILE = ("timing/", "throughput/", "memory/", "verifier/arithmetic/latency")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def config(model, out, preset="grpo", **kw) -> TrainConfig:
    return TrainConfig.from_preset(preset, **{**TINY, "model": model, "output_dir": str(out),
                                              "steps": 2, **kw})


def rows(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def stable(row):
    return {k: v for k, v in row.items() if not k.startswith(VOLATILE)}


# --- bug 1: the adaptive controller's horizon counts samples -----------------------------------
def test_adaptive_kl_moves_by_the_samples_in_the_step(tiny_model, tmp_path):
    # Step 1 observes KL 0 (pi == ref), so the error is clipped to -0.2; 2 prompts x 3 = 6
    # samples and horizon 10: beta = 0.04 * (1 - 0.2 * 6 / 10) = 0.0352 (was 0.04 * 0.98).
    Trainer(config(tiny_model, tmp_path / "r", kl_target=0.01, kl_horizon=10.0)).train()
    beta = [r["beta"] for r in rows(tmp_path / "r" / "metrics.jsonl")]
    assert beta == [pytest.approx(0.04), pytest.approx(0.04 * (1 - 0.2 * 6 / 10))]


# --- bug 2 and the k1 refusal: combinations that cannot work fail with the fix named ----------
def test_kl_target_without_a_starting_beta_is_refused():
    with pytest.raises(ValueError, match="starting beta > 0"):
        TrainConfig.from_preset("dr_grpo", kl_target=6.0)
    assert TrainConfig.from_preset("dr_grpo", kl_target=6.0, beta=0.05).adaptive_kl


def test_k1_in_the_loss_is_refused_naming_k3_and_k2():
    with pytest.raises(ValueError, match="k3.*k2"):
        TrainConfig.from_preset("grpo", kl_estimator="k1")
    TrainConfig.from_preset("grpo", kl_estimator="k1", beta=0.0)      # no KL term: nothing to refuse
    TrainConfig.from_preset("reinforce")                               # k1 in the reward is fine


# --- bug 3: bf16 keeps float32 master weights ---------------------------------------------------
def test_bf16_small_lr_step_moves_every_weight_with_a_gradient(tiny_model, tmp_path):
    tr = Trainer(config(tiny_model, tmp_path / "b", dtype="bfloat16", lr=1e-6))
    assert all(p.dtype == torch.float32 for p in tr.policy.parameters())     # master weights
    before = {n: p.detach().clone() for n, p in tr.policy.named_parameters()}
    grads = {}          # as the optimizer saw them (update frees them after its step)
    tr.optimizer.register_step_pre_hook(lambda *_: grads.update(
        {n: p.grad.clone() for n, p in tr.policy.named_parameters() if p.grad is not None}))
    rollout, _ = tr.collect()
    tr.update(tr.prepare(rollout), first=True)
    moved = total = 0
    for n, p in tr.policy.named_parameters():
        if n not in grads:
            continue
        has_grad = grads[n] != 0
        moved += int(((p.detach() != before[n]) & has_grad).sum())
        total += int(has_grad.sum())
    # AdamW's first step moves each weight with a gradient by ~lr; pure bf16 weights (the old
    # behaviour) kept ~2% of those moves and rounded the rest away.
    assert total > 0 and moved / total > 0.99


def test_bf16_forward_runs_under_autocast(tiny_model, tmp_path):
    tr = Trainer(config(tiny_model, tmp_path / "a", dtype="bfloat16"))
    seen = []
    hook = tr.policy.lm_head.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    rollout, _ = tr.collect()
    tr.update(tr.prepare(rollout), first=True)
    hook.remove()
    assert seen and set(seen) == {torch.bfloat16}


# --- bug 4: finite datasets of any size are shuffled per epoch and repeated ---------------------
def test_a_large_finite_dataset_is_shuffled_and_repeated():
    from rlvr.core import FunctionReward, Task
    from rlvr.envs.base import Environment, RowSource
    from rlvr.trainer.sampling.rollout import PromptStream
    n = 10_050
    tasks = [Task(f"t{i}", f"{i} =", str(i)) for i in range(n)]
    env = Environment("big", RowSource({"train": tasks}), rewards=[(FunctionReward(lambda t, c: 0.0), 1.0)])
    stream = PromptStream(env, seed=3)
    first = [t.id for t in stream.take(n)]
    second = [t.id for t in stream.take(n)]            # no StopIteration after one pass
    assert sorted(first) == sorted(second) == sorted(t.id for t in tasks)
    assert first != [t.id for t in tasks] and first != second     # shuffled, per epoch
    again = PromptStream(env, seed=3, cursor=n + 5)    # a checkpoint's cursor restores the order
    assert [t.id for t in again.take(3)] == second[5:8]


def test_procedural_sources_still_stream_in_their_own_order(tiny_model, tmp_path):
    tr = Trainer(config(tiny_model, tmp_path / "p"))
    assert [t.id for t in tr.stream.take(3)] == [t.id for t in tr.env.sample(3)]


# --- bug 5: only TrainConfig's sampling settings reach `generate` ------------------------------
def test_hf_generate_ignores_the_models_generation_config(tiny_model):
    from rlvr.core import Task
    from rlvr.trainer.models.loading import load_policy, load_tokenizer
    from rlvr.trainer.sampling.rollout import generate
    policy, tok = load_policy(tiny_model, "float32", "cpu"), load_tokenizer(tiny_model)
    tasks = [Task(f"t{i}", f"{i} + {i} =", str(2 * i)) for i in range(3)]
    clean = generate(policy, tok, tasks, 1, 24, greedy=True, share_prefix=True)
    policy.generation_config.no_repeat_ngram_size = 1
    policy.generation_config.min_new_tokens = 24
    policy.generation_config.suppress_tokens = [tok.eos_token_id]
    hf = generate(policy, tok, tasks, 1, 24, greedy=True, share_prefix=False)
    assert hf.completion_ids == clean.completion_ids
    assert policy.generation_config.no_repeat_ngram_size == 1       # put back after the call


def test_frac_reward_zero_std_leaves_failed_samples_out():
    from rlvr.core import Completion, Task, Verdict
    from rlvr.trainer.run.metrics import rollout_metrics
    from rlvr.trainer.sampling.rollout import Rollout
    from rlvr.trainer.models.tiny import _tokenizer
    t = Task("t", "1 =", "1")
    verdicts = [Verdict(1.0, "ok"), Verdict(1.0, "ok"), Verdict(0.0, "timeout"),   # valid all 1
                Verdict(1.0, "ok"), Verdict(0.0, "ok"), Verdict(0.0, "ok")]       # signal
    r = Rollout([t] * 6, [[1]] * 6, [[5]] * 6, [Completion("x", [5], "stop")] * 6, verdicts,
                torch.tensor([v.score for v in verdicts]),
                torch.tensor([not v.failed for v in verdicts]), group_size=3)
    env = type("E", (), {"name": "e", "parser": None})()
    assert rollout_metrics(r, env, _tokenizer(), ())["frac_reward_zero_std"] == 0.5


# --- overlong filtering ---------------------------------------------------------------------------
def test_truncated_completions_carry_no_loss_when_masked(tiny_model, tmp_path):
    on = Trainer(config(tiny_model, tmp_path / "m", mask_truncated_completions=True,
                        overlong_buffer=0, beta=0.0))
    off = Trainer(config(tiny_model, tmp_path / "n", overlong_buffer=0, beta=0.0))
    rollout, _ = on.collect()
    from rlvr.core import Completion
    for row in (0, 4):      # two that stop early (a random tiny model rarely does on its own)
        ids = rollout.completion_ids[row][:3] + [on.tokenizer.eos_token_id]
        rollout.completion_ids[row] = ids
        rollout.completions[row] = Completion(on.tokenizer.decode(ids[:-1]), ids, "stop")
    cut = [c.finish_reason == "length" for c in rollout.completions]
    assert any(cut) and not all(cut)
    b_on, b_off = on.prepare(rollout), off.prepare(rollout)
    assert b_on.num_seqs == len(cut) - sum(cut) and b_off.num_seqs == len(cut)
    for mb, m_on, a_on, a_off in zip(b_on.micro, b_on.loss_mask, b_on.advantages, b_off.advantages):
        for j, row in enumerate(mb.rows):
            assert m_on[j].any() != cut[row]
            if not cut[row]:           # the others keep their advantages (truncated ones stay in baselines)
                assert torch.equal(a_on[j], a_off[j])
    # The loss equals the GRPO loss over the kept rows alone, computed by hand: at inner step 1
    # the ratio is 1, so -objective = -A on each kept token, mean over tokens, mean over rows.
    result = on.update(b_on, first=True)
    want = 0.0
    for mb, a, m in zip(b_on.micro, b_on.advantages, b_on.loss_mask):
        for j in range(len(mb.rows)):
            if m[j].any():
                want += float(-a[j][m[j]].mean())
    assert result["loss"] == pytest.approx(want / b_on.num_seqs, abs=1e-6)


# --- activation checkpointing ---------------------------------------------------------------------
@pytest.mark.parametrize("share_prefix", [True, False])
def test_checkpointing_gives_the_same_gradients(tiny_model, tmp_path, share_prefix):
    from rlvr.trainer.forwards.fast import completion_values, pack, plan_groups
    from rlvr.trainer.models.loading import enable_checkpointing
    tr = Trainer(config(tiny_model, tmp_path / "c", "ppo", share_prefix=share_prefix))
    rollout, _ = tr.collect()
    groups = plan_groups(rollout, 6)[0]
    mb = pack(groups, rollout.prompt_ids, rollout.completion_ids, tr.tokenizer.pad_token_id,
              "cpu", share_prefix)
    torch.nn.init.normal_(tr.critic.value_head.weight)

    def grads():
        tr.policy.zero_grad(), tr.critic.zero_grad()
        logp, _ = completion_logprobs(tr.policy, mb)
        ((logp * mb.mask).sum() + completion_values(tr.critic, mb)[mb.mask].sum()).backward()
        return [p.grad.clone() for p in (*tr.policy.parameters(), *tr.critic.parameters())
                if p.grad is not None]

    plain = grads()
    enable_checkpointing(tr.policy)
    enable_checkpointing(tr.critic.backbone)
    again = grads()
    assert len(plain) == len(again) > 0
    assert all(torch.allclose(a, b, atol=1e-6, rtol=1e-5) for a, b in zip(plain, again))


def update_with_gradients(tr: Trainer, rollout):
    """One update of `tr` on a copy of `rollout` -> (batch, metrics, the gradients the
    optimizer stepped with, one per parameter)."""
    import copy
    params = [p for g in tr.optimizer.param_groups for p in g["params"]]
    grads, step = [], tr.optimizer.step

    def spy(*a, **kw):
        grads.extend(p.grad.clone() if p.grad is not None else None for p in params)
        return step(*a, **kw)
    tr.optimizer.step = spy
    batch = tr.prepare(copy.deepcopy(rollout))
    return batch, tr.update(batch, first=True), grads


@pytest.mark.parametrize("preset,extra", [
    ("grpo", {"beta": 0.1}), ("grpo", {"beta": 0.1, "gradient_checkpointing": True}),
    ("ppo", {}), ("grpo", {"lora_rank": 4, "beta": 0.1})])
def test_a_prompt_prefix_shared_by_the_batch_gives_the_same_update(tiny_model, tmp_path,
                                                                   monkeypatch, preset, extra):
    # A system turn that begins every prompt runs once per pass (reference, critic values,
    # update) instead of once per micro-batch: the same reference log-probs, values, loss and
    # gradients as running every prompt whole.
    import rlvr.trainer.forwards.prefix as prefix
    first = Trainer(config(tiny_model, tmp_path / "r", preset, **extra))
    rollout, _ = first.collect()
    system = first.tokenizer.encode("A careful assistant adds the numbers and states the sum. " * 2)
    rollout.prompt_ids = [system + p for p in rollout.prompt_ids]

    def run(shared: bool, name: str):
        if not shared:
            monkeypatch.setattr(prefix, "MIN_COMMON_PREFIX", 10 ** 9)
        tr = Trainer(config(tiny_model, tmp_path / name, preset, micro_batch_size=3, **extra))
        batch, result, grads = update_with_gradients(tr, rollout)
        assert len(batch.micro) == 2 and (batch.micro[0].prefix is not None) == shared
        return batch, result, grads

    (a, ra, ga), (b, rb, gb) = run(True, "a"), run(False, "b")
    assert a.micro[0].prompt_ids.size(1) < b.micro[0].prompt_ids.size(1) - len(system) + 2
    for x, y in zip(a.ref_logp + a.old_values, b.ref_logp + b.old_values):
        assert (x is None) == (y is None) and (x is None or torch.allclose(x, y, atol=1e-5))
    assert ra["loss"] == pytest.approx(rb["loss"], rel=1e-4, abs=1e-6)
    assert ra["grad_norm"] == pytest.approx(rb["grad_norm"], rel=1e-4)
    assert len(ga) == len(gb) > 0 and sum(g is not None for g in ga) > 0
    for x, y in zip(ga, gb):
        assert (x is None) == (y is None)
        assert x is None or torch.allclose(x, y, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("preset,extra", [
    ("grpo", {"beta": 0.1}), ("grpo", {"beta": 0.1, "gradient_checkpointing": True}),
    ("ppo", {}), ("grpo", {"lora_rank": 4, "beta": 0.1})])
def test_completions_packed_back_to_back_give_the_same_update(tiny_model, tmp_path, monkeypatch,
                                                              preset, extra):
    # Completions of different lengths packed on shared rows (no padding between them) give
    # the reference log-probs, values, loss, metrics and gradients of the padded layout.
    import rlvr.trainer.forwards.fast as models
    first = Trainer(config(tiny_model, tmp_path / "r", preset, **extra))
    rollout, _ = first.collect()
    lengths = [2, 16, 7, 16, 1, 11]
    rollout.completion_ids = [(c + list(range(3, 20)))[:n]
                              for c, n in zip(rollout.completion_ids, lengths)]
    rollout.rewards = torch.tensor([1., 0., 0., 1., 1., 0.])
    packs = models.Packing.of

    def run(packed: bool, name: str):
        made = []
        monkeypatch.setattr(models.Packing, "of", classmethod(
            lambda cls, mb, pmask: made.append(packs(mb, pmask)) or made[-1] if packed else None))
        tr = Trainer(config(tiny_model, tmp_path / name, preset, micro_batch_size=3, **extra))
        return (*update_with_gradients(tr, rollout), made)

    (a, ra, ga, made), (b, rb, gb, _) = run(True, "a"), run(False, "b")
    assert made and all(p is not None and p.ids.size(0) == 2 for p in made)   # 3 on 2 rows
    for mb, x, y in zip(a.micro * 2, a.ref_logp + a.old_values, b.ref_logp + b.old_values):
        assert (x is None) == (y is None)
        assert x is None or torch.allclose(x[mb.mask], y[mb.mask], atol=1e-5)
    assert {k: v for k, v in ra.items() if k.startswith(("loss", "entropy", "clip"))} == \
        pytest.approx({k: v for k, v in rb.items() if k.startswith(("loss", "entropy", "clip"))},
                      rel=1e-4, abs=1e-6)
    assert ra["grad_norm"] == pytest.approx(rb["grad_norm"], rel=1e-4)
    assert len(ga) == len(gb) > 0 and sum(g is not None for g in ga) > 0
    for x, y in zip(ga, gb):
        assert (x is None) == (y is None)
        assert x is None or torch.allclose(x, y, atol=1e-6, rtol=1e-4)


def test_a_shared_prefix_follows_the_weights_and_its_gradient_is_sent(tiny_model, tmp_path):
    # The prefix's cache belongs to one pass: after an update it is recomputed from the new
    # weights (never a stale one), and a pass with gradients that was never sent through the
    # prefix stops the next pass of that model loudly instead of losing its share.
    from rlvr.trainer.forwards.fast import pack
    tr = Trainer(config(tiny_model, tmp_path / "w", "grpo", micro_batch_size=3))
    rollout, _ = tr.collect()
    system = tr.tokenizer.encode("A careful assistant adds the numbers and states the sum. " * 2)
    rollout.prompt_ids = [system + p for p in rollout.prompt_ids]
    rollout.rewards = torch.tensor([1., 0., 0., 1., 1., 0.])
    batch = tr.prepare(rollout)
    tr.update(batch, first=True)
    mb = batch.micro[0]
    whole = pack([mb.rows], rollout.prompt_ids, rollout.completion_ids, tr.tokenizer.pad_token_id,
                 "cpu", True)
    with torch.no_grad():
        now, _ = completion_logprobs(tr.policy, mb)
        want, _ = completion_logprobs(tr.policy, whole)
    assert torch.allclose(now[mb.mask], want[whole.mask], atol=1e-5)
    logp, _ = completion_logprobs(tr.policy, mb)
    logp.sum().backward()                      # a pass with gradients, never sent ...
    with torch.no_grad():
        next(tr.policy.parameters()).add_(0.0)  # ... and a weight write
    with pytest.raises(RuntimeError, match="never sent"):
        completion_logprobs(tr.policy, mb)
    mb.prefix.backward()
    completion_logprobs(tr.policy, mb)


def test_checkpointing_changes_no_metric(tiny_model, tmp_path):
    Trainer(config(tiny_model, tmp_path / "x", steps=2)).train()
    Trainer(config(tiny_model, tmp_path / "y", steps=2, gradient_checkpointing=True)).train()
    a, b = rows(tmp_path / "x" / "metrics.jsonl"), rows(tmp_path / "y" / "metrics.jsonl")
    for ra, rb in zip(a, b):
        for k, v in stable(ra).items():
            assert rb[k] == (pytest.approx(v, rel=1e-5, abs=1e-7) if isinstance(v, float) else v), k


# --- LoRA -------------------------------------------------------------------------------------------
peft = pytest.importorskip("peft")


def test_lora_reference_is_the_base_with_adapters_off(tiny_model, tmp_path):
    tr = Trainer(config(tiny_model, tmp_path / "l", lora_rank=4, lr=1e-1))
    trainable = [n for n, p in tr.policy.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    opt_params = [p for g in tr.optimizer.param_groups for p in g["params"]]
    assert len(opt_params) == len(trainable)
    rollout, _ = tr.collect()
    batch = tr.prepare(rollout)
    tr.update(batch, first=True)                 # adapters move (B leaves 0)
    plain = Trainer(config(tiny_model, tmp_path / "p"))      # the untouched base model
    for i, mb in enumerate(batch.micro):
        base, _ = completion_logprobs(plain.policy, mb)
        ref, _ = completion_logprobs(tr.ref, mb)
        now, _ = completion_logprobs(tr.policy, mb)
        assert torch.allclose(ref[mb.mask], base[mb.mask], atol=1e-6)
        assert torch.allclose(batch.ref_logp[i][mb.mask], base[mb.mask], atol=1e-6)
        assert not torch.allclose(now[mb.mask], base[mb.mask], atol=1e-4)


def test_lora_checkpoint_holds_adapters_and_resumes_exactly(tiny_model, tmp_path):
    kw = dict(lora_rank=4, lora_dropout=0.1, inner_steps=2, gradient_checkpointing=True)
    Trainer(config(tiny_model, tmp_path / "full", steps=3, **kw)).train()
    Trainer(config(tiny_model, tmp_path / "part", steps=2, **kw)).train()
    ckpt = tmp_path / "part" / "checkpoints" / "step-000002" / "policy"
    assert (ckpt / "adapter_model.safetensors").exists() and not (ckpt / "model.safetensors").exists()
    Trainer.resume(tmp_path / "part", steps=3).train()
    a, b = rows(tmp_path / "full" / "metrics.jsonl"), rows(tmp_path / "part" / "metrics.jsonl")
    assert stable(a[2]) == stable(b[2])


def test_export_merges_lora_into_a_transformers_folder(tiny_model, tmp_path):
    from transformers import AutoModelForCausalLM
    from rlvr.trainer.run.export import export_run
    tr = Trainer(config(tiny_model, tmp_path / "run", lora_rank=4, lr=1e-1, steps=1))
    tr.train()
    out = export_run(tmp_path / "run", tmp_path / "merged", merge=True)
    merged = AutoModelForCausalLM.from_pretrained(out).eval()
    assert not any("lora" in n for n, _ in merged.named_parameters())
    rollout, _ = tr.collect()
    batch = tr.prepare(rollout)
    for mb in batch.micro:
        a, _ = completion_logprobs(tr.policy, mb)
        b, _ = completion_logprobs(merged, mb)
        assert torch.allclose(a[mb.mask], b[mb.mask], atol=1e-5)
    with pytest.raises(ValueError, match="--merge"):
        export_run(tmp_path / "run", tmp_path / "again", merge=False)


# --- models that need no hub, and a hub id that cannot be reached --------------------------------
def test_smollm2_is_the_default_model_everywhere():
    assert TrainConfig().model == "smollm2"
    for toml in sorted((ROOT / "configs").glob("*.toml")):
        assert load_config(toml).model == "smollm2", toml.name


def test_unreachable_hub_id_fails_in_one_line_naming_the_alias(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    proc = subprocess.run([sys.executable, "-m", "rlvr", "train", "model=nobody/no-such-model",
                           f"output_dir={tmp_path / 'run'}", "steps=1", "reward_deadline_s=0"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "nobody/no-such-model" in errors[0] and '"smollm2"' in errors[0]
    assert "Traceback" not in proc.stderr


def test_a_hub_model_without_the_network_fails_at_once(tmp_path):
    # No offline flag, but the hub's host refuses connections: one line naming why, in
    # seconds, instead of the hub client's half a minute of retries.
    import time
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": "http://127.0.0.1:9"}
    env.pop("HF_HUB_OFFLINE", None)

    def train(model: str) -> tuple[subprocess.CompletedProcess, float]:
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "rlvr", "train", f"model={model}",
                               f"output_dir={tmp_path / 'run'}", "steps=1", "reward_deadline_s=0"],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
        return proc, time.monotonic() - t0
    # The same start-up refused before any hub call (a model path that is a file): what the
    # hub's failure adds to it is the measure, so a busy machine's slow imports do not count.
    (tmp_path / "model.bin").write_bytes(b"not a model folder")
    baseline, t_local = train(str(tmp_path / "model.bin"))
    assert baseline.returncode == 2 and "is a file" in baseline.stderr, baseline.stderr[-2000:]
    proc, t_hub = train("nobody/no-such-model")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "the hub is unreachable" in proc.stderr and '"smollm2"' in proc.stderr
    assert t_hub - t_local < 12, (t_hub, t_local)     # the hub client's retries take ~23 s


def test_lora_without_peft_names_the_extra(tiny_model, tmp_path, monkeypatch):
    from rlvr.usage import MissingExtra
    monkeypatch.setitem(sys.modules, "peft", None)          # as if not installed
    with pytest.raises(MissingExtra, match=r"LoRA .*pip install 'rlvr\[lora\]'"):
        Trainer(config(tiny_model, tmp_path / "l", lora_rank=4))


def test_every_new_option_is_in_help_config(capsys):
    from rlvr.cli import main
    assert main(["train", "--help-config"]) == 0
    out = capsys.readouterr().out
    for name in ("mask_truncated_completions", "whiten_advantages", "cliprange_value",
                 "scale_rewards", "gspo_token", "reinforce_pp", "gradient_checkpointing",
                 "lora_rank", "lora_alpha", "lora_dropout", "lora_target_modules", "'auto'",
                 "k1 is refused in the loss", "smollm2"):
        assert name in out, name
