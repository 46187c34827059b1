"""DeepSeek-R1's pipeline on one environment: cold-start SFT, GRPO, rejection sampling, SFT.

    python -m rlvr.trainer.recipes.r1                          # runs/r1, the defaults below
    python -m rlvr.trainer.recipes.r1 --config configs/recipes/r1_arithmetic.toml
    python -m rlvr.trainer.recipes.r1 grpo_steps=32 'grpo={"lr": 5e-6}'   # R1Config fields
    python -m rlvr.trainer.recipes.r1 --config ... --overwrite             # start again

DeepSeek-R1 (DeepSeek-AI 2025, section 2.3) trains in four stages: (1) a cold start, SFT on a
few thousand long chain-of-thought traces so RL starts from readable reasoning; (2) reasoning-
oriented RL (GRPO, accuracy + format rewards); (3) rejection sampling from the RL checkpoint,
keeping only correct samples, then SFT on them; (4) a second RL stage. Here every trace that
teaches the student has been verified by the environment's own rewards: the cold-start traces
come from a teacher (the environment's solver by default, or any model, run or endpoint) through
`rlvr distill-data`, the rejection samples from the GRPO policy through the same builder.
Stage 4 is `rlvr train model=OUT/5-sft` (any preset).

Each stage writes its own folder under `output_dir` and a `done.json` when it has finished
(trainer/run/stages.py): rerunning the recipe skips finished stages, continues an interrupted one
(an SFT or GRPO stage from its checkpoint, a data stage after its last verified row) and refuses
a changed setting of a finished stage. Every stage's config is checked before stage 1; Ctrl-C
stops as `rlvr train` does (the step in progress checkpointed, the resume command printed).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
import warnings
from dataclasses import InitVar, dataclass, field
from pathlib import Path

from rlvr.usage import UsageError

from rlvr.trainer.run import RunInterrupted, load_fields, resume_config, start_run
from rlvr.trainer.run.stages import Stage, StagedRun

__all__ = ["R1Config", "STAGES", "run_r1", "check_stages", "summary", "main"]

RECIPE = "python -m rlvr.trainer.recipes.r1"


@dataclass
class R1Config:
    """The recipe's knobs; `sft` and `grpo` pass any other SFTConfig / TrainConfig field."""
    model: str = "smollm2"
    """Base model: a folder, hub id, rlvr run folder or 'smollm2'."""
    tokenizer: str = "think"
    """Tokenizer whose chat template renders every stage's prompts; 'think' = the model's own
    with the assistant turn opened by `<think>` (as the main job); '' = the model's own."""
    env: str = "arithmetic"
    """Environment name (`rlvr envs list`): its train split feeds every stage."""
    env_args: dict = field(default_factory=lambda: {
        "n_terms": 2, "max_value": 999, "ops": "+", "parentheses": False, "format_weight": 0.5})
    """Keyword arguments for the environment factory (once env_kwargs)."""
    output_dir: str = "runs/r1"
    """Recipe folder: one sub-folder per stage."""
    seed: int = 0
    """Seeds every stage."""
    cold_start_teacher: str = "program"
    """Who writes the cold-start traces: 'program' (the environment's solver), a model, an rlvr
    run or, with cold_start_endpoint, the model name an OpenAI-compatible server serves."""
    cold_start_endpoint: str = ""
    """Base URL of the cold-start teacher's server; empty = local."""
    cold_start_tasks: int = 300
    """Train-split tasks the cold-start teacher is asked (one kept trace each at most)."""
    cold_start_k: int = 1
    """Samples per task from the cold-start teacher (a program writes its trace k times)."""
    cold_start_sft_steps: int = 75
    """SFT steps on the cold-start traces."""
    grpo_steps: int = 16
    """GRPO steps from the cold-start model."""
    rejection_tasks: int = 300
    """Train-split tasks sampled from the GRPO policy for rejection sampling."""
    rejection_k: int = 8
    """Samples per task drawn from the GRPO policy."""
    rejection_keep: int = 1
    """Verified samples kept per task (shortest first, deduplicated)."""
    final_sft_from: str = "base"
    """Model the last SFT starts from: 'base' (as DeepSeek-R1 retrained its base model on the
    rejection-sampled data) or 'grpo' (continue the RL policy)."""
    final_sft_steps: int = 75
    """SFT steps on the rejection-sampled data."""
    max_completion_length: int = 96
    """Generation limit of GRPO and rejection sampling."""
    sft: dict = field(default_factory=lambda: {
        "batch_size": 8, "lr": 5e-5, "lr_schedule": "cosine", "warmup_steps": 5,
        "max_length": 256, "packing": True})
    """Other SFTConfig fields for both SFT stages."""
    grpo: dict = field(default_factory=lambda: {
        "prompts_per_step": 4, "group_size": 8, "temperature": 0.7, "lr": 1e-5,
        "micro_batch_size": 4, "gradient_checkpointing": True, "checkpoint_every": 0})
    """Other TrainConfig fields for the GRPO stage."""
    progress: bool = True
    """Progress bars of the SFT, GRPO and sampling stages (the stage lines are always printed)."""
    env_kwargs: InitVar[dict | None] = None
    """The old name of env_args (still read, with a DeprecationWarning)."""

    def __post_init__(self, env_kwargs=None):
        if env_kwargs is not None:
            warnings.warn("R1Config's env_kwargs is now env_args", DeprecationWarning,
                          stacklevel=3)
            self.env_args = env_kwargs
        if self.final_sft_from not in ("base", "grpo"):
            raise ValueError(f"final_sft_from must be 'base' or 'grpo', got {self.final_sft_from!r}")
        for name in ("cold_start_tasks", "cold_start_k", "rejection_tasks", "rejection_k",
                     "rejection_keep", "max_completion_length"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")


def _tokenizer(cfg: R1Config) -> str:
    """The tokenizer every stage renders prompts with (see R1Config.tokenizer)."""
    if cfg.tokenizer != "think":
        return cfg.tokenizer
    from rlvr.trainer.models.loading import resolve_model
    from rlvr.trainer.models.smollm import default_cache_dir
    from rlvr.trainer.recipes.r1zero import think_tokenizer
    return think_tokenizer(resolve_model(cfg.model), default_cache_dir())


def _sft_config(cfg: R1Config, model: str, data: Path, out: Path, steps: int, tok: str):
    """An SFT stage's SFTConfig: the `sft` table plus the stage's own fields."""
    from rlvr.trainer.sft import load_sft_config
    try:
        return load_sft_config(None, {**cfg.sft, "model": model, "tokenizer": tok,
                                      "data": str(data), "steps": steps, "seed": cfg.seed,
                                      "output_dir": str(out), "progress": cfg.progress})
    except ValueError as exc:
        raise ValueError(f"sft table: {exc}") from None


def _grpo_config(cfg: R1Config, model: str, out: Path):
    """The GRPO stage's TrainConfig: the `grpo` table plus the stage's own fields."""
    from rlvr.trainer.config import TrainConfig, load_config
    fields = {**cfg.grpo, "preset": "grpo", "model": model, "env": cfg.env,
              "env_args": dict(cfg.env_args), "steps": cfg.grpo_steps,
              "max_completion_length": cfg.max_completion_length, "seed": cfg.seed,
              "output_dir": str(out), "progress": cfg.progress}
    try:
        return load_config(None, load_fields(TrainConfig, None, fields,
                                             extra=("preset", "algorithm"),
                                             help_hint="`rlvr train --help-config`"))
    except ValueError as exc:
        raise ValueError(f"grpo table: {exc}") from None


def _data_config(cfg: R1Config, output: Path, **fields):
    from rlvr.trainer.verified_data import DistillDataConfig
    return DistillDataConfig(output=str(output), env=cfg.env, env_args=dict(cfg.env_args),
                             split="train", max_completion_length=cfg.max_completion_length,
                             progress=cfg.progress, **fields)


def _cold_start_config(cfg: R1Config, out: Path, tok: str):
    return _data_config(cfg, out / "traces.jsonl", tasks=cfg.cold_start_tasks,
                        teacher=cfg.cold_start_teacher, endpoint=cfg.cold_start_endpoint,
                        k=cfg.cold_start_k, keep_per_task=1, tokenizer=tok, seed=cfg.seed)


def _rejection_config(cfg: R1Config, policy: str, out: Path):
    return _data_config(cfg, out / "samples.jsonl", tasks=cfg.rejection_tasks, teacher=policy,
                        k=cfg.rejection_k, keep_per_task=cfg.rejection_keep,
                        shortest_first=True, dedup=True,
                        temperature=cfg.grpo.get("temperature", 1.0), seed=cfg.seed + 1)


def check_stages(cfg: R1Config) -> None:
    """Build every stage's config now (nothing loads), so a typo or a wrong type in the `sft`
    or `grpo` table is one line before stage 1, not an error in stage 3."""
    root = Path(cfg.output_dir)
    _cold_start_config(cfg, root / STAGES[0], "")
    for steps in (cfg.cold_start_sft_steps, cfg.final_sft_steps):
        _sft_config(cfg, cfg.model, root / "data.jsonl", root / STAGES[1], steps, "")
    _grpo_config(cfg, cfg.model, root / STAGES[2])
    _rejection_config(cfg, cfg.model, root / STAGES[3])


def cold_start_data(cfg: R1Config, out: Path, tok: str) -> Path:
    """Stage 1: verified traces from the cold-start teacher (resumes after its last row)."""
    from rlvr.trainer.verified_data import build_verified_dataset
    return build_verified_dataset(_cold_start_config(cfg, out, tok))


def _continue_or_start(run_cfg, make, build, out: Path) -> Path:
    """Train `run_cfg` in `out`: from the checkpoint an interrupted stage left (the same
    settings, or refused by the resume policy), or from its start."""
    if (out / "checkpoints" / "latest").exists():
        again, ckpt = resume_config(out, run_cfg.to_dict(), build, RECIPE)
        return make(again, ckpt).train()
    return start_run(run_cfg, make, overwrite=True, command=RECIPE)


def _sft(cfg: R1Config, model: str, data: Path, out: Path, steps: int, tok: str) -> Path:
    """An SFT stage on `data` (verified rows), refusing an empty set with what to change."""
    from rlvr.trainer.sft import SFTTrainer, load_sft_config
    if not data.exists() or not data.read_text().strip():
        raise ValueError(f"{data} holds no verified sample to fine-tune on: raise grpo_steps, "
                         f"rejection_k or rejection_tasks, or choose an easier env_args")
    return _continue_or_start(_sft_config(cfg, model, data, out, steps, tok), SFTTrainer,
                              lambda d: load_sft_config(None, d), out)


def grpo(cfg: R1Config, model: str, out: Path) -> Path:
    """Stage 3: GRPO (accuracy + format reward) from the cold-start model."""
    from rlvr.trainer.config import load_config
    from rlvr.trainer.run.loop import Trainer
    return _continue_or_start(_grpo_config(cfg, model, out), Trainer,
                              lambda d: load_config(None, d), out)


def rejection_data(cfg: R1Config, policy: Path, out: Path) -> Path:
    """Stage 4: sample the GRPO policy, keep its verified completions."""
    from rlvr.trainer.verified_data import build_verified_dataset
    return build_verified_dataset(_rejection_config(cfg, str(policy), out))


STAGES = ("1-cold-start-data", "2-cold-start-sft", "3-grpo", "4-rejection-data", "5-sft")
"""Stage folders under R1Config.output_dir, in order."""

_ENV = ("env", "env_args", "seed", "max_completion_length")
USES = {STAGES[0]: ("model", "tokenizer", *_ENV, "cold_start_teacher", "cold_start_endpoint",
                    "cold_start_tasks", "cold_start_k"),
        STAGES[1]: ("model", "tokenizer", "seed", "sft", "cold_start_sft_steps"),
        STAGES[2]: ("model", *_ENV, "grpo", "grpo_steps"),
        STAGES[3]: (*_ENV, "grpo", "rejection_tasks", "rejection_k", "rejection_keep"),
        STAGES[4]: ("model", "tokenizer", "seed", "sft", "final_sft_from", "final_sft_steps")}
"""The R1Config fields each stage reads (a finished stage refuses a change to them)."""


def _stages(cfg: R1Config, done: dict, tok) -> list[Stage]:
    """The five stages; `tok()` resolves the tokenizer when a stage first needs it."""
    final_from = lambda: cfg.model if cfg.final_sft_from == "base" else str(done[STAGES[2]])
    work = {
        STAGES[0]: lambda d: cold_start_data(cfg, d, tok()),
        STAGES[1]: lambda d: _sft(cfg, cfg.model, done[STAGES[0]], d, cfg.cold_start_sft_steps,
                                  tok()),
        STAGES[2]: lambda d: grpo(cfg, str(done[STAGES[1]]), d),
        STAGES[3]: lambda d: rejection_data(cfg, done[STAGES[2]], d),
        STAGES[4]: lambda d: _sft(cfg, final_from(), done[STAGES[3]], d, cfg.final_sft_steps,
                                  tok())}
    return [Stage(name, USES[name], work[name]) for name in STAGES]


def run_r1(cfg: R1Config, overwrite: bool = False) -> dict[str, Path]:
    """All five stages; returns each stage's product (data file or run folder). Every stage's
    config is checked first; `overwrite` removes the stages an earlier run made."""
    check_stages(cfg)
    settings = {k: v for k, v in dataclasses.asdict(cfg).items() if k != "progress"}
    run = StagedRun(Path(cfg.output_dir), settings, RECIPE, record="r1_config.json")
    done: dict[str, Path] = {}
    resolved: list[str] = []
    tok = lambda: resolved[0] if resolved else resolved.append(_tokenizer(cfg)) or resolved[0]
    stages = _stages(cfg, done, tok)
    run.start(stages, overwrite)
    for i, stage in enumerate(stages, 1):
        try:
            done[stage.name] = run.run(stage, i, len(stages))
        except KeyboardInterrupt as exc:
            raise RunInterrupted(f"r1: interrupted in stage {stage.name} "
                                 f"({_kept(Path(cfg.output_dir) / stage.name)})",
                                 getattr(exc, "exit_code", 130) - 128) from None
    return done


def _kept(folder: Path) -> str:
    """What an interrupted stage keeps for the rerun that continues it."""
    latest = folder / "checkpoints" / "latest"
    if latest.exists():
        return f"its checkpoint {latest.read_text().strip()} is kept"
    if any(folder.glob("*.jsonl")):
        return "the rows verified so far are kept"
    return "nothing of it was kept"


def _jsonl_rows(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.strip()) if path.exists() else 0


def _last(run: Path, key: str):
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()
            if line.strip()] if (run / "metrics.jsonl").exists() else []
    return next((r[key] for r in reversed(rows) if key in r), None), len(rows)


