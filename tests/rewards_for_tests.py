"""Rewards that misbehave on purpose, importable by spawned pool workers."""
import os
import time

from rlvr.core import BaseReward, Verdict


class Sleepy(BaseReward):
    """Sleeps forever on completions that say 'hang'; answers 1.0 otherwise."""
    name = "sleepy"

    def _score(self, task, completion):
        if "hang" in completion.text:
            time.sleep(10_000)
        return Verdict(1.0, extracted=completion.text)


class Raises(BaseReward):
    name = "raises"

    def _score(self, task, completion):
        raise RuntimeError(f"verifier exploded on {completion.text!r}")


class KillsWorker(BaseReward):
    name = "kills"

    def _score(self, task, completion):
        os._exit(7)


def sleep_forever_or_echo(ctx, item):
    if item == "hang":
        time.sleep(10_000)
    return (ctx, item)


def nested_pool_call(ctx, item):
    """Runs inside a worker and uses a pool of its own: nested deadlines must still work."""
    from rlvr.pool import WorkerPool
    with WorkerPool(1) as inner:
        out = inner.map("rewards_for_tests:sleep_forever_or_echo", [item, "hang"], deadline_s=0.5)
    return [(o.status, o.value) for o in out]


class HoldsALock(BaseReward):
    """Cannot be pickled (it holds a lock), so workers must build it from a Factory."""
    name = "holds_lock"

    def __init__(self, bonus: float = 0.0):
        import threading
        self.lock = threading.Lock()
        self.bonus = bonus

    def _score(self, task, completion):
        with self.lock:
            return Verdict(min(1.0, float(completion.text == task.answer) + self.bonus))
