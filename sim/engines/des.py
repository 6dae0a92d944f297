"""The discrete-event engine: the same harness generator on a SimPy clock,
with arrivals, shared capacity, rate limits, approvals, operator controls and
human resumption.

Each task is a SimPy process (:class:`TaskRun`) on a
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

**One task** (:class:`TaskRun`, :meth:`TaskRun.life`). A task arrives, waits
for its tenant's concurrency cap and a sandbox (both held until the harness
loop ends), drives the harness generator, performing each effect it yields and
letting the time it takes pass with ``env.timeout``, and, when the run stopped
in a state a human may resume, perhaps waits for one and goes round again with
extended budgets. It waits only on SimPy's public events: a pool's request
(:class:`~sim.engines.slots.SlotPool`), a timeout, the operators' resume event.

An operator's cancel is SimPy's :meth:`~simpy.Process.interrupt`
(:meth:`TaskRun.cancel`): the :class:`simpy.Interrupt` arrives at the
task's current wait, whose kind :attr:`TaskRun.mode` names (the constants
below), and the task undoes that wait. Queued for its tenant's cap or a
sandbox, or waiting for a human, the run ends as cancelled without being
driven (:func:`~sim.harness.loop.cancel`); in a step, what the step held
is given back (a queued or granted model slot, a counted approval), the
harness is told to abort (:func:`~sim.harness.state.request_abort`) and the
effect in flight is answered as cancelled after the seconds it ran
(:data:`~sim.engines.perform.EFFECTS`); the harness then ends the run.

The process schedules no event that nothing waits on beyond SimPy's own
(its start, its end): a model call whose slot is free is granted without
an event when none could matter (the pools' ``elide``), and an effect that
takes no time (a checkpoint, a 429) is answered without a timeout.

**Subagents.** A spawn (:class:`~sim.harness.effects.SpawnRequest`) starts
one SimPy process per child (:class:`ChildRun`): the same harness loop with
the cell's parameters, driven by the same :meth:`TaskRun.drive`, so a child
queues for model slots and rate-limit tokens like any run (children compete
with everyone). A child holds no sandbox or tenant slot of its own (it runs
in its parent's), and at most ``max_concurrent`` children of one spawn run at
once (a :class:`simpy.Resource` per spawn; the rest queue). The parent waits
on :class:`simpy.AllOf` of its children, and its wait is the spawn's
duration; without waiting (``harness.subagents.wait`` false), the spawn is
answered at once and a collection hands over the children that have ended
(waiting on :class:`simpy.AllOf` of the rest before a final answer). An
operator's cancel of the parent interrupts its children. With
``harness.subagents`` set, the series ``runs_in_system`` counts every run in
the system, children included (a child from its spawn to its end), and
:attr:`DesResult.child_times` lists each child's ``(spawned, ended)``.

**Shared budgets.** With ``harness.shared_budgets``, each root run gets a
fresh ledger per session budget (shared with its descendants) and its
tenant's ledger of each tenant budget (shared by all the tenant's runs,
children included: :attr:`DesEngine.tenant_scoped`), on the engine's clock
(a run's clock starts at its start). The DES's own tenant money budget
(``des.tenants[].money_usd``, :mod:`sim.engines.tenant_budget`) is checked
by the driver as before, with the same harness rule.

Units: seconds throughout.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Hashable, Sequence
from dataclasses import replace
from typing import Any

import simpy
from simpy import Interrupt
from simpy.events import Event

from sim.engines.arrivals import Arrival, arrival_schedule
from sim.engines.cell import Cell
from sim.engines.des_params import DesParams
from sim.engines.des_result import DesResult
from sim.engines.direct import RunObserver, Tracer
from sim.engines.gateway import ModelGateway
from sim.engines.gc_paused import gc_paused
from sim.engines.monitor import PULSE, Series
from sim.engines.perform import EFFECTS, answers
from sim.engines.ratelimit import RateLimiter
from sim.engines.slots import SlotPool
from sim.engines.tenant_budget import TenantLedger, refusal
from sim.harness.effects import (
    Checkpoint,
    ChildResults,
    ChildSpec,
    CollectChildren,
    ModelRequest,
    SpawnRequest,
    ToolRequest,
)
from sim.harness.loop import Loop, cancel
from sim.harness.params import HarnessParams
from sim.harness.pump import Observer, steps
from sim.harness.retry_budget import RetryBudget
from sim.harness.scopes import Ledger
from sim.harness.state import (
    RESUMABLE,
    SUCCEEDED,
    HarnessState,
    new_state,
    park,
    request_abort,
    resume,
)
from sim.harness.subagents import child_result, child_state
from sim.task_record import TaskRecord, make_record
from sim.world.streams import OPERATIONS, Draws, StreamPool, child_streams
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
        self.limiter = (RateLimiter(cap.requests_per_minute, cap.tokens_per_minute,
                                    cap.burst_s)
                        if cap.requests_per_minute or cap.tokens_per_minute else None)
        self.ledgers = {t.name: TenantLedger(t.money_usd) for t in des.tenants
                        if t.money_usd is not None}
        # a retry bucket per tenant (a client), shared by its runs (retry.quota)
        quota = cell.params.retry.quota
        self.retry_budgets = {} if quota is None else {
            t.name: RetryBudget(quota, self.clock) for t in des.tenants}
        self.series = {name: Series(name) for name in (
            "tasks_in_system", "busy_model_slots", "busy_sandboxes", "model_queue",
            "sandbox_queue", "parked")}
        # tasks of each tenant holding a sandbox (running), as "running:<tenant>"
        self.running = {t.name: Series(f"running:{t.name}") for t in des.tenants}
        self.series.update((s.name, s) for s in self.running.values())
        # every run in the system, children included (only with subagents)
        self.runs_series = (Series("runs_in_system") if cell.params.subagents is not None
                            else None)
        if self.runs_series is not None:
            self.series["runs_in_system"] = self.runs_series
        self.child_times: list[tuple[float, float]] = []  # (spawned, ended) per child
        # harness.shared_budgets of scope tenant: one ledger each per tenant, shared
        self.tenant_scoped: dict[str, list[Ledger]] = {}
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

    def clock(self) -> float:
        """The simulated time now (seconds)."""
        return float(self.env.now)

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
        result = DesResult(records, self.series, horizon,
                           self.limiter.rejected if self.limiter else 0, self.sandbox_hold,
                           self.sandbox_wait, self.limiter, offered,
                           {name: ledger.summary() for name, ledger in self.ledgers.items()})
        result.child_times = self.child_times
        return result

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

    def run_ledgers(self, tenant: str) -> list[Ledger] | None:
        """The shared budgets' ledgers of a new root run of ``tenant``: a
        fresh one per session budget (the run and its descendants share it)
        and the tenant's own (every run of the tenant shares it); None
        without ``harness.shared_budgets``."""
        budgets = self.cell.params.shared_budgets
        if not budgets:
            return None
        shared = self.tenant_scoped.get(tenant)
        if shared is None:
            shared = self.tenant_scoped[tenant] = [Ledger(b) for b in budgets
                                                   if b.scope == "tenant"]
        return [Ledger(b) for b in budgets if b.scope == "session"] + shared

    def human_delay(self, draws: Draws) -> float:
        """Seconds until a human resumes a stopped run, drawn from ``draws``."""
        return self.des.resume.delay.sample(draws)


# ---------------------------------------------------------------- one task

FOLD_EVERY = 256  # tasks ended between two folds of the engine's series

# what a task waits for (TaskRun.mode): what a cancel there undoes
CAP, SANDBOX, PARK, QUEUED, MODEL, TIMER, HELD, HUMAN = range(8)
CANCELLED = "cancelled by an operator"  # the cause of an operator's interrupt


class TaskRun:
    """One task of ``engine`` (arriving as ``arrival``), run as a SimPy
    process (:attr:`process`) started at once; ends with its record in
    ``engine.records``. :attr:`mode` is the kind of wait it is in (or last
    was), :attr:`kind` the type of the effect it performs (or last
    performed): what an operator's cancel finds."""

    __slots__ = ("engine", "arrival", "mode", "kind", "process", "key", "background",
                 "recorder")

    def __init__(self, engine: DesEngine, arrival: Arrival) -> None:
        self.engine = engine
        self.arrival = arrival
        self.mode = CAP
        self.kind: type | None = None
        self.key: tuple[int, ...] = (arrival.index,)  # the run's spawn key (child_streams)
        self.background: list[ChildRun] = []  # children started without waiting
        self.recorder: RunObserver | None = None  # its trace recorder (engine.tracer's)
        self.process = engine.env.process(self.life())

    def cancel(self) -> None:
        """An operator cancels the task wherever it waits: an interrupt,
        processed before any event of normal priority due now."""
        self.process.interrupt(CANCELLED)

    def life(self) -> Generator[Event, Any, None]:
        """The task from its arrival to its end (see the module docstring)."""
        engine, arrival = self.engine, self.arrival
        env, index = engine.env, arrival.index
        cell = engine.cell
        now = env.now
        engine.series["tasks_in_system"].record((now, 1))
        if engine.runs_series is not None:
            engine.runs_series.record((now, 1))
        streams = engine.pool.acquire(cell.seed, index)
        task = SimulatedTask(cell.world, streams)
        params = cell.params
        state = new_state(engine.prefix_tokens, task.model_id or params.model,
                          "Complete the task.", task.task_tokens)
        waits = [0.0, 0.0]  # queue before the start, waits for model slots
        start_s: float | None = None
        observers: tuple[Observer, ...] = ()
        resumptions = 0
        rules = engine.des.resume
        ledgers = engine.run_ledgers(arrival.tenant)  # kept over resumptions
        while True:  # a round: capacity, the harness loop, perhaps a human after it
            held: list = []
            asked = now
            if not (yield from self.acquire(held, waits)):  # cancelled while queued
                state = cancel(params, state)
                now = env.now
                break
            begun = now = env.now
            if start_s is None:
                start_s = now
                if engine.tracer is not None:  # one recorder over every round
                    self.recorder = engine.tracer(index, state, lambda: env.now)
                    observers = (self.recorder,)
            else:  # resumed by a human: the wait for a sandbox again is parked time
                park(state, now - asked)
            loop = cell.loop(state, params, retry_budget=engine.retry_budgets.get(arrival.tenant),
                             retry_key=f"{index}:", ledgers=ledgers, started_s=start_s)
            state = yield from self.drive(loop, state, params, waits, task, observers)
            now = env.now
            self.release(held, now, begun)
            if (state.status not in RESUMABLE or resumptions >= rules.max_times
                    or streams[OPERATIONS].uniform() >= rules.share):
                break
            delay = engine.human_delay(streams[OPERATIONS])
            parked_at = now
            parked = engine.series["parked"].record
            parked((now, 1))
            self.mode = HUMAN
            try:
                yield env.timeout(delay)
            except Interrupt:  # cancelled while waiting for a human
                now = env.now
                parked((now, -1))
                park(state, now - parked_at)
                state = cancel(params, state)
                break
            now = env.now
            parked((now, -1))
            park(state, now - parked_at)
            resumptions += 1
            params = engine.extended(resumptions)
            resume(state)
        self.end(state, task, streams, now, start_s, waits, resumptions)

    def acquire(self, held: list, waits: list[float]) -> Generator[Event, Any, bool]:
        """Wait for the tenant's cap, then a sandbox, appending each pool
        and its request (None: granted without an event) to ``held``; True
        once both are held (counted busy), False when cancelled while
        queued (both given back or withdrawn). ``waits[0]`` gains the wait."""
        engine, env = self.engine, self.engine.env
        tenant = self.arrival.tenant
        asked = env.now
        request: Event | None = None
        try:
            cap = engine.tenant_caps.get(tenant)
            if cap is not None:
                request = cap.take(asked)
                held.append((cap, request))
                if request is not None:
                    self.mode = CAP
                    yield request
            sandboxes = engine.sandboxes
            if sandboxes is not None:
                now = env.now
                request = sandboxes.take(now)
                held.append((sandboxes, request))
                queue = engine.series["sandbox_queue"].record
                if request is None:  # granted at once
                    queue((now, PULSE))  # a pulse
                else:
                    queue((now, 1))
                    self.mode = SANDBOX
                    since = now
                    try:
                        yield request
                    finally:  # granted or cancelled: out of the queue
                        now = env.now
                        queue((now, -1))
                        engine.sandbox_wait[self.arrival.index] += now - since
        except Interrupt:
            now = env.now
            for resource, request in held:
                if request is None or request.triggered:
                    resource.release(request, now)
                else:
                    resource.cancel(request)
            waits[0] += now - asked
            return False
        now = env.now
        waits[0] += now - asked
        engine.series["busy_sandboxes"].record((now, 1))
        engine.running[tenant].record((now, 1))
        return True

    def release(self, held: list, now: float, begun: float) -> None:
        """Give back the cap and the sandbox in ``held``, held since ``begun``."""
        engine = self.engine
        for resource, request in held:
            resource.release(request, now)
        engine.series["busy_sandboxes"].record((now, -1))
        engine.running[self.arrival.tenant].record((now, -1))
        engine.sandbox_hold[self.arrival.index] += now - begun

    def drive(self, loop: Loop, state: HarnessState, params: HarnessParams,
              waits: list[float], task: SimulatedTask, observers: Sequence[Observer] = ()
              ) -> Generator[Event, Any, HarnessState]:
        """Drive the harness ``loop`` to its end through the one pump
        (:func:`sim.harness.pump.steps`, telling ``observers``), each effect
        answered by :meth:`answerer`'s generator; settle the run in its
        tenant's ledger; return its final state."""
        final = yield from steps(loop, self.answerer(state, params, waits, task), observers)
        ledger = self.engine.ledgers.get(self.arrival.tenant)
        if ledger is not None:
            ledger.settle(self.arrival.index if len(self.key) == 1 else self.key,
                          final.money_usd)
        return final

    def answerer(self, state: HarnessState, params: HarnessParams, waits: list[float],
                 task: SimulatedTask) -> Callable[[Any], Generator[Event, Any, Any]]:
        """The DES's answer to each effect of the run of ``state`` against
        ``task``, as a SimPy generator: the tenant's shared money budget is
        checked before each call (a refusal answers it at once); while an
        operator pauses the task's scope it parks at the step boundary;
        the effect is answered from the dispatch table
        (:meth:`DesEngine.plan`; a model call through the gateway when model
        slots or rate limits are shared; a spawn by child processes) and its
        seconds pass. Cancelled (an interrupt), the wait is undone and the
        effect answered as cancelled (module docstring)."""
        engine = self.engine
        env = engine.env
        timeout = env.timeout
        # the run's key in its tenant's ledger: a root's index, a child's spawn key
        index: Hashable = self.arrival.index if len(self.key) == 1 else self.key
        scopes = self.arrival.scopes
        ledger = engine.ledgers.get(self.arrival.tenant)
        plan = engine.plan(type(task))
        paused = engine.paused
        gateway = engine.gateway
        queued_model = engine.queued_model

        def answer(effect: Any) -> Generator[Event, Any, Any]:
            if ledger is not None:  # the tenant's shared budget, before each call
                refused = refusal(ledger, index, params, state, effect)
                if refused is not None:
                    return refused
            kind = self.kind = type(effect)
            now = began = env.now
            try:
                if paused and paused & scopes:  # park at the step boundary
                    parked = engine.series["parked"].record
                    parked_at = now
                    parked((now, 1))
                    self.mode = PARK
                    try:
                        while paused & scopes:
                            yield engine.resumed
                    finally:
                        now = env.now
                        parked((now, -1))
                        park(state, now - parked_at)
                if kind is Checkpoint:  # answered with None, no time passes
                    return None
                began = now
                if kind is SpawnRequest:  # child runs: each its own process
                    self.mode = HELD
                    return (yield from self.spawn(effect, task, state, began, waits))
                if kind is CollectChildren:  # children started without waiting
                    self.mode = HELD
                    return (yield from self.collect(effect.wait, began))
                if kind is ModelRequest and queued_model:  # through the gateway
                    slot = gateway.take(now)
                    if slot is not None:  # none free: wait in the queue
                        self.mode = QUEUED
                        try:
                            yield slot
                        except Interrupt:
                            now = env.now
                            gateway.left(began, waits, now)
                            gateway.slots.release(slot, now)  # type: ignore[union-attr]
                            raise
                        now = env.now
                        gateway.left(began, waits, now)
                    result, seconds = gateway.answer(effect, task, began, slot, now)
                    if seconds is not None:  # else a 429: no time passes
                        self.mode = MODEL
                        try:
                            yield timeout(seconds)
                        finally:
                            now = env.now
                            gateway.done(slot, now)
                        result.latency_s = now - began  # includes the wait for a slot
                    return result
                respond, seconds_of, counted = plan[kind]
                result = respond(task, effect, now)
                # a tool call, the commonest, reads EFFECTS' seconds written out
                seconds = (result.duration_s if kind is ToolRequest
                           else seconds_of(effect, result))
                if seconds is None:  # no time passes
                    return result
                if counted is None:
                    self.mode = TIMER
                    yield timeout(seconds)
                else:  # counted in a time series while it lasts
                    counted.record((now, 1))
                    self.mode = HELD
                    try:
                        yield timeout(seconds)
                    finally:
                        counted.record((env.now, -1))
                return result
            except Interrupt:  # cancelled in a step: abort the call in flight
                request_abort(state)
                # parked at a step boundary, the effect had not begun
                elapsed = 0.0 if self.mode == PARK else env.now - began
                return EFFECTS[kind].cancelled(elapsed)
        return answer

    def spawn(self, effect: SpawnRequest, task: SimulatedTask, state: HarnessState,
              began: float, waits: list[float]) -> Generator[Event, Any, ChildResults]:
        """Start a :class:`ChildRun` per child of ``effect`` (made by this
        run, of ``state``, against ``task``), at most ``max_concurrent`` at
        once, and wait for them all; answer with their results and the wait.
        The children's waits for model slots add to ``waits[1]`` (the root
        task's record counts its whole tree's). Cancelled meanwhile, the
        children still running are cancelled too."""
        engine = self.engine
        env = engine.env
        cap = simpy.Resource(env, capacity=effect.max_concurrent)
        world = engine.cell.world.child_world(task.world)
        kids = [ChildRun(engine, self, (*self.key, state.children + j), spec, world, cap,
                         effect, waits) for j, spec in enumerate(effect.children)]
        if not effect.wait:  # collected later (collect)
            self.background.extend(kids)
            return ChildResults([], 0.0)
        try:
            yield simpy.AllOf(env, [kid.process for kid in kids])
        except Interrupt:
            for kid in kids:
                if kid.process.is_alive:
                    kid.cancel()
            raise
        return ChildResults([kid.result for kid in kids if kid.result is not None],
                            env.now - began)

    def collect(self, wait: bool, began: float) -> Generator[Event, Any, ChildResults]:
        """The results of the children started without waiting that have
        ended (with ``wait``: all, waited for), in the order they ended;
        cancelled while waiting, they are cancelled too."""
        env = self.engine.env
        if wait and any(kid.process.is_alive for kid in self.background):
            try:
                yield simpy.AllOf(env, [kid.process for kid in self.background])
            except Interrupt:
                for kid in self.background:
                    if kid.process.is_alive:
                        kid.cancel()
                raise
        ended = sorted((kid for kid in self.background if kid.result is not None),
                       key=lambda kid: kid.ended)
        for kid in ended:
            self.background.remove(kid)
        return ChildResults([kid.result for kid in ended], env.now - began)

    def end(self, state: HarnessState, task: SimulatedTask, streams: tuple[Draws, ...],
            now: float, start_s: float | None, waits: list[float], resumptions: int) -> None:
        """Leave the system at ``now`` and write the task's record."""
        engine, arrival = self.engine, self.arrival
        engine.series["tasks_in_system"].record((now, -1))
        if engine.runs_series is not None:
            engine.runs_series.record((now, -1))
        engine.pool.release(streams)
        del engine.runs[arrival.index]
        engine.records[arrival.index] = make_record(
            engine.cell.name, arrival.index, state, ground_truth=task.need,
            truly_done=task.answer_correct, tenant=arrival.tenant,
            agent_type=arrival.agent_type, arrival_s=arrival.time_s,
            start_s=now if start_s is None else start_s, end_s=now,
            queue_s=waits[0], model_wait_s=waits[1], resumptions=resumptions)
        engine.ended += 1
        if not engine.ended % FOLD_EVERY:  # keep the series' logs small (Series.fold)
            for series in engine.series.values():
                series.fold()
        if engine.on_task_end is not None:
            engine.on_task_end()


