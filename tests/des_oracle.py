"""The DES written plainly: one SimPy process per task (``_task`` ->
``_drive`` -> ``_acquire``/``_held``/``_park``, with ``yield from``, a
``try``/``finally`` per wait), operator cancels as
:meth:`simpy.Process.interrupt`, a new timeout for each wait. A test oracle:
the engine's process (:class:`sim.engines.des.TaskRun`, one flat generator whose
waits are undone in one place) must give exactly its results
(tests/test_des_driving.py).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import simpy
from simpy.events import Event

from sim.engines.arrivals import Arrival
from sim.engines.des import DesEngine
from sim.engines.gateway import ModelGateway
from sim.engines.monitor import Series
from sim.engines.perform import EFFECTS
from sim.engines.tenant_budget import refusal
from sim.harness.effects import Checkpoint, ModelRequest, Result
from sim.harness.loop import Loop, cancel
from sim.harness.params import HarnessParams
from sim.harness.state import RESUMABLE, HarnessState, new_state, park, request_abort, resume
from sim.task_record import make_record
from sim.world.streams import OPERATIONS
from sim.world.task import SimulatedTask


def _queued(gateway: ModelGateway, slot: Event, t0: float, waits: list[float]
            ) -> Generator[Event, Any, None]:
    """Wait in the gateway's queue for ``slot`` (asked for at ``t0``, counted
    in the queue by :meth:`ModelGateway.take`); interrupted, the request is
    given back."""
    try:
        yield slot
    except simpy.Interrupt:
        gateway.left(t0, waits, gateway.env.now)
        gateway.slots.release(slot, gateway.env.now)  # type: ignore[union-attr]
        raise
    gateway.left(t0, waits, gateway.env.now)


class ProcessEngine(DesEngine):
    """:class:`~sim.engines.des.DesEngine` with one SimPy process per task."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.processes: dict[int, simpy.Process] = {}
        self.holdings: dict[int, list] = {}

    def _start_arrivals(self) -> None:
        self.env.process(self._arrivals())

    def _arrivals(self):
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
                delay = self.human_delay(streams[OPERATIONS])
                parked_at = env.now
                series["parked"].add(parked_at, 1)
                try:
                    yield env.timeout(delay)
                finally:
                    series["parked"].add(env.now, -1)
                    park(state, env.now - parked_at)
                resumptions += 1
                params = self.extended(resumptions)
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
                request = cap.take(env.now)
                held.append((cap, request))
                if request is not None:
                    yield request
            if self.sandboxes is not None:
                request = self.sandboxes.take(env.now)
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
                    resource.release(request, env.now)
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
            resource.release(request, self.env.now)
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
        loop = self.cell.loop(state, params)
        if wrap is not None:
            loop = wrap(loop)
        send = loop.send
        plan = self.plan(type(task))
        gateway = self.gateway
        after = env.timeout  # a new timeout for each wait
        # a pool of model slots or rate limits: a model call queues (else it just takes time)
        queued_model = self.queued_model
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
                        yield from _queued(gateway, slot, began, waits)
                    result, seconds = gateway.answer(effect, task, began, slot, env.now)  # type: ignore[arg-type]
                    if seconds is not None:
                        try:
                            yield after(seconds)
                        except simpy.Interrupt:
                            gateway.done(slot, env.now)
                            raise
                        gateway.done(slot, env.now)
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
                pass
                request_abort(state)
                result = EFFECTS[kind].cancelled(0.0 if began is None else env.now - began)

    def _held(self, series: Series, seconds: float, after: Callable[[float], Event]
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

