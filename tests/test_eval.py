"""pass@k: the unbiased estimator (hand-computed and brute force), its bootstrap, per-task seeded
sampling, resuming, and `rlvr eval` end to end on a tiny model."""
import itertools
import json
import math
import random

import pytest

import rlvr
import rlvr.envs.arithmetic  # noqa: F401  (registers `arithmetic` without the full discovery)
from rlvr.cli import main
from rlvr.trainer.evaluation.evaluate import EvalConfig, LocalSampler, distinct_tasks, run_eval
from rlvr.trainer.evaluation.eval_records import task_seeds
from rlvr.passk import mean_pass_at_k, pass_at_k, pass_at_k_curve

ENV_ARGS = {"n_terms": 2, "max_value": 9, "ops": "+"}


@pytest.mark.parametrize("n,c,k,expected", [
    # 1 - C(n-c, k) / C(n, k), worked by hand:
    (4, 1, 1, 0.25),                  # 1 - C(3,1)/C(4,1) = 1 - 3/4
    (4, 1, 2, 0.5),                   # 1 - C(3,2)/C(4,2) = 1 - 3/6
    (5, 2, 2, 0.7),                   # 1 - C(3,2)/C(5,2) = 1 - 3/10
    (10, 3, 4, 1 - 35 / 210),         # C(7,4) = 35, C(10,4) = 210 -> 5/6
    (8, 0, 8, 0.0),                   # nothing right: no k draws can find one
    (8, 8, 1, 1.0),                   # everything right
    (8, 3, 6, 1.0),                   # n - c = 5 < k = 6: every 6-subset holds a right one
    (32, 1, 8, 0.25),                 # 1 - C(31,8)/C(32,8) = 1 - 24/32
])
def test_pass_at_k_hand_computed(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_pass_at_k_equals_brute_force_over_every_k_subset(n):
    # The definition itself: of all C(n, k) ways to pick k of the n samples, the fraction that
    # holds at least one correct sample -- enumerated, for every placement count c and every k.
    for c in range(n + 1):
        samples = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(samples, k))
            brute = sum(any(s) for s in subsets) / len(subsets)
            assert pass_at_k(n, c, k) == pytest.approx(brute, abs=1e-12), (n, c, k)


def test_pass_at_k_is_unbiased_not_the_naive_formula():
    # n=4, c=2, k=2: the naive 1-(1-c/n)^k = 1 - 0.25 = 0.75 overstates it; drawing 2 of 4
    # without replacement misses both right ones only in C(2,2)=1 of C(4,2)=6 ways -> 5/6.
    assert pass_at_k(4, 2, 2) == pytest.approx(5 / 6)
    assert 1 - (1 - 2 / 4) ** 2 != pytest.approx(5 / 6)
    # k = 1 is the plain fraction right, whatever n is.
    assert all(math.isclose(pass_at_k(n, c, 1), c / n) for n in (1, 7, 32) for c in range(n + 1))


def test_unbiased_in_expectation_over_simulated_draws():
    # A task solved with probability p: E over draws of n samples of the estimate = 1-(1-p)^k.
    # Averaged exactly over the binomial distribution of c (no Monte Carlo noise).
    n, p = 10, 0.3
    for k in (1, 3, 10):
        expect = sum(math.comb(n, c) * p**c * (1 - p) ** (n - c) * pass_at_k(n, c, k)
                     for c in range(n + 1))
        assert expect == pytest.approx(1 - (1 - p) ** k)


def test_mean_over_tasks_and_bad_input():
    # tasks with c = 0, 1, 4 of n = 4 at k = 2: (0 + 0.5 + 1) / 3 = 0.5
    assert mean_pass_at_k(4, [0, 1, 4], 2) == pytest.approx(0.5)
    assert mean_pass_at_k([4, 2], [1, 1], 1) == pytest.approx((0.25 + 0.5) / 2)   # n per task
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)
    with pytest.raises(ValueError):
        mean_pass_at_k(4, [], 1)
    with pytest.raises(ValueError, match="n >= k"):
        EvalConfig(ks=(1, 8), samples=4)
    with pytest.raises(ValueError, match="sample_tasks"):
        EvalConfig(tasks=10, sample_tasks=11)


