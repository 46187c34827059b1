"""Reading rows: the one place that knows the input formats every job accepts.

`iter_rows(source)` yields `(n, row)` from a JSON-lines file, a Parquet file, a directory saved by
`datasets`, or a Hugging Face dataset id (the real path for online users; tests use files). `n` is
the file's own line number for JSON lines (blank lines keep their number) and the 1-based row
number otherwise, so error messages and resumption both point at the input.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import urllib.request
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice
from pathlib import Path
from typing import Any, Iterator, TextIO
from urllib.parse import urlsplit

from rlvr.usage import UsageError

__all__ = ["iter_rows", "read_rows", "input_kind", "json_layout", "reads_raw_lines",
           "open_lines", "count_rows", "BadRow",
           "SUPPORTED", "bad_json", "has_no_rows", "HubUnreachable", "hub_offline_reason",
           "go_offline"]

JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson", "")
PARQUET_SUFFIXES = (".parquet", ".pq")
_FILE_SUFFIXES = (".jsonl", ".json", ".ndjson", ".parquet", ".pq", ".csv", ".tsv", ".txt")
SUPPORTED = ("a JSON-lines file (.jsonl/.json), a Parquet file (.parquet), a directory saved by "
             "`datasets`, or a Hugging Face dataset id (org/name)")


def bad_json(exc: json.JSONDecodeError) -> str:
    """A JSON line's parse error in words: 'bad JSON (Unterminated string starting at column
    9)' -- json's messages that end in 'at' take the column without a second 'at'."""
    return f"bad JSON ({exc.msg.removesuffix(' at')} at column {exc.colno})"


@dataclass(frozen=True)
class BadRow:
    """A JSON line that is not JSON: yielded in place of the row, so the caller counts it."""
    reason: str


class HubUnreachable(UsageError, ConnectionError):
    """A hub id that cannot be loaded: the hub cannot be reached and the local cache lacks it."""


@lru_cache(maxsize=1)
def hub_offline_reason() -> str | None:
    """Why the Hugging Face Hub cannot be reached, or None when it can: offline mode set by the
    user, or no connection to its host (HF_ENDPOINT's, or the proxy's for it) within 3 s -- a
    name that does not resolve fails at once. Asked once per process, before a load that would otherwise retry
    for half a minute."""
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").upper() in ("1", "ON", "YES", "TRUE"):
            return f"{var} is set"
    url = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    proxy = urllib.request.getproxies().get(url.scheme)
    if proxy and not urllib.request.proxy_bypass(url.hostname):   # through the proxy: ask it
        url = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=3).close()
    except OSError as exc:
        return f"{url.hostname}:{port} did not answer: {exc.strerror or exc}"
    return None


def go_offline() -> None:
    """Offline mode for the Hugging Face libraries in this process, so a hub call reads the
    local cache or fails at once. Both read the variable once, at import: one already imported
    is told through its module constant as well."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    for module, names in (("huggingface_hub.constants", ("HF_HUB_OFFLINE",)),
                          ("datasets.config", ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))):
        for name in names:
            if module in sys.modules and hasattr(sys.modules[module], name):
                setattr(sys.modules[module], name, True)


def looks_like_hub_id(source: str) -> bool:
    """'org/name' with no file suffix and no leading './' or '/': a missing local file such as
    'data/prefs.jsonl' is reported as missing, not sent to the hub."""
    return source.count("/") == 1 and not source.startswith((".", "/")) \
        and Path(source).suffix.lower() not in _FILE_SUFFIXES and not Path(source).exists()


def input_kind(source: str | Path) -> str:
    """'jsonl' (JSON lines, or one JSON array: `json_layout` tells which), 'parquet', 'saved' (a directory:
    saved by `datasets`, or a local dataset repository) or 'hub'; a clear error otherwise."""
    path = Path(source)
    if path.is_file():
        suffix = path.suffix.lower()
        if suffix in PARQUET_SUFFIXES:
            return "parquet"
        if suffix in JSONL_SUFFIXES:
            return "jsonl"
        raise ValueError(f"{source}: cannot read {suffix or 'this'} files; give {SUPPORTED}")
    if path.is_dir():
        return "saved"
    if looks_like_hub_id(str(source)):
        return "hub"
    raise FileNotFoundError(f"input {str(source)!r} does not exist (expected {SUPPORTED})")


