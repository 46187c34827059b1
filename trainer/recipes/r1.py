"""DeepSeek-R1's pipeline on one environment: cold-start SFT, GRPO, rejection sampling, SFT.

    python -m rlvr.trainer.recipes.r1                          # runs/r1, the defaults below
    python -m rlvr.trainer.recipes.r1 --config configs/recipes/r1_arithmetic.toml
    python -m rlvr.trainer.recipes.r1 grpo_steps=32 'grpo={"lr": 5e-6}'   # R1Config fields

DeepSeek-R1 (DeepSeek-AI 2025, section 2.3) trains in four stages: (1) a cold start, SFT on a
few thousand long chain-of-thought traces so RL starts from readable reasoning; (2) reasoning-
oriented RL (GRPO, accuracy + format rewards); (3) rejection sampling from the RL checkpoint,
keeping only correct samples, then SFT on them; (4) a second RL stage. Here every trace that
teaches the student has been verified by the environment's own rewards: the cold-start traces
come from a teacher (the environment's solver by default, or any model, run or endpoint) through
`rlvr distill-data`, the rejection samples from the GRPO policy through the same builder.
Stage 4 is `rlvr train model=OUT/5-sft` (any preset).

Each stage writes its own folder under `output_dir` and a `done.json` when it has finished;
rerunning the recipe skips finished stages and redoes an unfinished one from its start.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path

from rlvr.usage import coerce

__all__ = ["R1Config", "STAGES", "run_r1", "main"]


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
    env_kwargs: dict = field(default_factory=lambda: {
        "n_terms": 2, "max_value": 999, "ops": "+", "parentheses": False, "format_weight": 0.5})
    """Keyword arguments for the environment factory."""
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

    def __post_init__(self):
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
    from ..models import resolve_model
    from ..smollm import default_cache_dir
    from .r1zero import think_tokenizer
    return think_tokenizer(resolve_model(cfg.model), default_cache_dir())


def cold_start_data(cfg: R1Config, out: Path, tok: str) -> Path:
    """Stage 1: verified traces from the cold-start teacher."""
    from ..verified_data import DistillDataConfig, build_verified_dataset
    return build_verified_dataset(DistillDataConfig(
        output=str(out / "traces.jsonl"), env=cfg.env, env_args=dict(cfg.env_kwargs),
        split="train", tasks=cfg.cold_start_tasks, teacher=cfg.cold_start_teacher,
        endpoint=cfg.cold_start_endpoint, k=cfg.cold_start_k, keep_per_task=1,
        max_completion_length=cfg.max_completion_length, tokenizer=tok, seed=cfg.seed,
        progress=False))


def _sft(cfg: R1Config, model: str, data: Path, out: Path, steps: int, tok: str) -> Path:
    """An SFT stage on `data` (verified rows), refusing an empty set with what to change."""
    from ..sft import SFTConfig, sft
    if not data.exists() or not data.read_text().strip():
        raise ValueError(f"{data} holds no verified sample to fine-tune on: raise grpo_steps, "
                         f"rejection_k or rejection_tasks, or choose an easier env_kwargs")
    return sft(SFTConfig(**{**cfg.sft, "model": model, "tokenizer": tok, "data": str(data),
                            "steps": steps, "seed": cfg.seed, "output_dir": str(out),
                            "progress": False}), overwrite=True)


def grpo(cfg: R1Config, model: str, out: Path) -> Path:
    """Stage 3: GRPO (accuracy + format reward) from the cold-start model."""
    from ..config import TrainConfig
    from ..loop import train
    return train(TrainConfig(**{**cfg.grpo, "preset": "grpo", "model": model, "env": cfg.env,
                                "env_kwargs": dict(cfg.env_kwargs), "steps": cfg.grpo_steps,
                                "max_completion_length": cfg.max_completion_length,
                                "seed": cfg.seed, "output_dir": str(out), "progress": False}),
                 overwrite=True)


def rejection_data(cfg: R1Config, policy: Path, out: Path) -> Path:
    """Stage 4: sample the GRPO policy, keep its verified completions."""
    from ..verified_data import DistillDataConfig, build_verified_dataset
    return build_verified_dataset(DistillDataConfig(
        output=str(out / "samples.jsonl"), env=cfg.env, env_args=dict(cfg.env_kwargs),
        split="train", tasks=cfg.rejection_tasks, teacher=str(policy), k=cfg.rejection_k,
        keep_per_task=cfg.rejection_keep, shortest_first=True, dedup=True,
        temperature=cfg.grpo.get("temperature", 1.0),
        max_completion_length=cfg.max_completion_length, seed=cfg.seed + 1, progress=False))


STAGES = ("1-cold-start-data", "2-cold-start-sft", "3-grpo", "4-rejection-data", "5-sft")
"""Stage folders under R1Config.output_dir, in order."""


def _stage(root: Path, name: str, work) -> Path:
    """Run `work(folder)` unless the stage finished before; returns what it produced."""
    folder = root / name
    marker = folder / "done.json"
    if marker.exists():
        return Path(json.loads(marker.read_text())["result"])
    folder.mkdir(parents=True, exist_ok=True)
    print(f"r1: stage {name} ...", file=sys.stderr, flush=True)
    result = Path(work(folder))
    marker.write_text(json.dumps({"result": str(result)}) + "\n")
    return result


def run_r1(cfg: R1Config) -> dict[str, Path]:
    """All five stages; returns each stage's product (data file or run folder)."""
    root = Path(cfg.output_dir)
    root.mkdir(parents=True, exist_ok=True)
    (root / "r1_config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=1) + "\n")
    tok = _tokenizer(cfg)
    done: dict[str, Path] = {}
    done[STAGES[0]] = _stage(root, STAGES[0], lambda d: cold_start_data(cfg, d, tok))
    done[STAGES[1]] = _stage(root, STAGES[1], lambda d: _sft(
        cfg, cfg.model, done[STAGES[0]], d, cfg.cold_start_sft_steps, tok))
    done[STAGES[2]] = _stage(root, STAGES[2], lambda d: grpo(cfg, str(done[STAGES[1]]), d))
    done[STAGES[3]] = _stage(root, STAGES[3], lambda d: rejection_data(cfg, done[STAGES[2]], d))
    start = cfg.model if cfg.final_sft_from == "base" else str(done[STAGES[2]])
    done[STAGES[4]] = _stage(root, STAGES[4], lambda d: _sft(
        cfg, start, done[STAGES[3]], d, cfg.final_sft_steps, tok))
    return done


def load_r1_config(path: str | None, overrides: list[str]) -> R1Config:
    """R1Config from an optional TOML file plus KEY=VALUE overrides (dict fields as JSON)."""
    values = tomllib.loads(Path(path).read_text()) if path else {}
    types = typing.get_type_hints(R1Config)
    for pair in overrides:
        key, sep, raw = pair.partition("=")
        if not sep or key not in types:
            raise ValueError(f"expected KEY=VALUE with KEY one of R1Config's fields, got {pair!r}")
        values[key] = coerce(key, raw, types[key])
    unknown = set(values) - set(types)
    if unknown:
        raise ValueError(f"unknown R1Config field(s) {sorted(unknown)}; see --help")
    return R1Config(**values)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rlvr.trainer.recipes.r1", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", help="TOML file of R1Config fields")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="R1Config field overrides")
    args = p.parse_args(argv)
    try:
        done = run_r1(load_r1_config(args.config, args.overrides))
    except (ValueError, FileNotFoundError, ModuleNotFoundError) as exc:
        print(f"r1: error: {exc}", file=sys.stderr)
        return 2
    for name, path in done.items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
