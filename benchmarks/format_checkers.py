"""Formatting rewards: checks/s over a 100k-response mix, in one process and with 2 workers.

    .venv/bin/python benchmarks/format_checkers.py [--responses 100000] [--workers 2]

The mix: 80% `ifeval-style` responses (gold, gold with a comma / a capital / the last line
dropped / a chatty preamble, junk), 10% `json-schema` (gold, wrong type, prose), 10%
`think-format` (well-formed, trailing text, unclosed). A *check* is one instruction checked
(ifeval) or one response checked (json-schema, think-format). Three ways, side by side:

- `checkers`: the bare checker functions in a plain loop (arguments pre-validated);
- `rewards, loop`: each environment's full reward (`env.reward.score`, parsing, validation,
  the zero-weight loose-mode component, Verdicts) in a plain single-process loop;
- `rewards, pool`: the same rewards in `rlvr.pool.WorkerPool(workers)`, chunks of responses
  per call (as `rlvr score` sends them).

Target: >= 20,000 checks/s single-process on these short responses.
"""
from __future__ import annotations

import argparse
import os
import random
import time

from rlvr import Factory, WorkerPool, load_env
from rlvr.verifiers.instructions import CHECKERS, instruction_spec
from rlvr.verifiers.parser import ThinkParser
from rlvr.verifiers.structured import parse_json, schema_check

MODULE = "format_checkers"
FAMILIES = (("ifeval-style", 0.8), ("json-schema", 0.1), ("think-format", 0.1))


def _variants(family: str, env, task) -> list[str]:
    gold = env.gold(task)
    if family == "ifeval-style":
        return [gold, gold + "\nOne more thing, really.", "Sure!\n\n" + gold,
                "\n".join(gold.split("\n")[:-1]) or gold[:20], gold.upper(), "I don't know."]
    if family == "json-schema":
        return [gold, gold.replace('"', "'"), "Here is the object you asked for."]
    return [gold, gold + " Hope that helps!", "<think>" + task.metadata["question"]]


def build_mix(n: int, n_tasks: int, seed: int = 0) -> list[tuple[str, object, str]]:
    """n (family, task, response) triples, drawn with the FAMILIES weights."""
    rng = random.Random(seed)
    pools = {}
    for family, _ in FAMILIES:
        env = load_env(family)
        pools[family] = [(task, text) for task in env.sample(n_tasks)
                         for text in _variants(family, env, task)]
    names, weights = zip(*FAMILIES)
    out = []
    for family in rng.choices(names, weights, k=n):
        task, text = rng.choice(pools[family])
        out.append((family, task, text))
    return out


def n_checks(family: str, task) -> int:
    return len(task.metadata["instruction_id_list"]) if family == "ifeval-style" else 1


def bare_checks(mix) -> list[tuple]:
    """The bare work each response needs, with arguments validated beforehand (not timed)."""
    parser = ThinkParser()
    out = []
    for family, task, text in mix:
        if family == "ifeval-style":
            out.append((family, instruction_spec(task.metadata), text))
        elif family == "json-schema":
            out.append((family, task.answer, text))
        else:
            out.append((family, parser, text))
    return out


def run_checkers(work) -> None:
    for family, arg, text in work:
        if family == "ifeval-style":
            for iid, kwargs in arg:
                CHECKERS[iid](text, **kwargs)
        elif family == "json-schema":
            value, problem = parse_json(text)
            if not problem:
                schema_check(value, arg)
        else:
            arg.parse(text)


def build_envs() -> dict:
    return {family: load_env(family, check=False) for family, _ in FAMILIES}


def score_chunk(envs, chunk) -> int:
    """In a worker (or in process): score a chunk of (family, task, text); return #scored."""
    for family, task, text in chunk:
        envs[family].reward.score(task, text)
    return len(chunk)


def timed(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--responses", type=int, default=100_000)
    ap.add_argument("--tasks", type=int, default=500, help="distinct tasks per family")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=1000, help="responses per pool call")
    args = ap.parse_args()

    mix = build_mix(args.responses, args.tasks)
    checks = sum(n_checks(f, t) for f, t, _ in mix)
    mean_chars = sum(len(text) for _, _, text in mix) / len(mix)
    print(f"{len(mix)} responses ({mean_chars:.0f} chars on average), {checks} checks; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")

    work = bare_checks(mix)
    t_bare = timed(run_checkers, work)
    envs = build_envs()
    t_loop = timed(score_chunk, envs, mix)
    chunks = [mix[i:i + args.chunk] for i in range(0, len(mix), args.chunk)]
    # Workers do not re-run __main__: they import this file as a module (its folder is
    # sys.path[0] when run as a script, and spawned workers inherit sys.path).
    fn, context = f"{MODULE}:score_chunk", Factory(f"{MODULE}:build_envs")
    with WorkerPool(args.workers) as pool:
        pool.map(fn, chunks[:args.workers], deadline_s=120, context=context)  # spawn + import
        t0 = time.perf_counter()
        outcomes = pool.map(fn, chunks, deadline_s=120, context=context)
        t_pool = time.perf_counter() - t0
    assert all(o.status == "ok" for o in outcomes), [o.error for o in outcomes if o.error][:3]

    rows = [("checkers, plain loop", t_bare), ("rewards, plain loop", t_loop),
            (f"rewards, WorkerPool({args.workers})", t_pool)]
    print(f"{'':28s} {'seconds':>8s} {'checks/s':>10s} {'responses/s':>12s}")
    for name, t in rows:
        print(f"{name:28s} {t:8.2f} {checks / t:10.0f} {len(mix) / t:12.0f}")
    print(f"rewards loop / checkers loop: {t_bare / t_loop:.2f}x the throughput")
    print(f"pool ({args.workers} workers) / rewards loop: {t_loop / t_pool:.2f}x the throughput")
    per_family = {f: [m for m in mix if m[0] == f] for f, _ in FAMILIES}
    for family, items in per_family.items():
        t = timed(score_chunk, envs, items)
        print(f"  {family:14s} reward loop: {sum(n_checks(f, tk) for f, tk, _ in items) / t:8.0f} "
              f"checks/s, {len(items) / t:8.0f} responses/s")
    lean = load_env("ifeval-style", check=False, log_other_mode=False)
    items = per_family["ifeval-style"]
    t_lean = timed(lambda: [lean.reward.score(task, text) for _, task, text in items])
    print(f"  ifeval-style   strict only (log_other_mode=False): "
          f"{sum(n_checks(f, tk) for f, tk, _ in items) / t_lean:8.0f} checks/s")


if __name__ == "__main__":
    main()
