"""The R1-Zero loop on a laptop CPU: GRPO on SmolLM2-135M-Instruct, live, then in pictures.

    python -m rlvr.trainer.r1zero                 # the README's main job (scripts/r1zero.sh)
    python -m rlvr.trainer.r1zero --tiny          # the same path on a tiny random model, seconds
    python -m rlvr.trainer.r1zero steps=20 lr=5e-6   # any TrainConfig field as KEY=VALUE

DeepSeek-R1-Zero's recipe, scaled down: no SFT, the think/answer instruction in the prompt, a
rule-based reward (is the number in the answer right?), G samples per prompt, group-normalised
advantages. What to watch: accuracy on never-seen prompts (every step draws fresh ones), response
length, and how often the completion keeps the <think>...</think> format.

Settings are sized for ~10 minutes on 2 cores (a step of 4 prompts x 8 completions x 64 tokens
costs about a minute there); `R1ZERO_SETTINGS` says why each one is what it is.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

__all__ = ["R1ZERO_SETTINGS", "TINY_SETTINGS", "r1zero_config", "run", "summary_table", "main"]

R1ZERO_SETTINGS: dict = {
    "algorithm": "grpo",
    # Addition of numbers up to 20: SmolLM2-135M-Instruct answers about one in ten right at the
    # start (6/64 held-out greedy, measured), so a good share of the groups of 8 hold a right and a
    # wrong answer and GRPO has signal from step 1; far from 100%, so there is room to learn.
    # Half of the 441 sums are held out (test_fraction=0.5) so that an evaluation of 200
    # distinct never-trained problems exists (benchmarks/r1zero_cpu.py).
    "env": "arithmetic",
    "env_kwargs": {"n_terms": 2, "max_value": 20, "ops": "+", "test_fraction": 0.5},
    "steps": 8,
    "prompts_per_step": 4,
    "group_size": 8,
    # Room to think a little and answer. At the start about half the completions ramble past it
    # (47% in the measured first step); learning to answer inside it is what the first steps
    # teach (6% clipped by step 4, benchmarks/README.md).
    "max_completion_length": 64,
    # Below R1-Zero's 1.0: at 1.0 this small model's samples are almost never right (0 of 32 in
    # the first step, measured), so no group has a right answer to learn from; at 0.7 sampling
    # stays close to the greedy answer, which is right about one time in ten.
    "temperature": 0.7,
    # Far above the 1e-6 of long GPU runs: 8 steps must move a 135M model visibly.
    "lr": 1e-5,
    "micro_batch_size": 16,
    "checkpoint_every": 0,      # only the final model is saved
    "log_completions": 8,
    "seed": 0,
}

TINY_SETTINGS: dict = {**R1ZERO_SETTINGS, "steps": 2, "prompts_per_step": 2, "group_size": 4,
                       "max_completion_length": 12, "lr": 1e-3, "tensorboard": False}

# What the bar and the table show: (label, metric name, format). "accuracy" is the answer
# reward's mean (the only weighted component of the arithmetic environment).
_ACCURACY = "rewards/numeric_match/mean"
SUMMARY_ROWS = (("reward", "reward", ".3f"), ("accuracy", _ACCURACY, ".3f"),
                ("mean length (tokens)", "completions/mean_length", ".1f"),
                ("clipped ratio", "completions/clipped_ratio", ".3f"),
                ("think well-formed", "think/well_formed_rate", ".3f"),
                ("think unclosed", "think/unclosed_rate", ".3f"),
                ("think tokens", "think/mean_tokens", ".1f"),
                ("answer tokens", "answer/mean_tokens", ".1f"),
                ("entropy", "entropy", ".3f"), ("KL to reference", "kl", ".4f"))


def r1zero_config(model: str, output_dir: str, tiny: bool = False, overrides: list[str] = ()):
    """The resolved TrainConfig of the main job (KEY=VALUE overrides win)."""
    from .config import load_config, parse_overrides
    base = dict(TINY_SETTINGS if tiny else R1ZERO_SETTINGS)
    preset = base.pop("algorithm")
    extra = parse_overrides(list(overrides))
    preset = extra.pop("preset", extra.pop("algorithm", preset))
    return load_config(None, {**base, "preset": preset, "model": model, "output_dir": output_dir,
                              "progress": False, **extra})


def _bar_trainer(total: int):
    """A Trainer whose every step also updates a progress bar with the R1-Zero numbers."""
    from tqdm.auto import tqdm

    from .loop import Trainer

    class ProgressTrainer(Trainer):
        def train_step(self):
            metrics, samples = super().train_step()
            bar.update(1)
            bar.set_postfix_str(_postfix(metrics))
            return metrics, samples

    bar = tqdm(total=total, desc="R1-Zero GRPO", unit="step", dynamic_ncols=True,
               bar_format="{desc} {n_fmt}/{total_fmt} |{bar:20}| {elapsed}<{remaining}{postfix}")
    return ProgressTrainer, bar


def _postfix(m: dict) -> str:
    def f(key, fmt):
        v = m.get(key)
        return "-" if v is None else format(v, fmt)
    return (f"reward {f('reward', '.2f')}  acc {f(_ACCURACY, '.2f')}  "
            f"len {f('completions/mean_length', '.0f')}  think {f('think/well_formed_rate', '.2f')}")


def summary_table(rows: list[dict]) -> str:
    """Start vs end of the run: the mean of the first and last quarter of the steps (a single
    step of 32 samples is too noisy to compare on its own)."""
    if not rows:
        return "(no steps logged)"
    q = max(1, len(rows) // 4)
    head, tail = rows[:q], rows[-q:]
    span = lambda part: (f"step {part[0]['step']}" if len(part) == 1
                         else f"steps {part[0]['step']}-{part[-1]['step']}")
    lines = [f"{'metric':<22}{span(head):>14}{span(tail):>14}{'change':>10}"]
    for label, key, fmt in SUMMARY_ROWS:
        a, b = _mean(head, key), _mean(tail, key)
        if a is None and b is None:
            continue
        show = lambda v: "-" if v is None else format(v, fmt)
        delta = "-" if a is None or b is None else format(b - a, "+" + fmt)
        lines.append(f"{label:<22}{show(a):>14}{show(b):>14}{delta:>10}")
    return "\n".join(lines)


def _mean(rows: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return sum(vals) / len(vals) if vals else None


def _model_path(tiny: bool, cache: Path) -> str:
    if tiny:
        from .tiny import build_tiny_model
        path = cache / "tiny-model"
        return str(path) if (path / "config.json").exists() else build_tiny_model(path)
    from .smollm import smollm2_folder
    return smollm2_folder(cache)


def run(output_dir: str = "runs/r1zero", tiny: bool = False, overrides: list[str] = (),
        cache_dir: str | None = None) -> Path:
    """Train, plot, print the summary; returns the run folder."""
    import json

    from .plots import plot_run
    from .smollm import default_cache_dir
    t0 = time.perf_counter()
    _quiet_transformers()
    cache = Path(cache_dir) if cache_dir else default_cache_dir()
    model = _model_path(tiny, cache)
    cfg = r1zero_config(model, output_dir, tiny, overrides)
    out = Path(cfg.output_dir)
    for stale in ("metrics.jsonl", "eval.jsonl", "samples.jsonl", "plots", "checkpoints"):
        p = out / stale            # a previous run here is replaced, not appended to
        shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
    print(f"R1-Zero: {cfg.algorithm} on {cfg.env} {cfg.env_kwargs}, model {model}\n"
          f"  {cfg.steps} steps x {cfg.prompts_per_step} prompts x {cfg.group_size} completions, "
          f"<= {cfg.max_completion_length} tokens, lr {cfg.lr}, torch threads "
          f"{_threads()}", flush=True)
    trainer_cls, bar = _bar_trainer(cfg.steps)
    try:
        trainer_cls(cfg).train()
    finally:
        bar.close()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line]
    report = plot_run(out)
    print("\n" + summary_table(rows))
    for note in report.notes:
        print(f"note: {note}")
    print(f"\nplots:  {report.files[0]}  (+{len(report.files) - 1} panels in {report.files[0].parent})")
    print(f"model:  {out / 'checkpoints'}   samples: {out / 'samples.jsonl'}")
    print(f"time:   {time.perf_counter() - t0:.0f} s")
    return out


def _quiet_transformers() -> None:
    """The bar is the output: no per-load 'Loading weights' bars or deprecation chatter."""
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def _threads() -> int:
    import torch
    return torch.get_num_threads()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rlvr.trainer.r1zero", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tiny", action="store_true", default=os.environ.get("RLVR_TINY") == "1",
                   help="a tiny random model and 2 steps (smoke test; also RLVR_TINY=1)")
    p.add_argument("-o", "--out", default="runs/r1zero", help="run folder (default runs/r1zero)")
    p.add_argument("--cache", help="where converted models live (default $RLVR_CACHE or ~/.cache/rlvr)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="TrainConfig field overrides")
    args = p.parse_args(argv)
    try:
        run(args.out, args.tiny, args.overrides, args.cache)
    except (ValueError, FileNotFoundError, ModuleNotFoundError) as exc:
        print(f"r1zero: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
