"""Offline scoring: `rlvr score --env NAME INPUT -o OUTPUT`.

A file of (task, completion) rows -> one output row per input row, through the same Reward
objects and worker pool the trainer uses. Properties that matter on a million rows:

- **streams**: rows are read, scored and written in blocks, so memory stays flat;
- **parallel and cheap on IPC**: workers get raw lines in chunks and return finished JSON lines;
- **resumable**: output rows are written in input order and carry their input `line`; a rerun
  after a kill truncates a half-written last line and continues after the last finished line;
- **nothing lost**: a malformed row becomes an error row with its line number, a hung row a
  timeout row; neither stops the run.
"""
from __future__ import annotations

import heapq
import json
import os
import sys
from array import array
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

from . import __version__
from .core import ERROR, INFRA_ERROR, STATUSES, TIMEOUT, Completion, Verdict
from .pool import Factory, WorkerPool

__all__ = ["ScoreConfig", "ScoreSummary", "score_file", "add_parser"]


@dataclass
class ScoreConfig:
    """Everything `rlvr score` needs; saved beside the output as OUTPUT.meta.json."""
    env: str
    """Registered environment name (`rlvr envs list`)."""
    input: str
    """JSONL file, Parquet file, a directory saved by `datasets`, or a Hugging Face dataset id."""
    output: str
    """JSONL file to write (appended to when resuming)."""
    env_args: dict = field(default_factory=dict)
    """Keyword arguments for the environment factory."""
    id_field: str = "id"
    completion_field: str = "completion"
    answer_field: str = "answer"
    """Gold answer field; rows without it are looked up by task id in the environment."""
    split: str = "train"
    """Split to read when the input is a `datasets` dataset."""
    workers: int = 2
    """Worker processes (0 = score in this process, without deadlines: for debugging)."""
    deadline_s: float = 10.0
    """Hard wall-clock limit per row; past it the row is a `timeout` and its worker is replaced."""
    block_rows: int = 4096
    """Rows read and scored per block (memory is proportional to this, not to the input)."""
    batch_rows: int = 1
    """Rows per reward call. Above 1, `score_batch` sees them together (reward models batch on
    the accelerator) and the deadline applies to the whole batch."""
    backend: str = "process"
    """Where rows are scored: 'process' (a local worker pool) or 'ray' (Ray actors)."""
    ray_address: str | None = None
    """Ray cluster to join with the 'ray' backend; None starts a local Ray instance."""
    resume: bool = True
    """Continue a previous run's output instead of refusing to touch it."""
    progress: bool = True


@dataclass
class ScoreSummary:
    rows: int = 0
    resumed_rows: int = 0
    by_status: Counter = field(default_factory=Counter)
    score_sum: float = 0.0
    scored: int = 0
    latencies: array = field(default_factory=lambda: array("d"))
    slowest: list = field(default_factory=list)   # min-heap of (latency, line, id)

    def add(self, status: str, score: float | None, latency: float, line: int, row_id) -> None:
        self.rows += 1
        self.by_status[status] += 1
        if status not in (ERROR, INFRA_ERROR, TIMEOUT, "gold_unparseable") and score is not None:
            self.score_sum += score
            self.scored += 1
        self.latencies.append(latency)
        item = (latency, line, str(row_id))
        if len(self.slowest) < 5:
            heapq.heappush(self.slowest, item)
        elif item > self.slowest[0]:
            heapq.heapreplace(self.slowest, item)

    @property
    def mean_score(self) -> float | None:
        return self.score_sum / self.scored if self.scored else None

    @property
    def error_rows(self) -> int:
        return self.by_status[ERROR] + self.by_status[INFRA_ERROR]

    def to_dict(self) -> dict:
        ordered = sorted(self.latencies)        # sorted once for both percentiles
        pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0  # noqa: E731
        return {"rows": self.rows, "resumed_rows": self.resumed_rows,
                "mean_score": self.mean_score, "scored_rows": self.scored,
                "by_status": {s: self.by_status[s] for s in STATUSES if self.by_status[s]},
                "latency_p50_s": pick(0.5), "latency_p99_s": pick(0.99),
                "slowest": [{"line": ln, "id": i, "latency_s": lat}
                            for lat, ln, i in sorted(self.slowest, reverse=True)]}

    def render(self) -> str:
        d = self.to_dict()
        mean = "n/a" if d["mean_score"] is None else f"{d['mean_score']:.4f}"
        lines = [f"rows: {d['rows']} ({d['resumed_rows']} from an earlier run)",
                 f"mean score: {mean} over {d['scored_rows']} scored rows",
                 "status: " + ", ".join(f"{k}={v}" for k, v in d["by_status"].items()),
                 f"latency p50: {d['latency_p50_s'] * 1e3:.2f} ms, "
                 f"p99: {d['latency_p99_s'] * 1e3:.2f} ms",
                 "slowest: " + ", ".join(f"line {s['line']} ({s['latency_s'] * 1e3:.1f} ms)"
                                         for s in d["slowest"])]
        return "\n".join(lines)


