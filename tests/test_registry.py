"""The registry and its contract check."""
import sys
import textwrap

import pytest

import rlvr
from rlvr import Environment, EnvContractError, RowSource, Task, load_env, register_env, reward
from rlvr.envs.registry import EnvArgumentError, UnknownEnvError
from rlvr.usage import UsageError
from rlvr.verifiers import NumericMatch

TASKS = [Task(f"q{i}", prompt=f"{i}+1?", answer=str(i + 1)) for i in range(4)]


def test_unknown_name_suggests_the_closest_names_not_all_of_them():
    with pytest.raises(UnknownEnvError) as err:
        load_env("arithmetc")
    msg = str(err.value)
    assert msg.startswith("unknown environment 'arithmetc'; did you mean 'arithmetic'")
    assert "`rlvr envs list` shows all" in msg and "--import MODULE" in msg
    assert "reasoning-gym/" not in msg and len(msg) < 300     # not the 100+ registered names
    with pytest.raises(UnknownEnvError) as err:
        load_env("no-such-env")
    assert "did you mean" not in str(err.value)               # nothing close: no guess


@pytest.mark.parametrize("name, kwargs, message", [
    ("arithmetic", {"n_terms": "two"},
     "environment 'arithmetic': argument n_terms expects int (an integer), got 'two' (str); "
     "its default is 3"),
    ("tool-arithmetic", {"digits": "four"},
     "environment 'tool-arithmetic': argument digits expects int (an integer), got 'four' "
     "(str); its default is 4"),
    ("arithmetic", {"parentheses": "maybe"}, "argument parentheses expects bool (true or false)"),
    ("arithmetic", {"test_fraction": [0.2]}, "argument test_fraction expects float (a number)"),
])
def test_mistyped_builtin_arguments_are_named_before_the_factory_runs(name, kwargs, message):
    with pytest.raises(EnvArgumentError) as err:
        load_env(name, **kwargs)
    assert message in str(err.value)
    assert isinstance(err.value, UsageError)        # every command reports it in one line


def test_plugin_arguments_are_checked_against_their_annotations():
    from typing import Literal

    @register_env("typed-plugin", replace=True)
    def typed(style: Literal["chat", "base"] = "chat", limit: int | None = None,
              weights: dict | None = None, label: str = "x", rate: float = 0.5):
        return Environment("typed-plugin", RowSource({"train": TASKS}), [(NumericMatch(), 1.0)])

    with pytest.raises(EnvArgumentError, match=r"argument style expects one of 'chat', 'base', "
                                               r"got 'raw' \(str\); its default is 'chat'"):
        load_env("typed-plugin", style="raw")
    with pytest.raises(EnvArgumentError, match=r"limit expects int \(an integer\) or null"):
        load_env("typed-plugin", limit=2.5)
    with pytest.raises(EnvArgumentError, match=r"weights expects dict \(a JSON object\) or null"):
        load_env("typed-plugin", weights=[1])
    # what fits passes: an int where a float is expected, None for an optional, a JSON object;
    # an int where only text fits is that text (`--env-arg label=2024`)
    seen = {}

    @register_env("typed-plugin-echo", replace=True)
    def echo(label: str = "x", rate: float = 0.5, limit: int | None = None):
        seen.update(label=label, rate=rate, limit=limit)
        return typed()

    load_env("typed-plugin-echo", label=2024, rate=1, limit=None, check=False)
    assert seen == {"label": "2024", "rate": 1, "limit": None}


def test_arithmetic_is_registered_and_passes_contract():
    env = load_env("arithmetic", n_terms=4, max_value=50)
    assert env.name == "arithmetic" and len(env.sample(3)) == 3


def test_gold_that_does_not_score_one_is_rejected():
    @register_env("broken-gold", replace=True)
    def broken():
        return Environment("broken-gold", RowSource({"train": TASKS}), [(NumericMatch(), 1.0)],
                           gold=lambda t: "<answer>wrong</answer>")

    with pytest.raises(EnvContractError) as err:
        load_env("broken-gold")
    msg = str(err.value)
    assert "gold completion for task 'q0' scored" in msg and "must give the gold answer 1.0" in msg


def test_reward_that_pays_junk_is_rejected():
    @reward("always_one")
    def always_one(text):
        return 1.0

    @register_env("pays-junk", replace=True)
    def pays_junk():
        return Environment("pays-junk", RowSource({"train": TASKS}), [(always_one, 1.0)])

    with pytest.raises(EnvContractError, match=r"junk completion '' scored \{'always_one': 1.0\}"):
        load_env("pays-junk")


def test_declared_reward_field_missing_from_tasks_is_rejected():
    @reward("needs_tests")
    def needs_tests(text, tests):
        return 0.0

    @register_env("missing-field", replace=True)
    def missing_field():
        return Environment("missing-field", RowSource({"train": TASKS}), [(needs_tests, 1.0)])

    with pytest.raises(EnvContractError, match=r"read task field\(s\) \['tests'\] that task 'q0' lacks"):
        load_env("missing-field")


