"""`import rlvr` with Python started in the folder above a clone named `rlvr` (a clone at
~/rlvr, Python started in ~): the installed rlvr wins over the clone's folder, whichever way it
was installed. The clone is stood in for by a link named `rlvr` to this checkout."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _python_in_parent(tmp_path, code, *flags, env=None):
    parent = tmp_path / "home"
    parent.mkdir()
    (parent / "rlvr").symlink_to(ROOT, target_is_directory=True)
    return subprocess.run([sys.executable, *flags, "-c", code], cwd=parent, capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})


def test_the_editable_install_wins_over_the_clones_folder(tmp_path):
    out = _python_in_parent(tmp_path, "import rlvr; from rlvr import load_env; "
                                      "print(rlvr.__file__); print(load_env('arithmetic').name)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(ROOT / "rlvr" / "__init__.py"), "arithmetic"]


def test_a_regular_install_wins_over_the_clones_folder(tmp_path):
    site = tmp_path / "site" / "rlvr"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("WHERE = 'installed'\n")
    out = _python_in_parent(tmp_path, "import rlvr; print(rlvr.WHERE)",
                            env={"PYTHONPATH": str(tmp_path / "site")})
    assert out.returncode == 0 and out.stdout.strip() == "installed", out.stderr


def test_without_an_install_the_error_says_how_to_install(tmp_path):
    out = _python_in_parent(tmp_path, "import rlvr", "-S")      # -S: no site-packages at all
    assert out.returncode == 1
    assert "rlvr is not installed" in out.stderr and "pip install -e" in out.stderr
