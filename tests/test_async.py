"""`async_steps = k`: the sampler runs ahead of the update by at most k policy versions.

Every run here is a tiny random model for a few steps. The built-in sampler runs in its own
process for k >= 1 (trainer/sampling/process_engine.py); the server engine is the test server
of the server-engine tests.
"""
import json
import os
import signal
import time

import pytest
import torch

from rlvr.core import BaseReward, Verdict
from rlvr.trainer import TrainConfig
from rlvr.trainer.run.loop import Trainer
from rlvr.trainer.sampling.process_engine import SamplerDied

BASE = {"prompts_per_step": 2, "group_size": 2, "max_completion_length": 6, "lr": 1e-2,
        "beta": 0.0, "progress": False, "tensorboard": False, "checkpoint_every": 0,
        "reward_deadline_s": 0, "micro_batch_size": 4, "forward": "reference",
        "env_args": {"n_terms": 2, "max_value": 9, "prompt_style": "base", "format_weight": 1.0}}
NOT_COMPARED = ("timing/", "throughput/", "memory/", "async/", "verifier/arithmetic/latency")


class TextSum(BaseReward):
    """A reward that differs between almost any two completions, so each step moves the policy."""
    name = "text-sum"

    def _score(self, task, completion):
        return Verdict(sum(map(ord, completion.text)) % 7 / 7, extracted=completion.text)


def config(model, out, **kw) -> TrainConfig:
    return TrainConfig(**{**BASE, "model": model, "output_dir": str(out), "steps": 3, **kw})


def trainer(model, out, **kw) -> Trainer:
    t = Trainer(config(model, out, **kw))
    t.env.reward = TextSum()
    return t


def rows(out, name="metrics.jsonl"):
    return [json.loads(x) for x in (out / name).read_text().splitlines()]


def compared(row: dict) -> dict:
    return {k: v for k, v in row.items() if not k.startswith(NOT_COMPARED)}


def trained_versions(t: Trainer) -> list[tuple[int, list[int]]]:
    """(the trainer's version, the rollout's versions) of every batch the update prepared."""
    seen, prepare = [], t.prepare

    def spy(rollout):
        seen.append((t.step, list(rollout.versions)))
        return prepare(rollout)
    t.prepare = spy
    return seen


# --- k = 0 is the synchronous loop ---------------------------------------------------------------
def test_the_pipeline_at_depth_0_is_the_synchronous_loop_to_the_bit(tiny_model, tmp_path):
    plain = trainer(tiny_model, tmp_path / "plain")
    plain.train()
    piped = trainer(tiny_model, tmp_path / "piped")
    piped.start_pipeline(0)
    versions = trained_versions(piped)
    piped.train()
    a, b = rows(tmp_path / "plain"), rows(tmp_path / "piped")
    assert [compared(r) for r in a] == [compared(r) for r in b]
    assert all(r["async/staleness_max"] == 0 for r in b) and "async/wait_s" not in a[0]
    assert versions == [(0, [0] * 4), (1, [1] * 4), (2, [2] * 4)]
    for (name, p), q in zip(plain.policy.state_dict().items(), piped.policy.state_dict().values()):
        assert torch.equal(p, q), name
    assert rows(tmp_path / "plain", "samples.jsonl") == rows(tmp_path / "piped", "samples.jsonl")


# --- k >= 1: bounded staleness -------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("slow", ["sampler", "update"])
def test_no_sample_older_than_k_versions_is_trained_on(k, slow, tiny_model, tmp_path):
    t = trainer(tiny_model, tmp_path / "run", steps=5, async_steps=k, sampler_threads=1)
    t.start_pipeline(k)
    versions = trained_versions(t)
    if slow == "sampler":
        sample = t.pipeline.sample
        t.pipeline.sample = lambda engine, req: (time.sleep(0.4), sample(engine, req))[1]
    else:
        update = t.update
        t.update = lambda batch, first: (time.sleep(0.6), update(batch, first))[1]
    t.train()
    staleness = [step - min(v) for step, v in versions]
    assert len(staleness) == 5 and max(staleness) <= k
    assert [r["async/staleness_max"] for r in rows(tmp_path / "run")] == staleness
    if slow == "update":         # a fast sampler runs as far ahead as it may, and no further
        assert staleness[k:] == [k] * (5 - k)
    assert all("mismatch/kl_k3" in r for r in rows(tmp_path / "run"))     # corrected


