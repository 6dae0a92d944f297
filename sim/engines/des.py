"""The discrete-event engine: the same harness generator inside SimPy processes,
with arrivals, shared capacity, rate limits, approvals, operator controls and
human resumption.

One SimPy process per task. It waits for its tenant's concurrency cap and a
sandbox (held for the task's life), then drives the harness generator: a model
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
wherever it is: an in-flight call is aborted and answered as cancelled after
the seconds it had run, and the harness ends the run without paying for it.

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

import gc
from collections.abc import Callable, Generator
from dataclasses import replace
from typing import Any

import simpy

from sim.engines.arrivals import Arrival, arrival_schedule
from sim.engines.cell import Cell
from sim.engines.des_params import DesParams
from sim.engines.des_result import DesResult
from sim.engines.direct import Tracer
from sim.engines.gateway import ModelGateway
from sim.engines.monitor import Series
from sim.engines.perform import EFFECTS, answers
from sim.engines.ratelimit import RateLimiter
from sim.engines.slots import SlotPool
from sim.engines.tenant_budget import TenantLedger, refusal
from sim.engines.ticks import Tick
from sim.harness.effects import (
    Checkpoint,
    ModelRequest,
    Result,
)
from sim.harness.loop import Loop, agent_loop, cancel
from sim.harness.params import HarnessParams
from sim.harness.state import RESUMABLE, HarnessState, new_state, park, request_abort, resume
from sim.task_record import TaskRecord, make_record
from sim.world.streams import OPERATIONS, StreamPool
from sim.world.task import SimulatedTask

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
        self.paused: set[str] = set()
        self.resumed = self.env.event()
        self.processes: dict[int, simpy.Process] = {}
        self.records: list[TaskRecord | None] = [None] * len(arrivals)
        self.sandbox_hold = [0.0] * len(arrivals)
        self.sandbox_wait = [0.0] * len(arrivals)
        self.holdings: dict[int, list] = {}
        self.pool = StreamPool()
        self.params_by_round = [cell.params]
        self.detector = cell.make_detector
        self._plans: dict[type, dict[type, tuple[Any, Any, Series | None]]] = {}

    # ---------------------------------------------------------------- run
    def run(self) -> DesResult:
        """Simulate until every task has ended; return the results."""
        self.gateway = ModelGateway(self.env, self.model_slots, self.limiter,
                                    self.series["model_queue"], self.series["busy_model_slots"])
        self.env.process(self._arrive())
        if self.des.operations:
            self.env.process(self._operate())
        # the cyclic garbage collector is paused for the run: a DES run makes
        # next to no cycles (about 35 cyclic objects in 5,000 tasks, with or
        # without a tracer), and its passes over the tasks alive at once took
        # about 6% of a task's instructions
        paused = gc.isenabled()
        gc.disable()
        try:
            self.env.run()
        finally:
            if paused:
                gc.enable()
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

    def _arrive(self):
        env = self.env
        for arrival in self.arrivals:
            if arrival.time_s > env.now:
                yield env.timeout(arrival.time_s - env.now)
            self.processes[arrival.index] = env.process(self._task(arrival))

    def _operate(self):
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
                for index, process in list(self.processes.items()):
                    if process.is_alive and op.scope in self.arrivals[index].scopes:
                        process.interrupt("cancel")

    # --------------------------------------------------------------- a task
    def _task(self, arrival: Arrival):
        env, series = self.env, self.series
        cell = self.cell
        series["tasks_in_system"].add(env.now, 1)
        streams = self.pool.acquire(cell.seed, arrival.index)
        task = SimulatedTask(cell.world, streams)
        params = cell.params
        state = new_state(params.prefix_tokens, task.model_id or params.model,
                          "Complete the task.", task.task_tokens)
        waits = [0.0, 0.0]  # queue before the start, waits for model slots
        start = None
        wrap = None
        resumptions = 0
        try:
            while True:
                asked = env.now
                begun = yield from self._acquire(arrival, waits)
                if start is None:
                    start = begun
                    if self.tracer is not None:
                        wrap = self.tracer(arrival.index, state, lambda: env.now)
                else:  # resumed by a human: the wait for a sandbox again is parked time
                    park(state, begun - asked)
                try:
                    state = yield from self._drive(arrival, task, state, params, waits, wrap)
                finally:
                    self._release(arrival, begun)
                if (state.status not in RESUMABLE
                        or resumptions >= self.des.resume.max_times
                        or streams[OPERATIONS].uniform() >= self.des.resume.share):
                    break
                delay = self._human_delay(streams[OPERATIONS])
                parked_at = env.now
                series["parked"].add(parked_at, 1)
                try:
                    yield env.timeout(delay)
                finally:
                    series["parked"].add(env.now, -1)
                    park(state, env.now - parked_at)
                resumptions += 1
                params = self._extended(resumptions)
                resume(state)
        except simpy.Interrupt:  # cancelled while queued or while waiting for a human
            state = cancel(params, state)
        series["tasks_in_system"].add(env.now, -1)
        self.pool.release(streams)
        self.records[arrival.index] = make_record(
            cell.name, arrival.index, state, ground_truth=task.need,
            truly_done=task.answer_correct, tenant=arrival.tenant,
            agent_type=arrival.agent_type, arrival_s=arrival.time_s,
            start_s=env.now if start is None else start, end_s=env.now, queue_s=waits[0],
            model_wait_s=waits[1], resumptions=resumptions)
        if self.on_task_end is not None:
            self.on_task_end()

    def _acquire(self, arrival: Arrival, waits: list[float]):
        """Wait for the tenant's cap and a sandbox (both held until
        :meth:`_release`); return the time the task got them."""
        env, series = self.env, self.series
        t0 = env.now
        held = self.holdings[arrival.index] = []
        try:
            cap = self.tenant_caps.get(arrival.tenant)
            if cap is not None:
                request = cap.take()
                held.append((cap, request))
                if request is not None:
                    yield request
            if self.sandboxes is not None:
                request = self.sandboxes.take()
                held.append((self.sandboxes, request))
                asked = env.now
                if request is None:  # granted at once
                    series["sandbox_queue"].pulse(asked)
                else:
                    series["sandbox_queue"].add(asked, 1)
                    try:
                        yield request
                    finally:
                        series["sandbox_queue"].add(env.now, -1)
                        self.sandbox_wait[arrival.index] += env.now - asked
        except simpy.Interrupt:
            for resource, request in self.holdings.pop(arrival.index):
                if request is None or request.triggered:
                    resource.release(request)
                else:
                    resource.cancel(request)
            raise
        finally:
            waits[0] += env.now - t0
        now = env.now
        series["busy_sandboxes"].add(now, 1)
        self.running[arrival.tenant].add(now, 1)
        return now

    def _release(self, arrival: Arrival, begun: float) -> None:
        """Give back the cap and the sandbox of a task that held them since ``begun``."""
        for resource, request in self.holdings.pop(arrival.index, ()):
            resource.release(request)
        now = self.env.now
        self.series["busy_sandboxes"].add(now, -1)
        self.running[arrival.tenant].add(now, -1)
        self.sandbox_hold[arrival.index] += now - begun

    def _drive(self, arrival: Arrival, task: SimulatedTask, state: HarnessState,
               params: HarnessParams, waits: list[float], wrap: Callable[[Loop], Loop] | None
               ) -> Generator[simpy.Event, Any, HarnessState]:
        """Drive one harness loop (wrapped by ``wrap`` if given) to its end,
        answering each effect through the dispatch table
        (:data:`sim.engines.perform.EFFECTS`) and letting the time it takes
        pass; return the final state."""
        env = self.env
        loop = agent_loop(params, state, detector=self.detector(params))
        if wrap is not None:
            loop = wrap(loop)
        send = loop.send
        plan = self._plan(type(task))
        gateway = self.gateway
        after = Tick(env).after  # the task's timer, scheduled anew for each wait
        # a pool of model slots or rate limits: a model call queues (else it just takes time)
        queued_model = self.model_slots is not None or self.limiter is not None
        ledger = self.ledgers.get(arrival.tenant)
        result: Result = None
        while True:
            try:
                effect = send(result)
            except StopIteration as stop:
                final: HarnessState = stop.value
                if ledger is not None:
                    ledger.settle(arrival.index, final.money_usd)
                return final
            if ledger is not None:  # the tenant's shared budget, checked before each call
                refused = refusal(ledger, arrival.index, params, state, effect)
                if refused is not None:
                    result = refused
                    continue
            began = None
            kind = type(effect)
            try:
                if self.paused and self.paused & arrival.scopes:
                    yield from self._park(arrival, state)
                if kind is Checkpoint:  # answered with None, no time passes
                    result = None
                    continue
                began = env.now
                if queued_model and kind is ModelRequest:  # through the gateway, in place
                    slot = gateway.take(began)
                    if slot is not None:  # none free: wait in the queue
                        yield from gateway.queued(slot, began, waits)
                    result, seconds = gateway.answer(effect, task, began, slot)  # type: ignore[arg-type]
                    if seconds is not None:
                        try:
                            yield after(seconds)
                        except simpy.Interrupt:
                            gateway.done(slot)
                            raise
                        gateway.done(slot)
                        result.latency_s = env.now - began  # includes the wait for a slot
                    continue
                respond, seconds_of, counted = plan[kind]
                result = respond(task, effect, began)
                seconds = seconds_of(effect, result)
                if seconds is None:  # no time passes
                    continue
                if counted is None:
                    yield after(seconds)
                else:  # counted in a time series while it lasts
                    yield from self._held(counted, seconds, after)
            except simpy.Interrupt:  # an operator cancelled the task: abort the call in flight
                after = Tick(env).after  # the old one may still be due: a new timer
                request_abort(state)
                result = EFFECTS[kind].cancelled(0.0 if began is None else env.now - began)

    def _plan(self, answerer: type) -> dict[type, tuple[Any, Any, Series | None]]:
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

    def _held(self, series: Series, seconds: float, after: Callable[[float], Tick]
              ) -> Generator[simpy.Event, Any, None]:
        """Let ``seconds`` pass (on the task's timer ``after``), counted in
        ``series`` meanwhile (a model slot of an unlimited pool, a parked
        approval)."""
        series.add(self.env.now, 1)
        try:
            yield after(seconds)
        finally:
            series.add(self.env.now, -1)

    def _park(self, arrival: Arrival, state: HarnessState):
        """Wait at a step boundary while an operator pauses the task's scope;
        the time counts as parked (wall time, not active time)."""
        series, env = self.series, self.env
        t0 = env.now
        series["parked"].add(t0, 1)
        try:
            while self.paused & arrival.scopes:
                yield self.resumed
        finally:
            series["parked"].add(env.now, -1)
            park(state, env.now - t0)

    def _extended(self, round_: int):
        while len(self.params_by_round) <= round_:
            base = self.params_by_round[-1]
            factor = self.des.resume.budget_factor
            self.params_by_round.append(replace(base, budgets=base.budgets.scaled(factor)))
        return self.params_by_round[round_]

    def _human_delay(self, draws) -> float:
        return self.des.resume.delay.sample(draws)

