"""rlvr environments as verl's custom reward function.

In a verl config:

    custom_reward_function:
      path: /path/to/site-packages/rlvr/integrations/verl.py
      name: compute_score

`data_source` names the rlvr environment (a row's `data_source` column), `ground_truth` is the gold
answer, and `extra_info` may carry `rlvr_env_args` (factory keyword arguments) and any task
fields a reward reads (tests, schemas...). verl has no way to skip a sample, so a failed verdict
(timeout, error, ...) scores 0.0 and is flagged with `rlvr_failed=1` for its logs.
"""
from __future__ import annotations

import json
from functools import lru_cache

from rlvr.core import Completion, Task

__all__ = ["compute_score"]


@lru_cache(maxsize=32)
def _env(name: str, args_json: str):
    from rlvr.envs.registry import load_env
    return load_env(name, **json.loads(args_json))


def compute_score(data_source: str, solution_str: str, ground_truth, extra_info=None) -> dict:
    """Score one verl sample with the rlvr environment named by `data_source`."""
    extra = dict(extra_info or {})
    env_args = extra.pop("rlvr_env_args", {}) or {}
    env = _env(data_source, json.dumps(env_args, sort_keys=True))
    task = Task(str(extra.get("index", "")), extra.get("question", ""), ground_truth, extra)
    v = env.reward.score(task, Completion(solution_str))
    return {"score": 0.0 if v.failed else float(v.score), "rlvr_failed": int(v.failed),
            "rlvr_status": v.status, **{f"rlvr/{k}": float(s) for k, s in v.components.items()}}
