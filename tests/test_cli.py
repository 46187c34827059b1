"""`rlvr envs list|show` and the CLI's usage handling."""
import subprocess
import sys

from rlvr.cli import main


def test_envs_list_and_show(capsys):
    assert main(["envs", "list"]) == 0
    assert "arithmetic" in capsys.readouterr().out
    assert main(["envs", "show", "arithmetic", "--env-arg", "n_terms=2", "--split", "test"]) == 0
    out = capsys.readouterr().out
    assert "sample task id: arithmetic/test/0/0" in out
    assert "gold answer:" in out and "gold completion: '<think>" in out
    assert '"numeric_match": 1.0' in out


def test_envs_show_unknown_is_a_usage_error(capsys):
    assert main(["envs", "show", "nope"]) == 2
    assert "registered: " in capsys.readouterr().err


def test_console_entry_point_runs():
    out = subprocess.run([sys.executable, "-m", "rlvr.cli", "--version"], capture_output=True,
                         text=True)
    assert out.returncode == 0 and out.stdout.startswith("rlvr ")


def test_envs_show_missing_factory_argument_is_a_usage_error(capsys):
    import envs_for_tests  # noqa: F401
    from rlvr import Environment, RowSource, Task, register_env
    from rlvr.verifiers import NumericMatch

    @register_env("needs-arg", replace=True)
    def needs_arg(level: int):
        return Environment("needs-arg", RowSource({"train": [Task("a", answer=str(level))]}),
                           [(NumericMatch(), 1.0)])

    assert main(["envs", "show", "needs-arg"]) == 2
    err = capsys.readouterr().err
    assert "missing a required argument: 'level'" in err and "--env-arg" in err
    assert main(["envs", "show", "needs-arg", "--env-arg", "level=3"]) == 0
