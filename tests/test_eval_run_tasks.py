"""pass@k of a run folder is measured on the tasks the run trained on, every results file says
what its tasks were, and results of different problems are never compared."""
import json

import pytest

torch = pytest.importorskip("torch")

from rlvr.cli import main  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")   # see conftest.py

RUN_ENV = {"n_terms": 2, "max_value": 99, "ops": "+", "prompt_style": "base"}
EVAL = ["--tasks", "3", "--n", "2", "--k", "1,2", "--max-tokens", "4", "--no-progress",
        "--bootstrap", "20"]


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_model):
    out = tmp_path_factory.mktemp("run") / "run"
    assert main(["train", f"model={tiny_model}", f"output_dir={out}", "steps=1",
                 "prompts_per_step=2", "group_size=2", "max_completion_length=4",
                 "progress=false", "tensorboard=false", "eval_every=0", "checkpoint_every=1",
                 f"env_kwargs={json.dumps(RUN_ENV)}"]) == 0
    return out


def _eval(args, out, capsys) -> tuple[dict, str]:
    capsys.readouterr()
    assert main(["eval", *EVAL, *args, "-o", str(out)]) == 0
    return json.loads(out.read_text()), capsys.readouterr().err


def _fingerprints(env_kwargs: dict) -> list[str]:
    from rlvr import load_env
    from rlvr.trainer.evaluation.eval_records import task_fingerprint
    from rlvr.trainer.evaluation.evaluate import distinct_tasks
    tasks = distinct_tasks(load_env("arithmetic", **env_kwargs), "test", 3, 0)
    return [task_fingerprint(t) for t in tasks]


def test_a_run_folder_is_evaluated_on_its_own_tasks_and_says_so(run, tmp_path, capsys):
    # the README's command: --env names the run's environment, no arguments
    data, err = _eval(["--env", "arithmetic", "--model", str(run)], tmp_path / "r.json", capsys)
    assert data["config"]["env"] == "arithmetic" and data["config"]["env_kwargs"] == RUN_ENV
    assert data["env"]["arguments"] == RUN_ENV
    assert f"the tasks the run {run} trained on" in err
    assert data["task_fingerprints"] == _fingerprints(RUN_ENV) != _fingerprints({})
    # a given argument replaces the run's value for that argument only
    data, err = _eval(["--model", str(run), "--env-arg", "max_value=5"], tmp_path / "m.json",
                      capsys)
    assert data["config"]["env_kwargs"] == {**RUN_ENV, "max_value": 5} and "given:" in err


def test_any_model_on_a_runs_tasks_with_env_from(run, tiny_model, tmp_path, capsys):
    data, err = _eval(["--model", str(tiny_model), "--env-from", str(run)],
                      tmp_path / "base.json", capsys)
    assert data["config"]["env_kwargs"] == RUN_ENV
    assert data["task_fingerprints"] == _fingerprints(RUN_ENV)
    assert main(["eval", *EVAL, "--model", str(tiny_model), "--env-from", str(tiny_model)]) == 2


def test_plot_refuses_results_of_different_problems_in_one_line(run, tiny_model, tmp_path,
                                                               capsys):
    trained, _ = _eval(["--model", str(run)], tmp_path / "grpo.json", capsys)
    base, err = _eval(["--model", str(tiny_model)], tmp_path / "base.json", capsys)
    assert "(as given)" in err and base["config"]["env_kwargs"] == {}
    assert base["task_ids"] == trained["task_ids"]          # same ids, other problems
    assert main(["plot", "passk", str(tmp_path / "base.json"), str(tmp_path / "grpo.json"),
                 "-o", str(tmp_path / "p.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "different problems under the same task ids" in err
    assert '"max_value": 99' in err and "--env-from" in err
    assert not (tmp_path / "p.png").exists()
    # the same tasks compare
    _eval(["--model", str(tiny_model), "--env-from", str(run)], tmp_path / "same.json", capsys)
    assert main(["plot", "passk", str(tmp_path / "same.json"), str(tmp_path / "grpo.json"),
                 "-o", str(tmp_path / "p.png")]) == 0


def test_files_without_fingerprints_are_compared_by_their_environment(tmp_path):
    from rlvr.passk import mean_pass_at_k
    from rlvr.trainer.evaluation.passk_plot import TasksDiffer, plot_passk
    paths = []
    for name, kwargs in (("a", {}), ("b", {"n_terms": 2})):
        data = {"label": name, "samples": 4, "sampled_tasks": 2, "correct_counts": [1, 2],
                "task_ids": ["t0", "t1"], "config": {"env": "arithmetic", "env_kwargs": kwargs},
                "pass_at": {"pass@1": mean_pass_at_k(4, [1, 2], 1)}}
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(data))
    with pytest.raises(TasksDiffer, match=r'arithmetic \{\} vs arithmetic \{"n_terms": 2\}'):
        plot_passk(paths, tmp_path / "p.png")
