"""Reward-model training (`rlvr train-rm`): a Bradley-Terry model of pairwise preferences.

Given preference rows "for this prompt, `chosen` is better than `rejected`", learn a scalar
r(prompt, completion) such that P(chosen > rejected) = sigma(r_chosen - r_rejected) (Bradley and
Terry, 1952; the InstructGPT reward model, Ouyang et al. 2022, eq. 1). The loss is its negative
log-likelihood, optionally with a margin m that asks for a gap of at least m (Llama 2, Touvron
et al. 2023, eq. 2):

    loss = -log sigma(r_chosen - r_rejected - m)

The model is a `ScalarModel` from `rlvr.verifiers.reward_model` (one-logit classifier or
backbone + value head), rendered and tokenised exactly as `RewardModel` scores, so what is
trained is what is served. The output directory is a checkpoint `RewardModel(path)` loads.

Read top to bottom: config -> data -> loss -> loop (with eval, checkpoints and resume).
"""
from __future__ import annotations

import json
import math
import random
import shutil
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rlvr.rows import BadRow, iter_rows
from rlvr.verifiers.reward_model import ScalarModel, load_scalar_model, render_pair

__all__ = ["TrainRMConfig", "PreferencePair", "read_preferences", "bradley_terry_loss",
           "train_reward_model", "build_tiny_reward_model", "TrainRMResult"]


@dataclass
class TrainRMConfig:
    """Everything `rlvr train-rm` needs; saved in every checkpoint and in `train_rm.json`."""
    model: str
    """Starting checkpoint (local path or hub id), or `tiny` for a small random model with a
    character tokenizer (tests and examples: nothing to download)."""
    data: str
    """Preference rows: JSONL, Parquet, a `datasets` directory, or a hub dataset id."""
    output_dir: str
    """Where the trained model, checkpoints, metrics.jsonl and tensorboard/ go."""
    eval_data: str | None = None
    """Held-out preference rows; when unset `eval_fraction` of `data` is held out."""
    eval_fraction: float = 0.1
    """Share of `data` held out for evaluation when `eval_data` is unset."""
    holdout: str = "prompt"
    """Hold out whole prompts (`prompt`: no prompt is in both splits) or single `pair`s."""
    split: str = "train"
    """Split to read from a `datasets` input."""
    kind: str = "classifier"
    """`classifier` (one-logit sequence classifier) or `value_head` (backbone + scalar head)."""
    max_length: int = 512
    """Longest rendered pair in tokens; longer pairs are cut from the left (counted)."""
    batch_size: int = 8
    """Preference pairs per optimizer step."""
    lr: float = 1e-5
    """AdamW learning rate."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    warmup_steps: int = 0
    """Linear warm-up from 0 to `lr`; the rate is constant afterwards."""
    epochs: int = 1
    """Passes over the training pairs."""
    max_steps: int | None = None
    """Stop after this many steps (overrides `epochs`); raise it on resume to train on."""
    margin: float = 0.0
    """Margin m in -log sigma(r_c - r_r - m) for rows without their own `margin` field."""
    grad_clip: float = 1.0
    """Gradient-norm clip."""
    eval_every: int = 50
    """Held-out pairwise accuracy every N steps (and at the end)."""
    save_every: int = 100
    """Checkpoint every N steps (and at the end)."""
    keep_checkpoints: int = 2
    """Checkpoints kept in output_dir (the newest ones)."""
    seed: int = 0
    """Seeds the split, the data order and the head's initialisation."""
    device: str = "cpu"
    """'cpu' or 'cuda'."""
    dtype: str | None = None
    """Weights' dtype (float32, bfloat16, float16); unset: transformers' default for the checkpoint."""
    use_chat_template: bool = True
    """Render each pair through the tokenizer's chat template (prompt as the user turn, the
    response as the assistant's) when it has one."""
    tensorboard: bool = False
    """Also write metrics as TensorBoard events under output_dir/tensorboard (as `rlvr train`)."""
    progress: bool = True
    """Show a progress bar."""
    resume: bool = True
    """Continue from the newest checkpoint in output_dir when there is one; False deletes
    output_dir's checkpoints and metrics and starts over."""

    def __post_init__(self):
        if self.kind not in ("classifier", "value_head"):
            raise ValueError(f"kind must be 'classifier' or 'value_head', got {self.kind!r}")
        if self.holdout not in ("prompt", "pair"):
            raise ValueError("holdout must be 'prompt' or 'pair'")
        if not 0.0 <= self.eval_fraction < 1.0:
            raise ValueError("eval_fraction must be in [0, 1)")
        if self.batch_size < 1 or self.eval_every < 1 or self.save_every < 1 or self.epochs < 1:
            raise ValueError("batch_size, eval_every, save_every and epochs must be >= 1")


