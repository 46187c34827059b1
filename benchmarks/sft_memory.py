"""Where `rlvr sft`'s peak RSS goes, phase by phase, at the distillation doc's settings.

SmolLM2-135M-Instruct with the think-opening tokenizer, batch 8, max_length 256, packing, lr 1e-4,
cosine schedule with 5 warm-up steps (docs/distillation.md, step 2), on verified column-addition
traces (`rlvr distill-data --teacher program`). Phases are charged by memory_phases.PhaseProfiler
(a thread sampling /proc/self/status); the last line is the process's peak RSS (ru_maxrss),
what `memory/peak_gib` reports.

    .venv/bin/python benchmarks/sft_memory.py TRACES.jsonl [--steps 4] [KEY=VALUE ...]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

DOC = {"model": "smollm2", "batch_size": 8, "max_length": 256, "packing": True, "lr": 1e-4,
       "lr_schedule": "cosine", "warmup_steps": 5, "progress": False, "tensorboard": False,
       "checkpoint_every": 0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    args = ap.parse_intermixed_args()
    from memory_phases import PhaseProfiler
    prof = PhaseProfiler().start()
    import torch

    from rlvr.trainer.run.metrics import peak_memory_gib
    from rlvr.trainer.models.loading import resolve_model
    from rlvr.trainer.recipes.r1zero import think_tokenizer
    from rlvr.trainer.sft import trainer as sft_trainer
    from rlvr.trainer.sft.config import load_sft_config, parse_sft_overrides
    from rlvr.trainer.models.smollm import default_cache_dir
    prof.wrap(sft_trainer, "load_policy", "load policy weights")
    prof.wrap(sft_trainer.SFTTrainer, "_load_data", "load data")
    prof.wrap(sft_trainer, "nll_sum", "forward")
    prof.wrap(torch.Tensor, "backward", "backward")
    prof.wrap(torch.optim.AdamW, "step", "optimizer step")
    tok = think_tokenizer(resolve_model("smollm2"), default_cache_dir())
    with tempfile.TemporaryDirectory() as out:
        cfg = load_sft_config(None, {**DOC, "tokenizer": tok, "data": args.data, "output_dir": out,
                                     "steps": args.steps, **parse_sft_overrides(args.overrides)})
        sft_trainer.SFTTrainer(cfg).train()
    prof.stop()
    print(prof.table())
    print(f"peak RSS (ru_maxrss): {peak_memory_gib():.2f} GiB")


if __name__ == "__main__":
    main()
