"""rlvr: reinforcement learning with verifiable rewards for language models.

`import rlvr` stays light (no torch): components load when first used.
"""
from importlib import import_module

__version__ = "0.1.0"

_EXPORTS = {
    "Task": "rlvr.core", "Completion": "rlvr.core", "Verdict": "rlvr.core",
    "Reward": "rlvr.core", "BaseReward": "rlvr.core", "FunctionReward": "rlvr.core",
    "WeightedSum": "rlvr.core", "reward": "rlvr.core", "STATUSES": "rlvr.core",
    "register_env": "rlvr.envs.registry", "load_env": "rlvr.envs.registry", "list_envs": "rlvr.envs.registry",
    "check_env": "rlvr.envs.registry", "EnvContractError": "rlvr.envs.registry",
    "Environment": "rlvr.envs.base", "RowSource": "rlvr.envs.base",
    "WorkerPool": "rlvr.pool", "Factory": "rlvr.pool", "PooledReward": "rlvr.pooled_reward",
    "score_file": "rlvr.scoring", "ScoreConfig": "rlvr.scoring",
}
__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'rlvr' has no attribute {name!r}")