# Fields that may change when a run is resumed; any other change means "a different run".
_RESUMABLE_CHANGES = {"max_steps", "epochs", "eval_every", "save_every", "keep_checkpoints",
                      "tensorboard", "progress", "resume", "device"}


# --------------------------------------------------------------------------- data

@dataclass
class PreferencePair:
    """One preference: for `prompt` (text or chat messages), `chosen` beats `rejected`."""
    prompt: Any
    chosen: str
    rejected: str
    margin: float | None = None
    line: int = 0


def read_preferences(source: str, split: str = "train") -> tuple[list[PreferencePair], list[str]]:
    """All usable pairs, and one message per bad row ("line N: why") -- bad rows are skipped."""
    pairs, problems = [], []
    for line, row in iter_rows(source, split):
        try:
            pairs.append(to_pair(row, line))
        except ValueError as exc:
            problems.append(f"line {line}: {exc}")
    return pairs, problems


def to_pair(row: Any, line: int = 0) -> PreferencePair:
    """Normalise one row; raises ValueError saying what is wrong with it.

    Accepted forms: `prompt` (text or messages) with `chosen`/`rejected` as text or as
    assistant messages; or `chosen`/`rejected` as whole conversations with no `prompt`, whose
    common prefix is the prompt (the "implicit prompt" form of HH-RLHF-style data).
    """
    if isinstance(row, BadRow):
        raise ValueError(row.reason)
    if not isinstance(row, dict):
        raise ValueError(f"expected an object, got {type(row).__name__}")
    missing = [k for k in ("chosen", "rejected") if row.get(k) is None]
    if missing:
        raise ValueError(f"missing field(s) {missing}")
    prompt, chosen, rejected = row.get("prompt"), row["chosen"], row["rejected"]
    if prompt is None:
        if not (isinstance(chosen, list) and isinstance(rejected, list)):
            raise ValueError("missing field 'prompt' (needed unless chosen/rejected are "
                             "conversations)")
        prompt, chosen, rejected = _split_conversations(chosen, rejected)
    else:
        chosen, rejected = _reply_text(chosen, "chosen"), _reply_text(rejected, "rejected")
    if isinstance(prompt, str) and not prompt.strip():
        raise ValueError("empty prompt")
    if not isinstance(prompt, (str, list)):
        raise ValueError(f"prompt must be text or messages, got {type(prompt).__name__}")
    for name, text in (("chosen", chosen), ("rejected", rejected)):
        if not text.strip():
            raise ValueError(f"empty {name}")
    if chosen == rejected:
        raise ValueError("chosen and rejected are identical")
    margin = row.get("margin")
    if margin is not None and not (isinstance(margin, (int, float)) and math.isfinite(margin)):
        raise ValueError(f"margin must be a finite number, got {margin!r}")
    return PreferencePair(prompt, chosen, rejected, None if margin is None else float(margin), line)


