"""RewardModel: the Bradley-Terry loss by hand, scoring (batched == single, save/load, errors,
truncation, normalisation), the reward-model environment mixed with a verifier, light imports."""
import json
import math
import pickle
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from rlvr.core import Task  # noqa: E402
from rlvr.trainer.reward_models.rm_training import bradley_terry_loss, build_tiny_reward_model  # noqa: E402
from rlvr.verifiers.reward_model import (RewardModel, RewardModelConfig,  # noqa: E402
                                          load_scalar_model)

PROMPTS = ["What is 2 + 3?", [{"role": "system", "content": "Be brief."},
                              {"role": "user", "content": "Name a prime above 10."}],
           "Say hi", "What is 12 * 12? Think first."]
COMPLETIONS = ["<think>2 + 3 = 5</think> <answer>5</answer>", "11", "hi there, friend!",
               "<think>12 * 12 = 144</think> <answer>144</answer> and a long tail " * 2]


pytestmark = pytest.mark.usefixtures("one_torch_thread")   # see conftest.py


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
    return str(build_tiny_reward_model(tmp_path_factory.mktemp("rm-cls"), "classifier", seed=1))


@pytest.fixture(scope="module")
def value_head_dir(tmp_path_factory):
    path = build_tiny_reward_model(tmp_path_factory.mktemp("rm-vh"), "value_head", seed=2)
    # The builder zero-initialises the head (scores all 0); give it weights so scores differ.
    model, tok = load_scalar_model(str(path))
    torch.manual_seed(3)
    torch.nn.init.normal_(model.head.weight)
    model.save(path, tok)
    return str(path)


def _tasks():
    return [Task(f"t{i}", prompt=p) for i, p in enumerate(PROMPTS)]


# --------------------------------------------------------------------------- the loss

def test_bradley_terry_loss_hand_computed():
    r_c = torch.tensor([2.0, 0.0, -1.0], requires_grad=True)
    r_r = torch.tensor([0.0, 0.0, 1.0])
    # gaps g = r_c - r_r = [2, 0, -2]; -log sigma(g) = log(1 + e^-g):
    #   log(1 + e^-2) = 0.126928, log(1 + 1) = 0.693147, log(1 + e^2) = 2.126928
    #   mean = (0.126928 + 0.693147 + 2.126928) / 3 = 2.947003 / 3 = 0.982334
    loss, acc = bradley_terry_loss(r_c, r_r)
    assert loss.item() == pytest.approx(0.982334, abs=1e-6)
    # chosen wins only in pair 0 (the tie in pair 1 counts as not learned)
    assert acc.item() == pytest.approx(1 / 3)
    # d loss / d r_c_i = -(1 - sigma(g_i)) / 3 = -sigma(-g_i) / 3; for g = 0: -0.5 / 3
    loss.backward()
    assert r_c.grad[1].item() == pytest.approx(-1 / 6, abs=1e-7)
    assert r_c.grad[0].item() == pytest.approx(-(1 / (1 + math.exp(2))) / 3, abs=1e-7)


def test_bradley_terry_margin_scalar_and_per_pair():
    r_c, r_r = torch.tensor([2.0, 0.0, -1.0]), torch.tensor([0.0, 0.0, 1.0])
    # margin 1: g - 1 = [1, -1, -3]; log(1+e^-1) = 0.313262, log(1+e) = 1.313262,
    # log(1+e^3) = 3.048587; mean = 4.675111 / 3 = 1.558370
    loss, _ = bradley_terry_loss(r_c, r_r, 1.0)
    assert loss.item() == pytest.approx(1.558370, abs=1e-6)
    # per-pair margins [0, 1, 0]: [2, -1, -2] -> (0.126928 + 1.313262 + 2.126928) / 3 = 1.189039
    loss, _ = bradley_terry_loss(r_c, r_r, torch.tensor([0.0, 1.0, 0.0]))
    assert loss.item() == pytest.approx(1.189039, abs=1e-6)
    # a huge wrong-way gap stays finite: -log sigma(-1000) = 1000 (log(sigmoid) would be inf)
    loss, _ = bradley_terry_loss(torch.tensor([-500.0]), torch.tensor([500.0]))
    assert loss.item() == pytest.approx(1000.0)


