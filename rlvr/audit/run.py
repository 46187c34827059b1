"""Running an audit: sample tasks, build every strategy's completions, score them through the
environment's reward in the worker pool (as `rlvr score` does), and report per strategy."""
from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field

from rlvr import __version__
from rlvr.envs.registry import load_env, pooled_env_reward
from rlvr.pool import WorkerPool
from rlvr.pooled_reward import derive_deadline

from .report import BROKEN, OTHER_KINDS, SKIPPED, AuditReport, StrategyResult
from .registry import list_strategies
from .strategy import KINDS, Attempt, Strategy, make_case, task_kind

__all__ = ["AuditConfig", "run_audit"]


@dataclass
class AuditConfig:
    """Everything `rlvr audit` needs."""
    env: str
    """Registered environment name (`rlvr envs list`)."""
    env_args: dict = field(default_factory=dict)
    """Keyword arguments for the environment factory."""
    n: int = 5
    """Tasks to attack (the first n of the split)."""
    split: str | None = None
    """Split to take tasks from (default: the environment's first)."""
    seed: int = 0
    """Seed of the task source (procedural environments)."""
    strategies: str = "*"
    """Comma-separated strategy names or glob patterns (`rlvr audit --list` shows them)."""
    kind: str | None = None
    """The environment's kind (answer, code, instructions, json, format); unset: read from
    its tasks. Strategies for other kinds are skipped."""
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    """Worker processes scoring the attempts (0 = in this process, without deadlines)."""
    deadline_s: float | None = None
    """Hard wall-clock limit per attempt; unset: derived from the environment's declared
    longest verification, as `rlvr score` does."""


def select(pattern: str) -> list[Strategy]:
    """The registered strategies matching a comma-separated list of names or globs."""
    wanted = [p.strip() for p in pattern.split(",") if p.strip()] or ["*"]
    chosen = [s for s in list_strategies() if any(fnmatch.fnmatchcase(s.name, p) for p in wanted)]
    if not chosen:
        names = ", ".join(s.name for s in list_strategies())
        raise ValueError(f"no strategy matches {pattern!r}; registered: {names}")
    return chosen


def run_audit(cfg: AuditConfig, pool: WorkerPool | None = None) -> AuditReport:
    """Attack `cfg.env` with every selected strategy on its first `cfg.n` tasks."""
    if cfg.kind is not None and cfg.kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {cfg.kind!r}")
    if cfg.n < 1:
        raise ValueError(f"n must be at least 1, got {cfg.n}")
    strategies = select(cfg.strategies)
    env = load_env(cfg.env, **cfg.env_args)          # contract-checked, as `rlvr score` does
    tasks = env.sample(cfg.n, split=cfg.split or env.source.splits[0], seed=cfg.seed)
    kind = cfg.kind or task_kind(env, tasks[0])
    cases = [make_case(env, t, kind) for t in tasks]
    own_pool = pool is None and cfg.workers > 0
    pool = WorkerPool(cfg.workers) if own_pool else pool
    try:
        reward = env.reward if pool is None else pooled_env_reward(
            env, deadline_s=derive_deadline(env.reward, cfg.deadline_s),
            env_args=cfg.env_args, pool=pool, registered_as=cfg.env)
        results = _attack(strategies, cases, kind, reward)
    finally:
        if own_pool:
            pool.close()
    return AuditReport(cfg.env, cfg.env_args, kind, [t.id for t in tasks], results,
                       {"rlvr": __version__, "env": f"{env.name}@{env.version}",
                        "verifier": env.reward.version})


def _attack(strategies: list[Strategy], cases: list, kind: str, reward) -> list[StrategyResult]:
    """Build every attempt, score the plants, then everything else in one batch (so the pool
    runs them side by side), and fold the verdicts back per strategy."""
    built: dict[str, list] = {}
    results: dict[str, StrategyResult] = {}
    for s in strategies:
        if kind not in s.kinds:
            results[s.name] = StrategyResult(s.name, s.legit, SKIPPED,
                                             note=f"{OTHER_KINDS}{', '.join(s.kinds)}")
            continue
        try:
            built[s.name] = [(c.task, a) for c in cases for a in s.attempts(c)]
        except Exception as exc:       # the strategy's own bug: named, and a finding
            results[s.name] = StrategyResult(s.name, s.legit, BROKEN,
                                             note=f"raised {type(exc).__name__}: {exc}")
            continue
        if not any(not a.plant for _, a in built[s.name]):
            results[s.name] = StrategyResult(s.name, s.legit, SKIPPED,
                                             note="no attempt for these tasks")
            del built[s.name]
    for plants in (True, False):
        rows = [(name, t, a) for name, pairs in built.items() for t, a in pairs
                if a.plant == plants]
        if not rows:
            continue
        controls = {(t.id, a.control, a.finish_reason): t for _, t, a in rows
                    if a.control is not None}          # each control scored once
        verdicts = reward.score_batch(
            [t for _, t, _ in rows] + list(controls.values()),
            [a.completion() for _, _, a in rows]
            + [Attempt(text, finish).completion() for _, text, finish in controls])
        if plants:
            continue
        baseline = dict(zip(controls, verdicts[len(rows):]))
        by_name: dict[str, list] = {}
        for (name, task, attempt), verdict in zip(rows, verdicts):
            control = baseline.get((task.id, attempt.control, attempt.finish_reason))
            by_name.setdefault(name, []).append((task.id, attempt, verdict, control))
        for name, scored in by_name.items():
            legit = next(s.legit for s in strategies if s.name == name)
            results[name] = StrategyResult.scored(name, legit, scored)
    return [results[s.name] for s in strategies]
