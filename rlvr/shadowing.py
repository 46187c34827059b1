"""The one place rlvr imports a third-party package that a clone's own folder shadows.

rlvr's component folders sit at the clone's root (`envs/`, `verifiers/`, `trainer/`,
`sandbox/`) and install as `rlvr.envs`, `rlvr.verifiers`, ... . Python started in the clone's
root puts that root first on sys.path, so a top-level `import verifiers` would find the clone's
`verifiers/` folder (rlvr's own verifiers) instead of the third-party `verifiers` library that
`verifiers:<name>` environments load. `import_installed` finds the package as Python would
without the clone's folder -- a path search that skips the entries holding it, then the other
finders (editable installs) -- without editing sys.path, and registers it under its name.

The clone's root `__init__.py` uses it for `rlvr` itself: Python started in the folder above a
clone named `rlvr` finds the clone's root as a package `rlvr` before any install; that package
hands the name to the installed rlvr. This cannot be avoided without a swap: with no
`__init__.py` there, the root would be a namespace package that wins over an editable install's
finder (asked only after the path search), and `from rlvr import load_env` would fail. A regular
(wheel) install needs none of this.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["import_installed"]


def _holds(entry: str, name: str, ours: Path) -> bool:
    try:
        return (Path(entry or ".") / name).resolve() == ours
    except OSError:
        return False


def _spec(name: str, ours: Path):
    path = [entry for entry in sys.path if not _holds(entry, name, ours)]
    found = importlib.machinery.PathFinder.find_spec(name, path)
    if found is not None and found.origin:
        return found
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if finder is importlib.machinery.PathFinder or find is None:
            continue
        found = find(name, None)
        if found is not None and found.origin and Path(found.origin).resolve().parent != ours:
            return found
    return None


def import_installed(name: str, ours: Path) -> ModuleType:
    """The installed top-level package `name`, never the folder `ours` (a clone's own folder of
    that name). ImportError when it is not installed."""
    loaded = sys.modules.get(name)
    if loaded is not None and Path(getattr(loaded, "__file__", "") or "").resolve().parent != ours:
        return loaded
    spec = _spec(name, ours.resolve())
    if spec is None:
        raise ImportError(f"no installed package {name!r}", name=name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module        # what `import name` returns from now on
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module