class ChildRun(TaskRun):
    """One child run of a spawn (a subagent), run as its own SimPy process:
    it waits for a place among its spawn's ``max_concurrent`` (``cap``),
    then is driven like any task (:meth:`TaskRun.drive`: model slots, rate
    limits, tools, pauses of its root's scopes) against a task of ``world``
    drawn from its own streams (``key``: its root's index, then its ordinal
    at each level). Its waits for model slots add to its root's
    ``model_wait_s``. Traced, it is observed by the recorder its parent's
    makes for it (:meth:`~sim.engines.direct.RunObserver.child`, on the
    engine's clock). Its :class:`~sim.harness.effects.ChildResult` is in
    :attr:`result` once it has ended."""

    __slots__ = ("result", "ended")

    def __init__(self, engine: DesEngine, parent: TaskRun, key: tuple[int, ...],
                 spec: ChildSpec, world: Any, cap: simpy.Resource, spawn: SpawnRequest,
                 waits: list[float]) -> None:
        self.engine = engine
        self.arrival = parent.arrival  # its root's tenant and scopes
        self.mode = CAP
        self.kind = None
        self.key = key
        self.background = []
        self.recorder = None
        self.result: Any = None
        self.ended = 0.0
        self.process = engine.env.process(self.child_life(spec, world, cap, spawn, waits,
                                                          parent.recorder))

    def child_life(self, spec: ChildSpec, world: Any, cap: simpy.Resource,
                   spawn: SpawnRequest, waits: list[float],
                   recorder: RunObserver | None = None) -> Generator[Event, Any, None]:
        """The child from its spawn to its end (see the class docstring)."""
        engine = self.engine
        env, cell = engine.env, engine.cell
        params = cell.params
        spawned = env.now
        runs = engine.runs_series
        if runs is not None:
            runs.record((spawned, 1))
        task = SimulatedTask(world, child_streams(cell.seed, self.key), child=True)
        state = child_state(engine.prefix_tokens, task.model_id or params.model,
                            ChildSpec(spec.task, task.task_tokens, spec.depth))
        request = cap.request()
        try:
            yield request
        except Interrupt:  # cancelled while queued for its place
            cap.release(request)
            state = cancel(params, state)
        else:
            start = env.now
            park(state, start - spawned)  # the wait for its place: parked time
            loop = cell.loop(state, params,
                             retry_budget=engine.retry_budgets.get(self.arrival.tenant),
                             retry_key=":".join(map(str, self.key)) + ":",
                             ledgers=spawn.ledgers, started_s=spawn.now_s)
            observers: tuple[Observer, ...] = ()
            if recorder is not None:  # its calls are its root run's, marked as its
                self.recorder = recorder.child(state, lambda: env.now, self.key)
                observers = (self.recorder,)
            state = yield from self.drive(loop, state, params, waits, task, observers)
            cap.release(request)
        ended = env.now
        if runs is not None:
            runs.record((ended, -1))
        engine.child_times.append((spawned, ended))
        self.ended = ended
        answer = task.answer_tokens if state.status == SUCCEEDED else 0
        self.result = child_result(state, answer, state.wall_s)
