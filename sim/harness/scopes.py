"""Budgets shared by several runs: a session (a parent and all its
descendants) or a tenant over a window of time.

A :class:`ScopedBudget` (a parameter) says what is limited and how; a
:class:`Ledger` (a plain mutable object) is its running account, which the
driver creates once per session or tenant and hands to every run that
shares it (:func:`~sim.harness.loop.agent_loop`'s ``ledgers``). Sans-IO: the
ledger keeps no clock; every method is told ``now``, the seconds of
simulated (or real) time since the driver's origin, whose UTC calendar date
is ``epoch_s`` seconds after 1970-01-01T00:00Z at ``now`` = 0.

**Windows.** A session's ledger never resets. A tenant's resets when the
window changes: every ``window_s`` seconds from the origin, or at each UTC
day (``calendar: day``) or ISO week (``calendar: week``, from Monday 00:00Z)
boundary. Spend before a reset no longer counts.

**Two rules, as harnesses apply them** (``check``):

- ``before_call`` (sim's rule, pydantic-ai's ``check_before_request``): a
  call is admitted only if what the window has spent, plus what calls in
  flight reserved, plus this call's worst case (its prompt plus output cap;
  :func:`~sim.harness.budgets.worst_case_cost`) stays within the limit; its
  worst case is then reserved until its usage is charged. So a hard budget
  is never passed (while providers report within the worst case), whatever
  the concurrency;
- ``between_turns`` (the rule of several SDKs and gateways): a run is
  stopped only before a turn, once the window's spend has reached the
  limit. A turn started just below the limit goes through, so each of ``n``
  runs sharing the ledger can overshoot by one call: the overshoot is at
  most ``n`` times the largest call (its prompt plus output cap, or its
  worst-case cost).

**Hard or soft.** A hard budget stops the run
(``budget_exhausted:session`` or ``budget_exhausted:tenant``); a soft one
never stops anything. Either raises one ``alert`` event per window when the
share left falls to ``alert_at`` or below.

:meth:`Ledger.reserve` and :meth:`Ledger.charge` are also the DES tenant
ledger's rule (:mod:`sim.engines.tenant_budget`), which reserves a call's
prompt cost instead of its worst case. Units: tokens are counts (prompt,
cached or not, plus output and thinking), money is USD, time is seconds.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from sim.harness.fields import PYDANTIC_CONFIG, param, validated

__all__ = ["CALENDARS", "CHECKS", "MIN_WINDOW_S", "SCOPES", "Ledger", "ScopedBudget",
           "overshoot_bound", "window_index"]

SCOPES: tuple[str, ...] = ("session", "tenant")
CHECKS: tuple[str, ...] = ("before_call", "between_turns")
CALENDARS: tuple[str, ...] = ("day", "week")
DAY_S = 86_400.0
WEEK_S = 7 * DAY_S
MONDAY_S = 4 * DAY_S
"""1970-01-05T00:00Z, a Monday: ISO weeks start on Mondays."""
MIN_WINDOW_S = 0.001
"""The shortest reset window of a tenant's budget (seconds): a millisecond,
far below any billing period, and far enough above 0 that the window number of
any simulated time is finite (``5e-324`` made it infinite: an OverflowError)."""


@dataclass(frozen=True, slots=True)
class ScopedBudget:
    """A budget shared by the runs of a session or of a tenant (rules:
    ``sim.harness.scopes``). ``tokens`` and ``money_usd``: the limits (null:
    unlimited); ``hard``: stop runs at the limit (false: alert only);
    ``alert_at``: share of the limit left at which one alert per window is
    raised (null: no alert); ``check``: ``before_call`` or
    ``between_turns``; ``window_s`` or ``calendar`` (a tenant's reset: every
    so many seconds, or each UTC ``day`` or ``week``; at most one of them)."""

    __pydantic_config__: ClassVar[Any] = PYDANTIC_CONFIG

    scope: str = param("session", "session (a parent and its descendants) or tenant")
    tokens: int | None = param(None, "tokens per scope and window (prompt + output + "
                                     "thinking; null: unlimited)", gt=0)
    money_usd: float | None = param(None, "spend per scope and window (USD; null: "
                                          "unlimited)", gt=0)
    hard: bool = param(True, "stop runs at the limit (false: alert only)")
    alert_at: float | None = param(None, "share left that raises an alert (null: none)",
                                   ge=0, lt=1)
    check: str = param("before_call", "before_call (worst case, never passed) or "
                                      "between_turns (a turn may overshoot)")
    window_s: float | None = param(None, "tenant: reset every so many seconds", gt=0)
    calendar: str | None = param(None, "tenant: reset each UTC day or week")

    def __post_init__(self) -> None:
        validated(self, self._problems())

    def _problems(self) -> Iterator[tuple[str, str]]:
        for name, allowed in (("scope", SCOPES), ("check", CHECKS)):
            if getattr(self, name) not in allowed:
                yield name, f"must be one of {', '.join(allowed)}, got {getattr(self, name)!r}"
        if self.calendar is not None and self.calendar not in CALENDARS:
            yield "calendar", f"must be day, week or null, got {self.calendar!r}"
        if self.calendar is not None and self.window_s is not None:
            yield "window_s", "set window_s or calendar, not both"
        if self.window_s is not None and not self.window_s >= MIN_WINDOW_S:
            yield "window_s", (f"must be at least {MIN_WINDOW_S} s (a window's number is "
                               f"the time over it), got {self.window_s!r}")
        if self.scope == "session" and (self.calendar is not None or self.window_s is not None):
            yield "scope", "a session budget never resets: windows are for a tenant's"
        if self.tokens is None and self.money_usd is None:
            yield "tokens", "set tokens or money_usd (or both)"


def window_index(budget: ScopedBudget, now: float, epoch_s: float = 0.0) -> int:
    """The number of the window ``now`` (seconds since the origin, which is
    ``epoch_s`` seconds of UTC time after 1970-01-01T00:00Z) falls in: 0
    for a budget that never resets."""
    if budget.window_s is not None:
        return math.floor(now / budget.window_s)
    if budget.calendar == "day":
        return math.floor((epoch_s + now) / DAY_S)
    if budget.calendar == "week":
        return math.floor((epoch_s + now - MONDAY_S) / WEEK_S)
    return 0


def overshoot_bound(budget: ScopedBudget, runs: int, call_tokens: int, call_usd: float
                    ) -> tuple[int, float]:
    """The most a hard ``budget``'s window spend can end past its limits
    (``(tokens, USD)``) when ``runs`` runs share it and no call uses more
    than ``call_tokens`` tokens or ``call_usd`` USD: nothing for
    ``before_call`` (each call's worst case is reserved before it is made);
    ``runs`` calls for ``between_turns`` (every run may pass its check just
    below the limit and make one more call). A soft budget has no bound."""
    if not budget.hard:
        return (2**63 - 1, math.inf)
    if budget.check == "before_call":
        return (0, 0.0)
    return (runs * call_tokens, runs * call_usd)


class Ledger:
    """The running account of one :class:`ScopedBudget` shared by several
    runs: spend in the current window, reservations of calls in flight (by
    key), alerts and refusals, and the highest spend any window reached
    (``peak_tokens``, ``peak_usd``: what "configured vs actual" compares
    with the limit)."""

    __slots__ = ("budget", "epoch_s", "resets", "window", "tokens", "usd", "reserved_tokens",
                 "reserved_usd", "alerted", "alerts", "refused", "admitted", "peak_tokens",
                 "peak_usd")

    def __init__(self, budget: ScopedBudget, epoch_s: float = 0.0) -> None:
        self.budget = budget
        self.epoch_s = epoch_s
        self.resets = budget.window_s is not None or budget.calendar is not None
        self.window: int | None = None if self.resets else 0
        self.tokens = 0
        self.usd = 0.0
        self.reserved_tokens: dict[Hashable, int] = {}
        self.reserved_usd: dict[Hashable, float] = {}
        self.alerted = False
        self.alerts = 0
        self.refused = 0
        self.admitted = 0
        self.peak_tokens = 0
        self.peak_usd = 0.0

    def roll(self, now: float) -> None:
        """Start a new window, with nothing spent, when ``now`` is past the
        current one (reservations of calls in flight stay)."""
        if not self.resets:
            return
        index = window_index(self.budget, now, self.epoch_s)
        if index != self.window:
            self.window, self.tokens, self.usd, self.alerted = index, 0, 0.0, False

    def committed_usd(self) -> float:
        """Spent in the window plus reserved by calls in flight (USD)."""
        return self.usd + sum(self.reserved_usd.values())

    def committed_tokens(self) -> int:
        """Spent in the window plus reserved by calls in flight (tokens)."""
        return self.tokens + sum(self.reserved_tokens.values())

    def reserve(self, key: Hashable, tokens: int, usd: float, now: float) -> bool:
        """Whether a call of run ``key`` that may use ``tokens`` and ``usd``
        fits under the limits with what is committed (the ``before_call``
        rule); if so (or if the budget is soft) it is reserved in place of
        the run's previous reservation. A refusal of a hard budget is
        counted."""
        self.roll(now)
        b = self.budget
        over = ((b.tokens is not None and self.committed_tokens() + tokens > b.tokens)
                or (b.money_usd is not None and self.committed_usd() + usd > b.money_usd))
        if over and b.hard:
            self.refused += 1
            return False
        self.reserved_tokens[key] = tokens
        self.reserved_usd[key] = usd
        self.admitted += 1
        return True

    def release(self, key: Hashable) -> None:
        """Drop run ``key``'s reservation (its call failed, or it ended)."""
        self.reserved_tokens.pop(key, None)
        self.reserved_usd.pop(key, None)

    def charge(self, key: Hashable, tokens: int, usd: float, now: float) -> bool:
        """Add what run ``key``'s call used to the window and release its
        reservation; return True when this raised an alert (the share left
        fell to ``alert_at`` for the first time in the window)."""
        self.roll(now)
        self.tokens += tokens
        self.usd += usd
        self.release(key)
        self.peak_tokens = max(self.peak_tokens, self.tokens)
        self.peak_usd = max(self.peak_usd, self.usd)
        return self._alert()

    def spent(self, now: float) -> bool:
        """Whether the window has reached a hard limit (the ``between_turns``
        rule: checked before a turn, against spend only)."""
        self.roll(now)
        b = self.budget
        if not b.hard:
            return False
        return ((b.tokens is not None and self.tokens >= b.tokens)
                or (b.money_usd is not None and self.usd >= b.money_usd))

    def left(self) -> float:
        """The smallest share of a limit left in the window (1: untouched;
        may be negative once overshot)."""
        b = self.budget
        shares = [1.0]
        if b.tokens is not None:
            shares.append(1.0 - self.tokens / b.tokens)
        if b.money_usd is not None:
            shares.append(1.0 - self.usd / b.money_usd)
        return min(shares)

    def _alert(self) -> bool:
        at = self.budget.alert_at
        if at is None or self.alerted or self.left() > at:
            return False
        self.alerted = True
        self.alerts += 1
        return True

    def overshoot(self) -> tuple[int, float]:
        """How far the highest window spend went past the limits:
        ``(tokens, USD)``, each >= 0."""
        b = self.budget
        return (max(0, self.peak_tokens - b.tokens) if b.tokens is not None else 0,
                max(0.0, self.peak_usd - b.money_usd) if b.money_usd is not None else 0.0)