# --------------------------------------------------------------------------- reading

def _jsonl_rows(path: Path, start_after: int) -> Iterator[tuple[int, Any]]:
    """(line number, raw text) for every non-blank line after `start_after`."""
    with open(path, "r", encoding="utf-8", errors="replace") as f:
        for n, raw in enumerate(f, start=1):
            if n > start_after and raw.strip():
                yield n, raw


def _table_rows(path: Path, start_after: int) -> Iterator[tuple[int, Any]]:
    import pyarrow.parquet as pq
    n = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=4096):
        if n + batch.num_rows <= start_after:
            n += batch.num_rows
            continue
        for row in batch.to_pylist():
            n += 1
            if n > start_after:
                yield n, row


def _dataset_rows(source: str, split: str, start_after: int) -> Iterator[tuple[int, Any]]:
    import datasets
    if Path(source).is_dir():
        ds = datasets.load_from_disk(source)
        if isinstance(ds, datasets.DatasetDict):
            ds = ds[split]
    else:  # a hub id (the real path); streamed so memory stays flat
        ds = datasets.load_dataset(source, split=split, streaming=True)
    for n, row in enumerate(ds, start=1):
        if n > start_after:
            yield n, row


def read_rows(cfg: ScoreConfig, start_after: int = 0) -> Iterator[tuple[int, Any]]:
    path = Path(cfg.input)
    if path.is_file():
        if path.suffix in (".parquet", ".pq"):
            return _table_rows(path, start_after)
        return _jsonl_rows(path, start_after)
    return _dataset_rows(cfg.input, cfg.split, start_after)


def count_rows(cfg: ScoreConfig) -> int | None:
    path = Path(cfg.input)
    if path.is_file() and path.suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq
        return pq.ParquetFile(path).metadata.num_rows
    if path.is_file():
        with open(path, "rb") as f:
            return sum(1 for raw in f if raw.strip())
    return None


# --------------------------------------------------------------------------- scoring one row

@dataclass(frozen=True)
class _RowSpec:
    id_field: str
    completion_field: str
    answer_field: str
    versions: dict
    verifier: str


def _prepare(env, spec: _RowSpec, line: int, raw) -> tuple:
    """Decode a row and build its task and completion; a problem becomes an error verdict."""
    row, problem = _decode(raw, spec, line)
    if problem:
        return row, None, None, Verdict(0.0, ERROR, reason=problem)
    try:
        task = env.task_from_row(row, spec.id_field, spec.answer_field)
        completion = Completion(row[spec.completion_field],
                                finish_reason=row.get("finish_reason") or "stop")
    except (KeyError, TypeError, ValueError) as exc:
        message = exc.args[0] if exc.args else exc
        return row, None, None, Verdict(0.0, ERROR, reason=f"line {line}: {message}")
    return row, task, completion, None


def _score_row(ctx, item) -> tuple:
    """In a worker: raw row -> (output JSON line, status, score, latency, id). Never raises."""
    env, spec = ctx
    line, raw = item
    row, task, completion, failed = _prepare(env, spec, line, raw)
    return _finish(row, line, failed or env.reward.score(task, completion), spec)


