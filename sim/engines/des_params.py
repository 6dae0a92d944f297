"""Parameters of the discrete-event engine: arrivals, tenants, shared capacity,
operator controls and resumption (validated with the scenario).

Units: rates are tasks per hour, limits are per minute, times are seconds;
``null`` capacities are unlimited.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sim.world.params import MIN_RATE, DurationParams, Prob


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TenantParams(_Strict):
    """A tenant: its arrival rate (Poisson arrivals), its weight (batch
    arrivals), its agent type and its concurrency cap."""

    name: str = Field("default", description="tenant name")
    rate_per_hour: float = Field(60.0, ge=MIN_RATE,
                                 description="Poisson arrival rate (tasks/hour)")
    weight: float = Field(1.0, gt=0, description="share of a batch or of CSV rows without a "
                                                 "tenant (relative)")
    agent_type: str = Field("agent", description="agent type, for operator controls")
    max_concurrency: int | None = Field(None, ge=1, description="tasks of this tenant "
                                                                "running at once (null: no cap)")
    money_usd: float | None = Field(
        None, gt=0, allow_inf_nan=False,
        description="money budget shared by the tenant's runs (USD), checked before each model "
                    "call against the spend committed so far, calls in flight included "
                    "(null: none)")


class ArrivalParams(_Strict):
    """How tasks arrive: ``poisson`` (each tenant at its rate), ``batch`` (all
    at time zero), ``burst`` (``size`` tasks at once every ``every_s``
    seconds, from time zero), ``spike`` (``poisson``, plus ``size`` tasks at
    once at ``at_s`` seconds: one transient burst over a steady load) or
    ``csv`` (times read from ``path``: a column ``arrival_s`` and optional
    ``tenant`` and ``agent_type`` columns)."""

    kind: Literal["poisson", "batch", "burst", "spike", "csv"] = Field(
        "poisson", description="arrival process")
    path: str | None = Field(None, description="CSV file of arrival times (kind csv)")
    # left out of written settings when unset, so settings written before they existed
    # are written the same
    size: int | None = Field(None, ge=1, exclude_if=lambda v: v is None,
                             description="tasks arriving together (kinds burst and spike)")
    every_s: float | None = Field(None, gt=0, allow_inf_nan=False,
                                  exclude_if=lambda v: v is None,
                                  description="seconds between bursts (kind burst)")
    at_s: float | None = Field(None, ge=0, allow_inf_nan=False, exclude_if=lambda v: v is None,
                               description="when the spike's tasks arrive (seconds; kind spike)")

    @model_validator(mode="after")
    def _csv_needs_path(self) -> ArrivalParams:
        if self.kind == "csv" and not self.path:
            raise ValueError("kind csv needs a path")
        if self.kind == "burst" and (self.size is None or self.every_s is None):
            raise ValueError("kind burst needs a size and every_s")
        if self.kind == "spike" and (self.size is None or self.at_s is None):
            raise ValueError("kind spike needs a size and at_s")
        return self


class CapacityParams(_Strict):
    """Shared capacity; null is unlimited."""

    model_slots: int | None = Field(None, ge=1, description="concurrent model calls")
    sandboxes: int | None = Field(None, ge=1, description="sandboxes (held for a task's life)")
    requests_per_minute: float | None = Field(
        None, ge=MIN_RATE, description="model requests/minute (token bucket; 429 above it)")
    tokens_per_minute: float | None = Field(
        None, ge=MIN_RATE, description="prompt tokens/minute (token bucket)")
    burst_s: float | None = Field(
        None, gt=0, allow_inf_nan=False, exclude_if=lambda v: v is None,
        description="seconds of refill the rate limits' buckets hold (null: a minute; a "
                    "provider enforcing its minute over seconds holds a few)")


class OperatorAction(_Strict):
    """At ``at_s``, pause, resume or cancel the tasks in ``scope``: ``all``,
    ``tenant:<name>`` or ``agent_type:<name>``. Paused tasks park at their next
    step boundary and lose nothing; cancelled tasks abort their in-flight calls."""

    at_s: float = Field(ge=0, description="when (seconds)")
    action: Literal["pause", "resume", "cancel"] = Field(description="what")
    scope: str = Field("all", pattern=r"^(all|tenant:.+|agent_type:.+)$",
                       description="all, tenant:<name> or agent_type:<name>")


class ResumeParams(_Strict):
    """Humans resuming stopped runs from their checkpoints."""

    share: Prob = Field(0.0, description="share of budget_exhausted / needs_human runs resumed")
    delay: DurationParams = Field(default_factory=lambda: DurationParams(median_s=1800.0,
                                                                         sigma=1.0))
    budget_factor: float = Field(2.0, gt=1, description="budgets are multiplied by this")
    max_times: int = Field(1, ge=1, description="resumptions per task at most")


class DesParams(_Strict):
    """The discrete-event engine's settings (used when ``engine: des``)."""

    arrivals: ArrivalParams = Field(default_factory=ArrivalParams)
    tenants: Annotated[tuple[TenantParams, ...], Field(min_length=1)] = Field(
        default_factory=lambda: (TenantParams(),))
    capacity: CapacityParams = Field(default_factory=CapacityParams)
    operations: tuple[OperatorAction, ...] = Field((), description="operator controls")
    resume: ResumeParams = Field(default_factory=ResumeParams)

    @model_validator(mode="after")
    def _consistent(self) -> DesParams:
        names = [t.name for t in self.tenants]
        if len(set(names)) != len(names):
            raise ValueError(f"tenant names must be unique, got {names}")
        known = {f"tenant:{t.name}" for t in self.tenants} | {
            f"agent_type:{t.agent_type}" for t in self.tenants} | {"all"}
        paused: dict[str, float] = {}
        for op in sorted(self.operations, key=lambda o: o.at_s):
            if op.scope not in known:
                raise ValueError(f"operations: unknown scope {op.scope!r}; known: "
                                 f"{', '.join(sorted(known))}")
            if op.action == "pause":
                paused[op.scope] = op.at_s
            elif op.action == "resume":
                paused.pop(op.scope, None)
        if paused:
            raise ValueError(f"operations: {', '.join(sorted(paused))} paused and never "
                             f"resumed; tasks would park forever")
        return self
