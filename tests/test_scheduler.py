"""Scheduler: ordering, ties, cancel, recurring processes, async moments, batching, errors."""

from __future__ import annotations

import asyncio
import random

import numpy as np
import pytest

from sim_core.scheduler import EventError, Scheduler, batched


def test_order_by_time_priority_then_insertion():
    sim, log = Scheduler(), []
    sim.at(2.0, log.append, "t2")
    sim.at(1.0, log.append, "t1-p1", priority=1)
    sim.at(1.0, log.append, "t1-p0-first")
    sim.at(1.0, log.append, "t1-p0-second")
    sim.at(1.0, log.append, "t1-p-1", priority=-1)
    sim.after(0.5, log.append, "t0.5")
    assert sim.run() == 6
    assert log == ["t0.5", "t1-p-1", "t1-p0-first", "t1-p0-second", "t1-p1", "t2"]
    assert sim.now == 2.0


def test_cancel_and_pending():
    sim, log = Scheduler(), []
    a = sim.at(1.0, log.append, "a")
    sim.at(2.0, log.append, "b")
    sim.cancel(a)
    sim.cancel(a)  # idempotent
    assert sim.peek() == 2.0
    sim.run()
    assert log == ["b"]


def test_handlers_schedule_more_events_and_clock_advances():
    sim, seen = Scheduler(), []

    def tick(n):
        seen.append((sim.now, n))
        if n < 3:
            sim.after(1.5, tick, n + 1)

    sim.at(0.0, tick, 0)
    sim.run()
    assert seen == [(0.0, 0), (1.5, 1), (3.0, 2), (4.5, 3)]


def test_run_until_time_predicate_and_max_events():
    sim, log = Scheduler(), []
    proc = sim.every(1.0, lambda: log.append(sim.now))
    sim.run(until=3.5)
    assert log == [0.0, 1.0, 2.0, 3.0] and sim.now == 3.5
    sim.run(until=lambda: len(log) >= 6)
    assert log[-1] == 5.0
    assert sim.run(max_events=2) == 2 and log[-1] == 7.0
    sim.cancel(proc)
    assert sim.run() == 0


def test_recurring_process_with_start_and_stop_from_inside():
    sim, log = Scheduler(), []

    def work():
        log.append(sim.now)
        if len(log) == 3:
            proc.cancel()

    proc = sim.every(2.0, work, start=1.0)
    sim.run()
    assert log == [1.0, 3.0, 5.0]


def test_bad_schedule_arguments():
    sim = Scheduler(start=5.0)
    with pytest.raises(ValueError, match="before the current time"):
        sim.at(4.0, print)
    with pytest.raises(ValueError, match="delay must be >= 0"):
        sim.after(-1, print)
    with pytest.raises(ValueError, match="interval must be > 0"):
        sim.every(0, print)
    with pytest.raises(ValueError, match="until="):
        sim.run(until=1.0)


def _concurrent_run(seed: int) -> tuple[list, float]:
    """Agents act through coroutines with random latencies; effects mutate shared state."""
    sim = Scheduler()
    state: list[tuple[float, int]] = []
    rng = random.Random(seed)  # only latencies differ between runs
    in_flight = {"now": 0, "max": 0}

    async def act(agent: int):
        in_flight["now"] += 1
        in_flight["max"] = max(in_flight["max"], in_flight["now"])
        await asyncio.sleep(rng.random() * 0.01)
        in_flight["now"] -= 1
        value = len(state) * 10 + agent  # reads state: must see the pre-moment state
        return lambda: state.append((sim.now, value))

    for t in range(3):
        for agent in range(8):
            sim.at(float(t), act, agent)
    sim.run()
    return state, in_flight["max"]


def test_async_moment_is_concurrent_and_results_do_not_depend_on_completion_order():
    a, max_a = _concurrent_run(seed=1)
    b, max_b = _concurrent_run(seed=2)
    assert a == b  # completion order differs, effects are applied in sequence order
    assert max_a == 8 and max_b == 8  # all coroutines of a moment were in flight together
    assert [v for _, v in a[:8]] == list(range(8))  # every agent saw the state before the moment


def test_arun_inside_running_loop_and_run_refuses():
    async def main():
        sim, log = Scheduler(), []

        async def h(x):
            await asyncio.sleep(0)
            log.append(x)

        sim.at(1.0, h, "x")
        with pytest.raises(RuntimeError, match="await scheduler.arun"):
            sim.run()
        await sim.arun()
        return log

    assert asyncio.run(main()) == ["x"]


def test_batched_handler_merges_a_moment_into_one_call():
    sim, calls = Scheduler(), []
    act = batched(lambda agents: calls.append(agents.copy()))
    for agent in range(10_000):
        sim.at(1.0, act, agents=agent)
    sim.at(1.0, act, agents=np.array([20_000, 20_001]))
    sim.at(2.0, act, agents=7)
    assert sim.run() == 10_002
    assert len(calls) == 2  # one dispatch per moment, not one per agent
    assert calls[0].tolist() == list(range(10_000)) + [20_000, 20_001]
    assert calls[1].tolist() == [7]


def test_batched_handler_rejects_args():
    sim = Scheduler()
    act = batched(lambda agents: None)
    with pytest.raises(TypeError, match="agents="):
        sim.at(1.0, act)
    with pytest.raises(TypeError, match="only agents"):
        sim.at(1.0, act, 3, agents=1)


def test_failing_handler_names_event_time_agents_and_keeps_earlier_effects():
    sim, done = Scheduler(), []
    sim.at(1.0, done.append, "before")

    def boom(agents):
        raise ZeroDivisionError("division by zero")

    sim.at(2.5, batched(boom), agents=np.arange(3, 6), name="cohort:llm")
    sim.at(3.0, done.append, "after")
    with pytest.raises(EventError) as err:
        sim.run()
    msg = str(err.value)
    assert (
        "cohort:llm" in msg and "t=2.5" in msg and "[3, 4, 5]" in msg and "ZeroDivisionError" in msg
    )
    assert done == ["before"]
    assert sim.now == 2.5


def test_failing_coroutine_in_a_moment_is_reported():
    sim = Scheduler()

    async def ok():
        await asyncio.sleep(0)

    async def bad():
        await asyncio.sleep(0)
        raise KeyError("missing")

    sim.at(1.0, ok)
    sim.at(1.0, bad, agents=[42])
    with pytest.raises(EventError, match=r"'bad'.*t=1.*\[42\].*KeyError"):
        sim.run()


def test_stop_ends_the_run_after_the_current_moment():
    sim, log = Scheduler(), []

    def h(i):
        log.append(i)
        if i == 1:
            sim.stop("budget")

    for i in range(4):
        sim.at(float(i), h, i)
    sim.run()
    assert log == [0, 1] and sim.stop_reason == "budget"
