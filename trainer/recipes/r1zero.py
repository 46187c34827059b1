"""The R1-Zero loop on a laptop CPU: GRPO on SmolLM2-135M-Instruct, live, then in pictures.

    python -m rlvr.trainer.recipes.r1zero                 # the README's main job (scripts/r1zero.sh)
    python -m rlvr.trainer.recipes.r1zero --tiny          # the same path on a tiny random model, seconds
    python -m rlvr.trainer.recipes.r1zero steps=20 lr=5e-6   # any TrainConfig field as KEY=VALUE

DeepSeek-R1-Zero's recipe (DeepSeek-AI 2025, section 2.2), scaled down: no SFT, the
think/answer template, two rule-based rewards -- accuracy (is the number in the answer right?)
and format (reasoning inside <think>...</think>, the answer after it) -- G samples per prompt,
group-normalised advantages. What to watch: the format being adopted, accuracy rising, and the
held-out greedy evaluation of the base model against the trained one at the end.

A run folder that already holds a run is never overwritten: the same settings with more steps
resume it from its checkpoint; anything else is refused unless `--overwrite` is given.
`R1ZERO_SETTINGS` says why each setting is what it is.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from rlvr.trainer.run.checkpoint import RunFolderError

__all__ = ["R1ZERO_SETTINGS", "TINY_SETTINGS", "RunFolderError", "r1zero_config",
           "think_tokenizer", "resume_point", "held_out_eval", "run", "summary_table", "eval_table", "main"]

R1ZERO_SETTINGS: dict = {
    "preset": "grpo",
    # Addition of numbers up to 20: SmolLM2-135M-Instruct answers about one in ten right at the
    # start, so a good share of the groups of 8 hold a right and a wrong answer and GRPO has
    # signal from step 1; far from 100%, so there is room to learn. Half of the 441 sums are
    # held out (test_fraction=0.5): the closing evaluation draws its distinct never-trained
    # problems from them.
    "env": "arithmetic",
    # Format at half the accuracy's weight (docs/r1zero.md, "the two rewards and their
    # weights"): at equal weights a well-formed wrong answer earned as much as a right one and
    # held-out accuracy fell (0.51 -> 0.49); at 0.5 it rose (0.51 -> 0.59), format adopted alike.
    "env_args": {"n_terms": 2, "max_value": 20, "ops": "+", "test_fraction": 0.5,
                   "prompt_style": "chat", "format_weight": 0.5},
    "steps": 8,
    "prompts_per_step": 4,
    "group_size": 8,
    # Room to think a little and answer.
    "max_completion_length": 64,
    # Below R1-Zero's 1.0: at 1.0 this small model's samples are almost never right (0 of 32 in
    # the first step, measured), so no group has a right answer to learn from.
    "temperature": 0.7,
    # Far above the 1e-6 of long GPU runs: 8 steps must move a 135M model visibly.
    "lr": 1e-5,
    # Memory (measured in benchmarks/README.md, "Trainer memory"); neither changes the update
    # (the same loss and gradients up to float rounding). Checkpointing drops one micro-batch's
    # activations that sat beside the weights, the reference, the gradients and AdamW's two
    # states; half a group per micro-batch (4) shrinks the logits and activations of each
    # backward further (the prompt is then forwarded twice per group).
    "micro_batch_size": 4,
    "gradient_checkpointing": True,
    # Freed activations go back to the OS at once (allocator.py; benchmarks/README.md, "Trainer
    # memory").
    "tune_allocator": True,
    "checkpoint_every": 0,      # only the final model is saved
    "log_completions": 8,
    "seed": 0,
}

# The tiny random model stops only by chance: 48 tokens leave most of its first step's
# completions stopped (12 left 75% cut, which the trainer rightly warns about).
TINY_SETTINGS: dict = {**R1ZERO_SETTINGS, "steps": 2, "prompts_per_step": 2, "group_size": 4,
                       "max_completion_length": 48, "lr": 1e-3, "tensorboard": False}

EVAL_TASKS, TINY_EVAL_TASKS = 100, 8
"""Distinct held-out (test-split, never trained on) problems of the closing evaluation."""

PRESET_LABELS = {"grpo": "GRPO", "dr_grpo": "Dr. GRPO", "dapo": "DAPO", "gspo": "GSPO",
                 "rloo": "RLOO", "reinforce": "REINFORCE", "ppo": "PPO"}

# What the bar and the table show: (label, metric name, format).
_ACCURACY = "rewards/numeric_match/mean"
_FORMAT = "think/well_formed_rate"
SUMMARY_ROWS = (("reward", "reward", ".3f"), ("accuracy", _ACCURACY, ".3f"),
                ("think well-formed", _FORMAT, ".3f"),
                ("mean length (tokens)", "completions/mean_length", ".1f"),
                ("clipped ratio", "completions/clipped_ratio", ".3f"),
                ("think unclosed", "think/unclosed_rate", ".3f"),
                ("think tokens", "think/mean_tokens", ".1f"),
                ("answer tokens", "answer/mean_tokens", ".1f"),
                ("entropy", "entropy", ".3f"), ("KL to reference", "kl", ".4f"))
EVAL_ROWS = (("pass@1 (greedy)", "pass@1", ".3f"), ("think well-formed", _FORMAT, ".3f"))
_SAME_RUN_EXEMPT = ("output_dir", "steps", "progress")   # what may differ when resuming


def r1zero_config(model: str, output_dir: str, tiny: bool = False, overrides: list[str] = (),
                  tokenizer: str = ""):
    """The resolved TrainConfig of the main job (KEY=VALUE overrides win)."""
    from rlvr.trainer.config import load_config, parse_overrides
    base = dict(TINY_SETTINGS if tiny else R1ZERO_SETTINGS)
    extra = parse_overrides(list(overrides))
    return load_config(None, {**base, "model": model, "tokenizer": tokenizer,
                              "output_dir": output_dir, "progress": False, **extra})


def resume_point(out: Path, cfg, overwrite: bool = False) -> Path | None:
    """The checkpoint to continue from, None for a fresh run, or RunFolderError.

    A folder without a run (no config.json, metrics or checkpoints) starts fresh; with
    `overwrite` an old run's files are removed first. A run with the same settings and a
    checkpoint short of `cfg.steps` is resumed; anything else is refused, naming the flag."""
    from rlvr.trainer.run.checkpoint import clear_run, holds_run, latest_checkpoint, read_state
    if not holds_run(out):
        return None
    if overwrite:
        clear_run(out)
        return None
    how = "pass --overwrite to replace it, or -o DIR to write a new run elsewhere"
    try:
        saved = json.loads((out / "config.json").read_text())["config"]
    except (OSError, ValueError, KeyError, TypeError):
        raise RunFolderError(f"{out} holds files of a run without a readable config.json; {how}")
    now = json.loads(json.dumps(cfg.to_dict(), default=str))
    # fields on one side only come from another rlvr version's config, not from the user
    changed = sorted(k for k in set(saved) & set(now)
                     if k not in _SAME_RUN_EXEMPT and saved[k] != now[k])
    if changed:
        diff = ", ".join(f"{k} {saved.get(k)!r} -> {now.get(k)!r}" for k in changed[:4])
        raise RunFolderError(f"{out} already holds a run with other settings ({diff}); {how}")
    try:
        ckpt = latest_checkpoint(out)
        done = int(read_state(ckpt)["step"])
    except (OSError, ValueError, KeyError):
        raise RunFolderError(f"{out} holds an unfinished run with no checkpoint to resume "
                             f"from; {how}") from None
    if done >= cfg.steps:
        raise RunFolderError(f"{out} already holds a finished run of {done} steps; give "
                             f"steps=N with N > {done} to continue it, or {how}")
    return ckpt


def _run_trainer(cfg, checkpoint: Path | None, eval_tasks: int) -> None:
    """Train with a bar showing the R1-Zero numbers every step, and evaluate the held-out
    problems greedily before training (the base model, logged as step 0) and after it."""
    from tqdm.auto import tqdm

    from rlvr.trainer.run.loop import Trainer
    desc = f"R1-Zero {PRESET_LABELS.get(cfg.preset, cfg.preset)}"   # the preset in use

    class R1ZeroTrainer(Trainer):
        def train(self):
            self.eval_s = None            # how long the closing evaluation will take, if known
            if not _eval_rows(self.run_dir, step=0):
                print(f"held-out eval of the base model ({eval_tasks} problems, greedy) ...",
                      flush=True)
                t0 = time.perf_counter()
                _log_eval(self.run_dir, 0, held_out_eval(self, eval_tasks))
                self.eval_s = time.perf_counter() - t0
            self.step_s, self.clock = [], time.perf_counter()
            self.bar = tqdm(total=self.cfg.steps, initial=self.step, desc=desc, unit="step",
                            dynamic_ncols=True, bar_format="{desc} {n_fmt}/{total_fmt} |{bar:20}| "
                                                           "{elapsed}{postfix}")
            self.bar.set_postfix_str(time_left(0, [], None) + " (known after the first step)")
            try:
                out = super().train()
            finally:
                self.bar.close()
            print(f"held-out eval of the trained policy ({eval_tasks} problems, greedy) ...",
                  flush=True)
            _log_eval(self.run_dir, self.step, held_out_eval(self, eval_tasks))
            return out

        def train_step(self):
            metrics, samples = super().train_step()
            now = time.perf_counter()
            self.step_s.append(now - self.clock)    # the step, and any checkpoint before it
            self.clock = now
            self.bar.update(1)
            self.bar.set_postfix_str(time_left(self.bar.total - self.bar.n, self.step_s,
                                               self.eval_s) + "  " + _postfix(metrics))
            return metrics, samples

    R1ZeroTrainer(cfg, checkpoint).train()


def time_left(steps_left: int, step_s: list[float], eval_s: float | None) -> str:
    """The bar's estimate of the time left: the steps still to run at the mean time of the
    steps so far, plus the closing held-out evaluation, as long as the opening one took (when
    this process ran it; a resumed run only says it is still to come)."""
    if not step_s:
        return "left: ?"
    left = steps_left * sum(step_s) / len(step_s) + (eval_s or 0.0)
    return f"~{_clock(left)} left" + (" + final eval" if eval_s is None else "")


def _clock(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m}:{s:02d}"


def held_out_eval(trainer, n_tasks: int) -> dict:
    """Greedy pass@1 and the well-formed format rate on `n_tasks` distinct test-split problems
    (the split training never draws from), one greedy completion each."""
    from rlvr.trainer.evaluation.evaluate import distinct_tasks
    from rlvr.trainer.run.metrics import think_metrics
    from rlvr.trainer.sampling.rollout import score
    env, cfg = trainer.env, trainer.cfg
    tasks = distinct_tasks(env, "test", n_tasks, cfg.seed)
    rollout = score(env, trainer.engine.generate(tasks, 1, cfg.max_completion_length,
                                                 greedy=True))
    right = sum(v.solved for v in rollout.verdicts)     # the answer, not the format
    texts = [c.text for c in rollout.completions]
    fmt = think_metrics(texts, trainer.tokenizer, env.parser, cfg.reflection_phrases)
    return {"pass@1": right / len(tasks), _FORMAT: fmt[_FORMAT], "tasks": len(tasks)}


def _log_eval(run_dir: Path, step: int, result: dict) -> None:
    with open(run_dir / "eval.jsonl", "a") as f:
        f.write(json.dumps({"step": step, **result}) + "\n")


def _eval_rows(run_dir: Path, step: int | None = None) -> list[dict]:
    path = run_dir / "eval.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if step is None or r.get("step") == step]


def _postfix(m: dict) -> str:
    def f(key, fmt):
        v = m.get(key)
        return "-" if v is None else format(v, fmt)
    return (f"reward {f('reward', '.2f')}  acc {f(_ACCURACY, '.2f')}  "
            f"think {f(_FORMAT, '.2f')}  len {f('completions/mean_length', '.0f')}")


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
        lines.append(_row(label, a, b, fmt))
    return "\n".join(lines)


def eval_table(evals: list[dict]) -> str:
    """The held-out evaluation: the base model (step 0) against the last evaluated policy."""
    base = next((r for r in evals if r.get("step") == 0), None)
    last = max((r for r in evals if r.get("step", 0) > 0), key=lambda r: r["step"], default=None)
    if base is None and last is None:
        return "(no held-out evaluation)"
    n = (last or base).get("tasks", "?")
    head = f"held-out, {n} never-trained problems, greedy"
    lines = [f"{head:<36}{'base':>7}{'step ' + str(last['step']) if last else '-':>11}"
             f"{'change':>10}"]
    for label, key, fmt in EVAL_ROWS:
        a = base.get(key) if base else None
        b = last.get(key) if last else None
        lines.append(_row(label, a, b, fmt, width=(36, 7, 11)))
    return "\n".join(lines)


def _row(label, a, b, fmt, width=(22, 14, 14)) -> str:
    show = lambda v: "-" if v is None else format(v, fmt)
    delta = "-" if a is None or b is None else format(b - a, "+" + fmt)
    return f"{label:<{width[0]}}{show(a):>{width[1]}}{show(b):>{width[2]}}{delta:>10}"


def _mean(rows: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return sum(vals) / len(vals) if vals else None


THINK_OPEN = "<think>"


def think_tokenizer(model: str, cache: Path) -> str:
    """A copy of `model`'s tokenizer whose chat template opens the assistant turn with
    `<think>`, as reasoning models' own templates do (DeepSeek-R1's distilled models prefill
    it the same way). Measured on SmolLM2-135M-Instruct with the R1 system prompt (24 samples at
    T = 0.7): without it no completion has a think block at all, so a format reward never
    fires and has nothing to teach; with it 2 of 24 close the block (1 of 24 well-formed), and
    GRPO has a rare success to push up. The completion starts inside the block, so well-formed
    means: reasoning, `</think>`, then the answer."""
    from transformers import AutoTokenizer
    out = cache / f"{Path(model).name}-think-template"
    tok = AutoTokenizer.from_pretrained(model)
    if not tok.chat_template:
        raise ValueError(f"{model} has no chat template to open the think block in")
    template = tok.chat_template + "{% if add_generation_prompt %}" + THINK_OPEN + "{% endif %}"
    probe = [{"role": "user", "content": "x"}]
    tok.chat_template = template
    if not tok.apply_chat_template(probe, add_generation_prompt=True,
                                   tokenize=False).endswith(THINK_OPEN):
        raise ValueError(f"{model}'s chat template does not end with the generation prompt; "
                         "cannot open the think block after it")
    if (out / "tokenizer_config.json").exists() and \
            AutoTokenizer.from_pretrained(out).chat_template == template:
        return str(out)
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=cache))   # written whole, then moved
    tok.save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return str(out)


def _model_path(tiny: bool, cache: Path) -> str:
    if tiny:
        from rlvr.trainer.models.tiny import build_tiny_model
        path = cache / "tiny-model"
        return str(path) if (path / "config.json").exists() else build_tiny_model(path)
    from rlvr.trainer.models.smollm import smollm2_folder
    return smollm2_folder(cache)


def default_output(tiny: bool) -> str:
    """Tiny mode never writes where the real run lives."""
    return "runs/r1zero-tiny" if tiny else "runs/r1zero"


def run(output_dir: str | None = None, tiny: bool = False, overrides: list[str] = (),
        cache_dir: str | None = None, overwrite: bool = False,
        eval_tasks: int | None = None) -> Path:
    """Train (or resume), evaluate base vs trained, plot, print the summary; returns the folder."""
    from rlvr.trainer.run.plots import plot_run
    from rlvr.trainer.models.smollm import default_cache_dir
    t0 = time.perf_counter()
    _quiet_transformers()
    cache = Path(cache_dir) if cache_dir else default_cache_dir()
    model = _model_path(tiny, cache)
    cfg = r1zero_config(model, output_dir or default_output(tiny), tiny, overrides,
                        tokenizer=think_tokenizer(model, cache))
    out = Path(cfg.output_dir)
    checkpoint = resume_point(out, cfg, overwrite)
    n_eval = eval_tasks or (TINY_EVAL_TASKS if tiny else EVAL_TASKS)
    rewards = _reward_weights(cfg)
    print(f"R1-Zero: {cfg.preset} on {cfg.env} {cfg.env_args}, model {model}\n"
          f"  rewards {rewards}; {cfg.steps} steps x {cfg.prompts_per_step} prompts x "
          f"{cfg.group_size} completions, <= {cfg.max_completion_length} tokens, lr {cfg.lr}, "
          f"torch threads {_threads()}; held-out eval on {n_eval} problems, greedy", flush=True)
    if checkpoint is not None:
        print(f"  resuming {out} from {checkpoint.name}", flush=True)
    _run_trainer(cfg, checkpoint, n_eval)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line]
    report = plot_run(out)
    print("\n" + summary_table(rows) + "\n\n" + eval_table(_eval_rows(out)))
    for note in report.notes:
        print(f"note: {note}")
    peak = max((r.get("memory/peak_gib") or 0 for r in rows), default=0)
    print(f"\nplots:  {report.files[0]}  (+{len(report.files) - 1} panels in {report.files[0].parent})")
    print(f"model:  {out / 'checkpoints'}   samples: {out / 'samples.jsonl'}")
    print(f"time:   {time.perf_counter() - t0:.0f} s" + (f", peak memory {peak:.1f} GiB" if peak else ""))
    return out


def _reward_weights(cfg) -> str:
    import rlvr
    env = rlvr.load_env(cfg.env, **cfg.env_args)
    return ", ".join(f"{r.name} x{w:g}" for r, w in env.rewards)


def _quiet_transformers() -> None:
    """The bar is the output: no per-load 'Loading weights' bars or deprecation chatter."""
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def _threads() -> int:
    import torch
    return torch.get_num_threads()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rlvr.trainer.recipes.r1zero", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tiny", action="store_true", default=os.environ.get("RLVR_TINY") == "1",
                   help="a tiny random model and 2 steps, written to runs/r1zero-tiny "
                        "(smoke test; also RLVR_TINY=1)")
    p.add_argument("-o", "--out", default=None,
                   help="run folder (default runs/r1zero, or runs/r1zero-tiny with --tiny)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a run already in the folder (default: resume it or refuse)")
    p.add_argument("--eval-tasks", type=int, default=None,
                   help=f"held-out problems of the closing evaluation (default {EVAL_TASKS}, "
                        f"{TINY_EVAL_TASKS} with --tiny)")
    p.add_argument("--cache", help="where converted models live (default $RLVR_CACHE or ~/.cache/rlvr)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="TrainConfig field overrides")
    args = p.parse_args(argv)
    if args.eval_tasks is not None and args.eval_tasks < 1:
        p.error("--eval-tasks must be >= 1")
    try:
        run(args.out, args.tiny, args.overrides, args.cache, args.overwrite, args.eval_tasks)
    except (ValueError, FileNotFoundError, ModuleNotFoundError) as exc:
        print(f"r1zero: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:       # the trainer's stop says what it kept (trainer/run/)
        print(f"{str(exc) or 'r1zero: interrupted'} (or rerun this command)", file=sys.stderr)
        return getattr(exc, "exit_code", 130)
    return 0


if __name__ == "__main__":
    sys.exit(main())
