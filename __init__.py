"""The clone's folder seen as a package: it hands `import rlvr` to the installed rlvr.

Python started in the folder above a clone named `rlvr` (a clone at ~/rlvr, Python started in
~) finds this folder first on sys.path. Without this file the folder would become a namespace
package that shadows an editable install (whose finder Python asks only after its path search),
and `from rlvr import load_env` would fail. With it, the folder is a package whose only work is
to load the rlvr that is installed -- editable or not -- in its place, through rlvr/shadowing.py
(the one place rlvr steps past a clone's own folders; see docs/architecture.md, packaging).
Nothing here runs when Python starts anywhere else.
"""
import importlib.util
from pathlib import Path


def _load_installed() -> None:
    here = Path(__file__).resolve().parent
    spec = importlib.util.spec_from_file_location("_rlvr_shadowing", here / "rlvr" / "shadowing.py")
    shadowing = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shadowing)
    try:
        shadowing.import_installed("rlvr", here)
    except ImportError:
        raise ImportError(f"rlvr is not installed: {here} is its source folder; install it "
                          f"with `pip install -e {here}`", name="rlvr") from None


if __name__ == "rlvr":
    _load_installed()
