"""The clone's folder seen as a package: it hands `import rlvr` to the installed rlvr.

Python started in the folder above a clone named `rlvr` (a clone at ~/rlvr, Python started in
~) finds this folder first on sys.path. Without this file the folder would become a namespace
package that shadows an editable install (whose finder Python asks only after its path search),
and `from rlvr import load_env` would fail. With it, the folder is a package whose only work is
to load the rlvr that is installed -- editable or not, the one Python would have found had it
not started here -- in its place. Nothing here runs when Python starts anywhere else.
"""
import importlib.machinery
import importlib.util
import sys
from pathlib import Path


def _is_this_folder(entry: str, me: Path) -> bool:
    """Whether sys.path entry `entry` holds this clone as its `rlvr` package."""
    try:
        return (Path(entry or ".") / "rlvr" / "__init__.py").resolve() == me
    except OSError:
        return False


def _installed_spec():
    """How Python would import rlvr were this folder not on its path: the path search without
    the entries that hold this folder (a regular install), then the other finders (an
    editable install's); None when rlvr is not installed."""
    me = Path(__file__).resolve()
    path = [entry for entry in sys.path if not _is_this_folder(entry, me)]
    found = importlib.machinery.PathFinder.find_spec("rlvr", path)
    if found is not None and found.has_location:
        return found
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if finder is importlib.machinery.PathFinder or find is None:
            continue
        found = find("rlvr", None)
        if found is not None and found.has_location and Path(found.origin).resolve() != me:
            return found
    return None


def _load_installed() -> None:
    spec = _installed_spec()
    if spec is None:
        raise ImportError(f"rlvr is not installed: {Path(__file__).parent} is its source "
                          f"folder; install it with `pip install -e {Path(__file__).parent}`",
                          name="rlvr")
    module = importlib.util.module_from_spec(spec)
    sys.modules["rlvr"] = module      # the import statement returns what sys.modules holds
    spec.loader.exec_module(module)


if __name__ == "rlvr":
    _load_installed()
