"""The DES clock (sim/engines/des_clock.py) processes events exactly as
``simpy.Environment.run()`` does: the same order (time, then priority, then
the order they were scheduled), the same clock readings, processes and
failures, and entries pushed on :attr:`Clock.queue` directly are processed
as if :meth:`~simpy.Environment.schedule` had pushed them."""

from __future__ import annotations

import random
from heapq import heappush

import pytest
import simpy
from simpy.events import NORMAL

from sim.engines.des_clock import Clock
from sim.engines.perform import EFFECTS
from sim.harness.effects import ToolRequest, ToolResult


def _trace(env: simpy.Environment, seed: int, run) -> list[tuple[float, str]]:
    """Events of a random workload (timeouts at colliding times, urgent and
    normal events scheduled from callbacks, processes that wait and spawn)
    as ``(clock, label)`` in the order they were processed."""
    # (a process's start is urgent: it goes before normal events due at once)
    rng = random.Random(seed)
    seen: list[tuple[float, str]] = []

    def note(label: str):
        def callback(event) -> None:
            seen.append((env.now, label))
            draw = rng.random()
            if draw < 0.15:  # more from inside a callback: a timeout (normal priority)
                env.timeout(rng.choice((0, 0.5, 1.0))).callbacks.append(note(label + "+"))
            elif draw < 0.3:  # or a process, whose start is urgent
                env.process(worker(label + "+", 1))
        return callback

    def worker(name: str, steps: int = 3):
        for k in range(steps):
            yield env.timeout(rng.choice((0, 0.5, 1.0, 2.0)))
            seen.append((env.now, f"{name}:{k}"))
            if k == 1 and name.count("/") < 2:  # two generations of children at most
                env.process(worker(name + "/child"))

    for i in range(60):
        delay = rng.choice((0, 0.5, 1.0, 1.5, 1, 2))  # ints and floats due at equal times
        env.timeout(delay).callbacks.append(note(f"t{i}"))
        if i % 10 == 0:
            env.process(worker(f"p{i}"))
    run(env)
    return seen


@pytest.mark.parametrize("seed", range(8))
def test_run_all_processes_events_as_simpy_run_does(seed: int) -> None:
    expected = _trace(simpy.Environment(), seed, lambda env: env.run())
    got = _trace(Clock(), seed, lambda env: env.run_all())
    assert got == expected
    assert [type(t) for t, _ in got] == [type(t) for t, _ in expected]  # an int stays an int
    assert len(got) > 60


def _rescheduled(pushed: bool) -> tuple[list[str], float]:
    """Labels of a processed timeout rescheduled (pushed on the queue or
    through ``schedule``) among timeouts due at the same time; the clock after."""
    clock = Clock()
    labels: list[str] = []
    clock.timeout(1.0).callbacks.append(lambda e: labels.append("first"))
    again = clock.timeout(0.0)
    clock.run_all()  # `again` processed: rescheduled below, as the DES reschedules a timer
    again.callbacks = [lambda e: labels.append("again")]
    clock.timeout(1.0).callbacks.append(lambda e: labels.append("before"))
    if pushed:
        heappush(clock.queue, (clock.now + 1.0, NORMAL, next(clock.ids), again))
    else:
        clock.schedule(again, NORMAL, 1.0)
    clock.timeout(1.0).callbacks.append(lambda e: labels.append("after"))
    clock.run_all()
    return labels, clock.now


def test_an_entry_pushed_on_the_queue_is_processed_as_a_scheduled_one() -> None:
    assert _rescheduled(True) == _rescheduled(False) == (
        ["first", "before", "again", "after"], 2.0)


def test_a_failed_event_nobody_defused_raises_a_copy_of_its_exception() -> None:
    clock = Clock()
    event = clock.event()
    event.fail(ValueError("boom"))
    with pytest.raises(ValueError, match="boom") as raised:
        clock.run_all()
    assert raised.value.__cause__ is not None


def test_a_defused_failure_does_not_raise() -> None:
    clock = Clock()
    event = clock.event()
    event.fail(ValueError("boom"))
    event.defused = True
    clock.run_all()
    assert clock.now == 0


def test_the_des_tool_seconds_are_the_effect_tables() -> None:
    """The DES reads a tool call's seconds as ``result.duration_s`` without
    the table's call (des_task.advance): the table must say the same."""
    result = ToolResult("ok", 3, 2.5)
    assert EFFECTS[ToolRequest].seconds(None, result) == result.duration_s