def summary(cfg: R1Config, done: dict[str, Path]) -> str:
    """The final table: each stage's product, time and numbers."""
    lines = [f"{'stage':<18} {'time':>8}  numbers  (product)"]
    for name, product in done.items():
        marker = json.loads((Path(cfg.output_dir) / name / "done.json").read_text())
        seconds = marker.get("seconds")
        took = f"{int(seconds) // 60}:{int(seconds) % 60:02d}" if seconds is not None else "-"
        if name in (STAGES[0], STAGES[3]):
            numbers = f"{_jsonl_rows(product)} verified rows"
        elif name == STAGES[2]:
            reward, steps = _last(product, "reward")
            numbers = f"reward {reward:.3f} at step {steps}" if reward is not None else "-"
        else:
            loss, steps = _last(product, "loss")
            numbers = f"loss {loss:.4f} at step {steps}" if loss is not None else "-"
        lines.append(f"{name:<18} {took:>8}  {numbers}  ({product})")
    return "\n".join(lines)


def load_r1_config(path: str | None, overrides: list[str] | dict) -> R1Config:
    """R1Config from an optional TOML file plus KEY=VALUE overrides (dict fields as JSON),
    through the run harness's loader (trainer/run/loader.py)."""
    return R1Config(**load_fields(R1Config, path, overrides, help_hint=f"`{RECIPE} --help`"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=RECIPE, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", help="TOML file of R1Config fields")
    p.add_argument("--overwrite", action="store_true",
                   help="remove the stages an earlier run made in output_dir and start again")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="R1Config field overrides")
    argv = sys.argv[1:] if argv is None else list(argv)
    args, extras = p.parse_known_args(argv)     # KEY=VALUE pairs may follow the flags
    if any(a.startswith("-") or "=" not in a for a in extras):
        p.error(f"unrecognized arguments: {' '.join(extras)}")
    try:
        cfg = load_r1_config(args.config, args.overrides + extras)
        done = run_r1(cfg, overwrite=args.overwrite)
    except (ValueError, FileNotFoundError, ModuleNotFoundError, UsageError) as exc:
        print(f"r1: error: {exc}", file=sys.stderr)     # an env's arguments: at stage 1's start
        return 2
    except KeyboardInterrupt as exc:
        again = " ".join([RECIPE, *map(shlex.quote, [a for a in argv if a != "--overwrite"])])
        print(f"{str(exc) or 'r1: interrupted'}; resume with: {again}", file=sys.stderr)
        return getattr(exc, "exit_code", 130)
    print(summary(cfg, done))
    return 0


if __name__ == "__main__":
    sys.exit(main())
