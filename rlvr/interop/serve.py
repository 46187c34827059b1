"""`rlvr serve ENV`: a registered environment as an OpenEnv server.

Built with OpenEnv's own server (`openenv.core.env_server.create_fastapi_app`: WebSocket
sessions at `/ws`, `/health`, `/schema`, `/metadata`), so any OpenEnv client -- TRL's
environment factories, `GenericEnvClient`, other trainers' harnesses -- talks to it unchanged.
Each WebSocket session holds one episode at a time (`rlvr.interop.served`); verdicts are
computed as `rlvr score` computes them: the environment's reward rebuilt by name in a worker
pool, under the deadline derived from its declared longest verification, code in the sandbox.

OpenEnv's plain HTTP `/reset` and `/step` build a fresh environment per request (stateless), so
an episode of more than one step needs the WebSocket session, as OpenEnv's clients use.

    rlvr serve tool-arithmetic --port 8000
    python -c "from openenv import GenericEnvClient as C; e = C(base_url='http://127.0.0.1:8000').sync(); print(e.reset())"
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["ServeConfig", "build_app", "serve"]


@dataclass
class ServeConfig:
    """Everything `rlvr serve` needs."""
    env: str
    """Registered environment name (`rlvr envs list`)."""
    env_args: dict = field(default_factory=dict)
    """Keyword arguments for the environment factory."""
    host: str = "127.0.0.1"
    """Address to listen on (0.0.0.0 to accept other machines)."""
    port: int = 8000
    """Port to listen on."""
    sessions: int = 64
    """Most concurrent WebSocket sessions (one episode each); a client past it is refused with
    OpenEnv's CAPACITY_REACHED error."""
    idle_timeout_s: float | None = 600.0
    """A session idle this long is closed and its slot freed (a client that vanished without
    closing its socket); none = never."""
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    """Worker processes that score finished episodes (0 = score in the server process, without
    deadlines: for debugging)."""
    deadline_s: float | None = None
    """Hard wall-clock limit per verdict; past it the verdict is a `timeout`. Unset: derived from
    the environment's declared longest verification, as in `rlvr score`."""
    split: str = "train"
    """Split a `reset` without a task id or split draws its tasks from, in order."""
    seed: int = 0
    """Seed of the served split (procedural environments)."""


def build_app(cfg: ServeConfig):
    """(the FastAPI app, the shared `Served`): the environment loaded and contract-checked once,
    its reward in a worker pool of `cfg.workers` processes."""
    from openenv.core.env_server import ConcurrencyConfig, create_fastapi_app

    from rlvr.envs.registry import load_env, pooled_env_reward
    from rlvr.pool import WorkerPool
    from rlvr.pooled_reward import derive_deadline

    from .served import RlvrAction, RlvrObservation, RlvrState, Served, ServedEnvironment
    env = load_env(cfg.env, **cfg.env_args)
    reward = env.reward
    if cfg.workers > 0:
        reward = pooled_env_reward(env, deadline_s=derive_deadline(env.reward, cfg.deadline_s),
                                   env_args=cfg.env_args, pool=WorkerPool(cfg.workers).start(),
                                   registered_as=cfg.env)
    served = Served(env, reward, cfg.split, cfg.seed)

    def session() -> ServedEnvironment:
        return ServedEnvironment(served)
    session.__name__ = f"rlvr:{cfg.env}"
    concurrency = ConcurrencyConfig(max_concurrent_envs=cfg.sessions,
                                    session_timeout=cfg.idle_timeout_s)
    app = create_fastapi_app(session, RlvrAction, RlvrObservation, concurrency_config=concurrency,
                             env_name=cfg.env, state_cls=RlvrState)
    return app, served


def serve(cfg: ServeConfig, ready: Callable[[str], None] | None = None) -> None:
    """Serve until interrupted (uvicorn, which OpenEnv's servers run on); `ready` is called
    with the WebSocket URL once the environment is loaded."""
    import uvicorn
    app, _ = build_app(cfg)
    if ready is not None:
        ready(f"ws://{cfg.host}:{cfg.port}/ws")
    uvicorn.run(app, host=cfg.host, port=cfg.port, log_level="warning")
