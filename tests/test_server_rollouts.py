"""`rollout_engine = "server"`: training through an OpenAI-compatible completions server.

The server is tests/server_for_tests.py, started here on a tiny transformers model: it returns
each sampled token's log-prob and id, reloads weights through SGLang's and vLLM's reload APIs,
and can be told to fail or stall. The importance-correction maths is checked against numbers
worked by hand.
"""
import json
import math

import pytest
import torch

from rlvr.core import BaseReward, Verdict
from rlvr.trainer import TrainConfig
from rlvr.trainer.objective.importance import Knobs, mismatch_metrics, truncated_weights
from rlvr.trainer.run.loop import Trainer
from rlvr.trainer.models.loading import load_policy, load_tokenizer
from rlvr.trainer.sampling.server_engine import ServerEngine, ServerError

from server_for_tests import CompletionServer
from test_multiturn import pool  # noqa: F401  (a worker pool fixture for tool episodes)

pytest.importorskip("openai")

# the reference forward computes every group (the fast one skips groups without signal, and
# their mismatch is not measured): a mismatch measured every step
TINY = {"prompts_per_step": 2, "group_size": 2, "max_completion_length": 8, "lr": 1e-2,
        "beta": 0.0, "progress": False, "tensorboard": False, "checkpoint_every": 0,
        "reward_deadline_s": 0, "micro_batch_size": 4, "forward": "reference",
        "env_kwargs": {"n_terms": 2, "max_value": 9, "prompt_style": "base", "format_weight": 1.0}}


def server_config(model, out, url, **kw) -> TrainConfig:
    return TrainConfig(**{**TINY, "model": model, "output_dir": str(out), "steps": 2,
                          "rollout_engine": "server", "server_url": url,
                          "server_weights_dir": str(out.parent / f"{out.name}-weights"),
                          "server_retries": 1, "server_timeout_s": 30, **kw})


class TextSum(BaseReward):
    """A reward that differs between almost any two completions (the sum of their characters'
    codes mod 7, over 7), so every group carries signal and each step moves the policy."""
    name = "text-sum"

    def _score(self, task, completion):
        return Verdict(sum(map(ord, completion.text)) % 7 / 7, extracted=completion.text)


def metrics(out):
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]


# --- the correction's maths, by hand ------------------------------------------------------------
# Two completions: row 0 has two tokens, row 1 one (its second slot is padding).
#   trainer pi_old:  row 0 (0.5, 0.2)    row 1 (0.9)
#   sampler pi_s:    row 0 (0.25, 0.4)   row 1 (0.3)
#   ratios pi_old/pi_s: row 0 (2.0, 0.5), row 1 (3.0); threshold C = 2.5
TRAINER = torch.tensor([[0.5, 0.2], [0.9, 1.0]]).log()
SAMPLER = torch.tensor([[0.25, 0.4], [0.3, 1.0]]).log()
MASK = torch.tensor([[True, True], [True, False]])


def test_token_level_weights_are_ratios_truncated_at_c():
    w, cut = truncated_weights(TRAINER, SAMPLER, MASK, "token", 2.5)
    # row 0: 2.0 and 0.5 pass; row 1: 3.0 > 2.5 -> 2.5, truncated; padding -> 0
    assert torch.allclose(w, torch.tensor([[2.0, 0.5], [2.5, 0.0]]))
    assert cut.tolist() == [[False, False], [True, False]]


def test_sequence_level_weight_is_the_product_truncated_on_every_token():
    w, cut = truncated_weights(TRAINER, SAMPLER, MASK, "sequence", 2.5)
    # row 0: 2.0 * 0.5 = 1.0 on both tokens; row 1: 3.0 -> 2.5
    assert torch.allclose(w, torch.tensor([[1.0, 1.0], [2.5, 0.0]]))
    assert cut.tolist() == [[False, False], [True, False]]
    w, _ = truncated_weights(TRAINER, SAMPLER, MASK, "none", 2.5)
    assert w.tolist() == [[1.0, 1.0], [1.0, 0.0]]


