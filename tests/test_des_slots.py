"""The DES's slot pool (sim.engines.slots.SlotPool) against simpy.Resource:
the same workload gives the same sequence of (time, process, action), ties
at equal times included, since the pool schedules the same events in the
same order."""

from __future__ import annotations

import random

import pytest
import simpy

from sim.engines.slots import SlotPool


class _SimpyPool:
    """simpy.Resource behind the pool's interface (what the DES used before)."""

    def __init__(self, env: simpy.Environment, capacity: int) -> None:
        self.resource = simpy.Resource(env, capacity)

    def request(self):
        return self.resource.request()

    def release(self, request, now: float = 0.0) -> None:
        if not request.triggered:
            request.cancel()
        self.resource.release(request)

    def cancel(self, request) -> None:
        request.cancel()


def _workload(make_pool, seed: int, capacity: int) -> list[tuple]:
    """Processes that wait, request a slot, hold it and release it, on integer
    times (so many events tie), some interrupted while queued or holding;
    returns what happened, in order."""
    rng = random.Random(seed)
    env = simpy.Environment()
    pool = make_pool(env, capacity)
    log: list[tuple] = []

    def user(pid: int):
        for cycle in range(rng.randint(1, 4)):
            try:
                yield env.timeout(rng.choice((0, 0, 1, 2, 3)))
                request = pool.request()
                log.append((env.now, pid, cycle, "ask", request.triggered))
                try:
                    yield request
                except simpy.Interrupt:
                    log.append((env.now, pid, cycle, "gave up", request.triggered))
                    if request.triggered:
                        pool.release(request, env.now)
                    else:
                        pool.cancel(request)
                    continue
                log.append((env.now, pid, cycle, "got"))
                try:
                    yield env.timeout(rng.choice((0, 1, 1, 2, 4)))
                finally:
                    pool.release(request, env.now)
                    log.append((env.now, pid, cycle, "released"))
            except simpy.Interrupt:
                log.append((env.now, pid, cycle, "interrupted"))

    processes = [env.process(user(pid)) for pid in range(rng.randint(3, 25))]

    def operator():
        for _ in range(rng.randint(0, 6)):
            yield env.timeout(rng.choice((1, 2, 3)))
            process = rng.choice(processes)
            if process.is_alive and process is not env.active_process:
                process.interrupt("cancel")
                log.append((env.now, "operator", processes.index(process)))

    env.process(operator())
    env.run()
    log.append(("end", env.now))
    return log


@pytest.mark.parametrize("seed", range(60))
def test_slot_pool_serves_like_simpy_resource(seed):
    capacity = 1 + seed % 4
    mine = _workload(SlotPool, seed, capacity)
    theirs = _workload(_SimpyPool, seed, capacity)
    assert mine == theirs


def test_slot_pool_counts_and_rejects_no_capacity():
    env = simpy.Environment()
    pool = SlotPool(env, 2)
    first, second, third = pool.request(), pool.request(), pool.request()
    assert first.triggered and second.triggered and not third.triggered
    assert pool.count == 2 and list(pool.queue) == [third]
    pool.release(first, env.now)
    env.run()
    assert third.triggered and pool.count == 2 and not pool.queue
    with pytest.raises(ValueError, match="at least one slot"):
        SlotPool(env, 0)


def _plain_workload(pool_kind: str, seed: int, capacity: int) -> list[tuple]:
    """Processes on integer times (many ties) with no interrupts, which take
    a slot, hold it and give it back, on one or two pools: the eliding pool
    (``take``, no event when none could matter) or simpy.Resource."""
    rng = random.Random(seed)
    env = simpy.Environment()
    if pool_kind == "simpy":
        pools = [_SimpyPool(env, capacity), _SimpyPool(env, 1 + capacity // 2)]
    else:
        pools = [SlotPool(env, capacity, elide=True), SlotPool(env, 1 + capacity // 2, elide=True)]
    log: list[tuple] = []

    def user(pid: int):
        for cycle in range(rng.randint(1, 5)):
            pause = rng.choice((0, 0, 1, 2, 3, None))
            if pause is not None:
                yield env.timeout(pause)
            pool = rng.choice(pools)
            if pool_kind == "simpy":
                ticket = pool.request()
                yield ticket
            else:
                ticket = pool.take(env.now)
                if ticket is not None:
                    yield ticket
            log.append((env.now, pid, cycle, pools.index(pool), "got"))
            hold = rng.choice((0, 1, 1, 2, 4, None))
            if hold is not None:
                yield env.timeout(hold)
            pool.release(ticket, env.now)
            log.append((env.now, pid, cycle, "released"))

    def arrivals():
        for pid in range(rng.randint(3, 30)):
            env.process(user(pid))
            yield env.timeout(rng.choice((0, 0, 1, 2)))

    env.process(arrivals())
    env.run()
    log.append(("end", env.now))
    return log


@pytest.mark.parametrize("seed", range(80))
def test_eliding_pool_serves_like_simpy_resource(seed):
    """Leaving out the events that change nothing changes nothing: same
    grants, in the same order, at the same times, ties included."""
    capacity = 1 + seed % 5
    assert _plain_workload("elide", seed, capacity) == _plain_workload("simpy", seed, capacity)


@pytest.mark.parametrize("seed", range(10))
def test_series_pulse_is_add_one_then_minus_one(seed):
    """Series.pulse(t) leaves a series exactly as add(t, 1); add(t, -1) does:
    times, values, peak and integral, at repeated times too."""
    from sim.engines.monitor import Series

    rng = random.Random(seed)
    pulsed, added = Series("q"), Series("q")
    now = 0.0
    for _ in range(200):
        now += rng.choice((0.0, 0.0, 0.5, rng.random()))
        if rng.random() < 0.4:
            pulsed.pulse(now)
            added.add(now, 1)
            added.add(now, -1)
        else:
            delta = rng.choice((1, -1)) if pulsed.value > 0 else 1
            pulsed.add(now, delta)
            added.add(now, delta)
    assert (pulsed.times, pulsed.values, pulsed.peak) == (added.times, added.values, added.peak)
    assert pulsed.integral(now + 1.0) == added.integral(now + 1.0)


@pytest.mark.parametrize("seed", range(5))
def test_series_record_is_add(seed):
    """Series.record((t, d)) leaves a series as add(t, d) does and
    record((t, PULSE)) as pulse(t); a change recorded out of time order is
    refused when the series is read."""
    from sim.engines.monitor import PULSE, Series

    rng = random.Random(seed)
    recorded, added = Series("q"), Series("q")
    now = 0.0
    for _ in range(200):
        now += rng.choice((0.0, 0.5, rng.random()))
        if rng.random() < 0.3:
            recorded.record((now, PULSE))
            added.pulse(now)
        else:
            delta = rng.choice((1, -1)) if added.value > 0 else 1
            recorded.record((now, delta))
            added.add(now, delta)
    assert (recorded.times, recorded.values, recorded.peak) == (added.times, added.values,
                                                                added.peak)
    assert recorded.integral(now + 1.0) == added.integral(now + 1.0)
    recorded.record((now - 1.0, 1))
    with pytest.raises(ValueError, match="backwards"):
        recorded.value  # noqa: B018 - reading folds the log
