"""Scoring a file of rows: read in chunks, score in the pool, write in input order, resume."""
from __future__ import annotations

import heapq
import json
import os
import sys
import time
from array import array
from collections import Counter, deque
from itertools import compress, islice
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from rlvr import __version__
from rlvr.core import ERROR, INFRA_ERROR, TIMEOUT, Completion, Verdict
from rlvr.envs.multiturn import TranscriptError, episode_from_row
from rlvr.envs.registry import build_env, env_module, load_env
from rlvr.pool import Factory, WorkerPool, mark_step
from rlvr.pooled_reward import derive_deadline
from rlvr.rows import bad_json, count_rows, has_no_rows, iter_rows, open_lines, reads_raw_lines

from .fields import completion_text, get_field, with_fields
from .summary import (UNSCORED, ScoreSummary, add_counts, add_failure, failure_key,
                      pass_at_k_sample, task_key)

__all__ = ["ScoreConfig", "score_file", "resolve", "empty_input"]


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
    """Field holding the task id (looked up in the environment when a row has no gold)."""
    completion_field: str = "completion"
    """Field holding the completion text."""
    answer_field: str = "answer"
    """Gold answer field; rows without it are looked up by task id in the environment."""
    split: str = "train"
    """Split to read when the input is a `datasets` dataset."""
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    """Worker processes (0 = score in this process, without deadlines: for debugging)."""
    deadline_s: float | None = None
    """Hard wall-clock limit per row; past it the row is a `timeout` and its worker is replaced.
    Unset: derived from the environment's declared longest verification (`max_verify_s`); a
    value below that is refused, so a program's own limits always fire first."""
    block_rows: int = 4096
    """Most rows sent to a worker in one chunk (chunks size themselves to about 50 ms of work
    below that). Memory is proportional to this, not to the input."""
    batch_rows: int | None = None
    """Rows per reward call (unset: 1, or 32 for the reward-model environment). Above 1,
    `score_batch` sees them together (reward models batch on the accelerator) and the deadline
    applies to the whole batch."""
    backend: str = "process"
    """Where rows are scored: 'process' (a local worker pool) or 'ray' (Ray actors; pip install
    'rlvr[ray]')."""
    ray_address: str | None = None
    """Ray cluster to join with the 'ray' backend; None starts a local Ray instance."""
    resume: bool = True
    """Continue a previous run's output instead of refusing to touch it."""
    progress: bool = True
    """Show a progress bar on stderr."""


# --------------------------------------------------------------------------- reading

class _ChunkReader:
    """Hands out the input as chunks of non-blank rows: (line numbers, raw rows).

    JSON lines are taken raw with `islice` (no per-line Python work in this process; workers
    parse them); the line numbers of a chunk without blank lines travel as a `range`. Blank
    lines are skipped, but they keep their number, so `line` is always the input's own line
    number. Other formats come parsed from `rlvr.rows.iter_rows`.
    """

    def __init__(self, cfg: ScoreConfig, start_after: int):
        self._file = None
        if reads_raw_lines(cfg.input):
            self._file = open_lines(cfg.input, start_after)
            self._next = start_after + 1
        else:
            self._rows = iter_rows(cfg.input, cfg.split, start_after)

    def take(self, n: int) -> tuple[Sequence[int], list] | None:
        """The next `n` rows (fewer at the end of the input); None when there are none left."""
        if self._file is None:
            pairs = list(islice(self._rows, n))
            return ([p[0] for p in pairs], [p[1] for p in pairs]) if pairs else None
        lines, raws = [], []
        while len(raws) < n:
            first = self._next
            got = list(islice(self._file, n - len(raws)))
            if not got:
                break
            self._next += len(got)
            if not raws and not any(map(str.isspace, got)):     # the usual case
                return range(first, first + len(got)), got
            for i, raw in enumerate(got):
                if not raw.isspace():
                    lines.append(first + i)
                    raws.append(raw)
        return (lines, raws) if raws else None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


# --------------------------------------------------------------------------- scoring rows

@dataclass(frozen=True)
class _RowSpec:
    id_field: str
    completion_field: str
    answer_field: str
    versions: dict
    verifier: str
    batch_rows: int = 1
    nested: tuple = field(init=False, default=())
    """The field names that are dotted paths (rlvr.scoring.fields), worked out once."""

    def __post_init__(self):
        object.__setattr__(self, "nested", tuple(
            f for f in (self.id_field, self.answer_field, self.completion_field) if "." in f))


