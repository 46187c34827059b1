"""The worker pool: hard deadlines from any thread, asyncio and nested workers."""
import asyncio
import threading
import time

import pytest

from rlvr import PooledReward, Task
from rlvr.envs.registry import pooled_env_reward
from rlvr.pool import Factory, WorkerPool
from rewards_for_tests import KillsWorker, Raises, Sleepy

DEADLINE = 1.0
# What a call may take beyond its deadline on a busy machine: the deadline counts from the item's
# start, and a call can first wait for a fresh worker to boot (its imports took ~6 s at load 5)
# or for a stuck one to be killed. A missed deadline still fails: the hangs sleep for hours.
BUSY_MARGIN = 20.0


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(2) as p:
        p.map("rewards_for_tests:sleep_forever_or_echo", ["warm", "up"], deadline_s=30)
        yield p


def test_results_come_back_in_order_with_context(pool):
    out = pool.map("rewards_for_tests:sleep_forever_or_echo", list(range(50)), deadline_s=5,
                   context=Factory.of("ctx"))
    assert [o.value for o in out] == [("ctx", i) for i in range(50)]


def test_hung_call_times_out_within_deadline_and_pool_keeps_serving(pool):
    results = {}

    def hang():
        t0 = time.monotonic()
        results["hang"] = pool.call("rewards_for_tests:sleep_forever_or_echo", "hang",
                                    deadline_s=DEADLINE)
        results["hang_s"] = time.monotonic() - t0

    t = threading.Thread(target=hang)
    t.start()
    time.sleep(0.2)                       # the hang occupies one worker...
    t0 = time.monotonic()
    quick = pool.map("rewards_for_tests:sleep_forever_or_echo", ["a", "b", "c"], deadline_s=5)
    quick_s = time.monotonic() - t0
    t.join()
    assert [o.value[1] for o in quick] == ["a", "b", "c"]
    assert quick_s < DEADLINE             # ...while the other keeps serving
    assert results["hang"].status == "timeout"
    assert results["hang_s"] < DEADLINE + BUSY_MARGIN
    # the killed worker was replaced: both workers serve again
    after = pool.map("rewards_for_tests:sleep_forever_or_echo", list(range(8)), deadline_s=5)
    assert all(o.status == "ok" for o in after)


def test_timeout_in_the_middle_of_a_chunk_keeps_neighbours(pool):
    items = ["a", "hang", "b", "c"]
    out = pool.map("rewards_for_tests:sleep_forever_or_echo", items, deadline_s=DEADLINE)
    assert [o.status for o in out] == ["ok", "timeout", "ok", "ok"]
    assert [o.value[1] for o in out if o.status == "ok"] == ["a", "b", "c"]


def test_from_asyncio_without_blocking_the_loop(pool):
    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.05)
                ticks += 1

        tick_task = asyncio.create_task(ticker())
        t0 = time.monotonic()
        out = await pool.amap("rewards_for_tests:sleep_forever_or_echo", ["x", "hang"],
                              deadline_s=DEADLINE)
        elapsed = time.monotonic() - t0
        tick_task.cancel()
        return out, elapsed, ticks

    out, elapsed, ticks = asyncio.run(main())
    assert [o.status for o in out] == ["ok", "timeout"]
    assert elapsed < DEADLINE + BUSY_MARGIN
    assert ticks >= 5                     # the event loop kept running while we waited


def test_nested_pool_inside_a_worker(pool):
    out = pool.call("rewards_for_tests:nested_pool_call", "inner", deadline_s=30)
    assert out.status == "ok", out.error
    assert out.value == [("ok", (None, "inner")), ("timeout", None)]


def test_pooled_reward_statuses(pool):
    task = Task("t")
    sleepy = PooledReward(Sleepy(), deadline_s=DEADLINE, pool=pool)
    t0 = time.monotonic()
    verdicts = sleepy.score_batch([task] * 3, ["fine", "hang", "also fine"])
    assert time.monotonic() - t0 < DEADLINE + BUSY_MARGIN
    assert [v.status for v in verdicts] == ["ok", "timeout", "ok"]
    assert verdicts[1].score == 0.0 and "no verdict within 1s" in verdicts[1].reason

    raises = PooledReward(Raises(), deadline_s=5, pool=pool).score(task, "x")
    assert raises.status == "error" and "verifier exploded" in raises.reason

    died = PooledReward(KillsWorker(), deadline_s=5, pool=pool).score(task, "x")
    assert died.status == "error" and "worker died (exit code 7)" in died.reason


def test_pooled_equals_in_process(pool):
    from rlvr import load_env
    env = load_env("arithmetic", format_weight=0.5)
    tasks = env.sample(20)
    comps = [env.gold(t) if i % 3 else "<think>x</think><answer>0</answer>" for i, t in enumerate(tasks)]
    local = env.reward.score_batch(tasks, comps)
    pooled = PooledReward(env.reward, deadline_s=5, pool=pool).score_batch(tasks, comps)
    assert [(v.score, v.status, v.components) for v in pooled] == \
           [(v.score, v.status, v.components) for v in local]