def open_lines(path: str | Path, start_after: int = 0) -> TextIO:
    """A JSON-lines file opened for reading raw lines, positioned after line `start_after`."""
    f = open(path, "r", encoding="utf-8", errors="replace")
    deque(islice(f, start_after), maxlen=0)
    return f


def iter_rows(source: str | Path, split: str = "train", start_after: int = 0, *,
              config: str | None = None, cache_dir: str | None = None
              ) -> Iterator[tuple[int, Any]]:
    """(n, row) for every row after `start_after`; a JSON line that does not parse yields
    `(n, BadRow(reason))` instead of stopping the read. `config` and `cache_dir` go to
    `datasets.load_dataset` for hub ids and local dataset folders."""
    kind = input_kind(source)
    if kind == "jsonl":
        yield from (_json_array_rows(source, start_after) if _is_json_array(source)
                    else _jsonl_rows(source, start_after))
    elif kind == "parquet":
        yield from _parquet_rows(source, start_after)
    else:
        yield from _dataset_rows(str(source), split, start_after, config, cache_dir, kind)


def read_rows(source: str | Path, split: str = "train", *, limit: int | None = None,
              config: str | None = None, cache_dir: str | None = None) -> list[dict]:
    """The first `limit` rows (all by default) as a list, for task sources that hold their
    tasks in memory; a line that is not JSON is a ValueError naming it (a task file must be
    whole, unlike a file of completions to score, where a bad row is one error row)."""
    rows = []
    for n, row in islice(iter_rows(source, split, config=config, cache_dir=cache_dir), limit):
        if isinstance(row, BadRow):
            raise ValueError(f"{source}, line {n}: {row.reason}")
        rows.append(dict(row))
    return rows


def _jsonl_rows(path, start_after: int) -> Iterator[tuple[int, Any]]:
    with open_lines(path, start_after) as f:
        for n, raw in enumerate(f, start=start_after + 1):
            if raw.strip():
                try:
                    yield n, json.loads(raw)
                except json.JSONDecodeError as exc:
                    yield n, BadRow(bad_json(exc))


_PROBE_LINES = 20
"""Lines looked at before a file that parses on none of them is called not JSON lines."""


def json_layout(path: str | Path) -> str:
    """How a JSON file holds its rows: 'lines' (one JSON value per line) or 'array' (one JSON
    array, on one line or many, whatever the suffix). A file that is neither as a whole -- one
    JSON object, a broken array, a file none of whose first lines is JSON (a CSV, say) -- is a
    ValueError in one line, not an error row per line."""
    first, parsed, probed, bad = None, False, 0, ""
    with open(path, "r", encoding="utf-8", errors="replace") as f:
        for raw in f:
            if not raw.strip():
                continue
            try:
                value = json.loads(raw)
            except json.JSONDecodeError as exc:
                bad = bad or bad_json(exc)
                value = exc
            if first is None:
                first, head = value, raw.lstrip()[:1]
            if not isinstance(value, json.JSONDecodeError):
                parsed = True
                break
            probed += 1
            if probed >= _PROBE_LINES:
                break
        rest_blank = not f.read(4096).strip() if parsed else False
    if first is None:
        return "lines"                       # blank: no rows either way
    if not isinstance(first, json.JSONDecodeError):
        single_array = isinstance(first, list) and (rest_blank or Path(path).suffix == ".json")
        return "array" if single_array else "lines"
    if head == "[" or (head == "{" and not parsed):     # one JSON value over many lines?
        whole = _whole_json(path)
        if isinstance(whole, list):
            return "array"
        if isinstance(whole, dict):
            raise ValueError(f"{path} holds one JSON object, not rows: give one JSON object "
                             "per line (JSON lines) or a JSON array of objects")
        if head == "[":
            raise ValueError(f"{path}: not a JSON array ({whole}) and not JSON lines")
    if not parsed:
        raise ValueError(f"{path} is not JSON lines: none of its first {probed} lines is JSON "
                         f"(the first: {bad}); give {SUPPORTED}")
    return "lines"