def _score_rows(ctx, batch) -> list[tuple]:
    """In a worker: several raw rows through one `score_batch` call (for batching rewards)."""
    env, spec = ctx
    prepared = [(line, *_prepare(env, spec, line, raw)) for line, raw in batch]
    todo = [p for p in prepared if p[4] is None]
    verdicts = iter(env.reward.score_batch([p[2] for p in todo], [p[3] for p in todo])
                    if todo else ())
    return [_finish(row, line, failed or next(verdicts), spec)
            for line, row, _, _, failed in prepared]


def _decode(raw, spec: _RowSpec, line: int) -> tuple[dict, str]:
    """Parse and validate one input row; a problem is returned as a message, never raised."""
    if isinstance(raw, str):
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            return {"raw": raw.strip()[:2000]}, f"line {line}: bad JSON ({exc.msg} at column {exc.colno})"
    else:
        row = raw
    if not isinstance(row, dict):
        return {"raw": row}, f"line {line}: expected a JSON object, got {type(row).__name__}"
    if spec.completion_field not in row:
        return row, f"line {line}: missing field {spec.completion_field!r}"
    if not isinstance(row[spec.completion_field], str):
        return row, (f"line {line}: field {spec.completion_field!r} must be a string, got "
                     f"{type(row[spec.completion_field]).__name__}")
    return row, ""   # whether the row names its task is the environment's call (task_from_row)


def _finish(row: dict, line: int, verdict: Verdict, spec: _RowSpec) -> tuple:
    out = dict(row)
    out.update(line=line, score=verdict.score, status=verdict.status, extracted=verdict.extracted,
               reason=verdict.reason, latency_s=round(verdict.latency_s, 6),
               components=verdict.components,
               versions={**spec.versions, "verifier": verdict.version or spec.verifier})
    text = json.dumps(out, ensure_ascii=False, default=str)
    return text, verdict.status, verdict.score, verdict.latency_s, row.get(spec.id_field)


def _build_context(env_name: str, env_args: dict, module: str | None, spec: _RowSpec):
    from .registry import env_reward
    return env_reward(env_name, env_args, module), spec


# --------------------------------------------------------------------------- the run

def score_file(cfg: ScoreConfig, pool: WorkerPool | None = None) -> ScoreSummary:
    """Score `cfg.input` into `cfg.output`; returns the summary (also of resumed rows)."""
    from .registry import _entry, load_env
    env = load_env(cfg.env, **cfg.env_args)   # contract-checked once, in this process
    spec = _RowSpec(cfg.id_field, cfg.completion_field, cfg.answer_field,
                    {"rlvr": __version__, "env": f"{env.name}@{env.version}"}, env.reward.version)
    context = Factory(_build_context, {"env_name": cfg.env, "env_args": cfg.env_args,
                                       "module": _entry(cfg.env).module, "spec": spec})
    out_path = Path(cfg.output)
    summary = ScoreSummary()
    done_line = _prepare_output(cfg, out_path, summary)
    total = count_rows(cfg)
    own_pool = pool is None and cfg.workers > 0
    pool = _make_pool(cfg) if own_pool else pool
    bar = _progress(cfg, total, summary.rows)
    try:
        # One block is scored ahead while the previous one is written, so workers never
        # wait for the host's reading and writing.
        # backslashreplace: a lone surrogate from the input ("\ud800") is written back as the
        # same JSON escape instead of crashing the run.
        with open(out_path, "a", encoding="utf-8", errors="backslashreplace") as out, \
                ThreadPoolExecutor(1) as ahead:
            blocks = _blocks(read_rows(cfg, done_line), cfg.block_rows)
            submit = lambda b: ahead.submit(_score_block, b, pool, context, env, spec,  # noqa: E731
                                            cfg.deadline_s, cfg.batch_rows)
            current = next(blocks, None)
            future = submit(current) if current else None
            while current:
                following = next(blocks, None)
                results = future.result()
                future = submit(following) if following else None
                for (line, _), (text, status, score, latency, row_id) in zip(current, results):
                    out.write(text + "\n")
                    summary.add(status, score, latency, line, row_id)
                out.flush()
                if bar:
                    bar.update(len(current))
                current = following
    finally:
        if bar:
            bar.close()
        if own_pool:
            pool.close()
    return summary


