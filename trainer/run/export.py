"""`rlvr export RUN --merge -o DIR`: a run's latest policy as a plain transformers folder.

A full fine-tune's checkpoint already is one (copied as it is). A LoRA run's checkpoint holds only
the adapters; `merge=True` loads the run's base model, adds the adapters and folds them into the
weights (peft's `merge_and_unload`), so the result loads with `AutoModelForCausalLM` alone.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

__all__ = ["export_run"]


def export_run(run_dir: str | Path, out: str | Path, merge: bool = False) -> Path:
    """Write the run's latest policy to `out` (a transformers folder); return `out`."""
    from rlvr.trainer.run.checkpoint import latest_checkpoint
    run_dir, out = Path(run_dir), Path(out)
    policy = latest_checkpoint(run_dir) / "policy"
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} exists and is not empty; choose a new folder")
    if not (policy / "adapter_config.json").exists():      # full fine-tune: already a model folder
        shutil.copytree(policy, out, dirs_exist_ok=True)
        return out
    if not merge:
        raise ValueError(f"{run_dir} is a LoRA run (its checkpoint holds adapters only): pass "
                         "--merge to fold them into the base model")
    from rlvr.trainer.models.loading import load_lora, load_policy, load_tokenizer
    base = json.loads((run_dir / "config.json").read_text())["config"]["model"]
    model = load_lora(load_policy(base, "float32", "cpu"), str(policy)).merge_and_unload()
    model.save_pretrained(out, safe_serialization=True)
    load_tokenizer(str(policy)).save_pretrained(out)
    return out
