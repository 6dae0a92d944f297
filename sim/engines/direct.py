"""The direct engine: each task runs alone through the real harness in
virtual time, with no shared capacity.

Time is the sum of the durations the world reports (model latency, tool
durations, backoff waits; approval waits as parked time), so a task's wall time
is what it would take with unlimited sandboxes and model slots. This is the
fast engine; :mod:`sim.engines.des` adds queues, rate limits and arrivals.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sim.engines.cell import Cell
from sim.harness.effects import (
    ApprovalRequest,
    Checkpoint,
    ModelRequest,
    ToolRequest,
    VerifyRequest,
    Wait,
)
from sim.harness.loop import Loop, agent_loop
from sim.harness.state import HarnessState, new_state
from sim.records import TaskRecord, outcome_label
from sim.world.streams import StreamPool
from sim.world.task import SimulatedTask

Tracer = Callable[[int, HarnessState, Callable[[], float]], Callable[[Loop], Loop]]
"""Given a task's index, its state and the engine's clock (seconds since the
task started), a wrapper for its loop generator that sees every effect and
result (:class:`sim.traces.recorder.RunRecorder` is one)."""


def run_task(cell: Cell, index: int, pool: StreamPool | None = None,
             tracer: Tracer | None = None) -> TaskRecord:
    """Run task ``index`` of ``cell`` to its terminal state; return its record.
    ``tracer``, when given, wraps the task's loop (none: the loop runs bare)."""
    pool = pool if pool is not None else StreamPool()
    streams = pool.acquire(cell.seed, index)
    task = SimulatedTask(cell.world, streams)
    params = cell.params
    state = new_state(params.prefix_tokens, params.model, "Complete the task.",
                      cell.world.task_tokens)
    wrap = None if tracer is None else tracer(index, state,
                                              lambda: state.active_s + state.parked_s)
    final = drive(cell, task, state, wrap)
    pool.release(streams)
    return make_record(cell.name, index, final, task)


def run_tasks(cell: Cell, indices: Iterable[int], tracer: Tracer | None = None
              ) -> list[TaskRecord]:
    """Run the given tasks of ``cell`` one after another, in order."""
    pool = StreamPool()
    return [run_task(cell, i, pool, tracer) for i in indices]


def drive(cell: Cell, task: SimulatedTask, state: HarnessState,
          wrap: Callable[[Loop], Loop] | None = None) -> HarnessState:
    """Drive the harness generator (wrapped by ``wrap`` if given) against
    ``task`` until it returns."""
    loop = agent_loop(cell.params, state, detector=cell.make_detector(cell.params))
    if wrap is not None:
        loop = wrap(loop)
    send = loop.send
    respond, execute = task.respond, task.execute
    result = None
    try:
        while True:
            effect = send(result)
            kind = type(effect)
            if kind is ModelRequest:
                result = respond(effect, state.active_s + state.parked_s)
            elif kind is ToolRequest:
                result = execute(effect)
            elif kind is Checkpoint or kind is Wait:
                result = None
            elif kind is VerifyRequest:
                result = task.verify(effect)
            elif kind is ApprovalRequest:
                result = task.approve(effect)
            else:
                raise TypeError(f"unknown effect {effect!r}")
    except StopIteration as stop:
        return stop.value


def make_record(cell: str, index: int, s: HarnessState, task: SimulatedTask, *,
                tenant: str = "", agent_type: str = "", arrival_s: float = 0.0,
                start_s: float = 0.0, end_s: float | None = None, queue_s: float = 0.0,
                model_wait_s: float = 0.0, resumptions: int = 0) -> TaskRecord:
    """The flat record of a finished task (ground truth read here, for the
    report). Without engine times, the task starts at 0 and ends after its
    wall time."""
    return TaskRecord(
        cell=cell, task=index, state=s.status, reason=s.reason,
        outcome=outcome_label(s.status, s.reason, task.answer_correct),
        steps=s.turns, tool_calls=s.tool_calls, input_tokens=s.input_tokens,
        output_tokens=s.output_tokens, cache_read_tokens=s.cache_read_tokens,
        cache_write_tokens=s.cache_write_tokens, thinking_tokens=s.thinking_tokens,
        cost_usd=s.money_usd, active_s=s.active_s, wall_s=s.wall_s, retries=s.retries,
        nudges=s.nudges, verifier_rejections=s.verifier_rejections, compactions=s.compactions,
        ground_truth=task.need, truly_done=task.answer_correct, tenant=tenant,
        agent_type=agent_type, arrival_s=arrival_s, start_s=start_s,
        end_s=start_s + s.wall_s if end_s is None else end_s, queue_s=queue_s,
        model_wait_s=model_wait_s, resumptions=resumptions)
