"""Preference pairs from a verifier (`rlvr make-prefs`).

Where a verifier exists, preferences need no annotators: sample several completions per prompt
(from a policy, or read them from a file), score them with the environment's reward, and pair
every completion that passed with one that failed *for the same prompt*. The pairs train a
reward model (`rlvr train-rm`) that can then be checked against the verifier it imitates --
and they give the tests real preference data without any download.

A completion is `correct` when its verdict is `ok` with score >= `threshold`, `incorrect` when
it scored below (including `unparsed`: no readable answer has earned its 0). Verdicts that
failed (timeout, error...) say nothing about the completion and are left out, counted.
"""
from __future__ import annotations

import json
import random
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rlvr.core import Completion, Task

__all__ = ["MakePrefsConfig", "MakePrefsSummary", "make_preferences", "read_completions",
           "sample_completions"]


@dataclass
class MakePrefsConfig:
    """Everything `rlvr make-prefs` needs; saved beside the output as OUTPUT.meta.json."""
    env: str
    """Registered environment whose reward labels the completions."""
    output: str
    """Preference JSONL to write (prompt, chosen, rejected, scores, ids)."""
    env_args: dict = field(default_factory=dict)
    """Keyword arguments for the environment factory."""
    completions: str | None = None
    """JSONL/Parquet of rows with `completion` and a task `id` (or `prompt` + `answer`)."""
    policy: str | None = None
    """Model (local path or hub id) to sample completions from, when no file is given."""
    n_prompts: int = 64
    """Prompts drawn from the environment when sampling from a policy."""
    samples: int = 4
    """Completions sampled per prompt."""
    split: str = "train"
    """The environment's split the prompts are drawn from."""
    seed: int = 0
    """Seeds the prompt draw, the sampling and the pair draw."""
    max_new_tokens: int = 256
    """Longest sampled completion, in tokens."""
    temperature: float = 1.0
    """Sampling temperature."""
    device: str = "cpu"
    """Where the policy samples: 'cpu' or 'cuda'."""
    max_pairs_per_prompt: int = 4
    """Cap on (correct, incorrect) pairs per prompt, drawn at random (seeded); 0 = all."""
    threshold: float = 1.0
    """A completion is correct when its score is at least this."""
    id_field: str = "id"
    """Field of a completions row holding the task id."""
    completion_field: str = "completion"
    """Field of a completions row holding the completion text."""
    answer_field: str = "answer"
    """Field of a completions row holding the gold answer (rows without a task id)."""

    def __post_init__(self):
        if (self.completions is None) == (self.policy is None):
            raise ValueError("give exactly one of completions (a file) or policy (a model)")
        if self.samples < 1 or self.n_prompts < 1 or self.max_pairs_per_prompt < 0:
            raise ValueError("samples and n_prompts must be >= 1, max_pairs_per_prompt >= 0")


@dataclass
class MakePrefsSummary:
    prompts: int = 0
    completions: int = 0
    correct: int = 0
    incorrect: int = 0
    failed: Counter = field(default_factory=Counter)
    prompts_without_pair: int = 0
    pairs: int = 0
    bad_rows: list = field(default_factory=list)

    def render(self) -> str:
        failed = ", ".join(f"{k}={v}" for k, v in self.failed.items()) or "none"
        lines = [f"prompts: {self.prompts}, completions: {self.completions} "
                 f"(correct {self.correct}, incorrect {self.incorrect}, failed: {failed})",
                 f"pairs written: {self.pairs}; prompts with no (correct, incorrect) pair: "
                 f"{self.prompts_without_pair}"]
        if self.bad_rows:
            lines.append(f"bad rows skipped: {len(self.bad_rows)}")
            lines += [f"  {m}" for m in self.bad_rows[:20]]
        return "\n".join(lines)


def read_completions(cfg: MakePrefsConfig, env) -> tuple[dict[str, tuple[Task, list]], list[str]]:
    """Group a completions file by task: {task id: (task, [Completion...])}, bad-row messages."""
    from rlvr.rows import BadRow, iter_rows
    groups: dict[str, tuple[Task, list]] = {}
    problems = []
    for line, row in iter_rows(cfg.completions):
        try:
            if isinstance(row, BadRow):
                raise ValueError(row.reason)
            if not isinstance(row, dict):
                raise ValueError(f"expected an object, got {type(row).__name__}")
            text = row.get(cfg.completion_field)
            if not isinstance(text, str):
                raise ValueError(f"field {cfg.completion_field!r} missing or not a string")
            task = env.task_from_row(row, cfg.id_field, cfg.answer_field)
        except (KeyError, ValueError, TypeError) as exc:
            problems.append(f"line {line}: {str(exc).strip(chr(39))}")
            continue
        key = task.id or json.dumps([task.prompt, task.answer], default=str)
        groups.setdefault(key, (task, []))[1].append(
            Completion(text, finish_reason=row.get("finish_reason") or "stop"))
    return groups, problems