# --------------------------------------------------------------------------- scoring

@pytest.mark.parametrize("which", ["classifier_dir", "value_head_dir"])
def test_batched_scoring_equals_one_at_a_time(which, request):
    rm = RewardModel(request.getfixturevalue(which), batch_size=3)
    tasks = _tasks()
    batched = rm.score_batch(tasks, COMPLETIONS)
    single = [rm.score(t, c) for t, c in zip(tasks, COMPLETIONS)]
    assert all(v.ok for v in batched + single), [v.reason for v in batched + single]
    for b, s in zip(batched, single):
        assert b.score == pytest.approx(s.score, abs=1e-5)
        assert b.extracted == b.score          # no normalisation: score is the raw scalar
        assert b.latency_s > 0 and b.version.startswith("reward_model@")
    assert len({round(v.score, 4) for v in batched}) == len(batched)   # really different inputs


def test_saved_and_loaded_back_scores_identically(classifier_dir, tmp_path):
    rm = RewardModel(classifier_dir)
    before = [v.score for v in rm.score_batch(_tasks(), COMPLETIONS)]
    model, tok = load_scalar_model(classifier_dir)
    model.save(tmp_path / "copy", tok)
    copy = RewardModel(str(tmp_path / "copy"))
    after = [v.score for v in copy.score_batch(_tasks(), COMPLETIONS)]
    assert after == before
    clone = pickle.loads(pickle.dumps(rm))      # workers get the recipe and reload the weights
    assert [v.score for v in clone.score_batch(_tasks(), COMPLETIONS)] == before


def test_unscorable_inputs_are_errors_not_zero(classifier_dir):
    rm = RewardModel(classifier_dir)
    tasks = [Task("ok", prompt="Say hi"), Task("int", prompt=123),
             Task("msg", prompt=[{"role": "user"}]), Task("empty", prompt=[])]
    verdicts = rm.score_batch(tasks, ["hello"] * 4)
    assert verdicts[0].ok
    for v in verdicts[1:]:
        assert v.status == "error" and v.reason.startswith("cannot score")
    assert rm.score(Task("t", prompt="hi"), 42).status == "error"   # not a string
    # the good pair in a batch with bad ones scores what it scores alone
    assert verdicts[0].score == pytest.approx(rm.score(tasks[0], "hello").score, abs=1e-5)
    assert rm.stats["errors"] == 3      # 42 was refused at the Reward boundary, before the model


def test_chat_template_that_rejects_the_turns_is_an_error(tmp_path):
    from transformers import AutoTokenizer
    path = build_tiny_reward_model(tmp_path / "rm")
    tok = AutoTokenizer.from_pretrained(path)
    tok.chat_template = ("{% if messages[0]['role'] == 'system' %}"
                         "{{ raise_exception('System role not supported') }}{% endif %}"
                         + tok.chat_template)              # as Gemma's template does
    tok.save_pretrained(path)
    rm = RewardModel(str(path))
    system, plain = PROMPTS[1], PROMPTS[0]
    bad, good = rm.score_batch([Task("s", prompt=system), Task("p", prompt=plain)], ["11", "5"])
    assert bad.status == "error" and "System role not supported" in bad.reason
    assert good.ok


def test_truncation_is_reported(classifier_dir):
    v = RewardModel(classifier_dir, max_length=40).score(Task("t", prompt="p"), "x" * 200)
    assert v.ok and "truncated from" in v.reason and "to 40 tokens" in v.reason