def test_mismatch_metrics_by_hand():
    m = mismatch_metrics(TRAINER, SAMPLER, MASK, "token", Knobs(threshold=2.5))
    # log r = (ln 2, ln 0.5, ln 3); k1 = mean(-log r) = -(ln 2 - ln 2 + ln 3)/3 = -ln(3)/3
    assert m["mismatch/kl_k1"] == pytest.approx(-math.log(3) / 3)
    # k3 = mean((r - 1) - log r) = ((1 - ln 2) + (-0.5 + ln 2) + (2 - ln 3)) / 3 = (2.5 - ln 3)/3
    assert m["mismatch/kl_k3"] == pytest.approx((2.5 - math.log(3)) / 3)
    # quantiles of (0.5, 2, 3), linear: p05 at rank 0.1 -> 0.5 + 0.1*1.5; p50 = 2; p95 at 1.9
    assert m["mismatch/ratio_p05"] == pytest.approx(0.65)
    assert m["mismatch/ratio_p50"] == pytest.approx(2.0)
    assert m["mismatch/ratio_p95"] == pytest.approx(2.9)
    assert m["mismatch/truncated_frac"] == pytest.approx(1 / 3)          # 3.0 of three
    seq = mismatch_metrics(TRAINER, SAMPLER, MASK, "sequence", Knobs(threshold=2.5))
    # sequence ratios (1.0, 3.0): median 2.0, one of two truncated; the KL stays per token
    assert seq["mismatch/ratio_p50"] == pytest.approx(2.0)
    assert seq["mismatch/truncated_frac"] == pytest.approx(0.5)
    assert seq["mismatch/kl_k3"] == pytest.approx(m["mismatch/kl_k3"])


def test_equal_log_probs_mean_no_mismatch():
    m = mismatch_metrics(TRAINER, TRAINER, MASK, "token", Knobs(threshold=2.0))
    assert m["mismatch/kl_k1"] == 0 and m["mismatch/kl_k3"] == 0
    assert m["mismatch/ratio_p05"] == m["mismatch/ratio_p95"] == 1.0
    assert m["mismatch/truncated_frac"] == 0.0


