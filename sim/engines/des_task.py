"""One task of the DES, driven by the callbacks of the events it waits for
(:class:`TaskRun`), not by a SimPy process of its own.

A task is a state machine: each wait appends one of its methods to the
callbacks of the event it waits for (a request for a slot, its timer, the
operators' resume), and that method, called when SimPy processes the event,
does what the task does next until it must wait again. It schedules exactly
the events a process per task did, in the same order, so the simulation gives
the same results: what it leaves out is a generator frame per layer of the
task and SimPy's ``Process._resume`` on each of its some 30 wake-ups.

- A task starts when it arrives, inside a process that does only that
  (:func:`at_once`): SimPy runs a new process at once, before any event of
  normal priority due at the same time, as it started a task's process.
- Its timer is one :class:`simpy.Timeout`, scheduled again (pushed on the
  clock's heap as :meth:`simpy.Environment.schedule` pushes it, at normal
  priority, as a timeout is: :class:`~sim.engines.des_clock.Clock`) each
  time it has been processed; a timeout is triggered with value None when
  it is made, so rescheduling it needs no private field.
- An operator's cancel (:meth:`TaskRun.cancel`:
  :mod:`sim.engines.des_cancel`) also runs in a process of its
  own, as SimPy's interrupt did (urgent, in the order the operator gave
  them): it takes the task's callback off the event it waits for and does
  what the interrupted process did at that wait (gives back a queued or held
  slot, counts parked time, aborts the call in flight), then the task goes on.

Units: seconds throughout.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from heapq import heappush
from typing import TYPE_CHECKING, Any

from simpy.events import NORMAL, Event

from sim.engines.des_cancel import (
    CAP,
    HELD,
    HUMAN,
    MODEL,
    PARK,
    QUEUED,
    SANDBOX,
    TIMER,
    cancel_task,
)
from sim.engines.monitor import PULSE
from sim.engines.tenant_budget import refusal
from sim.harness.effects import Checkpoint, ModelRequest, Result, ToolRequest
from sim.harness.loop import Loop
from sim.harness.state import RESUMABLE, new_state, park, resume
from sim.task_record import make_record
from sim.world.streams import OPERATIONS
from sim.world.task import SimulatedTask

if TYPE_CHECKING:
    from sim.engines.arrivals import Arrival
    from sim.engines.des import DesEngine

FOLD_EVERY = 256  # tasks ended between two folds of the engine's series


def _ended(_: Event | None) -> None:
    """What an ended task's timer callbacks become (not its bound methods:
    they would keep the task alive in a reference cycle)."""


def at_once(action: Callable[[], None]) -> Generator[Event, Any, None]:
    """A SimPy process that calls ``action`` as soon as it starts, then ends."""
    action()
    return
    yield  # pragma: no cover - a generator that never waits


class TaskRun:
    """One task of ``engine``: waits for its tenant's cap and a sandbox, drives
    the harness loop, answers each effect, waits for a human to resume it;
    ends with its record in ``engine.records``. Started with :meth:`start`,
    cancelled with :meth:`cancel`."""

    __slots__ = (
        "engine", "env", "arrival", "index", "alive", "streams", "task", "params", "state",
        "waits", "start_s", "wrap", "resumptions", "asked", "sandbox_asked", "held", "begun",
        "send", "plan", "ledger", "effect", "kind", "began", "slot", "result", "counted",
        "tick", "due", "pending", "target", "waiting", "mode", "parked_at", "go", "done")
    effect: Any  # the effect waiting to be performed (parked, queued)
    began: float  # when the effect in flight began (seconds)
    result: Any  # the answer the harness gets when the wait ends
    due: float  # when the task's timer fires, the clock of its next step (seconds)
    pending: Any  # an effect to perform before asking the harness for the next
    waiting: Callable[[Event], None] | None  # the callback waiting on ``target``

    def __init__(self, engine: DesEngine, arrival: Arrival) -> None:
        self.engine = engine
        self.env = engine.env
        self.arrival = arrival
        self.index = arrival.index
        self.alive = True
        self.tick: Event | None = None  # the task's timer (a Timeout, rescheduled)
        # the timer's two commonest callbacks, bound once (not at each step);
        # end() drops them, so no reference cycle outlives the task
        self.go: Callable[[Event | None], None] = self.advance
        self.done: Callable[[Event], None] = self.answered
        self.target: Event | None = None  # the event waited for (other than the timer)
        self.mode = -1

    # ------------------------------------------------------------ waiting
    def _wait(self, event: Event, callback: Callable[[Event], None], mode: int) -> None:
        event.callbacks.append(callback)  # type: ignore[union-attr]
        self.target, self.waiting, self.mode = event, callback, mode

    def _sleep(self, seconds: float, callback: Callable[[Event], None], mode: int,
               now: float) -> None:
        """Wait ``seconds`` from ``now`` on the task's timer, as
        ``env.timeout(seconds)`` would; the clock will read :attr:`due` then
        (the same sum SimPy makes)."""
        tick = self.tick
        due = self.due = now + seconds
        if tick is None:
            tick = self.tick = self.env.timeout(seconds)
            tick.callbacks.append(callback)  # type: ignore[union-attr]
        else:  # processed: schedule it again (env.schedule, written out)
            tick.callbacks = [callback]
            clock = self.env
            heappush(clock.queue, (due, NORMAL, next(clock.ids), tick))
        self.mode = mode  # on its own timer: cancel finds the tick

    # ----------------------------------------------------- start, capacity
    def start(self) -> None:
        """The task arrives: it enters the system and asks for capacity."""
        engine, arrival = self.engine, self.arrival
        cell = engine.cell
        engine.series["tasks_in_system"].record((self.env.now, 1))
        self.streams = engine.pool.acquire(cell.seed, self.index)
        self.task = task = SimulatedTask(cell.world, self.streams)
        self.params = params = cell.params
        self.state = new_state(engine.prefix_tokens, task.model_id or params.model,
                               "Complete the task.", task.task_tokens)
        self.waits = [0.0, 0.0]  # queue before the start, waits for model slots
        self.start_s: float | None = None
        self.wrap: Callable[[Loop], Loop] | None = None
        self.resumptions = 0
        self.ledger = engine.ledgers.get(arrival.tenant)
        self.plan = engine._plan(type(task))
        self.acquire()

    def acquire(self) -> None:
        """Ask for the tenant's cap, then a sandbox (held until :meth:`release`)."""
        self.asked = now = self.env.now
        self.held: list = []
        cap = self.engine.tenant_caps.get(self.arrival.tenant)
        if cap is not None:
            request = cap.take(now)
            self.held.append((cap, request))
            if request is not None:
                self._wait(request, self.got_cap, CAP)
                return
        self.got_cap(None)

    def got_cap(self, _: Event | None) -> None:
        sandboxes = self.engine.sandboxes
        if sandboxes is not None:
            now = self.env.now
            request = sandboxes.take(now)
            self.held.append((sandboxes, request))
            queue = self.engine.series["sandbox_queue"]
            if request is None:  # granted at once
                queue.record((now, PULSE))  # a pulse
            else:
                queue.record((now, 1))
                self.sandbox_asked = now
                self._wait(request, self.got_sandbox, SANDBOX)
                return
        self.acquired()

    def got_sandbox(self, _: Event | None) -> None:
        self.left_sandbox_queue()
        self.acquired()

    def left_sandbox_queue(self) -> None:
        now = self.env.now
        self.engine.series["sandbox_queue"].record((now, -1))
        self.engine.sandbox_wait[self.index] += now - self.sandbox_asked

    def acquired(self) -> None:
        """Cap and sandbox held: start (or resume) driving the harness."""
        engine, env = self.engine, self.env
        now = env.now
        self.waits[0] += now - self.asked
        engine.series["busy_sandboxes"].record((now, 1))
        engine.running[self.arrival.tenant].record((now, 1))
        self.begun = now
        if self.start_s is None:
            self.start_s = now
            if engine.tracer is not None:
                self.wrap = engine.tracer(self.index, self.state, lambda: env.now)
        else:  # resumed by a human: the wait for a sandbox again is parked time
            park(self.state, now - self.asked)
        params = self.params
        loop = engine.cell.loop(self.state, params)
        if self.wrap is not None:
            loop = self.wrap(loop)
        self.send = loop.send
        self.go_on(None, now)

    def release(self, now: float) -> None:
        """Give back the cap and the sandbox held since :attr:`begun`."""
        engine = self.engine
        for resource, request in self.held:
            resource.release(request, now)
        engine.series["busy_sandboxes"].record((now, -1))
        engine.running[self.arrival.tenant].record((now, -1))
        engine.sandbox_hold[self.index] += now - self.begun

    # ------------------------------------------------------------ driving
    def go_on(self, result: Result, now: float, effect: Any = None) -> None:
        """:meth:`advance` with ``result`` for the harness at ``now``
        (``effect``: one the task parked before, performed first)."""
        self.result, self.due, self.pending = result, now, effect
        self.advance(None)

    def advance(self, _: Event | None) -> None:
        """Send :attr:`result` to the harness and perform the effects it
        asks for until one takes time (then return: its callback goes on);
        the clock reads :attr:`due` throughout. The callback of a timed wait
        (a tool call, a backoff, a verification) that needs nothing undone."""
        send, ledger, engine = self.send, self.ledger, self.engine
        clock = self.env
        queue, ids = clock.queue, clock.ids
        result, now, effect = self.result, self.due, self.pending
        while True:
            if effect is None:
                try:
                    effect = send(result)
                except StopIteration as stop:
                    self.drove(stop.value, now)
                    return
                if ledger is not None:  # the tenant's shared budget, checked before each call
                    refused = refusal(ledger, self.index, self.params, self.state, effect)
                    if refused is not None:
                        result, effect = refused, None
                        continue
                kind = self.kind = type(effect)
                if engine.paused and engine.paused & self.arrival.scopes:
                    self.effect = effect
                    self.parked_at = now
                    engine.series["parked"].record((now, 1))
                    self._wait(engine.resumed, self.resumed, PARK)
                    return
            else:
                kind = self.kind
                self.pending = None
            if kind is Checkpoint:  # answered with None, no time passes
                result = effect = None
                continue
            self.began = now
            if kind is ModelRequest and engine.queued_model:  # through the gateway
                slot = self.slot = engine.gateway.take(now)
                if slot is not None:  # none free: wait in the queue
                    self.effect = effect
                    self._wait(slot, self.got_slot, QUEUED)
                    return
                result, seconds = engine.gateway.answer(effect, self.task, now, None, now)
                wake, mode = self.done, MODEL
            else:
                respond, seconds_of, counted = self.plan[kind]
                result = respond(self.task, effect, now)
                if kind is ToolRequest:  # the commonest: EFFECTS' seconds, written out
                    seconds = result.duration_s
                else:
                    seconds = seconds_of(effect, result)
                    if counted is not None and seconds is not None:  # counted while it lasts
                        counted.record((now, 1))
                        self.counted = counted
                        self.result = result
                        self._sleep(seconds, self.released, HELD, now)
                        return
                wake, mode = self.go, TIMER
            effect = None
            if seconds is not None:  # else no time passes (a 429 among them)
                self.result = result
                tick = self.tick  # self._sleep(seconds, wake, mode, now), written out
                due = self.due = now + seconds
                if tick is None:
                    tick = self.tick = self.env.timeout(seconds)
                    tick.callbacks.append(wake)  # type: ignore[union-attr]
                else:
                    tick.callbacks = [wake]
                    heappush(queue, (due, NORMAL, next(ids), tick))
                self.mode = mode
                return

    def resumed(self, _: Event) -> None:
        """The operators resumed a scope: go on unless the task's is still paused."""
        engine = self.engine
        if engine.paused & self.arrival.scopes:
            self._wait(engine.resumed, self.resumed, PARK)
            return
        now = self.env.now
        self.unpark(now)
        self.go_on(None, now, self.effect)

    def unpark(self, now: float) -> None:
        self.engine.series["parked"].record((now, -1))
        park(self.state, now - self.parked_at)

    def got_slot(self, _: Event) -> None:
        """A model slot was granted: the call goes ahead."""
        now = self.env.now
        gateway = self.engine.gateway
        gateway.left(self.began, self.waits, now)
        result, seconds = gateway.answer(self.effect, self.task, self.began, self.slot, now)
        if seconds is None:  # a 429: no time passes
            self.go_on(result, now)
        else:
            self.result = result
            self._sleep(seconds, self.answered, MODEL, now)

    def answered(self, _: Event) -> None:
        now = self.due
        self.engine.gateway.done(self.slot, now)
        self.result.latency_s = now - self.began  # includes the wait for a slot
        self.advance(None)

    def released(self, _: Event) -> None:
        self.counted.record((self.due, -1))
        self.advance(None)

    # ---------------------------------------------------- end, resumption
    def drove(self, final: Any, now: float) -> None:
        """The harness loop ended: settle, give capacity back, then end or
        wait for a human to resume the run."""
        if self.ledger is not None:
            self.ledger.settle(self.index, final.money_usd)
        self.state = final
        self.release(now)
        engine = self.engine
        rules = engine.des.resume
        if (final.status not in RESUMABLE or self.resumptions >= rules.max_times
                or self.streams[OPERATIONS].uniform() >= rules.share):
            self.end(now)
            return
        delay = engine._human_delay(self.streams[OPERATIONS])
        self.parked_at = now
        engine.series["parked"].record((now, 1))
        self._sleep(delay, self.human_back, HUMAN, now)

    def human_back(self, _: Event) -> None:
        self.unpark(self.due)
        self.resumptions += 1
        self.params = self.engine._extended(self.resumptions)
        resume(self.state)
        self.acquire()

    def end(self, now: float) -> None:
        """Leave the system at ``now`` and write the task's record."""
        self.alive = False
        self.waiting = None  # methods of this task: no reference cycle is left
        self.go = self.done = _ended
        engine, arrival = self.engine, self.arrival
        engine.series["tasks_in_system"].record((now, -1))
        engine.pool.release(self.streams)
        del engine.runs[self.index]
        waits = self.waits
        engine.records[self.index] = make_record(
            engine.cell.name, self.index, self.state, ground_truth=self.task.need,
            truly_done=self.task.answer_correct, tenant=arrival.tenant,
            agent_type=arrival.agent_type, arrival_s=arrival.time_s,
            start_s=now if self.start_s is None else self.start_s, end_s=now,
            queue_s=waits[0], model_wait_s=waits[1], resumptions=self.resumptions)
        engine.ended += 1
        if not engine.ended % FOLD_EVERY:  # keep the series' logs small (Series.fold)
            for series in engine.series.values():
                series.fold()
        if engine.on_task_end is not None:
            engine.on_task_end()

    # ------------------------------------------------------------- cancel
    def cancel(self) -> None:
        """An operator cancels the task wherever it waits (nothing if it has
        ended): :func:`sim.engines.des_cancel.cancel_task`."""
        cancel_task(self)
