"""scripts/setup.sh installs what each README command needs, once: the test extras for the
suite, the base package for the main job, and no pip work when the stamp already covers it."""
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _fake_checkout(tmp_path: Path, stamp: str | None) -> Path:
    """A copy of the script and pyproject.toml with a .venv whose `python` logs its arguments."""
    (tmp_path / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "calls.log"}\n')
    python.chmod(0o755)
    if stamp is not None:
        digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
        (tmp_path / ".venv" / ".rlvr-install-stamp").write_text(f"{digest} {stamp}\n")
    return tmp_path


def _setup(root: Path, *args) -> list[str]:
    subprocess.run(["bash", str(root / "scripts" / "setup.sh"), *args], check=True,
                   capture_output=True, env={**os.environ, "PYTHON": "false"})
    log = root / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_the_main_job_installs_the_base_package_and_the_suite_its_extras(tmp_path):
    base = _setup(_fake_checkout(tmp_path / "a", None), "--base")
    assert "-m pip install -e ." in base and not any("[test]" in c for c in base)
    full = _setup(_fake_checkout(tmp_path / "b", None))
    assert "-m pip install -e .[test]" in full


def test_the_stamp_skips_what_is_installed_and_only_that(tmp_path):
    # a test set-up covers the main job's needs: nothing to do
    assert _setup(_fake_checkout(tmp_path / "a", "[test]"), "--base") == []
    assert _setup(_fake_checkout(tmp_path / "b", "[test]")) == []
    assert _setup(_fake_checkout(tmp_path / "c", ""), "--base") == []
    # after the main job's base set-up, the test command still installs its extras
    assert "-m pip install -e .[test]" in _setup(_fake_checkout(tmp_path / "d", ""))
