"""A pool of identical slots (model slots, sandboxes, a tenant's concurrency
cap) served first come, first served, on SimPy events.

:class:`SlotPool` schedules exactly the events :class:`simpy.Resource` does,
in the same order, so a simulation gives the same results with either: a
request is an event triggered (scheduled at the current time) when it is
granted; a release frees its slot at once and schedules one event whose
processing grants the slot to the head of the queue if one is free; a
request made while requests queue joins the back, and the head is granted
if a slot is free. What it leaves out is SimPy's generic machinery around
that (put and get queues scanned in Python, ``Request`` and ``Release``
objects with their context-manager and bookkeeping attributes), which cost
a DES task about a tenth of its time.

With ``elide=True`` the pool also leaves out the events whose processing
could change nothing, which is most of them: :meth:`take` grants a free slot
without an event when no other event is due at the current time (the
request's event would be the very next one processed, and all it would do
is resume the requester, so the requester simply goes on), and
:meth:`release` schedules no event when nobody queues and no other event is
due now (until the requester next waits, only it runs, and it cannot make a
queue form on a pool where it just freed a slot, so the event would find
nobody to grant). Both arguments need the requester to have been resumed by
an event of its own (a timeout, its own request), not by one that resumes
other processes after it, and not to be interrupted: the DES elides only
when no operator acts on tasks.
"""

from __future__ import annotations

from collections import deque

import simpy
from simpy.events import Event


class SlotPool:
    """``capacity`` slots, granted in request order (like :class:`simpy.Resource`)."""

    __slots__ = ("env", "capacity", "count", "queue", "elide", "_grant_head", "_peek")

    def __init__(self, env: simpy.Environment, capacity: int, *, elide: bool = False) -> None:
        if capacity <= 0:
            raise ValueError(f"a pool needs at least one slot, got {capacity}")
        self.env = env
        self.capacity = capacity
        self.count = 0  # slots in use
        self.queue: deque[Event] = deque()  # requests waiting, oldest first
        self.elide = elide  # leave out the events that change nothing (module docstring)
        self._grant_head = self._granting  # bound once: the callback of each release
        self._peek = env.peek  # the time of the next event due (infinity: none)

    def request(self) -> Event:
        """An event triggered when a slot is granted to this request (at once
        if one is free and nobody queues)."""
        event = Event(self.env)
        queue = self.queue
        if queue:
            queue.append(event)
            if self.count < self.capacity:  # the head, not this one, gets the free slot
                self.count += 1
                queue.popleft().succeed()
        elif self.count < self.capacity:
            self.count += 1
            event.succeed()
        else:
            queue.append(event)
        return event

    def take(self, now: float) -> Event | None:
        """A slot at once, with no event (None), when the pool elides, a
        slot is free, nobody queues and no other event is due at ``now``
        (the clock, seconds); else :meth:`request`'s event, to wait for."""
        if (self.elide and not self.queue and self.count < self.capacity
                and self._peek() > now):
            self.count += 1
            return None
        return self.request()

    def release(self, request: Event | None, now: float) -> None:
        """Give back ``request``'s slot if it was granted (None: a slot
        :meth:`take` granted without an event; a request still queued is
        withdrawn instead); then, as with SimPy's ``Release``, an event is
        scheduled now whose processing grants a free slot to the head of the
        queue, unless the pool elides and that event could grant nothing
        (``now``: the clock, seconds)."""
        if request is None or request.triggered:
            self.count -= 1
        else:
            self.queue.remove(request)
        if self.elide and not self.queue and self._peek() > now:
            return
        marker = Event(self.env)
        marker.callbacks.append(self._grant_head)
        marker.succeed()

    def cancel(self, request: Event) -> None:
        """Withdraw a request not yet granted (nothing if it was)."""
        if not request.triggered:
            self.queue.remove(request)

    def _granting(self, _: Event) -> None:
        queue = self.queue
        if queue and self.count < self.capacity:
            self.count += 1
            queue.popleft().succeed()