def _whole_json(path):
    """The file parsed as one JSON value, or the parse error in words."""
    with open(path, encoding="utf-8", errors="replace") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as exc:
            return f"bad JSON: {exc.msg} at line {exc.lineno}"


def reads_raw_lines(source: str | Path) -> bool:
    """True when `source` is a JSON-lines file: a caller may read it line by line and parse
    each line itself (`rlvr score` does, in its workers); anything else comes from
    `iter_rows` parsed."""
    return input_kind(source) == "jsonl" and json_layout(source) == "lines"


def _is_json_array(path) -> bool:
    return json_layout(path) == "array"


def _json_array_rows(path, start_after: int) -> Iterator[tuple[int, Any]]:
    rows = _whole_json(path)
    if not isinstance(rows, list):
        raise ValueError(f"{path}: not a JSON array ({rows})")
    yield from ((n, row) for n, row in enumerate(rows, start=1) if n > start_after)


def _parquet_rows(path, start_after: int) -> Iterator[tuple[int, Any]]:
    import pyarrow.parquet as pq
    n = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=4096):
        if n + batch.num_rows <= start_after:       # skip whole batches without decoding them
            n += batch.num_rows
            continue
        for row in batch.to_pylist():
            n += 1
            if n > start_after:
                yield n, row


def _dataset_rows(source: str, split: str, start_after: int, config: str | None,
                  cache_dir: str | None, kind: str) -> Iterator[tuple[int, Any]]:
    import datasets
    saved = kind == "saved" and any((Path(source) / name).exists()
                                    for name in ("dataset_info.json", "dataset_dict.json"))
    if kind == "hub":
        ds = _hub_dataset(datasets, source, config, split, cache_dir)
    elif not saved:     # a local dataset repository (data files plus a loading recipe)
        ds = datasets.load_dataset(source, config, split=split, cache_dir=cache_dir)
    else:
        ds = datasets.load_from_disk(source)
        if isinstance(ds, datasets.DatasetDict):
            if split not in ds:
                raise ValueError(f"{source} has splits {sorted(ds)}, not {split!r}")
            ds = ds[split]
    for n, row in enumerate(ds, start=1):
        if n > start_after:
            yield n, dict(row)


def has_no_rows(source: str | Path) -> bool:
    """True when a local file holds no rows at all (read only up to its first row); False
    when it has some, and for inputs that cannot tell without loading them (datasets, hub)."""
    kind = input_kind(source)
    if kind == "parquet":
        import pyarrow.parquet as pq
        return pq.ParquetFile(source).metadata.num_rows == 0
    if kind != "jsonl":
        return False
    if _is_json_array(source):
        return next(_json_array_rows(source, 0), None) is None
    with open(source, "rb") as f:
        return not any(raw.strip() for raw in f)


def _hub_dataset(datasets, source: str, config, split: str, cache_dir):
    """A hub dataset, streamed so memory stays flat on large sets; without the network, the
    cached copy, or one line saying what was tried and to pass a local path instead."""
    offline = hub_offline_reason()
    if offline is None:
        return datasets.load_dataset(source, config, split=split, streaming=True,
                                     cache_dir=cache_dir)
    go_offline()
    try:
        return datasets.load_dataset(source, config, split=split, cache_dir=cache_dir)
    except Exception as exc:    # offline, every failure means the same: not in the cache
        raise HubUnreachable(
            f"{source!r} names a Hugging Face Hub dataset, but the hub cannot be reached "
            f"({offline}) and the local cache does not hold it ({type(exc).__name__}); pass a "
            "local path instead: a JSON-lines or Parquet file, or a folder saved by `datasets`"
        ) from None


def count_rows(source: str | Path) -> int | None:
    """Non-blank rows in a local file (for a progress bar); None when unknown without a read."""
    kind = input_kind(source)
    if kind == "parquet":
        import pyarrow.parquet as pq
        return pq.ParquetFile(source).metadata.num_rows
    if kind == "jsonl" and not _is_json_array(source):
        with open(source, "rb") as f:
            return sum(1 for raw in f if raw.strip())
    return None
