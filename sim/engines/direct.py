"""The direct engine: each task runs alone through the real harness in
virtual time, with no shared capacity.

Time is the sum of the durations the world reports (model latency, tool
durations, backoff waits; approval waits as parked time), so a task's wall time
is what it would take with unlimited sandboxes and model slots. This is the
fast engine; :mod:`sim.engines.des` adds queues, rate limits and arrivals.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from sim.engines.cell import Cell
from sim.engines.gc_paused import gc_paused
from sim.engines.perform import Answer, answers
from sim.harness.effects import Checkpoint, ModelRequest, Result, ToolRequest
from sim.harness.loop import Loop
from sim.harness.state import HarnessState, new_state
from sim.task_record import TaskRecord, make_record
from sim.world.streams import StreamPool
from sim.world.task import SimulatedTask

Tracer = Callable[[int, HarnessState, Callable[[], float]], Callable[[Loop], Loop]]
"""Given a task's index, its state and the engine's clock (seconds since the
task started), a wrapper for its loop generator that sees every effect and
result (:class:`sim.traces.simulated.RunRecorder` is one). A tracer with a
``drive`` method (:class:`InlineTracer`) drives the loop itself instead."""


class InlineTracer(Protocol):
    """A tracer that records a task's run in the loop that drives it, rather
    than in a wrapper around the harness loop (the ``--traces`` path:
    :class:`sim.sweeps.cells.RunTracer`)."""

    def __call__(self, index: int, state: HarnessState, clock: Callable[[], float]
                 ) -> Callable[[Loop], Loop]: ...

    def drive(self, index: int, state: HarnessState, loop: Loop, task: SimulatedTask,
              answer: Mapping[type, Answer]) -> HarnessState:
        """Drive ``loop`` (task ``index``'s, of ``state``) against ``task``,
        answering each effect with ``answer[type(effect)](task, effect, now)``
        (``now``: the task's wall seconds); return the final state."""


def run_task(cell: Cell, index: int, pool: StreamPool | None = None,
             tracer: Tracer | None = None, task_type: type[SimulatedTask] | None = None
             ) -> TaskRecord:
    """Run task ``index`` of ``cell`` to its terminal state; return its record.
    ``tracer``, when given, wraps the task's loop, or drives it when it has a
    ``drive`` method (:class:`InlineTracer`; none: the loop runs bare)."""
    return run_task_with_world(cell, index, pool, tracer, task_type)[0]


def run_task_with_world(cell: Cell, index: int, pool: StreamPool | None = None,
                        tracer: Tracer | None = None,
                        task_type: type[SimulatedTask] | None = None, *,
                        prefix_tokens: int | None = None) -> tuple[TaskRecord, SimulatedTask]:
    """Run task ``index`` of ``cell``; return its record and the world's side
    of the task (a ``task_type``, e.g. one that records every call; default
    :class:`SimulatedTask`). The run's model is its task class's, if it names
    one; its task statement the task's own size. ``prefix_tokens`` is the
    cell's ``params.prefix_tokens`` when the caller looked it up once for many
    tasks (None: looked up here)."""
    pool = pool if pool is not None else StreamPool()
    streams = pool.acquire(cell.seed, index)
    task = (task_type or SimulatedTask)(cell.world, streams)
    params = cell.params
    prefix = params.prefix_tokens if prefix_tokens is None else prefix_tokens
    state = new_state(prefix, task.model_id or params.model, "Complete the task.",
                      task.task_tokens)
    if tracer is None:
        final = drive(cell, task, state)
    elif (inline := getattr(tracer, "drive", None)) is not None:  # recorded as it is driven
        final = inline(index, state, cell.loop(state), task, answers(type(task)))
    else:
        final = drive(cell, task, state,
                      tracer(index, state, lambda: state.active_s + state.parked_s))
    pool.release(streams)
    return make_record(cell.name, index, final, ground_truth=task.need,
                       truly_done=task.answer_correct), task


def run_tasks(cell: Cell, indices: Iterable[int], tracer: Tracer | None = None
              ) -> list[TaskRecord]:
    """Run the given tasks of ``cell`` one after another, in order. The
    cyclic garbage collector is paused meanwhile, as in the DES engine and
    a replay: runs make next to no cycles (7 unreachable cyclic objects in
    2,000 tasks of bounded.yaml, tau2.yaml or cached.yaml, traced or not,
    apart from a first traced chunk's 410), and its full passes walk every
    object alive, a traced chunk's recorded rows among them (some 4% of a
    traced run's CPU time on bounded.yaml, 1-2% of an untraced one's)."""
    pool = StreamPool()
    prefix = cell.params.prefix_tokens  # a sum over the tools: once per cell, not per task
    with gc_paused():
        return [run_task_with_world(cell, i, pool, tracer, prefix_tokens=prefix)[0]
                for i in indices]


def drive(cell: Cell, task: SimulatedTask, state: HarnessState,
          wrap: Callable[[Loop], Loop] | None = None) -> HarnessState:
    """Drive the harness generator (wrapped by ``wrap`` if given) against
    ``task`` until it returns, answering each effect through the dispatch
    table (:func:`sim.engines.perform.answers`). The task's clock is the
    harness's wall time (active plus parked seconds)."""
    loop = cell.loop(state)
    if wrap is not None:
        loop = wrap(loop)
    send = loop.send
    answer = answers(type(task))
    respond, execute = answer[ModelRequest], answer[ToolRequest]
    # the commonest three effects' types, and ``type``, as locals
    model_request, checkpoint, tool_request, type_of = ModelRequest, Checkpoint, ToolRequest, type
    result: Result = None
    try:
        while True:
            effect = send(result)
            kind = type_of(effect)
            if kind is model_request:  # the table's answers, the commonest three looked up once
                result = respond(task, effect, state.active_s + state.parked_s)
            elif kind is checkpoint:
                result = None
            elif kind is tool_request:
                result = execute(task, effect, state.active_s + state.parked_s)
            else:
                result = answer[kind](task, effect, state.active_s + state.parked_s)
    except StopIteration as stop:
        final: HarnessState = stop.value
        return final