# --- training through the server ---------------------------------------------------------------
@pytest.mark.parametrize("sync_every", [1, 2])
def test_training_through_the_server_syncs_and_measures_the_staleness(sync_every, tiny_model,
                                                                      tmp_path):
    out = tmp_path / "run"
    with CompletionServer(tiny_model) as srv:
        trainer = Trainer(server_config(tiny_model, out, srv.url, sync_every=sync_every))
        trainer.env.reward = TextSum()
        trainer.train()
        sent = srv.requests[0]
        assert sent["n"] == 2 and sent["logprobs"] == 1 and sent["return_token_ids"]
        assert isinstance(sent["prompt"][0], int) and sent["model"] == "tiny"
        assert len({r["seed"] for r in srv.requests}) == 4          # a seed per prompt
        # the first push, then one after each step (sync_every=1) or after step 2 only
        assert len(srv.reloads) == 1 + 1 + (2 // sync_every)
        rows = metrics(out)
        # step 1 samples from the synced start: server and trainer agree to float precision
        assert abs(rows[0]["mismatch/kl_k3"]) < 1e-6
        assert rows[0]["mismatch/ratio_p05"] == pytest.approx(1.0, abs=1e-4)
        if sync_every == 1:      # synced after step 1 (lr 1e-2 moved the policy): still equal
            assert abs(rows[1]["mismatch/kl_k3"]) < 1e-6
        else:                    # the server still holds step 0's weights: measured, corrected
            assert rows[1]["mismatch/kl_k3"] > 1e-4
            assert rows[1]["mismatch/ratio_p95"] - rows[1]["mismatch/ratio_p05"] > 1e-3
        # after the last sync the server's log-probs are the trainer's
        if sync_every == 1 or 2 % sync_every == 0:
            prompt, completion = list(range(5, 15)), [20, 21, 22]
            with torch.no_grad():
                logits = trainer.policy(input_ids=torch.tensor([prompt + completion])).logits
            mine = torch.log_softmax(logits[0, len(prompt) - 1:-1].float(), -1)
            mine = mine.gather(-1, torch.tensor(completion)[:, None]).squeeze(-1)
            assert torch.allclose(torch.tensor(srv.logprobs(prompt, completion)), mine, atol=1e-5)


def test_a_transient_server_error_is_retried(tiny_model, tmp_path):
    with CompletionServer(tiny_model) as srv:
        srv.fail_next = 1                            # one 500, then healthy: the client retries
        Trainer(server_config(tiny_model, tmp_path / "run", srv.url, steps=1)).train()
    assert len(metrics(tmp_path / "run")) == 1
    assert len(srv.requests) == 2 + 1                # two prompts, one of them twice


def test_a_server_failing_mid_run_refuses_the_step_and_the_run_resumes(tiny_model, tmp_path):
    out = tmp_path / "run"
    with CompletionServer(tiny_model) as srv:
        trainer = Trainer(server_config(tiny_model, out, srv.url, checkpoint_every=1))
        trainer.train_step = _fail_before_step(trainer, srv, step=1)
        with pytest.raises(ServerError) as err:
            trainer.train()
        msg = str(err.value)
        assert srv.url in msg and "500" in msg and "resume" in msg and "\n" not in msg
        # step 2 was refused whole: nothing of it logged, step 1's checkpoint is the last one
        assert len(metrics(out)) == 1
        assert sorted((out / "checkpoints").glob("step-*")) == [out / "checkpoints/step-000001"]
        srv.fail_next = 0
        Trainer.resume(out).train()                  # the healthy server: the run finishes
    assert [r["step"] for r in metrics(out)] == [1, 2]


def _fail_before_step(trainer, srv, step):
    """train_step that makes the server fail every request from the given step on."""
    original = trainer.train_step

    def train_step():
        if trainer.step == step:
            srv.fail_next = 100
        return original()
    return train_step


def test_a_stalled_server_times_out_with_one_clear_line(tiny_model, tmp_path):
    cfg = server_config(tiny_model, tmp_path / "run", "http://127.0.0.1:9/v1", server_retries=0,
                        server_timeout_s=0.3)            # the URL is set once the server is up
    import rlvr.envs.arithmetic  # noqa: F401
    import rlvr
    task = next(rlvr.load_env("arithmetic", **TINY["env_kwargs"]).tasks("train", 0))
    with CompletionServer(tiny_model) as srv:
        cfg.server_url = srv.url
        engine = ServerEngine(cfg, load_policy(tiny_model, "float32", "cpu"),
                              load_tokenizer(tiny_model))
        srv.stall_s = 1.0
        with pytest.raises(ServerError) as err:
            engine.generate([task], 2, 4, seeds=[1])
        srv.stall_s = 0.0
    msg = str(err.value)
    assert srv.url in msg and "server_timeout_s=0.3" in msg and "\n" not in msg


def test_token_ids_are_read_from_older_vllm_logprob_tokens(tiny_model, tmp_path):
    import rlvr.envs.arithmetic  # noqa: F401
    import rlvr
    task = next(rlvr.load_env("arithmetic", **TINY["env_kwargs"]).tasks("train", 0))
    policy, tok = load_policy(tiny_model, "float32", "cpu"), load_tokenizer(tiny_model)
    with CompletionServer(tiny_model) as srv:
        engine = ServerEngine(server_config(tiny_model, tmp_path / "r", srv.url), policy, tok)
        new = engine.generate([task], 2, 6, seeds=[5])
        srv.token_ids = False                       # only "token_id:N" in logprobs.tokens
        old = engine.generate([task], 2, 6, seeds=[5])
    assert old.completion_ids == new.completion_ids and old.sampler_logp == new.sampler_logp
    assert all(len(c) == len(lp) for c, lp in zip(old.completion_ids, old.sampler_logp))


def test_vllm_sync_reloads_the_folder_the_server_serves(tiny_model, tmp_path):
    import shutil
    served = tmp_path / "served"
    shutil.copytree(tiny_model, served)
    policy, tok = load_policy(tiny_model, "float32", "cpu"), load_tokenizer(tiny_model)
    with CompletionServer(served) as srv:
        cfg = server_config(tiny_model, tmp_path / "run", srv.url, server_sync="vllm",
                            server_weights_dir=str(served))
        engine = ServerEngine(cfg, policy, tok)
        with torch.no_grad():
            for p in policy.parameters():
                p.add_(0.05)
        before = srv.logprobs([5, 6, 7], [8, 9])
        engine.push(policy)
        after = srv.logprobs([5, 6, 7], [8, 9])
        assert srv.reloads[-1] == str(served) and before != after
        with torch.no_grad():
            logits = policy(input_ids=torch.tensor([[5, 6, 7, 8, 9]])).logits[0, 2:4]
        mine = torch.log_softmax(logits, -1).gather(-1, torch.tensor([[8], [9]])).squeeze(-1)
        assert torch.allclose(torch.tensor(after), mine, atol=1e-5)
        # a vLLM server started on another folder cannot see the pushes: refused up front
        cfg.server_weights_dir = str(tmp_path / "elsewhere")
        with pytest.raises(ServerError, match="vllm serve"):
            ServerEngine(cfg, policy, tok)


def test_bad_server_settings_are_refused(tiny_model, tmp_path):
    policy, tok = load_policy(tiny_model, "float32", "cpu"), load_tokenizer(tiny_model)
    with pytest.raises(ValueError, match="server_url"):
        ServerEngine(server_config(tiny_model, tmp_path / "r", ""), policy, tok)
    with pytest.raises(ValueError, match="server_sync"):
        ServerEngine(server_config(tiny_model, tmp_path / "r", "http://x/v1", server_sync="ray"),
                     policy, tok)
    with pytest.raises(ValueError, match="importance_correction"):
        ServerEngine(server_config(tiny_model, tmp_path / "r", "http://x/v1",
                                   importance_correction="tokens"), policy, tok)
    with pytest.raises(ServerError, match="cannot reach"):
        ServerEngine(server_config(tiny_model, tmp_path / "r", "http://127.0.0.1:9/v1",
                                   server_retries=0), policy, tok)


def test_the_update_multiplies_each_tokens_loss_by_its_truncated_weight(tiny_model, tmp_path):
    """A sampler that gave every token half the trainer's probability: every ratio is 2, above
    C = 1.5, so every weight is 1.5 and the policy gradient at inner step 1 (ratio to pi_old = 1,
    nothing clipped, no KL) is exactly 1.5 times the uncorrected one."""
    from rlvr.trainer.run.metrics import UpdateStats
    cfg = TrainConfig(**{**TINY, "model": tiny_model, "output_dir": str(tmp_path / "run"),
                         "steps": 1, "importance_threshold": 1.5})
    trainer = Trainer(cfg)
    trainer.env.reward = TextSum()
    rollout, _ = trainer.collect()
    assert rollout.sampler_logp is None                # the HF engine is the policy itself
    plain = trainer.prepare(rollout)
    assert not plain.is_weights and not any(k.startswith("mismatch/") for k in plain.stats)
    rollout.sampler_logp = []
    for p, c in zip(rollout.prompt_ids, rollout.completion_ids):
        with torch.no_grad():
            logits = trainer.policy(input_ids=torch.tensor([p + c])).logits[0, len(p) - 1:-1]
        logp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(c)[:, None]).squeeze(-1)
        rollout.sampler_logp.append((logp - math.log(2)).tolist())
    corrected = trainer.prepare(rollout)
    assert corrected.stats["mismatch/kl_k1"] == pytest.approx(-math.log(2), abs=1e-5)
    assert corrected.stats["mismatch/ratio_p50"] == pytest.approx(2.0, abs=1e-4)
    assert corrected.stats["mismatch/truncated_frac"] == 1.0
    trainer.cfg.importance_correction = "none"          # measured, not reweighted
    measured = trainer.prepare(rollout)
    assert measured.stats["mismatch/ratio_p50"] == pytest.approx(2.0, abs=1e-4)
    grads = []
    for batch in (plain, corrected, measured):
        trainer.policy.zero_grad()
        trainer.learner.micro_loss(batch, 0, True, UpdateStats()).backward()
        grads.append(torch.cat([p.grad.flatten() for p in trainer.policy.parameters()]))
    assert grads[0].abs().sum() > 0
    assert torch.allclose(grads[1], 1.5 * grads[0], rtol=1e-4, atol=1e-8)
    assert torch.allclose(grads[2], grads[0], rtol=1e-5, atol=1e-9)