def _json_encoder() -> Callable[[Any], str]:
    """`json.dumps(obj, ensure_ascii=False, default=str)`, without its per-call set-up.

    `json.dumps` with `default=` builds a new JSONEncoder (and C encoder) on every call, about a
    third of the cost of encoding an output row; here the C encoder is built once. Falls back to
    the public API if this Python's `json` internals differ.
    """
    reference = json.JSONEncoder(ensure_ascii=False, default=str).encode
    try:
        from json.encoder import c_make_encoder, encode_basestring
        markers: dict = {}
        c_encode = c_make_encoder(markers, str, encode_basestring, None, ": ", ", ",
                                  False, False, True)
    except (ImportError, TypeError):
        return reference
    if c_encode is None:
        return reference

    def encode(obj) -> str:
        try:
            return "".join(c_encode(obj, 0))
        except BaseException:
            markers.clear()       # a failed encode may leave its circular-reference markers
            raise

    probe = {"a": [1, 2.5, None, True, float("nan")], "é\u2028": "\ud800", "o": object}
    return encode if encode(probe) == reference(probe) else reference


class _RowScorer:
    """Turns raw rows into finished output lines; built once per worker (or in-process).

    `env` is None on the host, which only writes rows for calls that failed in the pool."""

    def __init__(self, spec: _RowSpec, env=None):
        self.spec, self.env = spec, env
        self._counts = env.summary_counts if env is not None else None
        self._encode = _json_encoder()
        self._versions: dict[str, dict] = {}      # verdict.version -> the output's `versions`

    def one(self, line: int, raw) -> tuple:
        """Raw row -> (output JSON line, status, score, latency, id, reason, counts). Never
        raises."""
        start = time.perf_counter()
        try:
            row, task, completion, failed = _prepare(self.env, self.spec, line, raw)
            return self.finish(row, line, failed or self.env.reward.score(task, completion))
        except Exception as exc:     # a broken environment: this row is an error, not the run
            return self.failed(line, raw, ERROR, f"{type(exc).__name__}: {exc}",
                               time.perf_counter() - start)

    def batch(self, lines: Sequence[int], raws: list) -> list[tuple]:
        """Several raw rows through one `score_batch` call (for batching rewards)."""
        start = time.perf_counter()
        try:
            prepared = [(line, *_prepare(self.env, self.spec, line, raw))
                        for line, raw in zip(lines, raws)]
            todo = [p for p in prepared if p[4] is None]
            verdicts = iter(self.env.reward.score_batch([p[2] for p in todo],
                                                        [p[3] for p in todo]) if todo else ())
            return [self.finish(row, line, failed or next(verdicts))
                    for line, row, _, _, failed in prepared]
        except Exception as exc:
            message, latency = f"{type(exc).__name__}: {exc}", time.perf_counter() - start
            return [self.failed(line, raw, ERROR, message, latency)
                    for line, raw in zip(lines, raws)]

    def failed(self, line: int, raw, status: str, message: str, latency: float) -> tuple:
        """The output row of a row whose scoring failed (raised, hung, killed its worker)."""
        row, _ = _decode(raw, self.spec, line)
        return self.finish(row, line, Verdict(0.0, status, reason=f"line {line}: {message}",
                                              latency_s=latency))

    def finish(self, row: dict, line: int, verdict: Verdict) -> tuple:
        versions = self._versions.get(verdict.version)
        if versions is None:
            versions = self._versions[verdict.version] = {
                **self.spec.versions, "verifier": verdict.version or self.spec.verifier}
        text = self._encode({**row, "line": line, "score": verdict.score,
                             "status": verdict.status, "extracted": verdict.extracted,
                             "reason": verdict.reason, "latency_s": round(verdict.latency_s, 6),
                             "components": verdict.components, "solved": verdict.solved,
                             "versions": versions})
        reason = verdict.reason if verdict.status in UNSCORED else None
        counts = self._counts(verdict) if self._counts else None
        return (text, verdict.status, verdict.score, verdict.latency_s,
                row.get(self.spec.id_field), reason, counts, pass_at_k_sample(row, verdict.solved))


def _pass_at_k_columns(samples, ids, lines) -> tuple[array, bytes]:
    """Task keys and solved flags of the rows that are pass@k samples (`pass_at_k_sample`:
    None for a row that is not one, else whether it solved its task)."""
    if None in samples:
        ids, lines, samples = (list(compress(col, [x is not None for x in samples]))
                               for col in (ids, lines, samples))
    return array("q", map(task_key, ids, lines)), bytes(map(bool, samples))


