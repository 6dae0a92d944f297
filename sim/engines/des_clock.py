"""The DES engine's clock: a :class:`simpy.Environment` whose run loop and
timer rescheduling cost less per event.

:meth:`Clock.run_all` is :meth:`simpy.Environment.run` without an ``until``
with :meth:`~simpy.Environment.step` written into its loop: it pops the same
heap of ``(time, priority, id, event)`` entries in the same order, calls each
event's callbacks in the same order and raises a failed event's exception
the same way (the engine never uses ``StopSimulation``). What it leaves out
is a method call per event (a capacity.yaml task processes about 28).
:attr:`Clock.queue` and :attr:`Clock.ids` are the environment's own heap and
id counter, for callers that push an entry as :meth:`~simpy.Environment.schedule`
does without the call (a task's timer, rescheduled at each step).

Units: seconds.
"""

from __future__ import annotations

from heapq import heappop
from itertools import count

import simpy
from simpy.core import SimTime
from simpy.events import Event, EventPriority


class Clock(simpy.Environment):
    """A SimPy environment with a cheaper run loop (:meth:`run_all`); every
    other method is SimPy's."""

    queue: list[tuple[SimTime, EventPriority, int, Event]]  # the heap of scheduled events
    ids: count  # the counter that orders events due at the same time and priority

    def __init__(self, initial_time: SimTime = 0) -> None:
        super().__init__(initial_time)
        self.queue = self._queue
        self.ids = self._eid

    def run_all(self) -> None:
        """Process events until none is left, exactly as ``run()`` does."""
        queue = self._queue
        pop = heappop
        while queue:
            self._now, _, _, event = pop(queue)
            callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]
            for callback in callbacks:  # type: ignore[union-attr]
                callback(event)
            if not event._ok and not hasattr(event, "_defused"):
                # a failed event nobody defused: raise a copy of its exception, as step() does
                exc = type(event._value)(*event._value.args)
                exc.__cause__ = event._value
                raise exc
