"""What one DES cell produced (:class:`DesResult`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.engines.monitor import Series
from sim.engines.ratelimit import RateLimiter
from sim.task_record import TaskRecord


@dataclass
class DesResult:
    """What one DES cell produced: a record per task (in task order), the time
    series, the horizon (end of the last task), the calls answered 429, and per
    task the seconds it held a sandbox and waited for one (not counting the
    wait for its tenant's cap). ``limiter`` is the provider's rate limiter (its
    admitted and rejected counts), or None without rate limits.
    ``offered_rate_per_s`` is the arrival rate the scenario sets (the sum of
    the tenants' Poisson rates, tasks per second; None for batch and CSV
    arrivals), against which Little's law is checked. See
    :func:`sim.analysis.capacity.measurements`."""

    records: list[TaskRecord]
    series: dict[str, Series]
    horizon_s: float
    rate_limited: int
    sandbox_hold_s: list[float] = field(default_factory=list)
    sandbox_wait_s: list[float] = field(default_factory=list)
    limiter: RateLimiter | None = None
    offered_rate_per_s: float | None = None
    tenant_budgets: dict[str, dict[str, float | int]] = field(default_factory=dict)
    """Per tenant with a shared money budget, its ledger's summary
    (:meth:`~sim.engines.tenant_budget.TenantLedger.summary`)."""
    child_times: list[tuple[float, float]] = field(default_factory=list)
    """Per child run (subagent), when it was spawned and when it ended
    (seconds), in the order the children ended."""


# -------------------------------------------------------------------- engine
