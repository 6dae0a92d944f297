"""The model gateway of the DES: a call queues for one of the model slots,
passes the provider's rate limits (or is answered 429 with Retry-After) and
holds its slot while the model answers (:class:`ModelGateway`)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import simpy

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

    def call(self, request: ModelRequest, task: SimulatedTask, waits: list[float]
             ) -> Generator[simpy.Event, Any, ModelResponse | ModelError]:
        """A model call in a pool of slots (queued for one) or behind rate
        limits (a 429 with Retry-After when they refuse it): the reported
        latency (seconds) includes the wait for a slot, which is also added
        to ``waits[1]``."""
        env = self.env
        slots = self.slots
        t0 = env.now
        slot = None
        asked = False
        try:
            if slots is not None:
                slot = slots.take()
                asked = True
                if slot is None:  # granted at once
                    self.queue.pulse(t0)
                else:
                    queue = self.queue
                    queue.add(t0, 1)
                    try:
                        yield slot
                    finally:
                        now = env.now
                        queue.add(now, -1)
                        waits[1] += now - t0
            now = env.now
            busy = self.busy
            busy.add(now, 1)
            try:
                limiter = self.limiter
                retry_after = 0.0 if limiter is None else limiter.admit(now, request.prompt_tokens)
                if retry_after:
                    return ModelError("rate_limit", 429, retry_after, "rate limit exceeded",
                                      now - t0)
                result = task.respond(request, now)  # the model's own path
                yield env.timeout(result.latency_s)
                result.latency_s = env.now - t0  # includes the wait for a model slot
                return result
            finally:
                busy.add(env.now, -1)
        except GeneratorExit:  # closed, not ended: like simpy.Resource, withdrawn if
            asked = False      # still queued, else not released
            if slot is not None:
                slots.cancel(slot)  # type: ignore[union-attr]
            raise
        finally:
            if asked:
                slots.release(slot)  # type: ignore[union-attr]
