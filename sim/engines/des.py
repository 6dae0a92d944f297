"""The discrete-event engine: the same harness generator on a SimPy clock,
with arrivals, shared capacity, rate limits, approvals, operator controls and
human resumption.

Each task is a SimPy process (:class:`~sim.engines.des_task.TaskRun`) on a
plain :class:`simpy.Environment`, run with its public API only. It
waits for its tenant's concurrency cap and a sandbox (held for the task's
life), then drives the harness generator: a model
call queues for a model slot, passes the provider's rate limits (or gets a 429
with Retry-After, which the harness's real classifier and backoff handle) and
holds the slot for time to first token plus decode time; a tool call, a
backoff wait, an approval and a verification each take the time the world
says. A model call's latency as reported to the harness includes its wait for
a slot, so the harness's time budgets see the time that really passed.

Parked time (wall time that is not active time) is the wait for an approval,
for an operator's resume (a paused task parks at its next step boundary),
for a human to resume a stopped run, and for a sandbox again after that; so
for every task not cancelled by an operator, end - start equals the
harness's active plus parked time. An operator's cancel interrupts the task
(:meth:`simpy.Process.interrupt`) wherever it is: an in-flight call is
aborted and answered as cancelled after the seconds it had run, and the
harness ends the run without paying for it.

The engine never writes the harness's state: it reports parked time with
:func:`~sim.harness.state.park`, cancels a running loop with
:func:`~sim.harness.state.request_abort` and a queued one with
:func:`~sim.harness.loop.cancel`, and resumes with
:func:`~sim.harness.state.resume`; every run ends inside the harness, which
records the outcome and emits the terminal event.

Time series (:class:`~sim.engines.monitor.Series`): tasks in the system, busy
model slots and sandboxes, the queues for them, parked tasks, and each
tenant's running tasks (``running:<tenant>``).

With unlimited capacity and no time-dependent rule binding, every task gets
the same outcome, steps, tokens and cost as in the direct engine: both drive
the same generator against the same :class:`~sim.world.task.SimulatedTask`
with the same random streams.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import replace
from typing import Any

import simpy

from sim.engines.arrivals import Arrival, arrival_schedule
from sim.engines.cell import Cell
from sim.engines.des_params import DesParams
from sim.engines.des_result import DesResult
from sim.engines.des_task import TaskRun
from sim.engines.direct import Tracer
from sim.engines.gateway import ModelGateway
from sim.engines.gc_paused import gc_paused
from sim.engines.monitor import Series
from sim.engines.perform import EFFECTS, answers
from sim.engines.ratelimit import RateLimiter
from sim.engines.slots import SlotPool
from sim.engines.tenant_budget import TenantLedger
from sim.harness.params import HarnessParams
from sim.task_record import TaskRecord
from sim.world.streams import Draws, StreamPool

__all__ = ["Arrival", "DesEngine", "DesResult", "arrival_schedule"]

class DesEngine:
    """One DES cell: build it, then :meth:`run` it once."""

    def __init__(self, cell: Cell, des: DesParams, arrivals: list[Arrival],
                 tracer: Tracer | None = None, *,
                 on_task_end: Callable[[], None] | None = None) -> None:
        self.cell = cell
        self.tracer = tracer
        self.on_task_end = on_task_end  # called as each task ends (progress)
        self.des = des
        self.arrivals = arrivals
        self.env = simpy.Environment()
        cap = des.capacity
        # without operators, the pools leave out the events that change nothing
        elide = not des.operations
        self.model_slots = (SlotPool(self.env, cap.model_slots, elide=elide)
                            if cap.model_slots else None)
        self.sandboxes = (SlotPool(self.env, cap.sandboxes, elide=elide)
                          if cap.sandboxes else None)
        self.tenant_caps = {t.name: SlotPool(self.env, t.max_concurrency, elide=elide)
                            for t in des.tenants if t.max_concurrency}
        self.limiter = (RateLimiter(cap.requests_per_minute, cap.tokens_per_minute)
                        if cap.requests_per_minute or cap.tokens_per_minute else None)
        self.ledgers = {t.name: TenantLedger(t.money_usd) for t in des.tenants
                        if t.money_usd is not None}
        self.series = {name: Series(name) for name in (
            "tasks_in_system", "busy_model_slots", "busy_sandboxes", "model_queue",
            "sandbox_queue", "parked")}
        # tasks of each tenant holding a sandbox (running), as "running:<tenant>"
        self.running = {t.name: Series(f"running:{t.name}") for t in des.tenants}
        self.series.update((s.name, s) for s in self.running.values())
        self.ended = 0  # tasks ended so far
        self.paused: set[str] = set()
        self.resumed = self.env.event()
        self.runs: dict[int, TaskRun] = {}  # the tasks in the system, by index
        self.records: list[TaskRecord | None] = [None] * len(arrivals)
        self.sandbox_hold = [0.0] * len(arrivals)
        self.sandbox_wait = [0.0] * len(arrivals)
        self.pool = StreamPool()
        self.params_by_round = [cell.params]
        self.prefix_tokens = cell.params.prefix_tokens  # a sum over the tools: once
        self._plans: dict[type, dict[type, tuple[Any, Any, Series | None]]] = {}

    # ---------------------------------------------------------------- run
    def run(self) -> DesResult:
        """Simulate until every task has ended; return the results."""
        self.gateway = ModelGateway(self.env, self.model_slots, self.limiter,
                                    self.series["model_queue"], self.series["busy_model_slots"])
        # a pool of model slots or rate limits: a model call queues (else it just takes time)
        self.queued_model = self.model_slots is not None or self.limiter is not None
        self._start_arrivals()
        if self.des.operations:
            self.env.process(self._operate())
        # the cyclic garbage collector is paused for the run: a DES run makes
        # next to no cycles (about 35 cyclic objects in 5,000 tasks, with or
        # without a tracer), and its passes over the tasks alive at once took
        # about 6% of a task's instructions
        with gc_paused():
            self.env.run()
        records = [r for r in self.records if r is not None]
        if len(records) < len(self.records):  # pragma: no cover - a bug, never silently dropped
            first = self.records.index(None)
            raise RuntimeError(f"{len(self.records) - len(records)} tasks never ended "
                               f"(first: {first})")
        horizon = max((r.end_s for r in records), default=0.0)
        offered = (sum(t.rate_per_hour for t in self.des.tenants) / 3600.0
                   if self.des.arrivals.kind == "poisson" else None)
        return DesResult(records, self.series, horizon,
                         self.limiter.rejected if self.limiter else 0, self.sandbox_hold,
                         self.sandbox_wait, self.limiter, offered,
                         {name: ledger.summary() for name, ledger in self.ledgers.items()})

    def _start_arrivals(self) -> None:
        """Start the arrivals' process (first, at time 0)."""
        self.env.process(self._arrivals())

    def _arrivals(self) -> Generator[simpy.Event, None, None]:
        """Each task's process, started as it arrives (in arrival order)."""
        env, runs = self.env, self.runs
        for arrival in self.arrivals:
            if arrival.time_s > env.now:
                yield env.timeout(arrival.time_s - env.now)
            runs[arrival.index] = TaskRun(self, arrival)

    def _operate(self) -> Generator[simpy.Event, None, None]:
        """The operators' actions, each at its time (in time order): pause or
        resume a scope, or cancel the tasks in it (an interrupt each)."""
        env = self.env
        for op in sorted(self.des.operations, key=lambda o: o.at_s):
            if op.at_s > env.now:
                yield env.timeout(op.at_s - env.now)
            if op.action == "pause":
                self.paused.add(op.scope)
            elif op.action == "resume":
                self.paused.discard(op.scope)
                self.resumed.succeed()
                self.resumed = env.event()
            else:
                for index, run in list(self.runs.items()):
                    if op.scope in self.arrivals[index].scopes:
                        run.cancel()

    def plan(self, answerer: type) -> dict[type, tuple[Any, Any, Series | None]]:
        """Effect type -> (the function answering it, the seconds it takes,
        the series counting it or None) for tasks of class ``answerer``: the
        dispatch table (:data:`sim.engines.perform.EFFECTS`) read once."""
        plan = self._plans.get(answerer)
        if plan is None:
            answer = answers(answerer)
            plan = self._plans[answerer] = {
                kind: (answer[kind], how.seconds,
                       None if how.series is None else self.series[how.series])
                for kind, how in EFFECTS.items()}
        return plan

    def extended(self, round_: int) -> HarnessParams:
        """The harness parameters of a run's round ``round_`` (0: the cell's;
        each human resumption multiplies the budgets by the scenario's
        ``des.resume.budget_factor``)."""
        while len(self.params_by_round) <= round_:
            base = self.params_by_round[-1]
            factor = self.des.resume.budget_factor
            self.params_by_round.append(replace(base, budgets=base.budgets.scaled(factor)))
        return self.params_by_round[round_]

    def human_delay(self, draws: Draws) -> float:
        """Seconds until a human resumes a stopped run, drawn from ``draws``."""
        return self.des.resume.delay.sample(draws)

