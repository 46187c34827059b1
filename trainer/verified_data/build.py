"""Building the dataset in three resumable stages, each leaving a file beside the output:

1. **sample** -> OUTPUT.candidates.jsonl: k teacher completions per task, one task's rows
   written (and fsync'd) together with `rlvr eval`'s sample store, so a kill loses at most the
   task in flight and a rerun samples only the tasks not yet on disk. Each row carries the task
   `id` and its `completion`: the file is an `rlvr score` input.
2. **score** -> OUTPUT.scored.jsonl: that file through `rlvr score`'s own path
   (`rlvr.scoring.score_file`: the same rewards, worker pool, deadlines and verdict statuses),
   which resumes after its last finished row.
3. **select** -> OUTPUT: the solved rows (`Verdict.solved`: status `ok` and the answer reward
   full), deduplicated, shortest first, at most `keep_per_task` per task, in TRL's
   prompt-completion format with each row's verdict. Chosen again from every scored row on each
   run and written atomically, so changing only the selection options never samples again.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, field
from itertools import groupby
from pathlib import Path

from rlvr.monitor.integrity import TraceScreen
from rlvr.scoring import ScoreConfig, score_file

from rlvr.trainer.evaluation.eval_records import SampleStore, TaskRecord, task_seeds
from rlvr.trainer.evaluation.evaluate import distinct_tasks
from rlvr.trainer.verified_data.config import DistillDataConfig
from rlvr.trainer.verified_data.summary import DistillSummary, TaskCount
from rlvr.trainer.verified_data.teachers import Teacher, make_teacher

__all__ = ["build_verified_dataset", "build", "side_paths", "select", "training_row"]


@dataclass(frozen=True)
class SidePaths:
    candidates: Path
    scored: Path
    summary: Path


def side_paths(output: str | Path) -> SidePaths:
    """OUT.jsonl's side files: OUT.candidates.jsonl, OUT.scored.jsonl, OUT.summary.json."""
    out = Path(output)
    stem = out.with_name(out.name.removesuffix(".jsonl"))
    return SidePaths(*(stem.with_name(stem.name + suffix) for suffix in
                       (".candidates.jsonl", ".scored.jsonl", ".summary.json")))


def build_verified_dataset(config: DistillDataConfig, teacher: Teacher | None = None) -> Path:
    """Sample, verify and select (see the module docstring); returns the output path.
    `teacher` replaces the one the config names (any object with `Teacher`'s methods)."""
    build(config, teacher)
    return Path(config.output)


def build(cfg: DistillDataConfig, teacher: Teacher | None = None) -> DistillSummary:
    """`build_verified_dataset`, returning the summary (also written to OUT.summary.json)."""
    import rlvr
    env = rlvr.load_env(cfg.env, **cfg.env_args)
    if cfg.split not in env.source.splits:
        raise ValueError(f"environment {cfg.env!r} has no split {cfg.split!r}; "
                         f"it has {list(env.source.splits)}")
    paths = side_paths(cfg.output)
    tasks = distinct_tasks(env, cfg.split, cfg.tasks, cfg.seed)
    teacher = teacher or make_teacher(cfg, env)    # a bad teacher fails before any file
    try:
        store = SampleStore(paths.candidates, cfg.sampling_identity())  # refuses other settings
        failed = _sample(cfg, tasks, teacher, store)
    finally:
        teacher.close()
    if paths.candidates.stat().st_size:
        score_file(ScoreConfig(env=cfg.env, input=str(paths.candidates),
                               output=str(paths.scored), env_args=cfg.env_args,
                               workers=cfg.workers, progress=cfg.progress))
    screen = TraceScreen(env, cfg.env, drop=cfg.integrity == "drop") \
        if cfg.integrity != "off" else None
    summary = _select_all(cfg, {t.id: t for t in tasks}, paths, teacher.name, screen)
    summary.failed_tasks = failed
    paths.summary.write_text(json.dumps({"config": asdict(cfg), **summary.to_dict()}, indent=1))
    if cfg.datasets_dir:
        _save_datasets(Path(cfg.output), Path(cfg.datasets_dir))
    return summary


# --------------------------------------------------------------------------- 1. sample

def _sample(cfg: DistillDataConfig, tasks, teacher: Teacher, store: SampleStore) -> dict:
    """Sample the tasks not yet in `store`; returns {task id: why} for those the teacher
    could not serve (left out; a rerun asks again)."""
    from tqdm.auto import tqdm
    done = store.finished()
    todo = [t for t in tasks if t.id not in done]
    seeds = dict(zip((t.id for t in tasks), task_seeds(cfg.seed, [t.id for t in tasks])))
    counter = _token_counter(cfg)
    failed: dict[str, str] = {}
    per_call = teacher.tasks_per_call(cfg.k)
    with tqdm(total=len(tasks), initial=len(tasks) - len(todo), unit="task",
              desc=f"sampling {teacher.name}", disable=not cfg.progress, file=sys.stderr,
              dynamic_ncols=True) as bar:
        for start in range(0, len(todo), per_call):
            chunk = todo[start:start + per_call]
            got = teacher.sample(chunk, cfg.k, [seeds[t.id] for t in chunk])
            for task, completions in zip(chunk, got):
                if isinstance(completions, Exception):
                    failed[task.id] = str(completions)
                    continue
                rows = [_candidate(task, j, len(completions), seeds[task.id], teacher.name, c,
                                   counter) for j, c in enumerate(completions)]
                store.write(TaskRecord(task.id, seeds[task.id], samples=rows))
            bar.update(len(chunk))
    return failed


