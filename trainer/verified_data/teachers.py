"""Teachers: whatever writes k completions per task, behind one small interface.

    teacher.sample(tasks, k, seeds) -> per task, k Completions or the Exception that stopped it

A task the teacher could not serve (an endpoint error after its retries, a solver that raised)
comes back as its exception: the builder reports it and leaves it out, never scores it as wrong,
and a rerun asks again. Three kinds:

- `ProgramTeacher`: the environment's own solver (`Environment.teacher`), deterministic.
- `LocalTeacher`: a transformers model (folder, hub id, 'smollm2', or an rlvr run directory's
  latest policy), sampled with the trainer's HF engine and one seed per task.
- `EndpointTeacher`: any OpenAI-compatible server, through `rlvr eval --endpoint`'s client.
"""
from __future__ import annotations

from typing import Protocol, Sequence

from rlvr.core import Completion, Task

from rlvr.trainer.verified_data.config import PROGRAM, DistillDataConfig

__all__ = ["Teacher", "ProgramTeacher", "LocalTeacher", "EndpointTeacher", "make_teacher",
           "NoProgramTeacher"]


class NoProgramTeacher(ValueError):
    """`teacher='program'` for an environment without a solver."""


class Teacher(Protocol):
    name: str
    """How the teacher is named in every kept row (`teacher`)."""

    def tasks_per_call(self, k: int) -> int:
        """How many tasks one `sample` call should get (a batch, or requests in flight)."""

    def sample(self, tasks: Sequence[Task], k: int,
               seeds: list[int]) -> list[list[Completion] | Exception]:
        """k completions per task, in task order, or the exception that stopped a task."""

    def close(self) -> None: ...


class ProgramTeacher:
    """The environment's solver: `env.teacher(task)` is one worked solution, written k times
    (it is deterministic, so `dedup` keeps one)."""

    def __init__(self, env):
        if env.teacher is None:
            raise NoProgramTeacher(
                f"environment {env.name!r} has no programmatic teacher (Environment.teacher); "
                "use --teacher MODEL (a model folder, hub id, 'smollm2' or a run directory) or "
                "--endpoint URL --teacher SERVED_MODEL")
        self.solve, self.name = env.teacher, f"program:{env.name}"

    def tasks_per_call(self, k: int) -> int:
        return 1        # a solver has no batch: each task is stored as soon as it is solved

    def sample(self, tasks, k, seeds):
        out = []
        for task in tasks:
            try:
                text = self.solve(task)
            except Exception as exc:   # our solver's bug: a counted failure naming it, never 0
                out.append(RuntimeError(f"program teacher raised {type(exc).__name__}: {exc}"))
                continue
            out.append([Completion(text) for _ in range(k)])
        return out

    def close(self) -> None:
        pass


class LocalTeacher:
    """A transformers model on this machine, sampled with the trainer's HF engine (shared-prefix
    sampler: each prompt prefilled once for its k samples), seeded per task."""

    def __init__(self, cfg: DistillDataConfig):
        import torch

        from rlvr.trainer.sampling.engines import HFEngine
        from rlvr.trainer.evaluation.evaluate import resolve_model
        from rlvr.trainer.models.loading import load_policy, load_tokenizer
        path = resolve_model(cfg.teacher)
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        tokenizer = load_tokenizer(resolve_model(cfg.tokenizer) if cfg.tokenizer else path)
        self.engine = HFEngine(load_policy(path, "float32", device), tokenizer, cfg.batch_size,
                               share_prefix=True)
        self.cfg, self.name = cfg, cfg.teacher

    def tasks_per_call(self, k: int) -> int:
        return max(1, self.cfg.batch_size // k)

    def sample(self, tasks, k, seeds):
        cfg = self.cfg
        rollout = self.engine.generate(list(tasks), k, cfg.max_completion_length,
                                       temperature=cfg.temperature, top_p=cfg.top_p,
                                       seeds=seeds)
        return [rollout.completions[i * k:(i + 1) * k] for i in range(len(tasks))]

    def close(self) -> None:
        pass


class EndpointTeacher:
    """An OpenAI-compatible server through `rlvr eval`'s client (retries, timeouts, per-task
    seeds); a task whose request still fails is returned as its EndpointError."""

    def __init__(self, cfg: DistillDataConfig):
        from rlvr.trainer.evaluation.endpoint import EndpointConfig, EndpointSampler
        self.sampler = EndpointSampler(EndpointConfig(
            url=cfg.endpoint, model=cfg.teacher, api_key_env=cfg.api_key_env,
            concurrency=cfg.concurrency, retries=cfg.retries, timeout_s=cfg.request_timeout_s))
        self.cfg, self.name = cfg, f"{cfg.teacher} @ {cfg.endpoint}"

    def tasks_per_call(self, k: int) -> int:
        return self.sampler.tasks_per_call(k)

    def sample(self, tasks, k, seeds):
        cfg = self.cfg
        return self.sampler.sample(tasks, k, seeds, max_tokens=cfg.max_completion_length,
                                   temperature=cfg.temperature, top_p=cfg.top_p)

    def close(self) -> None:
        self.sampler.close()


def make_teacher(cfg: DistillDataConfig, env) -> Teacher:
    """The teacher `cfg` names (see `DistillDataConfig.teacher`)."""
    if cfg.teacher == PROGRAM:
        return ProgramTeacher(env)
    if cfg.endpoint:
        return EndpointTeacher(cfg)
    return LocalTeacher(cfg)
