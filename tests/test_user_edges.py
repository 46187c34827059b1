"""What a new user hits on plausible mistakes: one line and exit 2, nothing written."""
import json

import pytest

torch = pytest.importorskip("torch")

from rlvr.cli import main  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")   # see conftest.py


def _one_error_line(capsys, command: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"rlvr {command}: error:"), err
    return err


@pytest.mark.parametrize("command", [
    ["eval", "--tasks", "2", "--n", "1", "--k", "1", "--no-progress"],
    ["train", "steps=1", "progress=false"],
    ["sft", "data=rlvr/data/arithmetic_sample.jsonl", "steps=1", "progress=false"]])
def test_a_model_that_is_a_file_is_one_line_at_once_and_writes_nothing(command, tmp_path,
                                                                        capsys):
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"not a model")
    out = tmp_path / "run"
    model = ["--model", str(weights)] if command[0] == "eval" else [f"model={weights}",
                                                                   f"output_dir={out}"]
    assert main(command + model) == 2
    err = _one_error_line(capsys, command[0])
    assert "is a file, not a model folder" in err and str(weights) in err
    assert not out.exists()      # exit 2: nothing written, not even an empty folder


def test_train_with_a_model_that_cannot_load_leaves_no_output_folder(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", f"model={tmp_path / 'no' / 'such'}", f"output_dir={out}", "steps=1",
                 "progress=false"]) == 2
    _one_error_line(capsys, "train")
    assert not out.exists()


def test_plot_passk_given_a_run_folder_is_one_line(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    assert main(["plot", "passk", str(tmp_path / "run")]) == 2
    err = _one_error_line(capsys, "plot")
    assert "is a folder" in err and "rlvr eval -o" in err