def sample_completions(cfg: MakePrefsConfig, tasks: list[Task]) -> dict[str, tuple[Task, list]]:
    """Sample `cfg.samples` completions per task from `cfg.policy` with Hugging Face generate."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(cfg.policy)
    model = AutoModelForCausalLM.from_pretrained(cfg.policy).to(cfg.device).eval()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"      # generation continues from the right end
    torch.manual_seed(cfg.seed)
    groups = {}
    for task in tasks:
        if isinstance(task.prompt, str):
            text = task.prompt
        else:
            text = tokenizer.apply_chat_template(task.prompt, tokenize=False,
                                                 add_generation_prompt=True)
        enc = tokenizer(text, return_tensors="pt", add_special_tokens=isinstance(task.prompt, str))
        with torch.inference_mode():
            out = model.generate(**enc.to(cfg.device), do_sample=True,
                                 temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens,
                                 num_return_sequences=cfg.samples,
                                 pad_token_id=tokenizer.pad_token_id)
        new = out[:, enc["input_ids"].shape[1]:]
        completions = []
        for seq in new.tolist():
            stopped = tokenizer.eos_token_id in seq
            if stopped:
                seq = seq[:seq.index(tokenizer.eos_token_id)]
            completions.append(Completion(tokenizer.decode(seq, skip_special_tokens=True),
                                          token_ids=seq,
                                          finish_reason="stop" if stopped else "length"))
        groups[task.id] = (task, completions)
    return groups


def _pairs_for(task: Task, completions: list, verdicts: list, cfg: MakePrefsConfig,
               rng: random.Random, summary: MakePrefsSummary, env_version: str) -> list[dict]:
    good, bad = [], []
    for c, v in zip(completions, verdicts):
        if v.failed:
            summary.failed[v.status] += 1
        elif v.ok and v.score >= cfg.threshold:
            good.append((c, v))
        else:
            bad.append((c, v))
    summary.correct += len(good)
    summary.incorrect += len(bad)
    # Same text on both sides teaches nothing (and train-rm would skip it).
    combos = [(g, b) for g in good for b in bad if g[0].text != b[0].text]
    if cfg.max_pairs_per_prompt and len(combos) > cfg.max_pairs_per_prompt:
        combos = rng.sample(combos, cfg.max_pairs_per_prompt)
    if not combos:
        summary.prompts_without_pair += 1
    return [{"id": task.id, "prompt": task.prompt, "chosen": g.text, "rejected": b.text,
             "chosen_score": gv.score, "rejected_score": bv.score,
             "rejected_status": bv.status, "env": env_version, "verifier": gv.version}
            for (g, gv), (b, bv) in combos]


def make_preferences(cfg: MakePrefsConfig) -> MakePrefsSummary:
    """Write (correct, incorrect) pairs per prompt to `cfg.output`; return what happened."""
    from rlvr.envs.registry import load_env
    env = load_env(cfg.env, **cfg.env_args)
    summary = MakePrefsSummary()
    if cfg.completions:
        groups, summary.bad_rows = read_completions(cfg, env)
    else:
        groups = sample_completions(cfg, env.sample(cfg.n_prompts, cfg.split, cfg.seed))
    rng = random.Random(cfg.seed)
    out_path = Path(cfg.output)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    env_version = f"{env.name}@{env.version}"
    with open(out_path, "w", encoding="utf-8") as out:
        for task, completions in groups.values():
            verdicts = env.reward.score_batch([task] * len(completions), completions)
            summary.prompts += 1
            summary.completions += len(completions)
            for row in _pairs_for(task, completions, verdicts, cfg, rng, summary, env_version):
                out.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
                summary.pairs += 1
    meta = {"config": asdict(cfg), "summary": {**asdict(summary), "failed": dict(summary.failed)}}
    out_path.with_name(out_path.name + ".meta.json").write_text(
        json.dumps(meta, indent=2, default=str))
    for msg in summary.bad_rows[:20]:
        print(f"make-prefs: skipped {msg}", file=sys.stderr)
    return summary
