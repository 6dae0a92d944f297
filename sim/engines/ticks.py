"""A timer event a DES task schedules again and again (:class:`Tick`),
instead of a new :class:`simpy.Timeout` for every call it waits for.

``tick.after(seconds)`` schedules the tick exactly as ``env.timeout(seconds)``
schedules a new timeout (the same priority, at the same point in the event
queue's order: :meth:`simpy.Environment.schedule` with ``NORMAL`` priority),
and returns it to be yielded; processed, it resumes its process with None, as
a timeout does. It saves a timeout's allocation (an object, its attribute
dict, its callback list bound anew) on each of a task's some 30 waits.

A tick may be scheduled again only once it has been processed. A process
interrupted while it waits for its tick leaves the tick in the queue (SimPy
only stops resuming the process, as with a timeout), so after an interrupt
the task takes a new tick (:func:`Tick` again) and the old one fires later
with nothing to do, like the timeout it stands for.
"""

from __future__ import annotations

import simpy
from simpy.events import NORMAL, Event


class Tick(Event):
    """A reusable timer event of ``env`` (already triggered, with value None,
    like a :class:`simpy.Timeout`; scheduled by :meth:`after`)."""

    def __init__(self, env: simpy.Environment) -> None:
        super().__init__(env)
        self._ok = True  # triggered with value None, as Timeout.__init__ sets them
        self._value = None
        self._schedule = env.schedule

    def after(self, seconds: float) -> Tick:
        """Schedule the tick ``seconds`` from now (as ``env.timeout(seconds)``
        would be) and return it, to be yielded."""
        self.callbacks = []
        self._schedule(self, NORMAL, seconds)
        return self