def test_bootstrap_interval_brackets_the_mean_and_matches_a_direct_bootstrap():
    rng = random.Random(0)
    counts = [rng.randint(0, 8) for _ in range(40)]
    curve = pass_at_k_curve(counts, 8, [1, 2, 8], resamples=2000, level=0.9, seed=3)
    for i, k in enumerate(curve.ks):
        assert curve.value[i] == pytest.approx(mean_pass_at_k(8, counts, k))
        assert curve.low[i] <= curve.value[i] <= curve.high[i]
    # pass@k grows with k at every point of the band
    assert curve.value == sorted(curve.value) and curve.low == sorted(curve.low)
    # the interval of a plain (slow) percentile bootstrap with another RNG agrees to ~0.02
    means = sorted(sum(pass_at_k(8, rng.choice(counts), 1) for _ in counts) / len(counts)
                   for _ in range(2000))
    assert curve.low[0] == pytest.approx(means[100], abs=0.02)
    assert curve.high[0] == pytest.approx(means[1899], abs=0.02)
    # all tasks alike: no spread; zero resamples: point estimates only
    flat = pass_at_k_curve([3] * 10, 8, [2], resamples=500)
    assert flat.low == flat.value == flat.high
    assert pass_at_k_curve(counts, 8, [4], resamples=0).low == pytest.approx(
        [mean_pass_at_k(8, counts, 4)])


# --- sampling and the run ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from rlvr.trainer.models.tiny import build_tiny_model
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def _sampler(path, batch_size):
    import torch

    from rlvr.trainer.models.loading import load_policy, load_tokenizer
    return LocalSampler(load_policy(path, "float32", torch.device("cpu")),
                        load_tokenizer(path), batch_size)


def test_task_seeds_depend_on_the_task_not_its_position():
    ids = ["a/0", "a/1", "a/2"]
    assert task_seeds(0, ids)[::-1] == task_seeds(0, ids[::-1])
    assert task_seeds(0, ids[1:]) == task_seeds(0, ids)[1:]
    assert len(set(task_seeds(0, ids))) == 3 and task_seeds(1, ids) != task_seeds(0, ids)


def test_a_tasks_samples_do_not_depend_on_order_batch_or_count(tiny, one_torch_thread):
    env = rlvr.load_env("arithmetic", **ENV_ARGS)
    tasks = distinct_tasks(env, "test", 4)
    seeds = dict(zip([t.id for t in tasks], task_seeds(0, [t.id for t in tasks])))
    one_per_call, two_per_call = _sampler(tiny, 4), _sampler(tiny, 8)

    def texts(sampler, ts):
        out = sampler.sample(ts, 4, [seeds[t.id] for t in ts], max_tokens=8)
        return {t.id: [c.text for c in comps] for t, comps in zip(ts, out)}
    ref = texts(one_per_call, tasks)
    assert texts(one_per_call, tasks[::-1]) == ref                      # order
    assert texts(one_per_call, tasks[2:3]) == {tasks[2].id: ref[tasks[2].id]}   # alone
    assert texts(two_per_call, tasks) == ref                            # two tasks per call
    # the samples do vary between tasks' seeds (the test could fail): same prompt, other seed
    other = one_per_call.sample(tasks[:1], 4, [seeds[tasks[0].id] + 1], max_tokens=8)
    assert [c.text for c in other[0]] != ref[tasks[0].id]