def test_factory_must_return_an_environment_and_names_are_checked():
    @register_env("not-an-env", replace=True)
    def not_an_env():
        return {"tasks": []}

    with pytest.raises(EnvContractError, match="returned dict, not an rlvr Environment"):
        load_env("not-an-env")
    with pytest.raises(ValueError, match="environment name"):
        register_env("bad name!")
    with pytest.raises(TypeError, match="its factory takes"):
        load_env("arithmetic", no_such_knob=3)


def test_duplicate_registration_needs_replace():
    @register_env("dup-env", replace=True)
    def first():
        return None

    def second():
        return None

    with pytest.raises(ValueError, match="already registered"):
        register_env("dup-env")(second)


def test_entry_point_group_adds_third_party_envs(tmp_path, monkeypatch):
    (tmp_path / "thirdparty_env.py").write_text(textwrap.dedent('''
        from rlvr import Environment, RowSource, Task
        from rlvr.verifiers import NumericMatch

        def make():
            tasks = [Task("a", answer="1"), Task("b", answer="2")]
            return Environment("thirdparty", RowSource({"train": tasks}), [(NumericMatch(), 1.0)])
    '''))
    dist = tmp_path / "thirdparty_env-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdparty-env\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[rlvr.envs]\nthirdparty = thirdparty_env:make\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from rlvr.envs import registry
    monkeypatch.setattr(registry, "_discovered", False)
    assert "thirdparty" in rlvr.list_envs()
    assert load_env("thirdparty").reward.score(Task("a", answer="1"), "<answer>1</answer>").score == 1.0


def test_arithmetic_splits_never_overlap_and_ids_regenerate():
    env = load_env("arithmetic", n_terms=2, max_value=30, parentheses=False)
    train = {t.metadata["expression"] for t in env.sample(300, "train")}
    test = {t.metadata["expression"] for t in env.sample(300, "test")}
    assert train and test and not (train & test)
    task = env.sample(5, "test", seed=3)[4]
    assert env.get_task(task.id) == task
    assert env.sample(5, seed=1) != env.sample(5, seed=2)


def test_arithmetic_answers_are_correct():
    env = load_env("arithmetic", n_terms=4, max_value=9)
    for task in env.sample(50):
        # our evaluator vs Python's, on expressions we generated ourselves
        assert int(task.answer) == eval(task.metadata["expression"])  # noqa: S307


def test_import_rlvr_stays_light():
    import subprocess
    code = "import rlvr, sys; rlvr.load_env('arithmetic'); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_learned_rewards_only_need_to_score_without_failing():
    class Learned(rlvr.BaseReward):
        name, learned = "learned_scalar", True

        def _score(self, task, completion):
            return rlvr.Verdict(0.37)      # a reward model's scalar: neither 1 on gold nor 0 on junk

    @register_env("with-learned", replace=True)
    def with_learned():
        return Environment("with-learned", RowSource({"train": TASKS}),
                           [(NumericMatch(), 1.0), (Learned(), 0.5)],
                           gold=lambda t: f"<answer>{t.answer}</answer>")

    assert load_env("with-learned").reward.score(TASKS[0], "<answer>1</answer>").score == pytest.approx(1.0 + 0.5 * 0.37)

    class LearnedButBroken(Learned):
        def _score(self, task, completion):
            raise RuntimeError("model file missing")

    @register_env("with-broken-learned", replace=True)
    def with_broken():
        return Environment("with-broken-learned", RowSource({"train": TASKS}),
                           [(NumericMatch(), 1.0), (LearnedButBroken(), 0.5)],
                           gold=lambda t: f"<answer>{t.answer}</answer>")

    with pytest.raises(EnvContractError, match="status error: learned_scalar: RuntimeError"):
        load_env("with-broken-learned")


def test_type_error_inside_a_factory_is_not_mistaken_for_bad_arguments():
    @register_env("raises-inside", replace=True)
    def raises_inside(level: int = 1):
        raise TypeError("raises_inside() got a bad argument from its own data")

    with pytest.raises(TypeError) as err:
        load_env("raises-inside", level=2)
    assert str(err.value) == "raises_inside() got a bad argument from its own data"
    with pytest.raises(TypeError, match=r"its factory takes \(level\)"):
        load_env("raises-inside", levl=2)


def test_builtin_module_table_matches_what_the_modules_register():
    # envs.BUILTIN_MODULES lets a worker import one environment's module alone; it must name
    # exactly what each module registers, or a built-in environment would go missing.
    import importlib
    from rlvr import envs
    from rlvr.envs import registry
    registry._discover()
    for module, names in envs.BUILTIN_MODULES.items():
        mod = importlib.import_module(f"rlvr.envs.{module}")
        registered = {n for n, e in registry._registry.items() if e.module.startswith(mod.__name__)}
        assert registered == set(names), module


def test_a_worker_rebuilding_one_environment_imports_only_its_module():
    import subprocess
    import sys
    code = ("import sys; from rlvr.envs.registry import build_env; "
            "build_env('arithmetic', {}, 'rlvr.envs.arithmetic'); "
            "print(sorted(m for m in ('sympy', 'rlvr.envs.math', 'rlvr.envs.code', 'torch') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
