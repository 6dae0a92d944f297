"""Provider rate limits as token buckets (requests and prompt tokens per minute).

A bucket of capacity ``limit`` refills continuously at ``limit / 60`` per
second. A request is admitted when both buckets hold enough; otherwise the
provider answers 429 with a Retry-After of the whole seconds until they will.

A bucket may hold less than a minute's worth (``burst_s``: the seconds of
refill it holds): a provider may enforce a per-minute limit over shorter
intervals (Anthropic's rate-limit page: 60 requests per minute may be
enforced as 1 request per second), so a burst that the minute would carry
is answered 429, and retries that come back together collide again.
"""

from __future__ import annotations

import math
from array import array


class TokenBucket:
    """One bucket refilled continuously at ``per_minute / 60`` a second,
    holding ``per_minute`` (None ``burst_s``) or ``burst_s`` seconds of
    refill, and full at time 0."""

    __slots__ = ("capacity", "rate", "level", "last", "unit")

    def __init__(self, per_minute: float, burst_s: float | None = None) -> None:
        self.rate = per_minute / 60.0
        self.capacity = per_minute if burst_s is None else self.rate * burst_s
        self.unit = min(1.0, self.capacity)  # one request, or a full bucket if smaller
        self.level = self.capacity
        self.last = 0.0

    def refill(self, now: float) -> None:
        """Add what flowed in since the last look."""
        self.level = min(self.capacity, self.level + (now - self.last) * self.rate)
        self.last = now

    def wait(self, amount: float) -> float:
        """Seconds until ``amount`` is available (0 if it is now); an amount
        above the capacity waits for a full bucket."""
        need = min(amount, self.capacity) - self.level
        return 0.0 if need <= 0 else need / self.rate


class RateLimiter:
    """Requests-per-minute and tokens-per-minute limits of one provider account.
    Counts the requests it ``admitted`` (and their prompt ``admitted_tokens``)
    and those it ``rejected`` with a 429 (and their prompt
    ``rejected_tokens``: sent, never processed nor billed); ``asked_at`` and
    ``rejected_at`` are the times (seconds, in order) of every request and of
    every rejected one: the provider's request rate over time;
    ``retried_at`` those of the requests that were harness retries, noted by
    the caller (the limiter cannot tell a retry from a first try).
    ``burst_s`` (seconds, None: a minute) is what both buckets hold
    (:class:`TokenBucket`)."""

    def __init__(self, requests_per_minute: float | None, tokens_per_minute: float | None,
                 burst_s: float | None = None) -> None:
        self.requests = (TokenBucket(requests_per_minute, burst_s) if requests_per_minute
                         else None)
        self.tokens = TokenBucket(tokens_per_minute, burst_s) if tokens_per_minute else None
        self.rejected = 0
        self.admitted = 0
        self.admitted_tokens = 0
        self.rejected_tokens = 0
        self.asked_at = array("d")  # 8 bytes a request
        self.rejected_at = array("d")
        self.retried_at = array("d")  # noted by the caller (the DES gateway)

    def admit(self, now: float, prompt_tokens: int) -> float:
        """Admit a request (consuming from the buckets) and return 0, or reject
        it and return the Retry-After in whole seconds (at least 1). Each
        bucket is refilled and asked for its wait as by :meth:`TokenBucket.refill`
        and :meth:`TokenBucket.wait`, inline and without ``min``/``max``
        calls (one model call each; the same floats). A bucket's wait is
        computed only when it has to wait: ``unit - level > 0`` is tested as
        ``level < unit``, the same for any floats (a difference of two floats
        has the sign of the exact difference, and is 0 only when they are
        equal), so an admitted request does no subtraction or division for
        it. The wait is compared with ``0.0``, not ``0``: a float against an
        int takes CPython's slow generic path (some 400 machine instructions).
        Replaying a capacity.yaml run's calls under callgrind: 4,720
        instructions a call before these two changes, 3,850 after."""
        self.asked_at.append(now)
        wait = 0.0  # the longer of the two buckets' waits (each >= 0)
        requests = self.requests
        tokens = self.tokens
        if requests is not None:
            level = requests.level + (now - requests.last) * requests.rate
            if level > requests.capacity:  # min() without the call, as in refill
                level = requests.capacity
            requests.last = now
            if level < requests.unit:
                wait = (requests.unit - level) / requests.rate
        if tokens is not None:
            held = tokens.level + (now - tokens.last) * tokens.rate
            if held > tokens.capacity:
                held = tokens.capacity
            tokens.last = now
            amount = float(prompt_tokens)
            if amount > tokens.capacity:  # an amount above the capacity waits for a full bucket
                amount = tokens.capacity
            if held < amount:
                need = (amount - held) / tokens.rate
                if need > wait:
                    wait = need
        if wait > 0.0:  # refilled, nothing taken (a wait can round to 0.0: admitted)
            if requests is not None:
                requests.level = level
            if tokens is not None:
                tokens.level = held
            self.rejected += 1
            self.rejected_tokens += prompt_tokens
            self.rejected_at.append(now)
            return float(max(1, math.ceil(wait)))
        self.admitted += 1
        self.admitted_tokens += prompt_tokens
        if requests is not None:
            requests.level = level - 1.0
        if tokens is not None:
            tokens.level = held - amount
        return 0.0