def test_rlvr_train_reports_an_unreachable_server_in_one_line(tiny_model, tmp_path, capsys):
    from rlvr.cli import main
    rc = main(["train", f"model={tiny_model}", f"output_dir={tmp_path / 'run'}", "steps=1",
               "rollout_engine=server", "server_url=http://127.0.0.1:9/v1", "server_retries=0",
               "progress=false"])
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert rc == 1 and len(err) == 1
    assert "cannot reach http://127.0.0.1:9/v1" in err[0] and "server_url" in err[0]


def test_episodes_carry_the_servers_log_probs_of_every_policy_turn(tiny_model, pool):
    """A two-turn tool episode: turn 1's log-probs from the rollout, turn 2's from what
    generate_ids returned (`Continuation.logprobs`), 0 on the environment's tokens; an engine
    whose later turns carry none leaves the episodes uncorrected (None)."""
    from test_multiturn import ScriptedEngine, calc_env, calc_script
    from rlvr.trainer.sampling.episodes import run_episodes
    from rlvr.trainer.sampling.episodes import Continuation
    tok = load_tokenizer(tiny_model)

    class Reporting(ScriptedEngine):             # a server: every token's log-prob is -(id/1000)
        def generate(self, *args, **kw):
            r = super().generate(*args, **kw)
            r.sampler_logp = [[-t / 1000 for t in ids] for ids in r.completion_ids]
            return r

        def generate_ids(self, contexts, max_new, **kw):
            return [Continuation(ids, [-t / 1000 for t in ids])
                    for ids in super().generate_ids(contexts, max_new, **kw)]

    env = calc_env(pool)
    r = run_episodes(Reporting(tok, calc_script), env, tok, env.sample(1), 2, 200)
    for ids, e, lp in zip(r.completion_ids, r.completions, r.sampler_logp):
        assert e.turns == 2 and len(lp) == len(ids) == len(e.token_mask)
        assert lp == [-t / 1000 if own else 0.0 for t, own in zip(ids, e.token_mask)]

    class FirstTurnOnly(Reporting):              # later turns come back as plain ids
        def generate_ids(self, contexts, max_new, **kw):
            return ScriptedEngine.generate_ids(self, contexts, max_new, **kw)

    for engine in (FirstTurnOnly(tok, calc_script), ScriptedEngine(tok, calc_script)):
        assert run_episodes(engine, env, tok, env.sample(1), 2, 200).sampler_logp is None