def test_a_refused_overflow_is_scored_against_the_completion_not_an_error(classifier_dir):
    """The completion made the pair too long: `unparsed` with the configured floor (never an
    `error`, which training leaves out: a policy would learn to write past the limit)."""
    rm = RewardModel(classifier_dir, max_length=40, on_overflow="refuse", overflow_score=-7.5)
    short, long = rm.score_batch([Task("t", prompt="p")] * 2, ["x", "x" * 200])
    assert short.ok and short.extracted is not None
    assert long.status == "unparsed" and long.score == -7.5 and "not judged" in long.reason
    assert rm.stats["refused"] == 1 and rm.stats["scored"] == 1
    sig = RewardModel(classifier_dir, max_length=40, on_overflow="refuse", normalize="sigmoid")
    v = sig.score(Task("t", prompt="p"), "x" * 200)
    assert v.status == "unparsed" and v.score == 0.0


def test_a_prompt_too_long_by_itself_is_an_error_not_the_policys(classifier_dir):
    rm = RewardModel(classifier_dir, max_length=40, on_overflow="refuse", normalize="sigmoid")
    v = rm.score(Task("t", prompt="y " * 200), "5")
    assert v.status == "error" and "prompt alone" in v.reason and "raise max_length" in v.reason


@pytest.mark.parametrize("kwargs, match", [
    ({"on_overflow": "error"}, "policy's: use 'refuse'"),
    ({"on_overflow": "refuse"}, "needs overflow_score"),
    ({"on_overflow": "refuse", "normalize": "running"}, "needs overflow_score")])
def test_overflow_settings_that_could_reward_a_refusal_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RewardModelConfig(path="unused", **kwargs)


def test_sigmoid_and_running_normalisation(classifier_dir):
    raw = RewardModel(classifier_dir).score_batch(_tasks(), COMPLETIONS)
    sig = RewardModel(classifier_dir, normalize="sigmoid").score_batch(_tasks(), COMPLETIONS)
    for r, s in zip(raw, sig):
        assert s.score == pytest.approx(1 / (1 + math.exp(-r.score)), abs=1e-6)
        assert s.extracted == pytest.approx(r.score, abs=1e-6)
    run = RewardModel(classifier_dir, normalize="running", batch_size=8)
    first = [v.score for v in run.score_batch(_tasks(), COMPLETIONS)]
    # one batch: statistics come from that batch, so it is standardised exactly
    mean = sum(first) / len(first)
    std = math.sqrt(sum((x - mean) ** 2 for x in first) / (len(first) - 1))
    assert mean == pytest.approx(0.0, abs=1e-6) and std == pytest.approx(1.0, abs=1e-4)


def test_value_head_backbone_without_head_is_refused(tmp_path):
    path = build_tiny_reward_model(tmp_path / "lm", causal_lm=True)
    with pytest.raises(FileNotFoundError, match="value_head.safetensors"):
        RewardModel(str(path), kind="value_head")
    rm = RewardModel(str(path), kind="value_head", init_value_head=True)
    assert rm.score(Task("t", prompt="hi"), "there").ok


def test_multi_logit_classifier_is_refused(tmp_path):
    from transformers import AutoModelForSequenceClassification
    from rlvr.trainer.reward_models.rm_training import build_tiny_tokenizer
    from rlvr.trainer.models.tiny import tiny_llama_config
    tok = build_tiny_tokenizer()
    cfg = tiny_llama_config(tok, layers=1, hidden=16, heads=2, num_labels=3)
    AutoModelForSequenceClassification.from_config(cfg).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="one logit"):
        RewardModel(str(tmp_path))


# --------------------------------------------------------------------------- environments

