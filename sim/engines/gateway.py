"""The model gateway of the DES: a call queues for one of the model slots,
passes the provider's rate limits (or is answered 429 with Retry-After) and
holds its slot while the model answers (:class:`ModelGateway`).

The engine drives a call in place, without a generator of its own: it takes
a slot (:meth:`ModelGateway.take`, or waits in :meth:`ModelGateway.queued`
when none is free), asks :meth:`ModelGateway.answer` for the model's reply
and the seconds it holds the slot, lets them pass and gives the slot back
with :meth:`ModelGateway.done` (an interrupt while it waits gives it back
too)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import simpy
from simpy.events import Event

from sim.engines.monitor import Series
from sim.engines.ratelimit import RateLimiter
from sim.engines.slots import SlotPool
from sim.harness.effects import ModelError, ModelRequest, ModelResponse
from sim.world.task import SimulatedTask


class ModelGateway:
    """Model slots (a :class:`SlotPool`, or None: unlimited) and rate limits
    (a :class:`RateLimiter`, or None) in front of the model; counts the
    calls queued for a slot in ``queue`` and the slots in use in ``busy``."""

    __slots__ = ("env", "slots", "limiter", "queue", "busy")

    def __init__(self, env: simpy.Environment, slots: SlotPool | None,
                 limiter: RateLimiter | None, queue: Series, busy: Series) -> None:
        self.env = env
        self.slots = slots
        self.limiter = limiter
        self.queue = queue
        self.busy = busy

    def take(self, t0: float) -> Event | None:
        """Ask for a slot at ``t0`` (seconds): None when it is granted at once
        (or there is no pool), else the request event to wait for in
        :meth:`queued`."""
        slots = self.slots
        if slots is None:
            return None
        slot = slots.take()
        if slot is None:
            self.queue.pulse(t0)
        return slot

    def queued(self, slot: Event, t0: float, waits: list[float]
               ) -> Generator[Event, Any, None]:
        """Wait in the queue for ``slot`` (asked for at ``t0``), counted in
        ``queue`` meanwhile and added to ``waits[1]``. Interrupted, the
        request is given back; closed (not ended), it is withdrawn if still
        queued and not released, like :class:`simpy.Resource`'s."""
        queue = self.queue
        queue.add(t0, 1)
        try:
            yield slot
        except simpy.Interrupt:
            self._leave(t0, waits)
            self.slots.release(slot)  # type: ignore[union-attr]
            raise
        except GeneratorExit:
            self._leave(t0, waits)
            self.slots.cancel(slot)  # type: ignore[union-attr]
            raise
        self._leave(t0, waits)

    def _leave(self, t0: float, waits: list[float]) -> None:
        now = self.env.now
        self.queue.add(now, -1)
        waits[1] += now - t0

    def answer(self, request: ModelRequest, task: SimulatedTask, t0: float, slot: Event | None
               ) -> tuple[ModelResponse | ModelError, float | None]:
        """With the slot granted now (``slot``: :meth:`take`'s or
        :meth:`queued`'s request, None for one granted at once): the model's
        reply and the seconds it holds the slot, after which the caller sets
        the reply's latency (from ``t0``, so it includes the wait for a slot)
        and calls :meth:`done`; or a 429 (Retry-After) when the rate limits
        refuse the call, with None seconds and the slot given back."""
        now = self.env.now
        busy = self.busy
        busy.add(now, 1)
        limiter = self.limiter
        retry_after = 0.0 if limiter is None else limiter.admit(now, request.prompt_tokens)
        if retry_after:
            self.done(slot)
            return ModelError("rate_limit", 429, retry_after, "rate limit exceeded",
                              now - t0), None
        result = task.respond(request, now)  # the model's own path
        return result, result.latency_s

    def done(self, slot: Event | None) -> None:
        """The call holding ``slot`` ended now: give the slot back."""
        self.busy.add(self.env.now, -1)
        if self.slots is not None:
            self.slots.release(slot)