def test_rlvr_eval_cli_on_a_tiny_model(tiny, tmp_path, capsys, one_torch_thread):
    out = tmp_path / "eval.json"
    code = main(["eval", "--env", "arithmetic", "--env-arg", "n_terms=2", "--model", tiny,
                 "--k", "1,2,4", "--tasks", "3", "--sample-tasks", "2", "--max-tokens", "6",
                 "-o", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "pass@4" in printed and "greedy pass@1" in printed and "95% CI" in printed
    data = json.loads(out.read_text())
    # greedy covers the 3 tasks; the 4 samples each were drawn for the first 2 only
    assert data["tasks"] == 3 and data["samples"] == 4 and data["sampled_tasks"] == 2
    assert len(data["correct_counts"]) == 2 and all(0 <= c <= 4 for c in data["correct_counts"])
    # the reported numbers are the estimator applied to the recorded counts
    for k in (1, 2, 4):
        assert data["pass_at"][f"pass@{k}"] == pytest.approx(
            mean_pass_at_k(4, data["correct_counts"], k))
        lo, hi = data["pass_at_ci"][f"pass@{k}"]
        assert lo <= data["pass_at"][f"pass@{k}"] <= hi
    rows = [json.loads(x) for x in (tmp_path / "eval.samples.jsonl").read_text().splitlines()]
    assert len(rows) == 3 + 2 * 4 and {r["kind"] for r in rows} == {"greedy", "sample"}
    assert main(["eval", "--env", "arithmetic", "--model", tiny, "--k", "one"]) == 2


def test_samples_file_scores_again_with_rlvr_score(tiny, tmp_path, one_torch_thread):
    cfg = EvalConfig(env="arithmetic", env_kwargs=ENV_ARGS, model=tiny, tasks=3, ks=(1, 2),
                     max_completion_length=6, bootstrap=0)
    run_eval(cfg, tmp_path / "e.json", progress=False)
    rows = [json.loads(x) for x in (tmp_path / "e.samples.jsonl").read_text().splitlines()]
    # a gold completion in the middle, so the rescoring has a right answer to agree on
    env = rlvr.load_env("arithmetic", **ENV_ARGS)
    rows[1]["completion"] = env.gold(env.get_task(rows[1]["id"]))
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({k: r[k] for k in ("id", "completion")}) + "\n"
                           for r in rows))
    args = ["score", "--env", "arithmetic", str(src), "-o", str(tmp_path / "s.jsonl")]
    for key, value in ENV_ARGS.items():
        args += ["--env-arg", f"{key}={json.dumps(value)}"]
    assert main(args) == 0
    scored = [json.loads(x) for x in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert [s["score"] for s in scored][2:] == [r["score"] for r in rows][2:]
    assert scored[1]["score"] == 1.0


def test_resume_skips_finished_tasks_and_drops_a_torn_one(tiny, tmp_path, one_torch_thread):
    cfg = lambda tasks: EvalConfig(env="arithmetic", env_kwargs=ENV_ARGS, model=tiny, tasks=tasks,
                                   ks=(1, 2), max_completion_length=6, bootstrap=0)
    out = tmp_path / "e.json"
    first = run_eval(cfg(2), out, progress=False)
    assert first.resumed_tasks == 0 and first.generated == 2 * 3
    lines = (tmp_path / "e.samples.jsonl").read_text().splitlines()
    # a run killed while writing its second task: the last row is cut in half
    (tmp_path / "e.samples.jsonl").write_text("\n".join(lines[:4]) + "\n" + lines[4][:20])
    more = run_eval(cfg(3), out, progress=False)          # and more tasks asked for this time
    assert more.resumed_tasks == 1 and more.generated == 2 * 3 and more.tasks == 3
    rows = [json.loads(x) for x in (tmp_path / "e.samples.jsonl").read_text().splitlines()]
    assert len(rows) == 9 and len({(r["id"], r["kind"], r["sample"]) for r in rows}) == 9
    # resumed samples are the ones a fresh run draws (seeded per task)
    fresh = run_eval(cfg(3), tmp_path / "fresh.json", progress=False)
    fresh_rows = (tmp_path / "fresh.samples.jsonl").read_text().splitlines()
    assert sorted(json.dumps(r, sort_keys=True) for r in rows) == \
        sorted(json.dumps(json.loads(x), sort_keys=True) for x in fresh_rows)
    assert fresh.correct_counts == more.correct_counts
    with pytest.raises(ValueError, match="other settings"):
        run_eval(EvalConfig(env="arithmetic", env_kwargs=ENV_ARGS, model=tiny, tasks=3,
                            ks=(1, 2), max_completion_length=6, temperature=0.5), out,
                 progress=False)


def test_a_run_directory_resolves_to_its_latest_policy(tiny, tmp_path):
    import shutil

    from rlvr.trainer.evaluation.evaluate import resolve_model
    run = tmp_path / "run"
    for step in ("step-000001", "step-000002"):
        shutil.copytree(tiny, run / "checkpoints" / step / "policy")
    (run / "checkpoints" / "latest").write_text("step-000001")
    assert resolve_model(str(run)) == str(run / "checkpoints" / "step-000001" / "policy")
    (run / "checkpoints" / "latest").unlink()            # no pointer: the highest step
    assert resolve_model(str(run)) == str(run / "checkpoints" / "step-000002" / "policy")
    with pytest.raises(FileNotFoundError, match="no finished checkpoint"):
        (tmp_path / "empty" / "checkpoints").mkdir(parents=True)
        resolve_model(str(tmp_path / "empty"))


def test_distinct_tasks_never_repeats_a_problem_and_fails_loud_when_short():
    env = rlvr.load_env("arithmetic", n_terms=2, max_value=3, ops="+")   # 16 expressions in all
    tasks = distinct_tasks(env, "train", 8)
    assert len({t.metadata["expression"] for t in tasks}) == 8
    with pytest.raises(ValueError, match="distinct"):
        distinct_tasks(env, "test", 200)


def test_tokenizer_option_renders_prompts_with_another_template(tiny, tmp_path, one_torch_thread):
    # the main job trains with a think-opening template; its base model is evaluated with it
    from rlvr.trainer.evaluation.evaluate import _sampler as eval_sampler
    from rlvr.trainer.recipes.r1zero import THINK_OPEN, think_tokenizer
    think = think_tokenizer(tiny, tmp_path)
    chat_env = {**ENV_ARGS, "prompt_style": "chat"}
    cfg = EvalConfig(env="arithmetic", env_kwargs=chat_env, model=tiny, tokenizer=think,
                     tasks=2, ks=(1,), max_completion_length=4, bootstrap=0)
    sampler, identity = eval_sampler(cfg)
    prompt = [{"role": "user", "content": "What is 1 + 2?"}]
    rendered = sampler.tokenizer.apply_chat_template(prompt, add_generation_prompt=True,
                                                     tokenize=False)
    assert rendered.endswith(THINK_OPEN) and identity["tokenizer"] == think
    own, _ = eval_sampler(EvalConfig(env="arithmetic", env_kwargs=chat_env, model=tiny))
    assert not own.tokenizer.apply_chat_template(prompt, add_generation_prompt=True,
                                                 tokenize=False).endswith(THINK_OPEN)
    # part of what a resumed run must share -- and absent when unset, so older runs resume
    assert cfg.identity()["tokenizer"] == think and "tokenizer" not in EvalConfig().identity()
    out = tmp_path / "e.json"
    run_eval(EvalConfig(env="arithmetic", env_kwargs=ENV_ARGS, model=tiny, tasks=1, ks=(1,),
                        max_completion_length=4, bootstrap=0), out, progress=False)
    with pytest.raises(ValueError, match="other settings"):
        run_eval(EvalConfig(env="arithmetic", env_kwargs=ENV_ARGS, model=tiny, tokenizer=think,
                            tasks=1, ks=(1,), max_completion_length=4, bootstrap=0), out,
                 progress=False)
    with pytest.raises(ValueError, match="local models"):
        EvalConfig(endpoint="http://127.0.0.1:1", tokenizer=think)