def _candidate(task, j: int, of: int, seed: int, teacher: str, completion, counter) -> dict:
    tokens = len(completion.token_ids) if completion.token_ids is not None else \
        counter(completion.text)
    return {"id": task.id, "kind": "sample", "sample": j, "of": of, "seed": seed,
            "teacher": teacher, "prompt": task.prompt, "completion": completion.text,
            "finish_reason": completion.finish_reason, "completion_tokens": tokens}


def _token_counter(cfg: DistillDataConfig):
    """Counts a text's tokens with `cfg.tokenizer`; without one, counts nothing (None)."""
    if not cfg.tokenizer:
        return lambda text: None
    from rlvr.trainer.evaluation.evaluate import resolve_model
    from rlvr.trainer.models.loading import load_tokenizer
    tok = load_tokenizer(resolve_model(cfg.tokenizer))
    return lambda text: len(tok(text, add_special_tokens=False)["input_ids"])


# --------------------------------------------------------------------------- 3. select

def select(rows: list[dict], keep_per_task: int = 0, shortest_first: bool = True,
           dedup: bool = True) -> list[dict]:
    """One task's scored rows -> the rows to keep: solved only, then one per distinct text
    (whitespace collapsed; the first sampled wins), then shortest first (tokens when counted,
    else characters; ties in sampling order), then at most `keep_per_task` (0 = all)."""
    kept = [r for r in rows if r.get("solved")]
    if dedup:
        seen: set[str] = set()
        kept = [r for r in kept if not (key := " ".join(r["completion"].split())) in seen
                and not seen.add(key)]
    if shortest_first:
        kept.sort(key=_length)
    return kept[:keep_per_task] if keep_per_task else kept


def _length(row: dict) -> int:
    tokens = row.get("completion_tokens")
    return tokens if tokens is not None else len(row["completion"])


def training_row(row: dict) -> dict:
    """A scored row in TRL's prompt-completion format, with its verdict: `completion` is one
    assistant message when the prompt is chat messages, else the text."""
    prompt, text = row["prompt"], row["completion"]
    completion = [{"role": "assistant", "content": text}] if isinstance(prompt, list) else text
    return {"prompt": prompt, "completion": completion, "task_id": row["id"],
            "teacher": row["teacher"], "sample": row["sample"], "reward": row["score"],
            "status": row["status"], "reason": row["reason"], "components": row["components"],
            "extracted": row.get("extracted"), "completion_tokens": row["completion_tokens"],
            "length": len(text), "finish_reason": row["finish_reason"],
            "versions": row.get("versions"), "integrity_flags": row.get("integrity_flags", [])}


def _select_all(cfg: DistillDataConfig, tasks: dict, paths: SidePaths, teacher: str,
                screen: TraceScreen | None = None) -> DistillSummary:
    """Read OUT.scored.jsonl task by task (a task's rows are consecutive), keep the selected
    rows of the tasks this run asks for (after the monitor's `screen` of every verified row),
    and write OUT atomically."""
    wanted = set(tasks)
    summary = DistillSummary(teacher=teacher, k=cfg.k)
    out = Path(cfg.output)
    tmp = out.with_name(out.name + ".tmp")
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(tmp, "w", encoding="utf-8") as f:
        for task_id, rows in groupby(_scored_rows(paths.scored), key=lambda r: r["id"]):
            if task_id not in wanted:
                continue
            rows = list(rows)
            clean = [r for r in rows if not r.get("solved") or screen is None
                     or screen.keep(tasks[task_id], r)]
            kept = select(clean, cfg.keep_per_task, cfg.shortest_first, cfg.dedup)
            f.writelines(json.dumps(training_row(r), ensure_ascii=False) + "\n" for r in kept)
            summary.add(task_id, TaskCount(len(rows), sum(bool(r["solved"]) for r in rows),
                                           len(kept)), rows, kept, _length)
    os.replace(tmp, out)
    summary.tasks_asked = len(tasks)
    summary.integrity = screen.report if screen is not None else None
    return summary


def _scored_rows(path: Path):
    if not path.exists():
        return
    with open(path, encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


def _save_datasets(jsonl: Path, folder: Path) -> None:
    """The kept rows as a `datasets` folder (`datasets.load_from_disk`)."""
    import datasets
    rows = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
    datasets.Dataset.from_list(rows).save_to_disk(str(folder))
