"""Where a multi-turn episode's time goes: SmolLM2-135M on `tool-arithmetic`.

Runs the same seeded episodes twice -- later turns sampled with the common prefix prefilled
once (`rlvr.trainer.sampling.rollout.prefill`, the library's path) and with every conversation prefilled whole (the
previous path) -- and prints, per sampling call, the contexts' lengths, the tokens generated and
the CPU seconds (load-independent, unlike wall time on a shared machine), the tool calls' cost,
and whether the two paths gave identical episodes.

    OMP_NUM_THREADS=1 python benchmarks/multiturn_rollout.py --tasks 2 --group 4 --max-new 64
"""
from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--max-new", type=int, default=64)
    ap.add_argument("--digits", type=int, default=4)
    args = ap.parse_args()

    import torch
    torch.set_num_threads(1)
    import rlvr.envs.tool_envs  # noqa: F401  (registers tool-arithmetic)
    from rlvr.envs.registry import load_env
    from rlvr.trainer import engines, episodes, rollout
    from rlvr.trainer.sampling.engines import HFEngine
    from rlvr.trainer.models.loading import load_policy, load_tokenizer, resolve_model
    from rlvr.verifiers.tools import Toolbox

    name = resolve_model(args.model)
    tok, model = load_tokenizer(name), load_policy(name, "float32", torch.device("cpu")).eval()
    env = load_env("tool-arithmetic", digits=args.digits)
    tasks = [env.get_task(f"tool-arithmetic/train/0/{i}") for i in range(args.tasks)]
    print("prompt tokens:", len(rollout.encode_prompt(tok, tasks[0].prompt, env.tool_schemas)))

    calls: list[tuple] = []

    def timed(tag, fn):
        def run(*a, **k):
            t0 = time.process_time()
            out = fn(*a, **k)
            calls.append((tag, time.process_time() - t0, a, out))
            return out
        return run

    shared, continuations, tool_run = (rollout.sample_shared_prefix,
                                       engines.sample_continuations, Toolbox.run)

    def whole(model, contexts, max_new, eos, pad, temperature=1.0, top_p=1.0, greedy=False,
              seeds=None):                        # the previous path: no prefix shared
        return shared(model, contexts, 1, max_new, eos, pad, temperature, top_p, greedy,
                      seeds=seeds)

    rollout.sample_shared_prefix = timed("turn 1", shared)
    Toolbox.run = timed("tools", tool_run)
    engine, got = HFEngine(model, tok, share_prefix=True), {}
    for mode, fn in (("common prefix once", continuations), ("whole conversations", whole)):
        engines.sample_continuations = timed(f"later turns ({mode})", fn)
        calls.clear()
        t0 = time.process_time()
        r = episodes.run_episodes(engine, env, tok, tasks, args.group, args.max_new,
                                  seeds=list(range(args.tasks)))
        got[mode] = [e.token_ids for e in r.completions]
        print(f"== {mode}: {time.process_time() - t0:.1f} CPU s, load {os.getloadavg()[0]:.1f}")
        for tag, cpu, a, out in calls:
            if tag == "tools":
                print(f"  tools: {len(a[1])} calls, {cpu:.2f} CPU s (host side)")
                continue
            print(f"  {tag}: contexts {[len(c) for c in a[1]]} -> generated "
                  f"{[len(s) for s in out]}: {cpu:.1f} CPU s")
    print("identical episodes:", len(set(map(str, got.values()))) == 1)
    for e in r.completions:
        print(f"  turns {e.turns} calls {e.tool_calls} errors {e.tool_errors} {e.end_reason}")


if __name__ == "__main__":
    main()