def _make_pool(cfg: ScoreConfig):
    if cfg.backend == "process":
        return WorkerPool(cfg.workers)
    if cfg.backend == "ray":
        from .ray_backend import RayPool
        return RayPool(cfg.workers, address=cfg.ray_address)
    raise ValueError(f"unknown backend {cfg.backend!r}; use 'process' or 'ray'")


def _blocks(rows: Iterator, size: int) -> Iterator[list]:
    block = []
    for item in rows:
        block.append(item)
        if len(block) >= size:
            yield block
            block = []
    if block:
        yield block


def _score_block(block, pool, context, env, spec, deadline_s, batch_rows=1) -> list[tuple]:
    """Score one block in the pool; a row that timed out or killed its worker still gets a row.

    The pool's unit of work (and of deadline) is one row, or with `batch_rows > 1` a batch of
    rows scored by one `score_batch` call."""
    units = [block[i:i + batch_rows] for i in range(0, len(block), batch_rows)]
    if pool is None:
        return [r for unit in units for r in _score_rows((env, spec), unit)]
    if batch_rows == 1:   # the common case: ship bare rows, not one-row lists
        outcomes = pool.map(_score_row, block, deadline_s=deadline_s, context=context)
        for o in outcomes:
            if o.status == "ok":
                o.value = [o.value]
    else:
        outcomes = pool.map(_score_rows, units, deadline_s=deadline_s, context=context)
    results = []
    for unit, o in zip(units, outcomes):
        if o.status == "ok":
            results.extend(o.value)
            continue
        status = {"timeout": TIMEOUT, "infra_error": INFRA_ERROR}.get(o.status, ERROR)
        for line, raw in unit:
            verdict = Verdict(0.0, status, reason=f"line {line}: {o.error}",
                              latency_s=o.latency_s)
            row, _ = _decode(raw, spec, line)
            results.append(_finish(row, line, verdict, spec))
    return results


def _prepare_output(cfg: ScoreConfig, out_path: Path, summary: ScoreSummary) -> int:
    """Check the output belongs to this run; return the last input line already scored.

    A half-written last line (the process was killed mid-write) is cut off; the finished rows
    are folded into `summary` so the final report covers the whole file.
    """
    meta_path = out_path.with_name(out_path.name + ".meta.json")
    meta = {"config": {k: v for k, v in asdict(cfg).items()
                       if k not in ("workers", "progress", "resume", "block_rows", "backend",
                                    "ray_address")},
            "rlvr_version": __version__}
    if out_path.exists() and out_path.stat().st_size > 0:
        if not cfg.resume:
            raise FileExistsError(f"{out_path} exists; rerun with resume to continue it or "
                                  "remove it")
        if meta_path.exists():
            old = json.loads(meta_path.read_text())
            if old.get("config") != meta["config"]:
                raise ValueError(f"{out_path} was written by a different run "
                                 f"({meta_path}); pick another output path or remove it")
        last = _fold_existing(out_path, summary)
        summary.resumed_rows = summary.rows
        return last
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text("")
    meta_path.write_text(json.dumps(meta, indent=2, default=str))
    return 0


