"""`rlvr envs list|show` and the CLI's usage handling."""
import json
import subprocess
import sys

import pytest

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
    err = capsys.readouterr().err
    assert "unknown environment 'nope'" in err and "rlvr envs list" in err


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


def test_score_with_a_wrong_env_argument_is_a_one_line_usage_error(tmp_path, capsys):
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": "x", "completion": "4", "answer": "4"}\n')
    code = main(["score", "--env", "arithmetic", "--env-arg", "n_term=2", str(rows),
                 "-o", str(tmp_path / "out.jsonl"), "--workers", "0"])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert "n_term" in lines[0] and "n_terms" in lines[0] and "max_value" in lines[0]
    assert not (tmp_path / "out.jsonl").exists()      # nothing half-written


def test_envs_list_shows_each_first_sentence_whole(capsys):
    from rlvr import list_envs
    from rlvr.cli.envs import first_sentence
    assert main(["envs", "list"]) == 0
    from rlvr.envs.registry import env_info
    lines = {ln.partition(" ")[0]: ln.partition(" ")[2].strip() for ln in
             capsys.readouterr().out.splitlines() if ln.strip()}
    assert set(lines) == set(list_envs())
    for name, text in lines.items():
        if env_info(name)["doc"].strip():          # (environments registered by other tests)
            assert text.endswith((".", "!", "?")), (name, text)     # never cut mid-sentence
    assert "the final attempt is scored like `code`" in lines["code-feedback"]
    # a description whose first sentence wraps over two docstring lines is joined, not cut
    doc = ("Write a function, see the failing tests: up to `n` attempts; the final\n"
           "    attempt is scored like `code`. More detail here.\n\nArgs: ...")
    assert first_sentence(doc) == ("Write a function, see the failing tests: up to `n` attempts;"
                                   " the final attempt is scored like `code`.")
    assert first_sentence("Uses e.g. sums and 3.5 too. Then more.") == \
        "Uses e.g. sums and 3.5 too."
    assert first_sentence("") == ""


def _one_usage_line(code, err, *fragments):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_a_mistyped_env_argument_is_one_line_in_every_command(tmp_path, capsys):
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": "x", "completion": "4", "answer": "4"}\n')
    expected = ("argument n_terms expects int (an integer)", "got 'two'")
    code = main(["score", "--env", "arithmetic", "--env-arg", "n_terms=two", str(rows),
                 "-o", str(tmp_path / "out.jsonl"), "--workers", "0"])
    _one_usage_line(code, capsys.readouterr().err, *expected)
    code = main(["envs", "show", "tool-arithmetic", "--env-arg", "digits=four"])
    _one_usage_line(code, capsys.readouterr().err, "argument digits expects int (an integer)")
    code = main(["train", f"output_dir={tmp_path / 'run'}", 'env_kwargs={"n_terms": "two"}'])
    _one_usage_line(code, capsys.readouterr().err, *expected)
    assert not (tmp_path / "run").exists()          # refused before anything was written


USER_ENVS = '''
from rlvr import Environment, RowSource, Task, register_env
from rlvr.verifiers import NumericMatch


@register_env("my-sums")
def my_sums(offset: int = 0):
    """Sums of my own, registered by a module that is not installed."""
    tasks = [Task(f"s{i}", prompt=f"{i}+{offset}?", answer=str(i + offset)) for i in range(3)]
    return Environment("my-sums", RowSource({"train": tasks}), [(NumericMatch(), 1.0)])
'''


def test_import_loads_a_users_environments_for_each_command(tmp_path, monkeypatch, capsys):
    """`--import my_envs` (found from the current directory, as `python -m` would) or
    `--import path/to/file.py`; pool workers import it again by name."""
    (tmp_path / "my_envs.py").write_text(USER_ENVS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))       # the folder is added to it
    monkeypatch.delitem(sys.modules, "my_envs", raising=False)
    assert main(["envs", "show", "my-sums", "--import", "my_envs"]) == 0
    assert "sample task id: s" in capsys.readouterr().out
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": "s1", "completion": "<answer>1</answer>"}\n'
                    '{"id": "s2", "completion": "<answer>5</answer>"}\n')
    out = tmp_path / "out.jsonl"
    code = main(["score", "--import", str(tmp_path / "my_envs.py"), "--env", "my-sums",
                 str(rows), "-o", str(out), "--workers", "1", "--no-progress"])
    assert code == 0, capsys.readouterr().err
    assert [json.loads(r)["score"] for r in out.read_text().splitlines()] == [1.0, 0.0]
    from rlvr.cli import build_parser
    for command in (["eval"], ["train"], ["make-prefs", "--env", "e", "-o", "o"]):
        assert build_parser().parse_args([*command, "--import", "my_envs"]).imports == ["my_envs"]
    code = main(["envs", "list", "--import", "no_such_module_here"])
    _one_usage_line(code, capsys.readouterr().err, "--import no_such_module_here: no module")