def _is_transcript(view, completion_field: str) -> bool:
    """A row scored as an episode: it holds `messages` and either no completion field or
    messages with an assistant turn (the trainer's samples.jsonl rows carry both the final text
    and the transcript; episode-aware rewards need the transcript). `messages` holding only the
    prompt beside a completion is a completion row."""
    if "messages" not in view:
        return False
    messages = view["messages"]
    return completion_field not in view or isinstance(messages, list) and any(
        isinstance(m, dict) and m.get("role") == "assistant" for m in messages)


def _prepare(env, spec: _RowSpec, line: int, raw) -> tuple:
    """Decode a row and build its task and completion; a problem becomes an error verdict."""
    row, problem = _decode(raw, spec, line)
    if problem:
        return row, None, None, Verdict(0.0, ERROR, reason=problem)
    try:
        view = with_fields(row, spec.nested)
        if _is_transcript(view, spec.completion_field):
            task, completion = episode_from_row(env, view, line, spec.id_field,
                                                spec.answer_field)
            return row, task, completion, None
        text = completion_text(get_field(view, spec.completion_field), spec.completion_field)
        task = _task(env, view, spec)
        completion = Completion(text, finish_reason=row.get("finish_reason") or "stop")
    except TranscriptError as exc:      # already names its line
        return row, None, None, Verdict(0.0, ERROR, reason=str(exc))
    except (KeyError, TypeError, ValueError) as exc:
        message = exc.args[0] if exc.args else exc
        return row, None, None, Verdict(0.0, ERROR, reason=f"line {line}: {message}")
    return row, task, completion, None


def _task(env, view: dict, spec: _RowSpec):
    """The row's task; when the environment cannot find it and the row carries no gold
    answer, the error says which option names the gold answer's field."""
    try:
        return env.task_from_row(view, spec.id_field, spec.answer_field)
    except KeyError as exc:
        if spec.answer_field in view or view.get(spec.id_field) is None:
            raise
        message = exc.args[0] if exc.args else exc
        raise KeyError(f"no gold answer: the row has no `{spec.answer_field}` field (name the "
                       f"field that holds it with --answer-field) and {message}") from None


def _decode(raw, spec: _RowSpec, line: int) -> tuple[dict, str]:
    """Parse and validate one input row; a problem is returned as a message, never raised."""
    if isinstance(raw, str):
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            return {"raw": raw.strip()[:2000]}, f"line {line}: {bad_json(exc)}"
    else:
        row = raw
    if not isinstance(row, dict):
        return {"raw": row}, f"line {line}: expected a JSON object, got {type(row).__name__}"
    return row, ""   # whether the row names its task is the environment's call (task_from_row)


@dataclass
class _Scored:
    """A run of consecutive finished rows: their output bytes and what the summary needs.

    This is all a chunk sends back, so the host does no per-row work: it writes `data` and
    folds the counts into the summary."""
    data: bytes
    rows: int
    by_status: dict
    scores: list              # scores of the rows that count towards the mean, in order
    latencies: array
    slowest: list             # at most 5 (latency, line, id), as in ScoreSummary
    seconds: float = 0.0      # time spent scoring them (sizes the next chunks)
    failures: dict = field(default_factory=dict)   # failure_key -> [rows, examples] (unscored)
    counts: dict = field(default_factory=dict)     # Environment.summary_counts, added up
    task_keys: array = field(default_factory=lambda: array("q"))   # per row (pass@k per task)
    solved: bytes = b""                                             # per row: 1 if correct

    @classmethod
    def of(cls, lines: Sequence[int], results: list[tuple], seconds: float = 0.0) -> "_Scored":
        """From per-row results (text, status, score, latency, id, reason, counts, sample), with
        C-speed steps only: a few passes over the chunk cost less than bookkeeping row by row."""
        if not results:
            return cls(b"", 0, {}, [], array("d"), [], seconds)
        texts, statuses, scores, latencies, ids, reasons, row_counts, samples = zip(*results)
        counts: dict = {}
        for c in filter(None, row_counts):
            add_counts(counts, c)
        failures: dict = {}
        for status, reason in zip(statuses, reasons):
            if reason is not None:
                add_failure(failures, *failure_key(status, reason))
        latencies = array("d", latencies)
        # (latency, line) decide the order; lines are unique, so ids are never compared
        slowest = [(lat, line, str(i))
                   for lat, line, i in heapq.nlargest(5, zip(latencies, lines, ids))]
        # backslashreplace: a lone surrogate from the input ("\ud800") is written back as the
        # same JSON escape instead of crashing the run.
        return cls(("\n".join(texts) + "\n").encode("utf-8", "backslashreplace"), len(texts),
                   dict(Counter(statuses)),
                   [x for st, x in zip(statuses, scores) if st not in UNSCORED and x is not None],
                   latencies, slowest, seconds, failures, counts,
                   *_pass_at_k_columns(samples, ids, lines))


