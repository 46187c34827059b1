"""`rlvr serve ENV`: serve a registered environment over OpenEnv's protocol (rlvr.interop.serve).

Options are built from `ServeConfig`'s fields and docstrings (rlvr.cli.options).
"""
from __future__ import annotations

from rlvr.usage import UsageError, field_docs, parse_kv

from .options import add_config_options, config_kwargs


def add_parser(sub) -> None:
    from rlvr.interop.serve import ServeConfig
    docs = field_docs(ServeConfig)
    p = sub.add_parser("serve", help="serve an environment as an OpenEnv server (reset/step over "
                                     "WebSocket, rlvr's verdict in each finished step)",
                       description="Serve a registered environment with OpenEnv's server: "
                                   "`reset` gives a task's prompt and tools, `step` takes the "
                                   "policy's message and answers with tool results or feedback, "
                                   "or ends the episode with its reward and rlvr's verdict "
                                   "(status, reason, components) in the metadata. A failed "
                                   "verdict's reward is null, never 0.")
    p.add_argument("env", help=docs["env"])
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                   help=docs["env_args"] + " (repeatable)")
    add_config_options(p, ServeConfig, skip=("env",), flags={"deadline_s": ("--deadline",)})
    p.set_defaults(func=cmd_serve)


def cmd_serve(args) -> int:
    from rlvr.envs.registry import EnvArgumentError, EnvContractError, UnknownEnvError
    from rlvr.interop.serve import ServeConfig, serve
    if args.workers < 0 or args.sessions < 1 or not 0 <= args.port < 65536 \
            or (args.deadline_s is not None and args.deadline_s <= 0):
        raise UsageError("--workers must be >= 0, --sessions >= 1, --port in 0..65535 and "
                         "--deadline > 0")
    cfg = ServeConfig(**config_kwargs(ServeConfig, args, env_args=parse_kv(args.env_arg)))
    try:
        import openenv  # noqa: F401  (an optional extra: say how to get it)
    except ImportError:
        raise UsageError("rlvr serve needs OpenEnv: pip install 'rlvr[openenv]'") from None
    try:
        serve(cfg, ready=lambda url: print(f"serving {cfg.env} at {url} (Ctrl-C stops)",
                                           flush=True))
    except (UnknownEnvError, EnvContractError, EnvArgumentError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    return 0
