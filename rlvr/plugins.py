"""Plugins: a registry's built-in modules and its entry-point group, imported once on first use.

rlvr's registries (audit strategies, monitor detectors) fill themselves by import: each
built-in module registers what it defines, and a third-party package adds its own through an
entry-point group (`[project.entry-points."rlvr.audit_strategies"]`). `Discovery` is that
"import them all, once" step, shared so every registry finds plugins the same way.
"""
from __future__ import annotations

import importlib
import threading
from typing import Iterable

__all__ = ["Discovery"]


class Discovery:
    """Calling it imports `package.module` for each built-in module, then loads every entry
    point of `group`; the first call does the work, later ones return at once."""

    def __init__(self, package: str, modules: Iterable[str], group: str):
        self.package, self.modules, self.group = package, tuple(modules), group
        self._done = False
        self._lock = threading.Lock()

    def __call__(self) -> None:
        if self._done:
            return
        with self._lock:
            if self._done:
                return
            self._done = True
            for module in self.modules:
                importlib.import_module(f"{self.package}.{module}")
            from importlib.metadata import entry_points
            for ep in entry_points(group=self.group):
                ep.load()
