"""reasoning-gym datasets as rlvr environments: the registry's contract (gold 1, junk 0) on a few
datasets, hash splits, ids that regenerate tasks, and a raising scorer counted as an error."""
import pytest

pytest.importorskip("reasoning_gym")

import rlvr  # noqa: E402
from rlvr.core import Completion  # noqa: E402
from rlvr.envs.reasoning_gym import DATASETS, ENV_NAMES, ReasoningGymReward  # noqa: E402
from rlvr.splits import hash_split  # noqa: E402

FEW = ("chain_sum", "leg_counting", "spell_backward", "sudoku", "gsm_symbolic")


@pytest.mark.parametrize("dataset", FEW)
def test_contract_gold_scores_one_junk_scores_zero(dataset):
    env = rlvr.load_env(f"reasoning-gym/{dataset}", size=2000)     # check=True: the contract
    for task in env.sample(3, split="test"):
        gold = env.reward.score(task, env.gold(task))
        assert (gold.score, gold.status) == (1.0, "ok"), gold.reason
        for junk in ("", "I don't know.", "<think>x</think> <answer>zzz-not-it</answer>"):
            v = env.reward.score(task, junk)
            assert v.score == 0.0 and v.status in ("ok", "unparsed"), (junk, v)


def test_splits_are_disjoint_hash_splits_and_ids_regenerate_tasks():
    env = rlvr.load_env("reasoning-gym/chain_sum", size=400, test_fraction=0.3)
    train, test = list(env.tasks("train", seed=5)), list(env.tasks("test", seed=5))
    assert len(train) + len(test) == 400 and 60 < len(test) < 180
    assert all(hash_split(t.metadata["question"], 0.3) == "test" for t in test)
    assert not {t.metadata["question"] for t in train} & {t.metadata["question"] for t in test}
    again = env.get_task(test[3].id)
    assert again.id == test[3].id and again.prompt == test[3].prompt and again.answer == test[3].answer
    assert test[3].id.startswith("reasoning-gym/chain_sum/test/5/")
    with pytest.raises(KeyError, match="not in the train split"):
        env.get_task(test[3].id.replace("/test/", "/train/"))
    with pytest.raises(KeyError, match="bad task id"):
        env.get_task("chain_sum/test/5/1")
    # seeded: another seed is another stream, the same seed the same one
    assert [t.answer for t in env.sample(5, "test", seed=5)] == [t.answer for t in test[:5]]
    assert [t.id for t in env.sample(5, "test", seed=6)] != [t.id for t in test[:5]]


