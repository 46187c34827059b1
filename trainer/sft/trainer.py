"""Supervised fine-tuning on verified completions (`rlvr sft`):

    for step in 1..steps:
        examples <- the next batch_size x grad_accumulation examples (seeded shuffle per epoch)
        for each micro-batch of batch_size examples:
            loss += NLL of its completion tokens / completion tokens of the whole step
            backward                                  # gradients accumulate
        theta <- AdamW step (norm clipped), learning-rate schedule step

The run folder is `rlvr train`'s: config.json, metrics.jsonl, eval.jsonl (held-out loss),
tensorboard/, checkpoints/step-N/policy (a transformers folder, or LoRA adapters), so
`rlvr eval --model RUN`, `rlvr export RUN`, `rlvr train model=RUN` and `rlvr plot RUN` take
it as they take an RL run. A checkpoint holds everything needed to continue exactly (weights,
optimizer, schedule, RNG, data cursor).
"""
from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

import torch

from rlvr.trainer.run.checkpoint import (latest_checkpoint, read_state, restore_trainer_state,
                                         seed_everything, write_checkpoint)
from rlvr.trainer.run.metrics import MetricsLogger, peak_memory_gib
from rlvr.trainer.models.loading import (add_lora, autocast, enable_checkpointing, load_lora, load_policy,
                      load_tokenizer, lora_dropout_active)
from rlvr.trainer.forwards.packing import packs
from rlvr.trainer.run import resume_config, run_steps, start_run, write_run_config
from rlvr.trainer.sft.batches import make_batch, nll_sum
from rlvr.trainer.sft.config import SFTConfig, load_sft_config
from rlvr.trainer.sft.data import Example, load_examples, split_held_out, truncate

__all__ = ["SFTTrainer", "sft", "resume_sft", "ExampleStream", "lr_factor", "summary_line"]