def _score_chunk(scorer: _RowScorer, chunk: tuple) -> _Scored:
    """In a worker: score a chunk of rows, one deadline step per row (or per reward batch)."""
    start = time.perf_counter()
    lines, raws = chunk
    size = scorer.spec.batch_rows
    results = []
    if size == 1:
        one = scorer.one
        for k, raw in enumerate(raws):
            mark_step(k)
            results.append(one(lines[k], raw))
    else:
        for step, i in enumerate(range(0, len(raws), size)):
            mark_step(step)
            results.extend(scorer.batch(lines[i:i + size], raws[i:i + size]))
    return _Scored.of(lines, results, time.perf_counter() - start)


def _build_context(env_name: str, env_args: dict, module: str | None, spec: _RowSpec):
    return _RowScorer(spec, build_env(env_name, env_args, module))


# --------------------------------------------------------------------------- the run

def score_file(cfg: ScoreConfig, pool: WorkerPool | None = None) -> ScoreSummary:
    """Score `cfg.input` into `cfg.output`; returns the summary (also of resumed rows)."""
    module = env_module(cfg.env)          # an unknown name fails here, before any worker
    if has_no_rows(cfg.input):            # so does an input that does not exist, can't be read
        raise ValueError(empty_input(cfg.input))        # or is empty
    own_pool = pool is None and cfg.workers > 0
    pool = _make_pool(cfg) if own_pool else pool
    bar = scored = None
    try:
        if own_pool and hasattr(pool, "start"):
            pool.start()    # workers boot while this process loads and checks the environment
        env = load_env(cfg.env, **cfg.env_args)   # contract-checked once, in this process
        cfg = resolve(cfg, env)
        spec = _RowSpec(cfg.id_field, cfg.completion_field, cfg.answer_field,
                        {"rlvr": __version__, "env": f"{env.name}@{env.version}"},
                        env.reward.version, cfg.batch_rows)
        out_path = Path(cfg.output)
        summary = ScoreSummary()
        done_line = _prepare_output(cfg, out_path, summary, env.summary_counts)
        bar = _progress(cfg, count_rows(cfg.input) if cfg.progress else None, summary.rows)
        if pool is None:
            scored = _in_process(cfg, _RowScorer(spec, env), done_line)
        else:
            context = Factory(_build_context, {"env_name": cfg.env, "env_args": cfg.env_args,
                                               "module": module, "spec": spec})
            scored = _in_pool(cfg, pool, context, spec, done_line)
        with open(out_path, "ab") as out:
            for part in scored:
                out.write(part.data)
                out.flush()
                summary.merge(part)
                if bar is not None:
                    bar.update(part.rows)
    finally:
        if scored is not None:
            scored.close()     # lets the chunks in flight finish while the pool still runs
        if bar is not None:     # (a bar without a total refuses bool())
            bar.close()
        if own_pool:
            pool.close()
    return summary


def empty_input(source: str) -> str:
    return f"{source}: 0 rows, nothing to score (the input is empty)"


def resolve(cfg: ScoreConfig, env) -> ScoreConfig:
    """Fill in what depends on the environment: the deadline (derived from its rewards' declared
    longest verification, never below it) and rows per reward call (32 for learned rewards)."""
    learned = any(getattr(r, "learned", False) for r, _ in env.rewards)
    return replace(cfg, deadline_s=derive_deadline(env.reward, cfg.deadline_s),
                   batch_rows=cfg.batch_rows or (32 if learned else 1))


def _make_pool(cfg: ScoreConfig):
    if cfg.backend == "process":
        return WorkerPool(cfg.workers)
    if cfg.backend == "ray":
        from rlvr.ray_backend import RayPool
        return RayPool(cfg.workers, address=cfg.ray_address)
    raise ValueError(f"unknown backend {cfg.backend!r}; use 'process' or 'ray'")


