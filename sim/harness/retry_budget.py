"""The retry token bucket shared by the runs of one client (:class:`RetryBudget`).

The AWS SDKs' "retry quota" and gRPC's retry throttling: every retry of a
transient model error takes tokens from one bucket that all runs of a client
(an account, a tenant) draw on; a success puts a little back. When a
provider rejects a burst, the bucket empties after a bounded number of
retries and further errors are not retried, so a client cannot multiply its
own request rate without bound. Its settings are a
:class:`~sim.harness.params.RetryQuota`; the harness's retry path
(:mod:`sim.harness.model_calls`) asks it before each retry; an engine makes
one instance per client and hands it to every run of that client.

A plain object with no clock of its own: time (seconds), when the bucket
refills with time, is read from the ``clock`` the engine passes in.
Units: tokens of the bucket (not model tokens), seconds.
"""

from __future__ import annotations

from collections.abc import Callable

from sim.harness.params import RetryQuota

__all__ = ["RetryBudget"]


class RetryBudget:
    """One shared retry bucket (see the module docstring).

    ``level`` is the tokens it holds; ``taken``, ``refused`` and
    ``refunded`` count the retries it allowed, the retries it refused and the
    tokens put back. ``clock`` returns the current time in seconds; it is
    read only when ``quota.refill_per_s`` > 0 (None: the bucket never refills
    with time)."""

    __slots__ = ("quota", "clock", "level", "last", "taken", "refused", "refunded")

    def __init__(self, quota: RetryQuota, clock: Callable[[], float] | None = None) -> None:
        self.quota = quota
        self.clock = clock
        self.level = quota.capacity
        self.last = clock() if clock is not None and quota.refill_per_s > 0 else 0.0
        self.taken = 0
        self.refused = 0
        self.refunded = 0.0

    def cost(self, kind: str) -> float:
        """Tokens a retry of an error of ``kind`` takes: ``timeout_cost`` for
        a timeout, ``retry_cost`` for any other."""
        quota = self.quota
        return quota.timeout_cost if kind == "timeout" else quota.retry_cost

    def take(self, cost: float) -> bool:
        """Take ``cost`` tokens for one retry and return True, or return False
        (nothing taken, counted in ``refused``) when fewer are left."""
        self._refill()
        if self.level < cost:
            self.refused += 1
            return False
        self.level -= cost
        self.taken += 1
        return True

    def give_back(self, tokens: float) -> None:
        """Put ``tokens`` back (a success), up to the capacity."""
        self._refill()
        before = self.level
        self.level = min(self.quota.capacity, self.level + tokens)
        self.refunded += self.level - before

    def _refill(self) -> None:
        """Add ``refill_per_s`` per second since the last look (up to the capacity)."""
        rate = self.quota.refill_per_s
        if rate > 0 and self.clock is not None:
            now = self.clock()
            self.level = min(self.quota.capacity, self.level + (now - self.last) * rate)
            self.last = now
