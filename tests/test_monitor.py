"""The monitor inside a run: second-opinion disagreement counts on a rollout with known
verdicts, screening (exactly the flagged rows lose their gradient), honeypots (never any
gradient), a stopped run that resumes, and detectors and second opinions from entry points."""
import dataclasses
import json
import textwrap
from pathlib import Path

import pytest
import torch

import rlvr
from rlvr.cli import main
from rlvr.core import Completion, Task, Verdict
from rlvr.monitor import Monitor, MonitorSettings, register_detector
from rlvr.monitor import detectors as detectors_module
from rlvr.monitor.honeypot import BAIT, NOTE
from rlvr.trainer.config import TrainConfig
from rlvr.trainer.run.loop import Trainer
from rlvr.trainer.run.metrics import UpdateStats
from rlvr.trainer.sampling.rollout import Rollout
from rlvr.trainer.models.tiny import build_tiny_model

TINY = {"prompts_per_step": 2, "group_size": 3, "max_completion_length": 16, "overlong_buffer": 8,
        "micro_batch_size": 2, "lr": 1e-2, "progress": False, "checkpoint_every": 0,
        "tensorboard": False, "forward": "reference", "beta": 0.1,
        "env_kwargs": {"n_terms": 2, "max_value": 9, "prompt_style": "base", "format_weight": 1.0}}