def _reply_text(value: Any, name: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and isinstance(value[-1], dict) \
            and value[-1].get("role") == "assistant" and isinstance(value[-1].get("content"), str):
        return value[-1]["content"]
    raise ValueError(f"{name} must be text or messages ending in an assistant turn")


def _split_conversations(chosen: list, rejected: list) -> tuple[list, str, str]:
    common = 0
    while common < min(len(chosen), len(rejected)) - 1 and chosen[common] == rejected[common]:
        common += 1
    if common == 0:
        raise ValueError("chosen and rejected conversations share no prompt turns")
    if len(chosen) != common + 1 or len(rejected) != common + 1:
        raise ValueError("chosen and rejected must differ only in their final assistant turn")
    return (list(chosen[:common]), _reply_text(chosen, "chosen"),
            _reply_text(rejected, "rejected"))


def split_holdout(pairs: list[PreferencePair], fraction: float, by: str, seed: int
                  ) -> tuple[list[PreferencePair], list[PreferencePair]]:
    """(train, held-out). By prompt: whole prompts go to one side, so held-out accuracy
    measures prompts the model never saw, not pairs whose chosen text it memorised."""
    if fraction == 0.0 or len(pairs) < 2:
        return pairs, []
    keys = [json.dumps(p.prompt, sort_keys=True) if by == "prompt" else str(i)
            for i, p in enumerate(pairs)]
    groups = list(dict.fromkeys(keys))
    random.Random(seed).shuffle(groups)
    target, held, sizes, n = max(1, round(fraction * len(pairs))), set(), Counter(keys), 0
    for g in groups:
        if n >= target or len(held) == len(groups) - 1:
            break
        held.add(g)
        n += sizes[g]
    return ([p for p, k in zip(pairs, keys) if k not in held],
            [p for p, k in zip(pairs, keys) if k in held])


# --------------------------------------------------------------------------- loss

def bradley_terry_loss(r_chosen, r_rejected, margin=None):
    """Mean of -log sigma(r_chosen - r_rejected - margin); also the pairwise accuracy.

    `margin` is a float or a per-pair tensor (0 = plain Bradley-Terry). Computed with
    `logsigmoid`, which stays finite for large negative gaps where log(sigmoid(x)) is -inf.
    Accuracy counts a tie as wrong: a model that cannot tell the two apart has not learned it.
    """
    import torch.nn.functional as F
    gap = r_chosen - r_rejected
    if margin is not None:
        gap = gap - margin
    loss = -F.logsigmoid(gap).mean()
    accuracy = (r_chosen > r_rejected).float().mean()
    return loss, accuracy


# --------------------------------------------------------------------------- the tiny model

TINY_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def build_tiny_tokenizer():
    """A character-level tokenizer built offline (printable ASCII + chat specials)."""
    import string

    from rlvr.trainer.models.tiny import char_tokenizer
    specials = ["<pad>", "<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    chars = [c for c in string.printable if c not in "\x0b\x0c\r"]
    return char_tokenizer(specials, chars, r"[\s\S]", TINY_CHAT_TEMPLATE, register_specials=True)


def build_tiny_reward_model(out_dir: str | Path, kind: str = "classifier", *, hidden_size: int = 64,
                     layers: int = 2, heads: int = 4, max_positions: int = 1024, seed: int = 0,
                     causal_lm: bool = False) -> Path:
    """Save a small randomly initialised Llama-style model with a character tokenizer.

    `kind` classifier -> a one-logit sequence classifier; value_head -> a backbone plus a
    zero-initialised head; `causal_lm=True` -> a language model (a toy policy for make-prefs).
    """
    import torch
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForSequenceClassification

    from rlvr.trainer.models.tiny import tiny_llama_config
    tokenizer = build_tiny_tokenizer()
    config = tiny_llama_config(tokenizer, layers, hidden_size, heads, max_positions=max_positions,
                               tie_word_embeddings=False, num_labels=1)
    torch.manual_seed(seed)
    out = Path(out_dir)
    if causal_lm:
        AutoModelForCausalLM.from_config(config).save_pretrained(out)
        tokenizer.save_pretrained(out)
        return out
    if kind == "classifier":
        model = ScalarModel("classifier", AutoModelForSequenceClassification.from_config(config))
    else:
        head = torch.nn.Linear(hidden_size, 1)
        torch.nn.init.zeros_(head.weight), torch.nn.init.zeros_(head.bias)
        model = ScalarModel("value_head", AutoModel.from_config(config), head)
    return model.save(out, tokenizer)


# --------------------------------------------------------------------------- the loop

@dataclass
class TrainRMResult:
    """What a run did: its last metrics, the rows it skipped, and where the model is."""
    output_dir: str
    step: int
    metrics: dict = field(default_factory=dict)
    eval_metrics: dict = field(default_factory=dict)
    train_pairs: int = 0
    eval_pairs: int = 0
    bad_rows: list = field(default_factory=list)
    truncated_pairs: int = 0
    resumed_from: int | None = None


@dataclass
class _Encoded:
    chosen: list
    rejected: list
    margin: float


class _Run:
    """The state of one training run: model, optimizer, data, loggers."""

    def __init__(self, cfg: TrainRMConfig):
        self.cfg = cfg
        self.out = Path(cfg.output_dir)
        self.ckpt_root = self.out / "checkpoints"
        self.bad_rows: list[str] = []
        self.truncated = 0

    # ---------------------------------------------------------------- setup
    def load_data(self) -> None:
        cfg = self.cfg
        pairs, problems = read_preferences(cfg.data, cfg.split)
        self.bad_rows += [f"{cfg.data}: {p}" for p in problems]
        if cfg.eval_data:
            eval_pairs, eval_problems = read_preferences(cfg.eval_data, cfg.split)
            self.bad_rows += [f"{cfg.eval_data}: {p}" for p in eval_problems]
        else:
            pairs, eval_pairs = split_holdout(pairs, cfg.eval_fraction, cfg.holdout, cfg.seed)
        if not pairs:
            raise ValueError(f"no usable preference pairs in {cfg.data} "
                             f"({len(problems)} bad rows: {problems[:3]})")
        for msg in self.bad_rows[:20]:
            print(f"train-rm: skipped {msg}", file=sys.stderr)
        if len(self.bad_rows) > 20:
            print(f"train-rm: ... and {len(self.bad_rows) - 20} more bad rows", file=sys.stderr)
        self.train_pairs, self.eval_pairs = pairs, eval_pairs

    def load_model(self) -> int:
        """Build or load the model and optimizer; return the step to start from."""
        import torch
        cfg = self.cfg
        if not cfg.resume:   # starting over: an old run's checkpoints must not be resumed later
            shutil.rmtree(self.ckpt_root, ignore_errors=True)
        latest = self._latest_checkpoint()
        torch.manual_seed(cfg.seed)
        if latest is not None:
            state = torch.load(latest / "trainer_state.pt", weights_only=False)
            self._check_same_run(state["config"])
            source = str(latest)
        elif cfg.model == "tiny":
            source = str(build_tiny_reward_model(
                self.out / "tiny-init", cfg.kind, max_positions=max(1024, cfg.max_length),
                seed=cfg.seed))
        else:
            source = cfg.model
        self.model, self.tokenizer = load_scalar_model(
            source, cfg.kind, device=cfg.device, dtype=cfg.dtype, init_value_head=True)
        shutil.rmtree(self.out / "tiny-init", ignore_errors=True)   # rebuilt from the seed
        self.optimizer = torch.optim.AdamW(list(self.model.parameters()), lr=cfg.lr,
                                           weight_decay=cfg.weight_decay)
        if latest is None:
            return 0
        self.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        return int(state["step"])

    def _latest_checkpoint(self) -> Path | None:
        done = sorted(self.ckpt_root.glob("step-*/trainer_state.pt")) if self.ckpt_root.is_dir() \
            else []
        return done[-1].parent if done else None

    def _check_same_run(self, saved: dict) -> None:
        now = asdict(self.cfg)
        changed = [k for k in now if k not in _RESUMABLE_CHANGES and saved.get(k) != now[k]]
        if changed:
            raise ValueError(f"{self.out} holds a different run (changed: {changed}); use "
                             "another output_dir or --no-resume with an empty one")

    def encode(self) -> None:
        self.train_enc = self._encode_all(self.train_pairs)
        self.eval_enc = self._encode_all(self.eval_pairs)
        if not self.train_enc:
            raise ValueError("no training pair could be rendered; see the skipped rows above")
        if self.truncated:
            print(f"train-rm: warning: {self.truncated} of "
                  f"{2 * (len(self.train_enc) + len(self.eval_enc))} texts were longer than "
                  f"max_length={self.cfg.max_length} and were cut from the left", file=sys.stderr)

    def _encode_all(self, pairs: list[PreferencePair]) -> list[_Encoded]:
        """Tokenise every pair; one the chat template rejects is a bad row, skipped."""
        out = []
        for p in pairs:
            try:
                out.append(self._encode(p))
            except Exception as exc:   # e.g. a template that demands alternating roles
                msg = f"line {p.line}: cannot render: {type(exc).__name__}: {exc}"
                self.bad_rows.append(msg)
                print(f"train-rm: skipped {msg}", file=sys.stderr)
        return out

    def _encode(self, p: PreferencePair) -> _Encoded:
        ids = [self._tokens(p.prompt, text) for text in (p.chosen, p.rejected)]
        return _Encoded(ids[0], ids[1], self.cfg.margin if p.margin is None else p.margin)

    def _tokens(self, prompt, text: str) -> list[int]:
        templated = self.cfg.use_chat_template and bool(self.tokenizer.chat_template)
        ids = self.tokenizer(render_pair(self.tokenizer, prompt, text, self.cfg.use_chat_template),
                             add_special_tokens=not templated)["input_ids"]
        if len(ids) > self.cfg.max_length:
            self.truncated += 1
            ids = ids[-self.cfg.max_length:]
        return ids

    # ---------------------------------------------------------------- steps
    def total_steps(self) -> int:
        per_epoch = math.ceil(len(self.train_enc) / self.cfg.batch_size)
        return self.cfg.max_steps if self.cfg.max_steps is not None else per_epoch * self.cfg.epochs

    def batch_for(self, step: int) -> list[_Encoded]:
        """The pairs of optimizer step `step`: a pure function of (seed, step), so a resumed
        run sees exactly the batches the uninterrupted one would have."""
        n, bs = len(self.train_enc), self.cfg.batch_size
        per_epoch = math.ceil(n / bs)
        epoch, pos = divmod(step, per_epoch)
        order = list(range(n))
        random.Random(self.cfg.seed * 100_003 + epoch).shuffle(order)
        return [self.train_enc[i] for i in order[pos * bs:(pos + 1) * bs]]

    def rewards(self, batch: list[_Encoded]):
        """(r_chosen, r_rejected, margins) for a batch, in one forward pass of 2B rows."""
        import torch
        seqs = [e.chosen for e in batch] + [e.rejected for e in batch]
        width = max(map(len, seqs))
        ids = torch.full((len(seqs), width), self.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, s in enumerate(seqs):
            ids[row, :len(s)], mask[row, :len(s)] = torch.tensor(s), 1
        device = self.model.device
        r = self.model(ids.to(device), mask.to(device)).float()
        margins = torch.tensor([e.margin for e in batch], device=device)
        return r[:len(batch)], r[len(batch):], margins

    def train_step(self, step: int) -> dict:
        import torch
        start = time.perf_counter()
        self.model.train()
        lr = self.cfg.lr * min(1.0, (step + 1) / self.cfg.warmup_steps) \
            if self.cfg.warmup_steps else self.cfg.lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        r_c, r_r, margins = self.rewards(self.batch_for(step))
        loss, acc = bradley_terry_loss(r_c, r_r, margins)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(list(self.model.parameters()),
                                                   self.cfg.grad_clip)
        self.optimizer.step()
        return {"train/loss": loss.item(), "train/accuracy": acc.item(),
                "train/reward_margin": (r_c - r_r).mean().item(),
                "train/reward_mean": torch.cat([r_c, r_r]).mean().item(),
                "train/grad_norm": float(grad_norm), "train/lr": lr,
                "timing/step_s": time.perf_counter() - start}

    def evaluate(self) -> dict:
        """Pairwise accuracy, loss and mean reward gap on the held-out pairs."""
        import torch
        if not self.eval_enc:
            return {}
        self.model.eval()
        losses, correct, gaps = [], 0, []
        with torch.inference_mode():
            for b in range(0, len(self.eval_enc), self.cfg.batch_size):
                batch = self.eval_enc[b:b + self.cfg.batch_size]
                r_c, r_r, margins = self.rewards(batch)
                loss, acc = bradley_terry_loss(r_c, r_r, margins)
                losses.append(loss.item() * len(batch))
                correct += acc.item() * len(batch)
                gaps += (r_c - r_r).tolist()
        n = len(self.eval_enc)
        return {"eval/loss": sum(losses) / n, "eval/accuracy": correct / n,
                "eval/reward_margin": sum(gaps) / n, "eval/pairs": n}

    # ---------------------------------------------------------------- persistence
    def save_checkpoint(self, step: int) -> Path:
        import torch
        final = self.ckpt_root / f"step-{step:08d}"
        tmp = self.ckpt_root / f".tmp-step-{step:08d}"
        shutil.rmtree(tmp, ignore_errors=True)
        self.model.save(tmp, self.tokenizer)
        torch.save({"step": step, "optimizer": self.optimizer.state_dict(),
                    "torch_rng": torch.get_rng_state(), "config": asdict(self.cfg)},
                   tmp / "trainer_state.pt")
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)        # a checkpoint exists whole or not at all
        for old in sorted(self.ckpt_root.glob("step-*"))[:-self.cfg.keep_checkpoints]:
            shutil.rmtree(old, ignore_errors=True)
        return final


def train_reward_model(cfg: TrainRMConfig) -> TrainRMResult:
    """Train (or resume training) a reward model; the final model is saved in output_dir."""
    from transformers.utils import logging as hf_logging
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()     # "Writing model shards" at every checkpoint is noise
    try:
        return _train(cfg)
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def _train(cfg: TrainRMConfig) -> TrainRMResult:
    run = _Run(cfg)
    run.out.mkdir(parents=True, exist_ok=True)
    run.load_data()
    start = run.load_model()
    run.encode()
    total = run.total_steps()
    result = TrainRMResult(str(run.out), start, train_pairs=len(run.train_enc),
                           eval_pairs=len(run.eval_enc), bad_rows=run.bad_rows,
                           truncated_pairs=run.truncated, resumed_from=start or None)
    from rlvr.trainer.run.metrics import MetricsLogger     # the one logger of every training command
    logger = MetricsLogger(run.out, start, total, cfg.tensorboard, progress=False)
    bar = _progress(cfg, total, start)
    try:
        for step in range(start, total):
            metrics = run.train_step(step)
            done = step + 1
            if done % cfg.eval_every == 0 or done == total:
                result.eval_metrics = run.evaluate()
                metrics.update(result.eval_metrics)
            logger.log(done, metrics)
            result.step, result.metrics = done, metrics
            if done % cfg.save_every == 0 or done == total:
                run.save_checkpoint(done)
            if bar:
                bar.update(1)
                bar.set_postfix(bar_postfix(metrics, result.eval_metrics))
    finally:
        logger.close()
        if bar:
            bar.close()
    if start >= total and not result.eval_metrics:
        result.eval_metrics = run.evaluate()
    run.model.save(run.out, run.tokenizer)
    _write_summary(run.out, cfg, result)
    return result


def _write_summary(out: Path, cfg: TrainRMConfig, result: TrainRMResult) -> None:
    from rlvr import __version__
    (out / "train_rm.json").write_text(json.dumps(
        {"config": asdict(cfg), "rlvr_version": __version__, "result": asdict(result)},
        indent=2, default=str))


def bar_postfix(metrics: dict, eval_metrics: dict) -> dict:
    """What the bar shows: this step's loss and batch accuracy, and the held-out accuracy only
    once an evaluation has run (before it there is none to show, not a `nan`)."""
    out = {"loss": f"{metrics['train/loss']:.3f}"}
    if "train/accuracy" in metrics:
        out["batch_acc"] = f"{metrics['train/accuracy']:.2f}"
    if "eval/accuracy" in eval_metrics:
        out["eval_acc"] = f"{eval_metrics['eval/accuracy']:.2f}"
    return out


def _progress(cfg: TrainRMConfig, total: int, initial: int):
    if not cfg.progress:
        return None
    from tqdm import tqdm
    return tqdm(total=total, initial=initial, unit="step", desc="train-rm", file=sys.stderr,
                dynamic_ncols=True)
