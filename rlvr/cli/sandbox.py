"""`rlvr sandbox run FILE` and `rlvr sandbox build-image`.

`run` executes one program under the default limits, passes its stdout/stderr through (capped)
and prints a final JSON line with the run result -- for checking a set-up, and for tests.
Exit code: 0 when the program ran and exited 0, 1 otherwise, 2 when the sandbox is unavailable.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from rlvr.sandbox.base import LANGUAGES, Limits, SandboxUnavailable
from rlvr.usage import UsageError

from .options import add_config_options, config_kwargs

_SUFFIXES = {".py": "python", ".c": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp"}


def add_parser(sub) -> None:
    p = sub.add_parser("sandbox", help="run a program in the sandbox; build the Docker image",
                       description=__doc__.split("\n\n")[0])
    cmds = p.add_subparsers(dest="sandbox_command", metavar="SUBCOMMAND")
    run = cmds.add_parser("run", help="run one program under the default limits")
    run.add_argument("file", help="program source (.py, .c, .cpp)")
    run.add_argument("--backend", choices=["process", "docker"], default="process")
    run.add_argument("--language", choices=sorted(LANGUAGES),
                     help="default: from the file suffix")
    run.add_argument("--stdin", help="file whose contents are the program's stdin")
    add_config_options(run, Limits)
    run.set_defaults(func=cmd_run)
    build = cmds.add_parser("build-image", help="import the Docker backend's base image locally")
    build.add_argument("--force", action="store_true", help="rebuild even if it exists")
    build.set_defaults(func=cmd_build_image)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def cmd_run(args) -> int:
    from rlvr.sandbox import get_sandbox
    path = Path(args.file)
    if not path.is_file():
        raise UsageError(f"no such file: {args.file}")
    language = args.language or _SUFFIXES.get(path.suffix)
    if language is None:
        raise UsageError(f"cannot tell the language of {path.name}; pass --language")
    try:
        limits = Limits(**config_kwargs(Limits, args))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    stdin = Path(args.stdin).read_bytes() if args.stdin else b""
    try:
        kwargs = {"pool_size": 1} if args.backend == "docker" else {"slots": 1}
        with get_sandbox(args.backend, limits=limits, **kwargs) as sb:
            res = sb.run(path.read_text(), language=language, stdin=stdin)
    except SandboxUnavailable as exc:
        print(json.dumps({"status": "infra_error", "reason": str(exc)}))
        return 2
    sys.stdout.write(res.stdout)
    sys.stdout.flush()
    sys.stderr.write(res.stderr)
    summary = res.to_dict()
    for key in ("stdout", "stderr", "channel"):
        summary.pop(key)
    print(json.dumps(summary))
    return 0 if res.ok else 1


def cmd_build_image(args) -> int:
    from rlvr.sandbox.docker import build_image
    try:
        tag = build_image(force=args.force)
    except SandboxUnavailable as exc:
        print(f"rlvr sandbox build-image: {exc}", file=sys.stderr)
        return 2
    print(tag)
    return 0