def _fold_existing(out_path: Path, summary: ScoreSummary) -> int:
    last_line, good_bytes = 0, 0
    with open(out_path, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                break                      # torn write: drop it, the row is redone
            try:
                row = json.loads(raw)
            except json.JSONDecodeError:
                break
            good_bytes += len(raw)
            last_line = row["line"]
            summary.add(row["status"], row.get("score"), row.get("latency_s", 0.0),
                        last_line, row.get("id"))
    if good_bytes != out_path.stat().st_size:
        with open(out_path, "r+b") as f:
            f.truncate(good_bytes)
    return last_line


def _progress(cfg: ScoreConfig, total: int | None, initial: int):
    if not cfg.progress:
        return None
    from tqdm import tqdm
    return tqdm(total=total, initial=initial, unit="row", desc=f"scoring {cfg.env}",
                file=sys.stderr, dynamic_ncols=True)


# --------------------------------------------------------------------------- CLI

def add_parser(sub) -> None:
    p = sub.add_parser("score", help="score a file of completions with an environment's rewards",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("input", help="JSONL, Parquet, a saved `datasets` directory, or a hub dataset id")
    p.add_argument("-o", "--output", required=True, help="output JSONL (resumed if it exists)")
    p.add_argument("--env", help="environment name (see `rlvr envs list`)")
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="keyword argument for the environment factory (repeatable)")
    p.add_argument("--reward-model", metavar="PATH",
                   help="score with a learned reward model (local path or hub id); with --env, "
                        "it is added to that environment's rewards")
    p.add_argument("--rm-weight", type=float, default=1.0, help="the reward model's weight")
    p.add_argument("--rm-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="RewardModel option, e.g. normalize=sigmoid (repeatable)")
    p.add_argument("--batch-rows", type=int, default=None,
                   help="rows per reward call (default 1; 32 with --reward-model)")
    p.add_argument("--id-field", default="id")
    p.add_argument("--completion-field", default="completion")
    p.add_argument("--answer-field", default="answer")
    p.add_argument("--split", default="train", help="split of a `datasets` input")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="worker processes (0: in this process, no deadlines)")
    p.add_argument("--deadline", type=float, default=10.0, help="seconds allowed per row")
    p.add_argument("--backend", choices=("process", "ray"), default="process",
                   help="score in local worker processes, or on Ray actors (pip install 'rlvr[ray]')")
    p.add_argument("--ray-address", default=None,
                   help="Ray cluster address for --backend ray (default: start a local one)")
    p.add_argument("--block-rows", type=int, default=4096)
    p.add_argument("--no-resume", action="store_true",
                   help="refuse to continue an existing output file")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--summary-json", help="also write the summary to this JSON file")
    p.set_defaults(func=cmd_score)


def _resolve_env(args, parse_kv) -> tuple[str, dict]:
    """--env and/or --reward-model -> (environment name, factory arguments)."""
    from .cli import UsageError
    if not args.env and not args.reward_model:
        raise UsageError("give --env NAME, --reward-model PATH, or both")
    env_args = parse_kv(args.env_arg)
    if not args.reward_model:
        return args.env, env_args
    rm_args = {"path": args.reward_model, "weight": args.rm_weight, **parse_kv(args.rm_arg)}
    if args.env:   # the environment's own rewards keep their weights beside the model
        rm_args.update(base_env=args.env, base_env_args=env_args, verifier_weight=1.0)
    return "reward-model", rm_args


def cmd_score(args) -> int:
    from .cli import EXIT_OK, EXIT_ROW_ERRORS, UsageError, parse_kv
    from .registry import EnvContractError, UnknownEnvError
    if args.workers < 0 or args.deadline <= 0 or args.block_rows < 1 \
            or (args.batch_rows is not None and args.batch_rows < 1):
        raise UsageError("--workers must be >= 0, --deadline > 0, --block-rows and "
                         "--batch-rows >= 1")
    env_name, env_args = _resolve_env(args, parse_kv)
    path = Path(args.input)
    if not path.exists() and ("/" not in args.input or args.input.startswith((".", "/"))):
        raise UsageError(f"input {args.input!r} does not exist")
    cfg = ScoreConfig(env=env_name, input=args.input, output=args.output,
                      env_args=env_args, id_field=args.id_field,
                      completion_field=args.completion_field, answer_field=args.answer_field,
                      split=args.split, workers=args.workers, deadline_s=args.deadline,
                      block_rows=args.block_rows, resume=not args.no_resume,
                      batch_rows=args.batch_rows or (32 if args.reward_model else 1),
                      backend=args.backend, ray_address=args.ray_address,
                      progress=not args.no_progress)
    if args.backend == "ray":
        try:
            from .ray_backend import require_ray
            require_ray()
        except ImportError as exc:
            raise UsageError(str(exc)) from None
    try:
        summary = score_file(cfg)
    except (UnknownEnvError, EnvContractError, FileExistsError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    print(summary.render())
    print(f"output: {cfg.output}")
    if args.summary_json:
        Path(args.summary_json).write_text(json.dumps(summary.to_dict(), indent=2))
    return EXIT_ROW_ERRORS if summary.error_rows else EXIT_OK
