"""One task of the DES as a SimPy process (:meth:`TaskRun.life`).

A task arrives, waits for its tenant's concurrency cap and a sandbox (both
held until the harness loop ends), drives the harness generator, performing
each effect it yields and letting the time it takes pass with
``env.timeout``, and, when the run stopped in a state a human may resume,
perhaps waits for one and goes round again with extended budgets. It waits
only on SimPy's public events: a pool's request (:class:`~sim.engines.slots.SlotPool`),
a timeout, the operators' resume event.

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

Units: seconds throughout.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from simpy import Interrupt
from simpy.events import Event

from sim.engines.monitor import PULSE
from sim.engines.perform import EFFECTS
from sim.engines.tenant_budget import refusal
from sim.harness.effects import Checkpoint, ModelRequest, ToolRequest
from sim.harness.loop import Loop, cancel
from sim.harness.params import HarnessParams
from sim.harness.state import (
    RESUMABLE,
    HarnessState,
    new_state,
    park,
    request_abort,
    resume,
)
from sim.task_record import make_record
from sim.world.streams import OPERATIONS, Draws
from sim.world.task import SimulatedTask

if TYPE_CHECKING:
    from sim.engines.arrivals import Arrival
    from sim.engines.des import DesEngine

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

    __slots__ = ("engine", "arrival", "mode", "kind", "process")

    def __init__(self, engine: DesEngine, arrival: Arrival) -> None:
        self.engine = engine
        self.arrival = arrival
        self.mode = CAP
        self.kind: type | None = None
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
        streams = engine.pool.acquire(cell.seed, index)
        task = SimulatedTask(cell.world, streams)
        params = cell.params
        state = new_state(engine.prefix_tokens, task.model_id or params.model,
                          "Complete the task.", task.task_tokens)
        waits = [0.0, 0.0]  # queue before the start, waits for model slots
        start_s: float | None = None
        wrap: Callable[[Loop], Loop] | None = None
        resumptions = 0
        rules = engine.des.resume
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
                if engine.tracer is not None:
                    wrap = engine.tracer(index, state, lambda: env.now)
            else:  # resumed by a human: the wait for a sandbox again is parked time
                park(state, now - asked)
            loop = cell.loop(state, params)
            if wrap is not None:
                loop = wrap(loop)
            state = yield from self.drive(loop, state, params, waits, task)
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
              waits: list[float], task: SimulatedTask
              ) -> Generator[Event, Any, HarnessState]:
        """Drive the harness ``loop`` to its end and return its final state:
        send each result, perform the effect it yields (answered from the
        dispatch table, :meth:`DesEngine._plan`; a model call through the
        gateway when model slots or rate limits are shared) and let its
        seconds pass; park at a step boundary while an operator pauses the
        task's scope; checks the tenant's shared money budget before each
        call. Cancelled (an interrupt), the wait is undone and the effect
        answered as cancelled (module docstring)."""
        engine = self.engine
        env = engine.env
        timeout = env.timeout
        send = loop.send
        index = self.arrival.index
        scopes = self.arrival.scopes
        ledger = engine.ledgers.get(self.arrival.tenant)
        plan = engine.plan(type(task))
        paused = engine.paused
        gateway = engine.gateway
        queued_model = engine.queued_model
        result: Any = None
        effect: Any = None
        kind: Any = None
        now = env.now
        began = now
        slot: Event | None = None
        counted: Any = None
        while True:
            try:
                if effect is None:
                    try:
                        effect = send(result)
                    except StopIteration as stop:
                        final = stop.value
                        if ledger is not None:
                            ledger.settle(index, final.money_usd)
                        return final
                    if ledger is not None:  # the tenant's shared budget, before each call
                        refused = refusal(ledger, index, params, state, effect)
                        if refused is not None:
                            result, effect = refused, None
                            continue
                    kind = self.kind = type(effect)
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
                    result = effect = None
                    continue
                began = now
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
                    effect = None
                    if seconds is not None:  # else a 429: no time passes
                        self.mode = MODEL
                        try:
                            yield timeout(seconds)
                        finally:
                            now = env.now
                            gateway.done(slot, now)
                        result.latency_s = now - began  # includes the wait for a slot
                    continue
                respond, seconds_of, counted = plan[kind]
                result = respond(task, effect, now)
                # a tool call, the commonest, reads EFFECTS' seconds written out
                seconds = (result.duration_s if kind is ToolRequest
                           else seconds_of(effect, result))
                effect = None
                if seconds is None:  # no time passes
                    continue
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
                now = env.now
            except Interrupt:  # cancelled in a step: abort the call in flight
                now = env.now
                request_abort(state)
                # parked at a step boundary, the effect had not begun
                elapsed = 0.0 if self.mode == PARK else now - began
                result, effect = EFFECTS[kind].cancelled(elapsed), None

    def end(self, state: HarnessState, task: SimulatedTask, streams: tuple[Draws, ...],
            now: float, start_s: float | None, waits: list[float], resumptions: int) -> None:
        """Leave the system at ``now`` and write the task's record."""
        engine, arrival = self.engine, self.arrival
        engine.series["tasks_in_system"].record((now, -1))
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