def test_a_sample_reported_too_old_is_dropped_counted_and_sampled_again(tiny_model, tmp_path):
    t = trainer(tiny_model, tmp_path / "run", steps=4, async_steps=1)
    t.start_pipeline(1)
    versions = trained_versions(t)
    sample, lied = t.pipeline.sample, []

    def stale_once(engine, req):
        r = sample(engine, req)
        if req.step == 3 and not lied:       # as if sampled with the starting weights
            lied.append(req.step)
            r.versions = [0] * len(r)
        return r
    t.pipeline.sample = stale_once
    t.train()
    assert lied == [3] and all(step - min(v) <= 1 for step, v in versions)
    dropped = [r["async/dropped_stale"] for r in rows(tmp_path / "run")]
    assert dropped == [0, 0, 4, 4]           # the 4 rows of step 3's first batch, once


# --- a sampler process that dies ---------------------------------------------------------------
def test_a_killed_sampler_process_is_restarted_and_the_run_finishes(tiny_model, tmp_path):
    t = trainer(tiny_model, tmp_path / "run", steps=4, async_steps=1)
    t.start_pipeline(1)
    process = t.pipeline.engine.engine
    first, step = process.pid, t.train_step

    def kill_after_2():
        out = step()
        if t.step == 1:                      # step 2 trained (step advances after this)
            os.kill(process.pid, signal.SIGKILL)
        return out
    t.train_step = kill_after_2
    t.train()
    assert process.restarts == 1 and len(rows(tmp_path / "run")) == 4
    assert [r["async/sampler_restarts"] for r in rows(tmp_path / "run")][-1] == 1
    assert t.pipeline is None                # stopped with the run


def test_a_sampler_that_keeps_dying_stops_the_run_which_resumes_with_nothing_lost(tiny_model,
                                                                                 tmp_path):
    sync = trainer(tiny_model, tmp_path / "sync", steps=4, checkpoint_every=1)
    sync.train()
    out = tmp_path / "run"
    t = trainer(tiny_model, out, steps=4, async_steps=1, checkpoint_every=1)
    t.start_pipeline(1)
    process, sample = t.pipeline.engine.engine, t.pipeline.sample

    def dies_at_step_3(engine, req):
        if req.step == 3:
            start = process._start

            def start_and_die():             # every child started for this request dies
                start()
                os.kill(process.pid, signal.SIGKILL)
            process._start = start_and_die
            os.kill(process.pid, signal.SIGKILL)
        return sample(engine, req)
    t.pipeline.sample = dies_at_step_3
    with pytest.raises(SamplerDied, match="died twice"):
        t.train()
    assert t.pipeline is None and t.step < 4
    resumed = Trainer.resume(out)
    resumed.env.reward = TextSum()
    resumed.train()
    assert [r["step"] for r in rows(out)] == [1, 2, 3, 4]
    # the same prompts, step for step, as the synchronous run: none skipped, none twice
    tasks = lambda o: [(r["step"], r["task_id"]) for r in rows(o, "samples.jsonl")]
    assert tasks(out) == tasks(tmp_path / "sync")


# --- the server engine ---------------------------------------------------------------------------
def test_async_through_the_server_engine_bounds_staleness_and_syncs_by_disk(tiny_model,
                                                                           tmp_path):
    pytest.importorskip("openai")
    from server_for_tests import CompletionServer
    out = tmp_path / "run"
    with CompletionServer(tiny_model) as srv:
        t = trainer(tiny_model, out, steps=4, async_steps=1, rollout_engine="server",
                    server_url=srv.url, server_weights_dir=str(tmp_path / "weights"),
                    server_retries=1, server_timeout_s=30)
        t.start_pipeline(1)
        versions = trained_versions(t)
        update = t.update                    # a slow update: the sampler runs ahead
        t.update = lambda batch, first: (time.sleep(0.5), update(batch, first))[1]
        t.train()
        assert len(srv.reloads) == 1 + 1 + 4     # its own load, the first push, one per step
    staleness = [step - min(v) for step, v in versions]
    assert max(staleness) <= 1 and staleness[1:] == [1, 1, 1]
    m = rows(out)
    assert abs(m[0]["mismatch/kl_k3"]) < 1e-6          # step 1: the synced start
    assert m[-1]["mismatch/kl_k3"] > 1e-6              # one version behind: measured


# --- settings ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, words", [
    ({"async_steps": -1}, "async_steps must be >= 0"),
    ({"async_steps": 1, "sync_every": 3}, "set sync_every <= 2"),
    ({"async_steps": 1, "dynamic_sampling": True}, "dynamic_sampling=false"),
    ({"async_steps": 1, "lora_rank": 4}, "full fine-tuning"),
    ({"async_steps": 1, "partial_rollouts": True, "share_prefix": "false"}, "share_prefix=true"),
])
def test_settings_that_cannot_work_are_refused_in_one_line(kw, words, tiny_model, tmp_path):
    with pytest.raises(ValueError, match=words) as err:
        config(tiny_model, tmp_path / "r", **kw)
    assert "\n" not in str(err.value)


