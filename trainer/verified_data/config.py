"""`DistillDataConfig`: what `rlvr distill-data` builds, one field per option."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

__all__ = ["DistillDataConfig", "PROGRAM"]

PROGRAM = "program"
"""The `teacher` value that names the environment's own solver (`Environment.teacher`)."""


@dataclass
class DistillDataConfig:
    """A dataset of teacher completions that the environment's rewards verified.

    The resolved config is written beside the output (OUTPUT.candidates.meta.json); a rerun
    with the same sampling settings continues the run."""
    output: str
    """JSONL file of kept rows (prompt, completion, verdict); its side files share its stem."""
    env: str = "arithmetic"
    """Environment name (`rlvr envs list`)."""
    env_args: dict = field(default_factory=dict)
    """Keyword arguments for the environment factory."""
    split: str = "train"
    """Split the tasks come from."""
    tasks: int = 200
    """Number of distinct tasks (the first N distinct prompts of the split for `seed`)."""
    teacher: str = PROGRAM
    """Who writes the completions: 'program' (the environment's solver), a model folder, hub
    id, 'smollm2' or an rlvr run directory (its latest policy); with `endpoint`, the model
    name the server serves."""
    endpoint: str = ""
    """Base URL of an OpenAI-compatible server (vLLM, SGLang, a hosted API); empty = local."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the endpoint's API key (unset: no key is sent)."""
    concurrency: int = 8
    """Endpoint requests in flight at once."""
    retries: int = 3
    """Endpoint retries per request (server errors, rate limits, timeouts), with backoff."""
    request_timeout_s: float = 120.0
    """Endpoint deadline per request."""
    k: int = 4
    """Completions sampled per task (a programmatic teacher writes its one trace k times)."""
    temperature: float = 1.0
    """Sampling temperature of a model teacher."""
    top_p: float = 1.0
    """Nucleus threshold of a model teacher."""
    max_completion_length: int = 256
    """Generation limit in tokens for a model teacher."""
    batch_size: int = 64
    """Completions per generate call (a local model teacher)."""
    tokenizer: str = ""
    """Tokenizer folder or hub id: a local teacher renders its prompts with it (default: the
    model's own); for other teachers it only counts `completion_tokens` (empty: not counted)."""
    seed: int = 0
    """Seeds the task list and every task's sampling generator."""
    keep_per_task: int = 0
    """Most rows kept per task (0 = every verified one)."""
    shortest_first: bool = True
    """Keep the shortest verified completions of a task first (else in sampling order)."""
    dedup: bool = True
    """Keep one copy of completions identical after whitespace is collapsed."""
    integrity: str = "drop"
    """The reward-hacking monitor on every verified trace (docs/monitoring.md): 'drop' the
    traces a hack detector flags or the environment's second opinion does not reward, 'keep'
    them (flags counted and written in each row's `integrity_flags`), or 'off'."""
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    """Scoring worker processes, as `rlvr score` (0 = score in this process, no deadlines)."""
    datasets_dir: str = ""
    """Also save the kept rows as a `datasets` folder here (load_from_disk); empty = none."""
    progress: bool = True
    """Show progress bars on stderr."""

    def __post_init__(self):
        for name in ("tasks", "k", "max_completion_length", "batch_size", "concurrency"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.integrity not in ("drop", "keep", "off"):
            raise ValueError(f"integrity={self.integrity!r}; expected 'drop', 'keep' or 'off'")
        if self.keep_per_task < 0 or self.workers < 0:
            raise ValueError("keep_per_task and workers must be >= 0")
        if self.teacher == PROGRAM and self.endpoint:
            raise ValueError("teacher 'program' is the environment's solver: drop --endpoint, "
                             "or name the model the endpoint serves with --teacher")
        if not self.output.endswith(".jsonl"):
            raise ValueError(f"output {self.output!r} is not a .jsonl file; name one, e.g. "
                             "-o traces.jsonl")

    def sampling_identity(self) -> dict:
        """The settings a resumed run must share with the run it continues (the selection
        options and the task count may change: kept rows are chosen again from every
        sampled row, and the first N distinct tasks do not depend on N)."""
        d = asdict(self)
        for name in ("output", "tasks", "concurrency", "retries", "request_timeout_s",
                     "api_key_env", "batch_size", "keep_per_task", "shortest_first", "dedup",
                     "integrity",
                     "workers", "datasets_dir", "progress"):
            d.pop(name)
        return d
