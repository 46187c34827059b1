"""`rlvr envs list` and `rlvr envs show NAME`."""
from __future__ import annotations

import json
import re

from rlvr.envs.registry import EnvArgumentError, env_info, list_envs, load_env
from rlvr.usage import EXIT_OK, UsageError, parse_kv


def add_parser(sub) -> None:
    from rlvr.cli import add_import_option
    p = sub.add_parser("envs", help="list registered environments or show one")
    envs_sub = p.add_subparsers(dest="envs_command", metavar="ACTION", required=True)
    listing = envs_sub.add_parser("list", help="names of every registered environment")
    listing.set_defaults(func=cmd_list)
    add_import_option(listing)
    show = envs_sub.add_parser("show", help="an environment's rewards, a sample prompt and gold")
    add_import_option(show)
    show.add_argument("name")
    show.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                      help="keyword argument for the environment factory (repeatable)")
    show.add_argument("--split", default=None, help="split to sample from (default: the first)")
    show.set_defaults(func=cmd_show)


def cmd_list(args) -> int:
    for name in list_envs():
        print(f"{name:24s} {first_sentence(env_info(name)['doc'])}")
    return EXIT_OK


_SENTENCE_END = re.compile(r"[.!?](?=\s+[A-Z`(\[]|\s*$)")


def first_sentence(doc: str) -> str:
    """The docstring's first sentence, whole even when it wraps over several lines: the first
    paragraph with its line breaks joined, cut after the first `.`, `!` or `?` that ends the
    text or is followed by a capital (so "e.g. the" and "3.5" do not end it)."""
    paragraph = " ".join((doc or "").strip().split("\n\n")[0].split())
    end = _SENTENCE_END.search(paragraph)
    return paragraph[:end.end()] if end else paragraph


def cmd_show(args) -> int:
    try:
        env = load_env(args.name, **parse_kv(args.env_arg))
    except EnvArgumentError as exc:     # say how to pass arguments if none were passed
        hint = "" if args.env_arg else "; pass factory arguments with --env-arg KEY=VALUE"
        raise UsageError(f"{exc}{hint}") from None
    except ValueError as exc:       # the factory's own check of a value
        raise UsageError(f"environment {args.name!r}: {exc}") from None
    info = env.describe()
    task = env.sample(1, split=args.split or env.source.splits[0])[0]
    print(json.dumps(info, indent=2))
    print(f"\nsignature: {args.name}{env_info(args.name)['signature']}")
    print(f"\nsample task id: {task.id}")
    print("prompt:")
    if isinstance(task.prompt, list):
        print("\n".join(map(message_line, task.prompt)))
    else:
        print(f"  {task.prompt}")
    print(f"gold answer: {task.answer!r}")
    gold = None if env.gold is None else env.gold(task)
    if gold is None:
        print("gold completion: (none: these tasks carry no reference answer)")
    elif getattr(gold, "messages", None):       # an episode: the transcript a perfect policy plays
        print("gold episode:")
        print("\n".join(map(message_line, gold.messages)))
    else:
        print(f"gold completion: {getattr(gold, 'text', gold)!r}")
    return EXIT_OK


def message_line(msg: dict) -> str:
    """One chat message as an indented line: `[role name] content`, tool calls as
    `name(arguments)`."""
    who = " ".join(str(x) for x in (msg.get("role"), msg.get("name")) if x)
    calls = [c.get("function", c) for c in msg.get("tool_calls") or []]
    parts = [str(msg.get("content") or "")] + [
        f"calls {f.get('name')}({_arguments(f.get('arguments'))})" for f in calls]
    return f"  [{who}] " + " ".join(p for p in parts if p)


def _arguments(args) -> str:
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