def test_envs_show_prints_an_episode_gold_as_a_transcript(capsys):
    assert main(["envs", "show", "tool-arithmetic"]) == 0
    out = capsys.readouterr().out
    assert "Episode(" not in out and "gold episode:" in out
    gold = out.split("gold episode:")[1]
    assert "[assistant] calls calculator({\"expression\": " in gold
    assert "[tool calculator] " in gold and "[assistant] Answer: " in gold


def test_a_missing_optional_dependency_names_its_extra(tmp_path, monkeypatch, capsys):
    """reasoning-gym environments and `rlvr eval --endpoint` without their packages: one line
    with the `pip install 'rlvr[...]'` that brings them, exit 2."""
    from rlvr.envs import reasoning_gym
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)    # `import reasoning_gym` fails
    reasoning_gym._dataset.cache_clear()
    code = main(["envs", "show", "reasoning-gym/chain_sum"])
    _one_usage_line(code, capsys.readouterr().err, "pip install 'rlvr[reasoning-gym]'")
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": "reasoning-gym/chain_sum/train/0/0", "completion": "x"}\n')
    code = main(["score", "--env", "reasoning-gym/chain_sum", str(rows), "-o",
                 str(tmp_path / "out.jsonl"), "--workers", "0", "--no-progress"])
    _one_usage_line(code, capsys.readouterr().err, "pip install 'rlvr[reasoning-gym]'")
    monkeypatch.setitem(sys.modules, "openai", None)
    code = main(["eval", "--env", "arithmetic", "--endpoint", "http://127.0.0.1:9/v1",
                 "--model", "m", "--tasks", "2", "--k", "1", "--no-progress"])
    _one_usage_line(code, capsys.readouterr().err, "--endpoint",
                    "openai package is not installed", "pip install 'rlvr[openai]'")


def test_a_hub_name_without_the_network_is_one_quick_line(tmp_path, monkeypatch, capsys):
    """No network (here: HF_ENDPOINT at a closed local port): no half minute of retries and no
    traceback, but one line saying what was tried and to pass a local path -- for a scored
    file and for an environment's dataset alike."""
    import socket
    import time
    import huggingface_hub.constants
    from rlvr import rows
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    for var in ("NO_PROXY", "no_proxy"):      # straight to the closed port, whatever the proxy
        monkeypatch.setenv(var, "127.0.0.1")
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(var, "")            # restored after the test: going offline sets one
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    datasets_config = pytest.importorskip("datasets.config")
    monkeypatch.setattr(datasets_config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets_config, "HF_DATASETS_OFFLINE", False)
    rows.hub_offline_reason.cache_clear()
    try:
        start = time.monotonic()
        code = main(["score", "--env", "math", "someorg/data", "-o", str(tmp_path / "o.jsonl"),
                     "--workers", "0", "--no-progress"])
        _one_usage_line(code, capsys.readouterr().err, "'someorg/data' names a Hugging Face Hub",
                        f"127.0.0.1:{port} did not answer", "pass a local path")
        code = main(["envs", "show", "gsm8k", "--env-arg", "data=someorg/gsm8k-copy"])
        _one_usage_line(code, capsys.readouterr().err, "'someorg/gsm8k-copy' names a Hugging Face")
        assert time.monotonic() - start < 30     # the hub client's retries take ~23 s a call
    finally:
        rows.hub_offline_reason.cache_clear()


def test_make_prefs_from_an_empty_file_says_0_rows(tmp_path, capsys):
    empty = tmp_path / "completions.jsonl"
    empty.write_text("\n")
    code = main(["make-prefs", "--env", "arithmetic", "--completions", str(empty),
                 "-o", str(tmp_path / "prefs.jsonl")])
    _one_usage_line(code, capsys.readouterr().err, "0 rows, nothing to pair")
    assert not (tmp_path / "prefs.jsonl").exists()


def test_the_command_line_keeps_openmp_from_spinning_on_a_busy_machine():
    # set before torch loads (the rlvr command imports rlvr.cli first), never over the user's
    # own setting, and never by importing the library itself
    import os
    import subprocess
    import sys
    probe = "import os, {m}; print(os.environ.get('GOMP_SPINCOUNT'))"
    env = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"}
    run = lambda module, extra=None: subprocess.run(
        [sys.executable, "-c", probe.format(m=module)], env={**env, **(extra or {})},
        capture_output=True, text=True, check=True).stdout.strip()
    assert run("rlvr.cli") == "10000"
    assert run("rlvr.cli", {"GOMP_SPINCOUNT": "500"}) == "500"
    assert run("rlvr") == "None" and run("rlvr.trainer") == "None"
