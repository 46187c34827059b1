"""The import layers (docs/architecture.md): every import, at module level or inside a function,
points down or sideways, never up; and no import cycle exists outside the CLI.

    floor  rlvr.{core, pool, pooled_reward, rows, usage, splits, stats, passk, boundary, plugins,
           ray_backend}
      1    rlvr.sandbox
      2    rlvr.verifiers
      3    rlvr.envs            (the registry lives here)
      4    rlvr.trainer, rlvr.scoring, rlvr.audit, rlvr.monitor, rlvr.integrations, rlvr.interop
    roof   rlvr.cli             (the one package that may import every folder)

`rlvr/__init__.py` is the public facade: it names its exports as strings and imports them on
first use, so it is not an edge of the graph.
"""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"rlvr": "rlvr", "envs": "rlvr.envs", "verifiers": "rlvr.verifiers",
           "trainer": "rlvr.trainer", "sandbox": "rlvr.sandbox"}
LAYERS = [("rlvr.cli", 5), ("rlvr.__main__", 5), ("rlvr.trainer", 4), ("rlvr.scoring", 4),
          ("rlvr.audit", 4), ("rlvr.monitor", 4), ("rlvr.integrations", 4), ("rlvr.interop", 4),
          ("rlvr.envs", 3), ("rlvr.verifiers", 2), ("rlvr.sandbox", 1), ("rlvr", 0)]


def layer(module: str) -> int:
    for prefix, level in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return level
    raise AssertionError(module)


def modules() -> dict[str, Path]:
    """Every rlvr module name -> its file (the component folders map into rlvr.*)."""
    out = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package, *parts])] = path
    return out


def imports(name: str, path: Path, known: dict) -> set[str]:
    """The rlvr modules `name` imports anywhere in its file (resolved to known modules)."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")[: len(name.split(".")) - node.level + is_package]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and target != "rlvr":
                found.add(target)
    return found


GRAPH = {name: imports(name, path, modules()) for name, path in modules().items()}


def test_the_graph_is_read():
    # the scan itself: a broken resolver would make every assertion below pass vacuously
    assert "rlvr.core" in GRAPH["rlvr.envs.registry"]
    assert "rlvr.envs.registry" in GRAPH["rlvr.scoring.run"]
    assert "rlvr.sandbox.base" in GRAPH["rlvr.verifiers.code"]


@pytest.mark.parametrize("name", sorted(GRAPH))
def test_imports_point_down(name):
    up = sorted(t for t in GRAPH[name] if layer(t) > layer(name))
    assert not up, f"{name} (layer {layer(name)}) imports from above: {up}"


def test_no_import_cycles_outside_the_cli():
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):   # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1 and not all(c.startswith("rlvr.cli") for c in component):
                cycles.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_no_file_over_600_lines():
    long = {str(p.relative_to(ROOT)): n for p in modules().values()
            if (n := len(p.read_text().splitlines())) > 600}
    assert not long, long
