"""`rlvr audit --env NAME`: attack an environment with the registered exploit strategies
(rlvr.audit); exit 1 when a wrong strategy earned reward, an attempt escaped the verdict, or a
legitimate form was refused.

Options are built from `AuditConfig`'s fields and docstrings (rlvr.cli.options).
"""
from __future__ import annotations

import json
from pathlib import Path

from rlvr.audit import AuditConfig, list_strategies, run_audit
from rlvr.usage import EXIT_FAILURE, EXIT_OK, UsageError, field_docs, parse_kv

from .options import add_config_options, config_kwargs


def add_parser(sub) -> None:
    docs = field_docs(AuditConfig)
    p = sub.add_parser("audit", help="attack an environment with generic exploit strategies",
                       description="Try a library of exploit strategies (and legitimate "
                                   "re-renderings of the gold) on an environment's tasks; exit "
                                   "1 when any wrong strategy earns reward, escapes the verdict, "
                                   "or any legitimate form is refused.")
    p.add_argument("--env", help=docs["env"])
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                   help=docs["env_args"] + " (repeatable)")
    add_config_options(p, AuditConfig, skip=("env",), flags={"deadline_s": ("--deadline",), "n": ("-n", "--n")})
    p.add_argument("--json", metavar="PATH", help="also write the report as JSON to PATH "
                                                  "('-' for stdout, instead of the table)")
    p.add_argument("--no-examples", action="store_true", help="leave out the examples")
    p.add_argument("--list", action="store_true", help="list the registered strategies and exit")
    p.set_defaults(func=cmd_audit)


def cmd_audit(args) -> int:
    from rlvr.envs.registry import EnvArgumentError, EnvContractError, UnknownEnvError
    if args.list:
        for s in list_strategies():
            side = "legit" if s.legit else "wrong"
            print(f"{s.name:24} {side:5} {','.join(s.kinds):32} {s.description}")
        return EXIT_OK
    if not args.env:
        raise UsageError("give --env NAME (rlvr envs list shows them)")
    if args.n < 1 or args.workers < 0 or (args.deadline_s is not None and args.deadline_s <= 0):
        raise UsageError("--n must be >= 1, --workers >= 0 and --deadline > 0")
    cfg = AuditConfig(**config_kwargs(AuditConfig, args, env_args=parse_kv(args.env_arg)))
    try:
        report = run_audit(cfg)
    except (UnknownEnvError, EnvContractError, EnvArgumentError, ValueError, KeyError) as exc:
        raise UsageError(str(exc)) from None
    if args.json == "-":
        print(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        print(report.render(examples=not args.no_examples))
        if args.json:
            Path(args.json).write_text(json.dumps(report.to_dict(), indent=2, default=str))
    return EXIT_FAILURE if report.findings else EXIT_OK