def test_rlvr_train_takes_async_steps_and_refuses_in_one_line(tiny_model, tmp_path, capsys):
    from rlvr.cli import main
    assert main(["train", f"model={tiny_model}", f"output_dir={tmp_path / 'r'}",
                 "async_steps=1", "sync_every=5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sync_every <= 2" in err[0]
    assert not (tmp_path / "r").exists()


# --- partial rollouts ----------------------------------------------------------------------------
def test_a_generation_interrupted_by_new_weights_continues_under_them_token_by_token(tiny_model):
    """The sampler swaps weights after 3 tokens: the first 3 tokens are those (and the
    log-probs those) of the old weights with the same seed, the rest carry the new version and
    the new weights' log-probs; nothing restarts."""
    from rlvr.trainer.models.loading import load_policy, load_tokenizer
    from rlvr.trainer.sampling.process_engine import behaviour_logprobs
    from rlvr.trainer.sampling.rollout import TokenRecord, generate
    import rlvr
    tok, env = load_tokenizer(tiny_model), rlvr.load_env("arithmetic")
    tasks = env.sample(2)
    model = load_policy(tiny_model, "float32", torch.device("cpu")).eval()
    old = {k: v.clone() for k, v in model.state_dict().items()}
    new = {k: v + 0.5 * torch.randn_like(v) if v.is_floating_point() else v
           for k, v in old.items()}
    calls = []

    def refresh():                           # before each forward: prefill, then per token
        calls.append(len(calls))
        if len(calls) == 4:                  # before the forward that gives token 3's logits
            model.load_state_dict(new)
        return 7 if len(calls) >= 4 else 6
    kw = dict(temperature=1.0, share_prefix=True, seeds=[11, 12])
    r = generate(model, tok, tasks, 2, 12, record=TokenRecord(refresh), **kw)
    model.load_state_dict(old)
    plain = generate(model, tok, tasks, 2, 12, **kw)
    long = [i for i, ids in enumerate(r.completion_ids) if len(ids) > 3]
    assert long, "every completion stopped within 3 tokens: pick other seeds"
    for i in range(len(r)):
        n = len(r.completion_ids[i])
        assert r.token_versions[i] == [6] * min(n, 3) + [7] * max(n - 3, 0)
        assert len(r.sampler_logp[i]) == n
        assert r.completion_ids[i][:3] == plain.completion_ids[i][:3]
    before = behaviour_logprobs(model, r.prompt_ids, r.completion_ids, 1.0)
    model.load_state_dict(new)
    after = behaviour_logprobs(model, r.prompt_ids, r.completion_ids, 1.0)
    for i in range(len(r)):
        assert r.sampler_logp[i][:3] == pytest.approx(before[i][:3], abs=1e-5)
    i = long[0]   # token 3: drawn from the new weights (over the old keys of earlier tokens)
    assert abs(r.sampler_logp[i][3] - before[i][3]) > 1e-3


def test_partial_rollouts_train_with_per_token_versions_within_the_bound(tiny_model, tmp_path):
    t = trainer(tiny_model, tmp_path / "run", steps=4, async_steps=1, partial_rollouts=True,
                max_completion_length=24, sampler_threads=1)
    t.start_pipeline(1)
    seen, prepare = [], t.prepare

    def spy(rollout):
        seen.append((t.step, rollout.versions, rollout.token_versions, rollout.sampler_logp,
                     rollout.completion_ids))
        return prepare(rollout)
    t.prepare = spy
    t.train()
    assert len(seen) == 4
    for step, versions, per_token, logps, ids in seen:
        for v, tv, lp, c in zip(versions, per_token, logps, ids):
            assert len(tv) == len(lp) == len(c) and tv == sorted(tv) and v == tv[0]
            assert step - v <= 1
    m = rows(tmp_path / "run")
    assert all("async/partial_frac" in r and "mismatch/kl_k3" in r for r in m)


def test_partial_rollouts_are_refused_where_no_token_can_change_version(tiny_model, tmp_path):
    with pytest.raises(ValueError, match="partial_rollouts needs rollout_engine='hf'"):
        config(tiny_model, tmp_path / "r", async_steps=1, partial_rollouts=True,
               rollout_engine="server", server_url="http://127.0.0.1:9/v1")
    with pytest.raises(ValueError, match="partial_rollouts needs async_steps >= 1"):
        config(tiny_model, tmp_path / "r", partial_rollouts=True)