class ExampleStream:
    """Example indices in seeded-shuffled epochs, read as one endless stream from `cursor`
    (so a resumed run reads exactly what the uninterrupted one would have)."""

    def __init__(self, n: int, seed: int, cursor: int = 0):
        self.n, self.seed, self.cursor, self._orders = n, seed, cursor, {}

    def _order(self, epoch: int) -> list[int]:
        if epoch not in self._orders:
            order = list(range(self.n))
            random.Random(f"{self.seed}/{epoch}").shuffle(order)
            self._orders = {epoch: order}
        return self._orders[epoch]

    def take(self, k: int) -> list[int]:
        out = [self._order(i // self.n)[i % self.n] for i in range(self.cursor, self.cursor + k)]
        self.cursor += k
        return out


def lr_factor(step: int, warmup: int, total: int, schedule: str) -> float:
    """Multiplier of the learning rate at optimizer step `step` (0-based): linear warm-up
    over `warmup` steps, then constant, linear decay to 0 or a cosine to 0 at `total`."""
    if warmup and step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return 1.0 - progress if schedule == "linear" else 0.5 * (1.0 + math.cos(math.pi * progress))


class SFTTrainer:
    """One SFT run. `SFTTrainer(config).train()`; `SFTTrainer.resume(run_dir).train()`."""

    def __init__(self, config: SFTConfig, checkpoint: Path | None = None):
        self.cfg = cfg = config
        self.run_dir = Path(cfg.output_dir)
        seed_everything(cfg.seed)
        self.device = torch.device("cuda" if cfg.device == "auto" and torch.cuda.is_available()
                                   else "cpu" if cfg.device == "auto" else cfg.device)
        self.tokenizer = load_tokenizer(cfg.tokenizer or cfg.model)
        self.train_set, self.eval_set = self._load_data()
        self.steps = cfg.steps or math.ceil(cfg.epochs * len(self.train_set)
                                            / cfg.examples_per_step)
        self.policy = self._build_policy(checkpoint)
        if cfg.packing and not packs(self.policy):
            raise ValueError("packing needs the model's attention to take a block-diagonal mask "
                             "(sdpa or eager attention); set packing=false")
        trainable = [p for p in self.policy.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(trainable, lr=cfg.lr, betas=tuple(cfg.adam_betas),
                                           weight_decay=cfg.weight_decay,
                                           fused=self.device.type in ("cpu", "cuda"))
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: lr_factor(s, cfg.warmup_steps, self.steps, cfg.lr_schedule))
        self.stream = ExampleStream(len(self.train_set), cfg.seed)
        self.step = 0
        if checkpoint:
            state = read_state(checkpoint)
            self.step = state["step"]
            self.stream = ExampleStream(len(self.train_set), cfg.seed, cursor=state["cursor"])
            restore_trainer_state(checkpoint, None, self.optimizer, self.scheduler)  # RNG last
        self.run_dir.mkdir(parents=True, exist_ok=True)

    def _load_data(self) -> tuple[list[Example], list[Example]]:
        cfg, tok = self.cfg, self.tokenizer
        train = truncate(load_examples(cfg.data, tok, cfg.split), cfg.max_length)
        if cfg.eval_data:
            return train, truncate(load_examples(cfg.eval_data, tok, cfg.split), cfg.max_length)
        return split_held_out(train, cfg.eval_fraction, cfg.seed)

    def _build_policy(self, checkpoint: Path | None):
        """float32 master weights (bf16 only under autocast); LoRA adapters when lora_rank > 0."""
        cfg = self.cfg
        if cfg.lora_rank:
            base = load_policy(cfg.model, "float32", self.device)
            policy = (load_lora(base, str(checkpoint / "policy")) if checkpoint else
                      add_lora(base, cfg.lora_rank, cfg.lora_alpha, cfg.lora_dropout,
                               tuple(cfg.lora_target_modules)))
        else:
            policy = load_policy(str(checkpoint / "policy") if checkpoint else cfg.model,
                                 "float32", self.device)
        if cfg.gradient_checkpointing:
            enable_checkpointing(policy)
        return policy

    @classmethod
    def resume(cls, run_dir: str | Path, **overrides) -> "SFTTrainer":
        """Continue a run from its latest checkpoint (overrides: e.g. steps=200; only the
        fields in trainer/run/resume.py's RESUMABLE may change)."""
        cfg, ckpt = resume_config(run_dir, overrides, lambda d: load_sft_config(None, d),
                                  "rlvr sft")
        return cls(cfg, ckpt)

    # --- the loop ---------------------------------------------------------------------------
    def train(self) -> Path:
        cfg = self.cfg
        self._write_run_config()
        log = MetricsLogger(self.run_dir, self.step, self.steps, cfg.tensorboard, cfg.progress,
                            desc="rlvr sft", report_to=cfg.report_to, config=cfg.to_dict(),
                            bar_keys=("loss",))
        def one_step():
            log.log(self.step + 1, self.train_step())
            self.step += 1
            last = self.step == self.steps
            if self.eval_set and (last or (cfg.eval_every and self.step % cfg.eval_every == 0)):
                log.log(self.step, self.evaluate(), "eval.jsonl")
        try:
            if self.step == 0 and cfg.eval_every and self.eval_set:
                log.log(0, self.evaluate(), "eval.jsonl")      # the model before training
            run_steps(self, self.steps, one_step, cfg.checkpoint_every, "rlvr sft")
        finally:
            log.close()
        return self.run_dir

    def micro_batches(self, examples: list[Example]):
        """The step's examples, longest first (less padding), `batch_size` at a time."""
        cfg, pad = self.cfg, self.tokenizer.pad_token_id
        ordered = sorted(examples, key=len, reverse=True)
        return [make_batch(ordered[i:i + cfg.batch_size], pad, self.device, self.policy,
                           cfg.packing, cfg.max_length)
                for i in range(0, len(ordered), cfg.batch_size)]

    def train_step(self) -> dict:
        """One optimizer step: the pseudo-code at the top of this file."""
        cfg, t0 = self.cfg, time.perf_counter()
        at = self.stream.cursor
        examples = [self.train_set[i] for i in self.stream.take(cfg.examples_per_step)]
        micro = self.micro_batches(examples)
        n_targets = sum(mb.n_targets for mb in micro)
        total = 0.0
        with lora_dropout_active(self.policy, cfg.lora_rank > 0 and cfg.lora_dropout > 0):
            for mb in micro:
                with autocast(self.device, cfg.dtype):
                    loss = nll_sum(self.policy, mb) / n_targets
                loss.backward()
                total += float(loss.detach())
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm or float("inf"))
        lr = self.scheduler.get_last_lr()[0]
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        seconds = time.perf_counter() - t0
        seen = sum(mb.real_tokens for mb in micro)
        return {"loss": total, "grad_norm": float(grad_norm), "lr": lr,
                "tokens/trained": n_targets, "tokens/seen": seen,
                "epoch": (at + len(examples)) / len(self.train_set),
                "timing/step_s": seconds, "throughput/tokens_per_s": seen / seconds,
                "memory/peak_gib": peak_memory_gib()}

    @torch.no_grad()
    def evaluate(self) -> dict:
        """Mean NLL per completion token of the held-out examples."""
        nll, n = 0.0, 0
        for mb in self.micro_batches(self.eval_set):
            with autocast(self.device, self.cfg.dtype):
                nll += float(nll_sum(self.policy, mb))
            n += mb.n_targets
        return {"loss": nll / max(n, 1), "tokens": n, "examples": len(self.eval_set)}

    # --- checkpoints --------------------------------------------------------------------------
    def save_checkpoint(self) -> Path:
        """Weights (safetensors), optimizer, scheduler, RNG states, data cursor, step, config."""
        name = f"step-{self.step:06d}"
        state = {"step": self.step, "cursor": self.stream.cursor, "config": self.cfg.to_dict()}
        return write_checkpoint(self.run_dir / "checkpoints", name, policy=self.policy,
                                tokenizer=self.tokenizer, critic=None, optimizer=self.optimizer,
                                scheduler=self.scheduler, state=state)

    def _write_run_config(self) -> None:
        write_run_config(self.run_dir, self.cfg, kind="sft",
                         data={"train_examples": len(self.train_set),
                               "held_out_examples": len(self.eval_set), "steps": self.steps})


def sft(config: SFTConfig | str | Path | None = None, overwrite: bool = False,
        **overrides) -> Path:
    """Python API mirroring `rlvr sft`: an SFTConfig, or a TOML path, plus field overrides;
    returns the run folder. A folder that already holds a run is refused (`resume_sft`
    continues it), or with `overwrite` emptied of that run first.

    >>> sft(SFTConfig(data="verified.jsonl", steps=100))        # doctest: +SKIP
    """
    if isinstance(config, SFTConfig):
        cfg = load_sft_config(None, {**config.to_dict(), **overrides}) if overrides else config
    else:
        cfg = load_sft_config(config, overrides)
    return start_run(cfg, SFTTrainer, overwrite, "rlvr sft")


def summary_line(run_dir: str | Path, seconds: float) -> str:
    """What a finished run did, in one line: steps, the last step's loss, the time taken and
    where the trained model is (`seconds`: the caller's wall clock, loading included)."""
    run_dir = Path(run_dir)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()
            if line.strip()]
    loss = f"{rows[-1]['loss']:.4f}" if rows and rows[-1].get("loss") is not None else "n/a"
    try:
        model = latest_checkpoint(run_dir) / "policy"
    except FileNotFoundError:
        model = "no checkpoint written"
    return (f"sft: {rows[-1]['step'] if rows else 0} steps, final loss {loss}, "
            f"{seconds:.0f} s; model: {model}")


def resume_sft(run_dir: str | Path, **overrides) -> Path:
    """Python API mirroring `rlvr sft --resume RUN_DIR`."""
    return SFTTrainer.resume(run_dir, **overrides).train()