def test_combined_environment_reports_every_component(classifier_dir):
    from rlvr.envs.learned_reward import reward_model_env
    env = reward_model_env(classifier_dir, base_env="arithmetic", weight=0.5,
                           verifier_weight=1.0, normalize="sigmoid")
    assert env.describe()["rewards"] == {"reward_model": 0.5, "numeric_match": 1.0,
                                         "think_format": 0.0}
    task = env.sample(1)[0]
    completions = [env.gold(task), "<think>hmm</think> <answer>-999</answer>", "no idea"]
    verdicts = env.reward.score_batch([task] * 3, completions)
    for v, c in zip(verdicts, completions):
        assert set(v.components) == {"reward_model", "numeric_match", "think_format"}
        rm = v.components["reward_model"]
        assert 0.0 < rm < 1.0
        assert v.score == pytest.approx(1.0 * v.components["numeric_match"] + 0.5 * rm)
        assert env.reward.score(task, c).components == pytest.approx(v.components, abs=1e-5)
    assert verdicts[0].components["numeric_match"] == 1.0
    assert verdicts[1].components["numeric_match"] == 0.0


def test_rlvr_score_with_reward_model_env(classifier_dir, tmp_path, capsys):
    from rlvr.cli import main
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"id": f"r{i}", "prompt": p, "completion": c,
                                        "answer": ""}) + "\n"
                            for i, (p, c) in enumerate(zip(PROMPTS, COMPLETIONS))))
    out = tmp_path / "out.jsonl"
    code = main(["score", "--env", "reward-model", "--env-arg", f"path={classifier_dir}",
                 str(rows), "-o", str(out), "--workers", "0", "--no-progress"])
    assert code == 0, capsys.readouterr().err
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    expected = RewardModel(classifier_dir).score_batch(_tasks(), COMPLETIONS)
    assert [r["status"] for r in scored] == ["ok"] * 4
    assert [r["score"] for r in scored] == pytest.approx([v.score for v in expected], abs=1e-5)


def test_import_rlvr_does_not_import_torch():
    code = ("import sys, rlvr, rlvr.verifiers, rlvr.envs, rlvr.verifiers.reward_model, "
            "rlvr.cli.train_rm\n"
            "from rlvr import list_envs\nassert 'reward-model' in list_envs()\n"
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_rlvr_score_reward_model_flag_batches_in_the_pool(classifier_dir, tmp_path, capsys):
    """`rlvr score --reward-model PATH` on prompt-only rows, in 2 workers, batched; and mixed
    with an environment's verifier via --env."""
    from rlvr.cli import main
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"prompt": p, "completion": c}) + "\n"
                            for p, c in zip(PROMPTS, COMPLETIONS)))
    out = tmp_path / "out.jsonl"
    code = main(["score", "--reward-model", classifier_dir, str(rows), "-o", str(out),
                 "--workers", "2", "--batch-rows", "3", "--deadline", "120", "--no-progress"])
    assert code == 0, capsys.readouterr().err
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    expected = RewardModel(classifier_dir).score_batch(_tasks(), COMPLETIONS)
    assert [r["status"] for r in scored] == ["ok"] * 4
    assert [r["score"] for r in scored] == pytest.approx([v.score for v in expected], abs=1e-5)

    mixed = tmp_path / "mixed.jsonl"
    arith = [{"id": "arithmetic/train/0/0", "completion": "<think>8+27</think><answer>35</answer>"},
             {"id": "arithmetic/train/0/0", "completion": "<answer>34</answer>"}]
    rows.write_text("".join(json.dumps(r) + "\n" for r in arith))
    assert main(["score", "--env", "arithmetic", "--reward-model", classifier_dir,
                 "--rm-weight", "0.5", str(rows), "-o", str(mixed), "--workers", "0",
                 "--no-progress"]) == 0
    got = [json.loads(line) for line in mixed.read_text().splitlines()]
    assert [r["components"]["numeric_match"] for r in got] == [1.0, 0.0]
    for r in got:
        assert r["score"] == pytest.approx(r["components"]["numeric_match"]
                                           + 0.5 * r["components"]["reward_model"], abs=1e-6)