@pytest.fixture
def every_sample():
    """A detector that fires on every sample (tests of the actions), registered for one test."""
    @register_detector("test-every-sample", kinds=("answer",))
    def always(sample):
        """Fires on every sample."""
        return "always"
    yield "test-every-sample"
    del detectors_module._detectors["test-every-sample"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def tiny_trainer(model, out, **kw) -> Trainer:
    return Trainer(TrainConfig.from_preset("grpo", **{**TINY, "model": model,
                                                      "output_dir": str(out), "steps": 2, **kw}))


def read_jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def rollout_of(tasks, texts, verdicts) -> Rollout:
    n = len(texts)
    return Rollout(tasks, [[1]] * n, [[2]] * n, [Completion(t) for t in texts], list(verdicts),
                   torch.tensor([v.score for v in verdicts]), torch.ones(n, dtype=torch.bool))


# --------------------------------------------------------------------------- the second opinion

def test_second_opinion_counts_disagreements_both_ways(tmp_path):
    # Math-Verify against verdicts we set by hand on four arithmetic completions:
    #   row 0: right answer, we reward     -> agree
    #   row 1: wrong answer, we reward     -> disagree_reward (a hole being used)
    #   row 2: right answer, we refuse     -> disagree_refuse (signal lost)
    #   row 3: wrong answer, we refuse     -> agree
    #   row 4: our verifier failed (error) -> counted as failed, never a disagreement
    env = rlvr.load_env("arithmetic")
    task = Task("t", prompt="What is 17 + 18?", answer="35")
    texts = ["<think>s</think> <answer>35</answer>", "<think>s</think> <answer>36</answer>",
             "<think>s</think> <answer>35</answer>", "<think>s</think> <answer>36</answer>",
             "<think>s</think> <answer>35</answer>"]
    ours = [Verdict(1.0), Verdict(1.0, reason="loose"), Verdict(0.0, reason="strict"),
            Verdict(0.0), Verdict(0.0, "error", reason="crash")]
    monitor = Monitor(env, "arithmetic", MonitorSettings(every=1, sample=32), tmp_path)
    metrics = monitor.observe(rollout_of([task] * 5, texts, ours), step=1).metrics
    assert metrics["monitor/checked"] == 4 and metrics["monitor/second_opinion_failed"] == 1
    assert metrics["monitor/disagree_reward_count"] == 1
    assert metrics["monitor/disagree_refuse_count"] == 1
    assert metrics["monitor/disagree_reward"] == pytest.approx(1 / 4)
    rows = read_jsonl(tmp_path / "monitor" / "disagreements.jsonl")
    assert [(r["direction"], r["completion"]) for r in rows] == [("reward", texts[1]),
                                                                 ("refuse", texts[2])]
    assert rows[0]["ours"]["reason"] == "loose" and rows[0]["theirs"]["score"] == 0.0
    assert rows[1]["theirs"]["score"] == 1.0 and rows[0]["checker"] == "Math-Verify"


def test_second_opinion_runs_every_n_steps_and_says_when_there_is_none(tmp_path):
    env = rlvr.load_env("arithmetic")
    task = Task("t", prompt="What is 17 + 18?", answer="35")
    r = rollout_of([task], ["<answer>36</answer>"], [Verdict(1.0)])
    monitor = Monitor(env, "arithmetic", MonitorSettings(every=2), tmp_path)
    assert "monitor/checked" not in monitor.observe(r, step=1).metrics
    assert monitor.observe(r, step=2).metrics["monitor/disagree_reward_count"] == 1
    with pytest.warns(UserWarning, match="no second checker for environment 'json-schema'"):
        Monitor(rlvr.load_env("json-schema"), "json-schema", MonitorSettings(), tmp_path)


# --------------------------------------------------------------------------- screening

def gradient(trainer, batch) -> torch.Tensor:
    """d(loss)/d(theta) of one inner step at theta_old, without stepping the optimizer."""
    trainer.policy.zero_grad(set_to_none=True)
    with trainer.forward.pass_over(batch.micro):
        for i in range(len(batch.micro)):
            loss = trainer.learner.micro_loss(batch, i, True, UpdateStats())
            if loss.requires_grad:
                loss.backward()
    return torch.cat([p.grad.flatten() for p in trainer.policy.parameters()
                      if p.grad is not None])


def test_screen_zeroes_exactly_the_flagged_rows(tiny_model, tmp_path):
    t = tiny_trainer(tiny_model, tmp_path / "run", monitor_action="screen")
    rollout, _ = t.collect()
    watch = t.monitor.observe(rollout, 1)
    watch.screened = [0, 4]                  # two flagged rows, in different groups
    plain = t.prepare(rollout)
    adv = {row: plain.advantages[k][j].clone() for k, mb in enumerate(plain.micro)
           for j, row in enumerate(mb.rows)}
    assert any(adv[r].abs().sum() > 0 for r in (0, 4))    # the rows had advantages to lose
    screened = t.prepare(rollout)
    screened = t.monitor.screen(screened, watch)
    for k, mb in enumerate(screened.micro):
        for j, row in enumerate(mb.rows):
            if row in (0, 4):
                assert screened.advantages[k][j].abs().sum() == 0
                assert not screened.loss_mask[k][j].any()
            else:
                assert torch.equal(screened.advantages[k][j], adv[row])
    # Gradient: whatever the flagged rows' advantages were, the screened gradient is the same
    # (they contribute nothing, KL term included), and it differs from the unscreened one.
    g = gradient(t, screened)
    poisoned = t.prepare(rollout)
    poisoned = dataclasses.replace(poisoned, advantages=tuple(
        a.masked_fill(torch.tensor([r in (0, 4) for r in mb.rows])[:, None], 100.0)
        for a, mb in zip(poisoned.advantages, poisoned.micro)))
    poisoned = t.monitor.screen(poisoned, watch)
    assert torch.allclose(gradient(t, poisoned), g, atol=1e-7)
    assert not torch.allclose(gradient(t, plain), g, atol=1e-6)


def test_screened_rows_leave_their_groups_baseline(tiny_model, tmp_path, monkeypatch):
    """A flagged sample's reward must not stay in its group's baseline: the others' advantages
    are those of the group without it (else they all fall, and the update pushes probability
    toward what was screened)."""
    from rlvr.trainer.objective import algorithms as alg
    t = tiny_trainer(tiny_model, tmp_path / "run", monitor_action="screen")
    rollout, _ = t.collect()
    G = rollout.group_size
    rollout.rewards[:G] = torch.tensor([1.0, 1.0] + [0.0] * (G - 2))   # row 0 is the hack
    monkeypatch.setattr(t.monitor, "_flags", lambda r, i: {"hedge": "test"} if i == 0 else {})
    watch = t.monitor.observe(rollout, 1)
    assert watch.screened == [0] and not rollout.valid[0] and rollout.valid[1:].all()
    batch = t.monitor.screen(t.prepare(rollout), watch)
    adv = {row: batch.advantages[k][j][0].item() for k, mb in enumerate(batch.micro)
           for j, row in enumerate(mb.rows)}
    alone = alg.grpo_advantages(rollout.rewards[1:G][None], torch.ones(1, G - 1, dtype=torch.bool))
    assert adv[0] == 0.0
    assert [adv[r] for r in range(1, G)] == pytest.approx(alone[0].tolist(), abs=1e-6)
    with_hack = alg.grpo_advantages(rollout.rewards[:G][None], torch.ones(1, G, dtype=torch.bool))
    assert adv[1] > with_hack[0, 1].item() + 0.1      # the baseline no longer holds the hack


def test_screen_in_a_run_says_how_many(tiny_model, tmp_path, every_sample):
    t = tiny_trainer(tiny_model, tmp_path / "run", monitor_action="screen",
                     monitor_detectors=("test-every-sample",), steps=1)
    t.train()
    row = read_jsonl(tmp_path / "run" / "metrics.jsonl")[0]
    assert row["monitor/screened"] == 6 and row["hack/test-every-sample"] == 1.0
    assert row["grad_norm"] == 0.0          # every sample screened: nothing reaches the weights


# --------------------------------------------------------------------------- honeypots

def test_honeypots_are_planted_scored_and_carry_no_gradient(tiny_model, tmp_path):
    t = tiny_trainer(tiny_model, tmp_path / "run", honeypot_frac=0.5)
    rollout, _ = t.collect()
    pots = [i for i, task in enumerate(rollout.tasks) if task.metadata.get("honeypot")]
    assert len(pots) == 3 and all(NOTE in rollout.tasks[i].prompt for i in pots)
    rollout.completions[pots[0]] = Completion(f"<answer>{BAIT}</answer>")   # takes the bait
    watch = t.monitor.observe(rollout, 1)
    assert watch.metrics["hack/honeypot_rate"] == pytest.approx(1 / 3)
    assert rollout.verdicts[pots[0]].score == 1.0 and not rollout.valid[pots].any()
    batch = t.monitor.screen(t.prepare(rollout), watch)
    for k, mb in enumerate(batch.micro):
        for j, row in enumerate(mb.rows):
            if row in pots:
                assert not batch.loss_mask[k][j].any() and batch.advantages[k][j].abs().sum() == 0
    g = gradient(t, batch)
    poisoned = t.prepare(rollout)
    pot_rows = [torch.tensor([r in pots for r in mb.rows])[:, None] for mb in poisoned.micro]
    poisoned = dataclasses.replace(
        poisoned,
        advantages=tuple(a.masked_fill(rows, 100.0)
                         for a, rows in zip(poisoned.advantages, pot_rows)),
        loss_mask=tuple(m | (rows & mb.mask)
                        for m, rows, mb in zip(poisoned.loss_mask, pot_rows, poisoned.micro)))
    poisoned = t.monitor.screen(poisoned, watch)
    assert torch.allclose(gradient(t, poisoned), g, atol=1e-7)


# --------------------------------------------------------------------------- stop

def test_stop_ends_the_run_with_a_checkpoint_that_resumes(tiny_model, tmp_path, capsys,
                                                          every_sample):
    out = tmp_path / "run"
    tiny_trainer(tiny_model, out, steps=4, monitor_action="stop", monitor_threshold=0.5,
                 monitor_patience=2, monitor_detectors=("test-every-sample",)).train()
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert "hack/test-every-sample = 1.00 > 0.5 for 2 steps" in message
    assert "monitor/disagreements.jsonl" in message and "--resume" in message
    assert [r["step"] for r in read_jsonl(out / "metrics.jsonl")] == [1, 2]
    assert (out / "checkpoints" / "step-000002" / "trainer_state.pt").exists()
    assert main(["train", "--resume", str(out), "monitor_action=log"]) == 0
    assert [r["step"] for r in read_jsonl(out / "metrics.jsonl")] == [1, 2, 3, 4]
    capsys.readouterr()
    assert main(["monitor", str(out)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert "test-every-sample" in table[1] and len([ln for ln in table if ln.strip()[:1] in
                                                    "1234"]) == 4
    assert main(["monitor", str(tmp_path / "nowhere")]) == 2


# --------------------------------------------------------------------------- plugins

def test_detector_and_second_opinion_register_through_entry_points(tmp_path, monkeypatch):
    (tmp_path / "thirdparty_monitor.py").write_text(textwrap.dedent('''
        from rlvr.core import BaseReward, Verdict
        from rlvr.monitor import register_detector

        @register_detector("shouting", kinds=("answer",))
        def shouting(sample):
            """An answer in capitals."""
            return "capitals" if sample.answer.isupper() else None

        class Strict(BaseReward):
            name = "strict_thirdparty"
            def _score(self, task, completion):
                return Verdict(float(completion.text.strip() == f"<answer>{task.answer}</answer>"))

        def second_opinion(env):
            return Strict()
    '''))
    dist = tmp_path / "thirdparty_monitor-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdparty-monitor\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[rlvr.monitor_detectors]\nshouting = thirdparty_monitor\n\n"
        "[rlvr.second_opinions]\njson-schema = thirdparty_monitor:second_opinion\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(detectors_module._discover, "_done", False)
    assert detectors_module.get_detector("shouting").description == "An answer in capitals."
    env = rlvr.load_env("json-schema")
    monitor = Monitor(env, "json-schema", MonitorSettings(every=1), tmp_path)
    assert monitor.checker_name == "strict_thirdparty (registered for json-schema)"
    task = Task("t", answer="7")
    r = rollout_of([task, task], ["<answer>7</answer>", "<answer>8</answer>"],
                   [Verdict(0.0), Verdict(1.0)])
    m = monitor.observe(r, 1).metrics
    assert (m["monitor/disagree_refuse_count"], m["monitor/disagree_reward_count"]) == (1, 1)


# --------------------------------------------------------------------------- plots

def test_hack_rates_are_plotted_beside_the_reward_only_when_logged(tmp_path):
    from rlvr.trainer.run.plots import plot_run
    for name, extra in (("with", {"hack/hedge": 0.25, "monitor/disagree_reward": 0.5}),
                        ("without", {})):
        run = tmp_path / name
        run.mkdir()
        rows = [{"step": s, "reward": 0.1 * s, **{k: v * s / 3 for k, v in extra.items()}}
                for s in (1, 2, 3)]
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        report = plot_run(run)
        names = [p.name for p in report.files]
        assert ("monitor.png" in names) == bool(extra)
        assert not any("monitor" in note for note in report.notes)


def test_a_bad_monitor_setting_is_refused_before_the_model_loads(tiny_model, tmp_path, capsys):
    args = ["train", f"model={tiny_model}", f"output_dir={tmp_path / 'run'}", "steps=1"]
    assert main(args + ["monitor_action=loud"]) == 2
    assert "monitor_action='loud'; expected one of ['off', 'log', 'screen', 'stop']" in \
        capsys.readouterr().err
    assert main(args + ["monitor_detectors=[\"no-such\"]"]) == 2
    assert "unknown detector 'no-such'" in capsys.readouterr().err
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


# --------------------------------------------------------------------------- distill-data

class HackingTeacher:
    """Every sample right; sample 1 of each task adds a correction after its answer (a verifier
    reading the tag rewards it; the `correction` detector flags it)."""
    name = "hacking"

    def tasks_per_call(self, k):
        return 4

    def sample(self, tasks, k, seeds):
        hack = lambda t, j: f" Wait, it could be {int(t.answer) + 1}." if j == 1 else ""
        return [[Completion(f"<think>add</think> <answer>{t.answer}</answer>{hack(t, j)}")
                 for j in range(k)] for t in tasks]

    def close(self):
        pass


@pytest.mark.parametrize("integrity", ["drop", "keep", "off"])
def test_distill_data_drops_flagged_traces_and_reports_them(tmp_path, integrity, monkeypatch):
    from rlvr.trainer.verified_data import DistillDataConfig, build
    # arithmetic's reader refuses an answer followed by a doubt with another value; put the
    # hole back (read the tag, ignore what follows) so the environment rewards the hack and the
    # integrity check is what must catch it
    import rlvr.verifiers.numeric as numeric
    monkeypatch.setattr(numeric, "_standing", lambda span, text, source: text)
    cfg = DistillDataConfig(output=str(tmp_path / "out.jsonl"), env="arithmetic",
                            env_args={"n_terms": 2, "max_value": 9}, tasks=4, k=3, workers=0,
                            progress=False, dedup=False, integrity=integrity)
    summary = build(cfg, HackingTeacher())
    kept = read_jsonl(cfg.output)
    assert summary.solved == 12                      # the environment rewards every trace
    hacked = [r for r in kept if "Wait" in r["completion"][0]["content"]]
    if integrity == "off":
        assert summary.integrity is None and len(kept) == 12
        return
    report = summary.integrity
    assert (report.checked, report.flagged, dict(report.by_flag)) == (12, 4, {"correction": 4})
    assert report.second_opinion == "Math-Verify"
    if integrity == "drop":
        assert report.dropped == 4 and len(kept) == 8 and not hacked
    else:
        assert report.dropped == 0 and len(kept) == 12
        assert all(r["integrity_flags"] == ["correction"] for r in hacked) and len(hacked) == 4
    assert "4 flagged" in summary.render() and "correction" in summary.render()


def test_the_ifeval_second_opinion_drives_googles_checker_as_its_evaluation_does(monkeypatch):
    # Google's checker is not installed here: a stand-in with its interface (INSTRUCTION_DICT of
    # classes taking the id; build_description(**kwargs); get_instruction_args();
    # check_following(response)) checks the glue: None kwargs left out, the prompt passed to
    # instructions that ask for it, the answer span (not the thinking) checked.
    import sys
    import types
    seen = []

    class NoComma:
        def __init__(self, iid):
            self.iid = iid

        def build_description(self, **kwargs):
            seen.append(kwargs)

        def get_instruction_args(self):
            return {"prompt": None} if self.iid == "combination:repeat_prompt" else None

        def check_following(self, response):
            return "," not in response

    registry = types.SimpleNamespace(INSTRUCTION_DICT={"punctuation:no_comma": NoComma,
                                                       "combination:repeat_prompt": NoComma})
    pkg = types.ModuleType("eval_framework.tasks.ifeval")
    pkg.instructions_registry = registry
    for name in ("eval_framework", "eval_framework.tasks"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "eval_framework.tasks.ifeval", pkg)
    from rlvr.monitor.second_opinion import GoogleIFEval
    checker = GoogleIFEval()
    task = Task("t", prompt="Say hi without commas.", metadata={
        "instruction_id_list": ["punctuation:no_comma", "combination:repeat_prompt"],
        "kwargs": [{"keywords": None}, {"prompt_to_repeat": "Say hi"}]})
    assert checker.score(task, "<think>a, b</think> Hi there").score == 1.0
    assert checker.score(task, "<think>ab</think> Hi, there").score == 0.0
    assert {} in seen and {"prompt_to_repeat": "Say hi"} in seen
    assert {"prompt": "Say hi without commas."} in seen
