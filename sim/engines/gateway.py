"""The model gateway of the DES: a call queues for one of the model slots,
passes the provider's rate limits (or is answered 429 with Retry-After) and
holds its slot while the model answers (:class:`ModelGateway`).

The engine drives a call in place (:class:`sim.engines.des.TaskRun`): it takes a
slot (:meth:`ModelGateway.take`; when none is free, it waits for the request
and calls :meth:`ModelGateway.left` once granted or cancelled), asks
:meth:`ModelGateway.answer` for the model's reply and the seconds it holds
the slot, lets them pass and gives the slot back with
:meth:`ModelGateway.done` (a cancel while it waits gives it back too). Each
method is told the clock (``now``, seconds) by its caller."""

from __future__ import annotations

import simpy
from simpy.events import Event

from sim.engines.monitor import PULSE, Series
from sim.engines.ratelimit import RateLimiter
from sim.engines.slots import SlotPool
from sim.harness.effects import ModelError, ModelRequest, ModelResponse
from sim.world.task import SimulatedTask


class ModelGateway:
    """Model slots (a :class:`SlotPool`, or None: unlimited) and rate limits
    (a :class:`RateLimiter`, or None) in front of the model; counts the
    calls queued for a slot in ``queue`` and the slots in use in ``busy``."""

    __slots__ = ("env", "slots", "limiter", "queue", "busy", "_queued", "_busy")

    def __init__(self, env: simpy.Environment, slots: SlotPool | None,
                 limiter: RateLimiter | None, queue: Series, busy: Series) -> None:
        self.env = env
        self.slots = slots
        self.limiter = limiter
        self.queue = queue
        self.busy = busy
        self._queued, self._busy = queue.record, busy.record  # Series.add in one C call

    def take(self, now: float) -> Event | None:
        """Ask for a slot now (``now``: the clock, seconds): None when it is
        granted at once (or there is no pool), else the request event to
        wait for (counted in ``queue`` meanwhile, until :meth:`left`)."""
        slots = self.slots
        if slots is None:
            return None
        slot = slots.take(now)
        self._queued((now, PULSE if slot is None else 1))  # a pulse when granted at once
        return slot

    def left(self, t0: float, waits: list[float], now: float) -> None:
        """A call that asked for a slot at ``t0`` left the queue at ``now``
        (granted or cancelled): counted out of ``queue``, its wait added to
        ``waits[1]``."""
        self._queued((now, -1))
        waits[1] += now - t0

    def answer(self, request: ModelRequest, task: SimulatedTask, t0: float, slot: Event | None,
               now: float) -> tuple[ModelResponse | ModelError, float | None]:
        """With the slot granted at ``now`` (``slot``: :meth:`take`'s request,
        None for one granted at once): the model's
        reply and the seconds it holds the slot, after which the caller sets
        the reply's latency (from ``t0``, so it includes the wait for a slot)
        and calls :meth:`done`; or a 429 (Retry-After) when the rate limits
        refuse the call, with None seconds and the slot given back. A
        retry's time (``request.attempt`` > 0) is noted in the limiter's
        ``retried_at``."""
        self._busy((now, 1))
        limiter = self.limiter
        retry_after = 0.0
        if limiter is not None:
            retry_after = limiter.admit(now, request.prompt_tokens)
            if request.attempt:  # a harness retry (admitted or not)
                limiter.retried_at.append(now)
        if retry_after:
            self.done(slot, now)
            return ModelError("rate_limit", 429, retry_after, "rate limit exceeded",
                              now - t0), None
        result = task.respond(request, now)  # the model's own path
        return result, result.latency_s

    def done(self, slot: Event | None, now: float) -> None:
        """The call holding ``slot`` ended at ``now``: give the slot back."""
        self._busy((now, -1))
        if self.slots is not None:
            self.slots.release(slot, now)