def test_closed_pool_gives_infra_error():
    p = WorkerPool(1)
    p.close()
    v = PooledReward(Sleepy(), deadline_s=1, pool=p).score(Task("t"), "x")
    assert v.status == "infra_error" and "pool unavailable" in v.reason


def test_unpicklable_reward_is_built_inside_the_worker(pool):
    import pickle
    from rewards_for_tests import HoldsALock
    with pytest.raises(TypeError):
        pickle.dumps(HoldsALock())
    r = PooledReward(Factory("rewards_for_tests:HoldsALock", {"bonus": 0.0}), deadline_s=5,
                     pool=pool, name="holds_lock")
    verdicts = r.score_batch([Task("a", answer="yes"), Task("b", answer="yes")], ["yes", "no"])
    assert [(v.status, v.score) for v in verdicts] == [("ok", 1.0), ("ok", 0.0)]


def test_interpreter_exits_even_if_a_pool_was_never_closed():
    import subprocess
    import sys
    code = ("from rlvr.pool import WorkerPool\n"
            "p = WorkerPool(2)\n"
            "print(p.call('rewards_for_tests:sleep_forever_or_echo', 1, deadline_s=20).value)\n")
    import os
    env = {**os.environ, "PYTHONPATH": os.path.dirname(__file__)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=30, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "(None, 1)"


def test_pooled_reward_for_a_registered_env_by_name(pool):
    import envs_for_tests  # noqa: F401  (registers test-hang, whose env holds a lambda)
    from rlvr import load_env
    env = load_env("test-hang")
    tasks = env.sample(3)
    # build the environment in the workers first (imports can take seconds on a busy machine)
    pooled_env_reward(env, deadline_s=60, pool=pool).score_batch(tasks[:2], ["x", "y"])
    r = pooled_env_reward(env, deadline_s=DEADLINE, pool=pool)
    verdicts = r.score_batch(tasks, [env.gold(tasks[0]), "hang", "<answer>-1</answer>"])
    assert [(v.status, v.score) for v in verdicts] == [("ok", 1.0), ("timeout", 0.0), ("ok", 0.0)]


def steps_of(ctx, item):
    """A call of several steps (as `rlvr score` sends a chunk of rows): each step sleeps
    `seconds`, 'hang' hangs, 'die' kills the worker; the result lists the steps done."""
    import os
    from rlvr.pool import mark_step
    done = []
    for k, (what, seconds) in enumerate(item):
        mark_step(k)
        if what == "hang":
            time.sleep(10_000)
        if what == "die":
            os._exit(9)
        time.sleep(seconds)
        done.append(k)
    return done


def test_marked_steps_each_get_the_deadline_and_a_timeout_names_its_step(pool):
    # 4 steps of 0.4 s: 1.6 s in all, over the 1 s deadline, yet every step is within it
    out = pool.call("test_pool:steps_of", [("ok", 0.4)] * 4, deadline_s=DEADLINE)
    assert (out.status, out.value, out.step) == ("ok", [0, 1, 2, 3], None)
    t0 = time.monotonic()
    hung = pool.call("test_pool:steps_of", [("ok", 0.0), ("ok", 0.3), ("hang", 0), ("ok", 0)],
                     deadline_s=DEADLINE)
    assert (hung.status, hung.step) == ("timeout", 2)
    assert time.monotonic() - t0 < 0.3 + DEADLINE + BUSY_MARGIN
    assert DEADLINE <= hung.latency_s < DEADLINE + 3.0     # timed from the step, not the call
    died = pool.call("test_pool:steps_of", [("ok", 0.0), ("die", 0)], deadline_s=5)
    assert (died.status, died.step) == ("error", 1) and "exit code 9" in died.error
    # a call that marks no steps reports none
    plain = pool.call("rewards_for_tests:sleep_forever_or_echo", "hang", deadline_s=DEADLINE)
    assert (plain.status, plain.step) == ("timeout", None)


def test_mark_step_outside_a_worker_does_nothing():
    assert steps_of(None, [("ok", 0.0)] * 3) == [0, 1, 2]


def test_importing_the_pool_leaves_multiprocessing_spawn_alone():
    """The stdlib's spawn hook is swapped only while one of our workers starts: a user's
    own spawned processes still re-run their `__main__` as the stdlib does."""
    import multiprocessing.spawn as spawn
    before = spawn.get_preparation_data
    import rlvr.pool as pool
    assert spawn.get_preparation_data is before
    with pool._without_main():
        assert spawn.get_preparation_data("rlvr-worker").get("init_main_from_path") is None
        assert spawn.get_preparation_data is not before
    assert spawn.get_preparation_data is before