@dataclass
class _ChunkSizer:
    """Rows per chunk: about `target_s` of scoring each, a multiple of `step`, at most `most`.

    As joblib's automatic batch size does: large chunks make the per-call cost (IPC, the host's
    bookkeeping) vanish per row, while chunks of bounded duration keep both workers busy to the
    end of the input and bound the work a timeout throws away (a timed-out chunk's finished
    rows are scored again). Starts at one row (or batch), since a row may take seconds, and at
    most doubles per chunk."""
    step: int
    most: int
    target_s: float = 0.05
    size: int = field(default=0, init=False)
    _ideal: float | None = field(default=None, init=False)   # rows per target_s, last measured

    def next(self) -> int:
        grown = 2 * self.size or self.step
        if self._ideal is not None:
            grown = min(grown, self._ideal)
        self.size = max(self.step, int(min(self.most, grown)) // self.step * self.step)
        return self.size

    def observe(self, rows: int, seconds: float) -> None:
        if rows and seconds > 0:
            self._ideal = self.target_s * rows / seconds


def _in_process(cfg: ScoreConfig, scorer: _RowScorer, done_line: int) -> Iterator[_Scored]:
    reader = _ChunkReader(cfg, done_line)
    size = max(cfg.batch_rows, cfg.block_rows // cfg.batch_rows * cfg.batch_rows)
    try:
        while (chunk := reader.take(size)) is not None:
            yield _score_chunk(scorer, chunk)
    finally:
        reader.close()


def _in_pool(cfg: ScoreConfig, pool, context: Factory, spec: _RowSpec,
             done_line: int) -> Iterator[_Scored]:
    """Chunks scored in the pool, yielded in input order.

    Each worker has one chunk running and one queued behind it, so it never waits for this
    process; memory is bounded by those few chunks, not by the input."""
    reader = _ChunkReader(cfg, done_line)
    sizer = _ChunkSizer(step=cfg.batch_rows, most=max(cfg.block_rows, cfg.batch_rows))
    n = max(1, getattr(pool, "n_workers", 1))
    pending: deque = deque()
    from concurrent.futures import ThreadPoolExecutor   # not at the top: workers import us
    ex = ThreadPoolExecutor(n, thread_name_prefix="rlvr-score")
    try:
        while True:
            while len(pending) < 2 * n and (chunk := reader.take(sizer.next())) is not None:
                pending.append(ex.submit(_run_chunk, pool, context, spec, chunk,
                                         cfg.deadline_s))
            if not pending:
                return
            for part in pending.popleft().result():
                sizer.observe(part.rows, part.seconds)
                yield part
    finally:
        for future in pending:
            future.cancel()
        ex.shutdown(wait=True)
        reader.close()


def _run_chunk(pool, context: Factory, spec: _RowSpec, chunk: tuple,
               deadline_s: float) -> list[_Scored]:
    """Score one chunk in the pool. A row (or reward batch) that timed out or killed its
    worker gets its row here; the rest of the chunk is scored again by a fresh call."""
    size = spec.batch_rows
    parts, todo = [], [chunk]          # a stack: the next piece, in input order, is last
    while todo:
        piece = todo.pop()
        if isinstance(piece, _Scored):
            parts.append(piece)
            continue
        lines, raws = piece
        o = pool.map(_score_chunk, [piece], deadline_s=deadline_s, context=context)[0]
        if o.status == "ok":
            parts.append(o.value)
            continue
        status = {"timeout": TIMEOUT, "infra_error": INFRA_ERROR}.get(o.status, ERROR)
        lo, hi = (0, len(raws)) if o.step is None else \
            (o.step * size, min(len(raws), (o.step + 1) * size))
        if hi < len(raws):
            todo.append((lines[hi:], raws[hi:]))
        host = _RowScorer(spec)       # rare: one per failure, so no state shared by threads
        todo.append(_Scored.of(lines[lo:hi], [host.failed(line, raw, status, o.error, o.latency_s)
                                              for line, raw in zip(lines[lo:hi], raws[lo:hi])]))
        if lo:
            todo.append((lines[:lo], raws[:lo]))
    return parts


def _prepare_output(cfg: ScoreConfig, out_path: Path, summary: ScoreSummary,
                    counts_of: Callable | None = None) -> int:
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
        last = _fold_existing(out_path, summary, counts_of)
        summary.resumed_rows = summary.rows
        return last
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text("")
    meta_path.write_text(json.dumps(meta, indent=2, default=str))
    return 0


def _fold_existing(out_path: Path, summary: ScoreSummary, counts_of: Callable | None = None
                   ) -> int:
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
                        last_line, row.get("id"), row.get("reason"),
                        counts_of(Verdict.from_dict(row)) if counts_of else None,
                        pass_at_k_sample(row))
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