def test_the_generic_env_takes_a_dataset_and_its_config():
    env = rlvr.load_env("reasoning-gym", dataset="chain_sum", size=200,
                        config={"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1})
    task = env.sample(1, "train")[0]
    assert task.metadata["rg_metadata"]["num_terms"] == 2
    with pytest.raises(ValueError, match="no dataset 'nope'"):
        rlvr.load_env("reasoning-gym", dataset="nope")


def test_a_mistyped_dataset_is_one_line_with_the_closest_names(capsys):
    from rlvr.cli import main
    assert main(["envs", "show", "reasoning-gym", "--env-arg", "dataset=chainsum"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "reasoning-gym has no dataset 'chainsum'; did you mean 'chain_sum'" in err


def test_a_raising_scorer_is_a_counted_error_not_a_zero(monkeypatch):
    env = rlvr.load_env("reasoning-gym/leg_counting", size=500)
    task = env.sample(1, "test")[0]
    from rlvr.envs import reasoning_gym as mod
    ds = mod._dataset("leg_counting", task.metadata["rg_seed"], 500, task.metadata["rg_config"])

    def boom(answer, entry):
        raise RuntimeError("scorer bug")
    monkeypatch.setattr(ds, "score_answer", boom)
    v = ReasoningGymReward().score(task, Completion("<think>.</think> <answer>4</answer>"))
    assert v.status == "error" and "scorer raised RuntimeError: scorer bug" in v.reason
    monkeypatch.setattr(ds, "score_answer", lambda answer, entry: 1.7)
    v = ReasoningGymReward().score(task, Completion("<think>.</think> <answer>4</answer>"))
    assert v.status == "error" and "not a number in [0, 1]" in v.reason
    # no answer tag: the model's doing, an unparsed 0 (never reaches the scorer)
    v = ReasoningGymReward().score(task, Completion("<think>.</think> 4 legs"))
    assert (v.score, v.status) == (0.0, "unparsed")


def _chain_sum_task():
    env = rlvr.load_env("reasoning-gym/chain_sum", size=500)
    return env, env.sample(1, "train")[0]


def test_several_different_answer_blocks_are_a_hedge():
    env, task = _chain_sum_task()
    g, w = task.answer, str(int(task.answer) + 1)
    v = env.reward.score(task, f"<think>.</think> <answer>{w}</answer> <answer>{g}</answer>")
    assert (v.score, v.status) == (0.0, "ok") and "2 different <answer> blocks" in v.reason
    assert env.reward.score(task, f"<answer>{g}</answer> <answer> {g} </answer>").score == 1.0


@pytest.mark.parametrize("dressed", ["{w} or {g}", "{g} — though it could be {w}",
                                     r"{w}\phantom{{{g}}}", r"x \neq {g}"])
def test_partial_credit_for_a_text_containing_the_gold_is_withheld(dressed):
    env, task = _chain_sum_task()
    g, w = task.answer, str(int(task.answer) + 1)
    v = env.reward.score(task, f"<think>.</think> <answer>{dressed.format(g=g, w=w)}</answer>")
    assert (v.score, v.status) == (0.0, "ok"), v.reason


def test_the_gold_in_math_delimiters_is_the_gold():
    env, task = _chain_sum_task()
    for form in ("${}$", r"\({}\)", "{}."):
        answer = form.format(task.answer)
        assert env.reward.score(task, f"<answer>{answer}</answer>").score == 1.0, answer


@pytest.mark.parametrize("tail", [
    "Oops, I slipped a digit: it should be {w}.", "The final answer is {w}, not {g}.",
    "\nAnswer: {w}", "Hmm, {g} doesn't add up. I'm lost.",
    "Actually that is not right; I cannot tell what it is.", "Wait, maybe {w}.",
    "Indeed, the answer is {w}.", "\n#### {w}?"])
@pytest.mark.parametrize("dataset", ["chain_sum", "spell_backward"])
def test_what_follows_the_answer_block_can_undo_it(dataset, tail):
    """A correction, a retraction, a later answer line or an alternative after the block: the
    tagged answer is not the one the completion ends on."""
    env = rlvr.load_env(f"reasoning-gym/{dataset}", size=500)
    task = env.sample(1, "train")[0]
    g = str(task.answer)
    w = str(int(g) + 1) if g.lstrip("-").isdigit() else g + "q"
    text = f"<think>.</think> <answer>{g}</answer> " + tail.format(g=g, w=w)
    assert env.reward.score(task, text).score == 0.0, text


@pytest.mark.parametrize("tail", ["Let me double-check: {g} is right.",
                                  "Wait, let me verify that. Recounting gives {g} again.",
                                  "Checking: it holds.", "The answer is {g}."])
def test_a_re_check_that_confirms_the_answer_block_keeps_it(tail):
    env = rlvr.load_env("reasoning-gym/spell_backward", size=500)
    task = env.sample(1, "train")[0]
    text = f"<think>.</think> <answer>{task.answer}</answer> " + tail.format(g=task.answer)
    assert env.reward.score(task, text).score == 1.0, text


def test_a_score_off_by_float_rounding_is_clamped_a_real_one_is_an_error(monkeypatch):
    env, task = _chain_sum_task()
    from rlvr.envs import reasoning_gym as mod
    md = task.metadata
    ds = mod._dataset("chain_sum", md["rg_seed"], 500, md["rg_config"])
    monkeypatch.setattr(ds, "score_answer", lambda answer, entry: 1.0000000000000002)
    v = env.reward.score(task, f"<answer>{task.answer}</answer>")
    assert (v.score, v.status) == (1.0, "ok")
    monkeypatch.setattr(ds, "score_answer", lambda answer, entry: -1e-17)
    v = env.reward.score(task, "<answer>1</answer>")
    assert (v.score, v.status) == (0.0, "ok")
    monkeypatch.setattr(ds, "score_answer", lambda answer, entry: 1.001)
    assert env.reward.score(task, "<answer>1</answer>").status == "error"


def test_the_gold_with_more_appended_earns_no_partial_credit():
    """spell_backward pays a letter share per matching position: the gold with a letter more
    sums to 1.0000000000000002 there (neither an error nor full credit), a near miss keeps its
    partial credit."""
    env = rlvr.load_env("reasoning-gym/spell_backward", size=500)
    task = env.sample(1, "train")[0]
    g = task.answer
    for padded in (g + "x", f"{g}x or {g}", f"{g}, then adjusting, {g}x"):
        v = env.reward.score(task, f"<think>.</think> <answer>{padded}</answer>")
        assert (v.score, v.status) == (0.0, "ok"), (padded, v.reason)
    near = g[:-1] + ("a" if g[-1] != "a" else "b")
    assert 0.0 < env.reward.score(task, f"<answer>{near}</answer>").score < 1.0
    assert env.reward.score(task, f"<answer>{g}</answer>").score == 1.0


def test_a_scorer_that_cannot_parse_the_answer_is_unparsed_not_an_error():
    """prime_factorization's scorer calls int() on each factor: a malformed answer raises."""
    env = rlvr.load_env("reasoning-gym/prime_factorization", size=500)
    task = env.sample(1, "train")[0]
    v = env.reward.score(task, "<think>.</think> <answer>7 or 8</answer>")
    assert (v.score, v.status) == (0.0, "unparsed") and "ValueError" in v.reason, v.reason
    assert env.reward.score(task, env.gold(task)).score == 1.0


def test_a_number_equal_to_a_numeric_gold_reaches_the_scorer_as_the_gold():
    """basic_arithmetic's scorer compares text: `1234.0` or `1,234` for 1234 were refused."""
    env = rlvr.load_env("reasoning-gym/basic_arithmetic", size=500)
    task = next(t for t in env.sample(20, "train") if abs(int(t.answer)) >= 1000)
    g = int(task.answer)
    for form in (f"{g}.0", f"{g:,}", f"${g}$", f"{g}."):
        assert env.reward.score(task, f"<answer>{form}</answer>").score == 1.0, form
    assert env.reward.score(task, f"<answer>{g + 1}.0</answer>").score < 1.0


def test_every_installed_dataset_is_registered():
    from reasoning_gym.factory import DATASETS as installed
    missing = sorted(set(installed) - set(DATASETS))
    assert not missing, f"update envs/reasoning_gym_names.py: reasoning-gym has {missing}"
    names = set(rlvr.list_envs())
    assert set(ENV_NAMES) <= names and "reasoning-gym/sudoku" in names
