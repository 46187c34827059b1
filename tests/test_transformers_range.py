"""The transformers range pyproject.toml declares is tested at both ends.

The rest of the suite runs on the newest release the installer picked (the upper end). This
test builds a small environment whose only difference is the range's lowest release -- a venv
layered over the suite's own, so torch and everything else are the same packages -- and runs
there the adapter's contract and one update on the fast path (no fallback warning), which
must equal the same update on the reference forward (public API only).
It installs that release from the package index on first use (kept in `.venv-transformers-low`
for the next run)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOW_VENV = ROOT / ".venv-transformers-low"


def declared_range() -> tuple[str, str]:
    """(lowest, first excluded) transformers versions from pyproject.toml."""
    text = (ROOT / "pyproject.toml").read_text()
    found = re.search(r'"transformers>=([\w.]+),\s*<([\w.]+)"', text)
    assert found, "pyproject.toml must declare transformers with both bounds: >=LOW,<HIGH"
    return found.group(1), found.group(2)


def test_the_range_has_both_bounds_and_the_suite_runs_inside_it():
    import transformers
    from packaging.version import Version
    low, high = declared_range()
    assert Version(low) <= Version(transformers.__version__) < Version(high)


def _layered_venv(version: str) -> Path:
    """A venv seeing this interpreter's packages, with transformers==`version` (and whatever
    that release requires in other versions) installed in front of them."""
    python = LOW_VENV / "bin" / "python"
    stamp = LOW_VENV / "transformers-version"
    if stamp.exists() and stamp.read_text() == version:
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(LOW_VENV)], check=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    base = sysconfig.get_paths()["purelib"]
    # addsitedir (not a bare path): the base's own .pth files run too (rlvr's editable install)
    Path(site, "_base_venv.pth").write_text(f"import site; site.addsitedir({base!r})\n")
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", f"transformers=={version}"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    stamp.write_text(version)
    return python


CHECK = textwrap.dedent("""
    import dataclasses, sys, tempfile, warnings
    import torch, transformers
    assert transformers.__version__ == sys.argv[1], transformers.__version__
    assert torch.__file__.startswith(sys.argv[2]), torch.__file__    # the suite's own torch
    from rlvr.trainer.forwards import hf_adapter
    from rlvr.trainer.config import TrainConfig
    from rlvr.trainer.forwards.fast import FastForward
    from rlvr.trainer.run.loop import Trainer
    from rlvr.trainer.forwards.reference import ReferenceForward
    from rlvr.trainer.models.loading import load_policy
    from rlvr.trainer.models.tiny import build_tiny_model
    out = tempfile.mkdtemp()
    model = build_tiny_model(out + "/model")
    hf_adapter.check_contract(load_policy(model, "float32", torch.device("cpu")))
    cfg = TrainConfig(model=model, output_dir=out + "/run", steps=1, prompts_per_step=2,
                      group_size=3, max_completion_length=8, reward_deadline_s=0,
                      progress=False, tensorboard=False,
                      env_kwargs={"n_terms": 2, "max_value": 9, "prompt_style": "base"})
    def update(tr, rollout):       # (metrics, the updated weights) of one update
        metrics = tr.update(tr.prepare(rollout), first=True)
        return metrics, torch.cat([p.detach().flatten() for p in tr.policy.parameters()])

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)   # a fallback warning fails the check
        warnings.filterwarnings("ignore", message=".*completions hit max_completion_length")
        tr = Trainer(cfg)
        assert isinstance(tr.forward, FastForward)
        rollout, _ = tr.collect()
        rollout.rewards = torch.tensor([1.0, 0.0, 0.5, 0.0, 1.0, 0.0])   # signal in every group
        ref = Trainer(dataclasses.replace(cfg, forward="reference", output_dir=out + "/ref"))
        assert isinstance(ref.forward, ReferenceForward)
        (fast_m, fast_w), (ref_m, ref_w) = update(tr, rollout), update(ref, rollout)
    assert fast_m["grad_norm"] > 0, fast_m
    for key in ("loss", "loss/policy", "grad_norm", "kl", "entropy"):       # fast == reference
        if key in fast_m:
            assert abs(fast_m[key] - ref_m[key]) <= 1e-5 * max(1.0, abs(ref_m[key])), (key, fast_m, ref_m)
    torch.testing.assert_close(fast_w, ref_w, rtol=1e-5, atol=1e-6)
    print("ok", transformers.__version__)
""")


def test_the_lowest_declared_transformers_runs_the_contract_and_a_training_step():
    low, _ = declared_range()
    python = _layered_venv(low)
    base = sysconfig.get_paths()["purelib"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run([str(python), "-c", CHECK, low, base], capture_output=True, text=True,
                          env=env, timeout=600, cwd=ROOT)
    assert proc.returncode == 0 and f"ok {low}" in proc.stdout, \
        proc.stdout[-2000:] + proc.stderr[-4000:]
