"""The direct engine: each task runs alone through the real harness in
virtual time, with no shared capacity.

Time is the sum of the durations the world reports (model latency, tool
durations, backoff waits; approval waits as parked time), so a task's wall time
is what it would take with unlimited sandboxes and model slots. This is the
fast engine; :mod:`sim.engines.des` adds queues, rate limits and arrivals.

**Subagents.** A spawn (:class:`~sim.harness.effects.SpawnRequest`) is
performed inline: each child runs the same harness loop with the cell's
parameters, to its end, one after another in virtual time, against a task of
``world.fanout.child_class`` drawn from its own streams
(:func:`~sim.world.streams.child_streams`: the root task's index and the
child's ordinals), sharing the parent's ledgers and starting on the parent's
clock. The parent waits as if the children ran side by side, at most
``max_concurrent`` at once, each queued child taking the first slot free in
order (:func:`makespan`): the parent's elapsed time is the longest child's
when all fit at once, the sum of theirs when ``max_concurrent`` is 1. Without
shared capacity, the children's own clocks are not delayed by the queue.
Children started without waiting (``harness.subagents.wait`` false) run at
once too; each ends, on the parent's clock, where its slot in that schedule
ends (:func:`finish_times`), and a collection hands over those ended by the
parent's clock (all of them, the parent waiting for the last, when it waits).
Traced, each child is observed by the recorder its parent's makes for it
(:meth:`RunObserver.child`), so its calls are its root run's, recorded in
the order they were made: each child's to its end in turn.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from sim.engines.cell import Cell
from sim.engines.gc_paused import gc_paused
from sim.engines.perform import answers
from sim.harness.effects import (
    Checkpoint,
    ChildResult,
    ChildResults,
    ChildSpec,
    CollectChildren,
    ModelRequest,
    Result,
    SpawnRequest,
    ToolRequest,
)
from sim.harness.loop import Loop
from sim.harness.pump import Observer
from sim.harness.pump import drive as pump
from sim.harness.state import SUCCEEDED, HarnessState, new_state
from sim.harness.subagents import child_result, child_state
from sim.task_record import TaskRecord, make_record
from sim.world.streams import StreamPool, child_streams
from sim.world.task import SimulatedTask


class RunObserver(Observer, Protocol):
    """An observer of one run's pump that makes its children's observers
    (:class:`sim.traces.simulated.RunRecorder` is one)."""

    def child(self, state: HarnessState, clock: Callable[[], float],
              key: tuple[int, ...]) -> RunObserver:
        """The observer of the child run of ``state`` whose spawn key is
        ``key``; ``clock`` reads the same clock as this run's observer."""


Tracer = Callable[[int, HarnessState, Callable[[], float]], RunObserver]
"""Given a task's index, its state and the engine's clock (seconds since the
task started), an observer of the pump that drives its loop
(:class:`RunObserver`; :class:`sim.traces.simulated.RunRecorder` is one): it
sees every effect and result of the task's own loop, and makes the observer
of each of its children's (:meth:`RunObserver.child`)."""


def run_task(cell: Cell, index: int, pool: StreamPool | None = None,
             tracer: Tracer | None = None, task_type: type[SimulatedTask] | None = None
             ) -> TaskRecord:
    """Run task ``index`` of ``cell`` to its terminal state; return its record.
    ``tracer``, when given, makes an observer of the task's run (none: the
    loop runs unobserved)."""
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
        final = drive(cell, task, state, path=(index,))
    else:
        observer = tracer(index, state, lambda: state.active_s + state.parked_s)
        final = drive(cell, task, state, (observer,), path=(index,), recorder=observer)
    pool.release(streams)
    return make_record(cell.name, index, final, ground_truth=task.need,
                       truly_done=task.answer_correct), task


def run_task_state(cell: Cell, index: int, pool: StreamPool | None = None
                   ) -> tuple[TaskRecord, HarnessState]:
    """Run task ``index`` of ``cell`` (untraced); return its record and its
    final harness state (which holds what its subagents did: children,
    their outcomes, tokens and cost)."""
    pool = pool if pool is not None else StreamPool()
    streams = pool.acquire(cell.seed, index)
    task = SimulatedTask(cell.world, streams)
    params = cell.params
    state = new_state(params.prefix_tokens, task.model_id or params.model,
                      "Complete the task.", task.task_tokens)
    final = drive(cell, task, state, path=(index,))
    pool.release(streams)
    return make_record(cell.name, index, final, ground_truth=task.need,
                       truly_done=task.answer_correct), final


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
          observers: Sequence[Observer] = (), *, path: tuple[int, ...] = (),
          loop: Loop | None = None, recorder: RunObserver | None = None) -> HarnessState:
    """Drive the harness generator (``loop``, default the cell's loop on
    ``state``) against ``task`` until it returns, through the one pump
    (:func:`sim.harness.pump.drive`, telling ``observers``), each effect
    answered by :func:`answerer` (``path`` is the run's spawn key: its task's
    index, then its ordinal at each level; ``recorder``, one of
    ``observers``, makes its children's observers)."""
    if loop is None:
        loop = cell.loop(state, retry_key=":".join(map(str, path)) + ":" if path else "")
    return pump(loop, answerer(cell, task, state, path, recorder), observers)


def answerer(cell: Cell, task: SimulatedTask, state: HarnessState, path: tuple[int, ...],
             recorder: RunObserver | None = None) -> Callable[[Any], Result]:
    """The direct engine's answer to each effect of the run of ``state``
    against ``task``: through the dispatch table
    (:func:`sim.engines.perform.answers`), at the run's clock (the harness's
    wall time, active plus parked seconds); a spawn by running the children
    to their ends (:func:`run_children`, each through the same pump,
    observed by ``recorder.child``'s observer when a ``recorder`` is given),
    those started without waiting ending later on the parent's clock and
    handed over by a collection (:func:`collected`)."""
    answer = answers(type(task))
    respond, execute = answer[ModelRequest], answer[ToolRequest]
    # the commonest three effects' types as locals (closure cells)
    model_request, checkpoint, tool_request = ModelRequest, Checkpoint, ToolRequest
    background: list[tuple[float, ChildResult]] = []  # children not waited for: (end, result)

    def perform(effect: Any) -> Result:
        kind = type(effect)
        if kind is model_request:  # the table's answers, the commonest three looked up once
            return respond(task, effect, state.active_s + state.parked_s)
        if kind is checkpoint:
            return None
        if kind is tool_request:
            return execute(task, effect, state.active_s + state.parked_s)
        if kind is SpawnRequest:  # child runs, performed here
            result = run_children(cell, task, state, effect, path, recorder)
            if not effect.wait:  # they end later on the parent's clock
                now = state.active_s + state.parked_s
                ends = finish_times([r.duration_s for r in result.results],
                                    effect.max_concurrent)
                background.extend((now + end, r)
                                  for end, r in zip(ends, result.results, strict=True))
                result = ChildResults([], 0.0)
            return result
        if kind is CollectChildren:
            return collected(background, state.active_s + state.parked_s, effect.wait)
        return answer[kind](task, effect, state.active_s + state.parked_s)
    return perform


def run_children(cell: Cell, parent: SimulatedTask, state: HarnessState, spawn: SpawnRequest,
                 path: tuple[int, ...], recorder: RunObserver | None = None) -> ChildResults:
    """Run the children of ``spawn`` (made by the run of ``state``, against
    ``parent``, whose spawn key is ``path``) to their ends, one after
    another; answer with their results and the parent's wait
    (:func:`makespan` of their wall times). With the parent's ``recorder``,
    each child is observed by the recorder it makes for the child, on the
    parent's clock (the child starts at the spawn's ``now_s``)."""
    params = cell.params
    world = cell.world.child_world(parent.world)
    results = []
    for j, spec in enumerate(spawn.children):
        key = (*path, state.children + j)
        task = SimulatedTask(world, child_streams(cell.seed, key), child=True)
        child = child_state(params.prefix_tokens, task.model_id or params.model,
                            ChildSpec(spec.task, task.task_tokens, spec.depth))
        loop = cell.loop(child, retry_key=":".join(map(str, key)) + ":",
                         ledgers=spawn.ledgers, started_s=spawn.now_s)
        if recorder is None:
            final = drive(cell, task, child, path=key, loop=loop)
        else:
            mine = recorder.child(child, _clock(spawn.now_s, child), key)
            final = drive(cell, task, child, (mine,), path=key, loop=loop, recorder=mine)
        answer = task.answer_tokens if final.status == SUCCEEDED else 0
        results.append(child_result(final, answer, final.wall_s))
    return ChildResults(results, makespan([r.duration_s for r in results],
                                          spawn.max_concurrent))


def _clock(start_s: float, state: HarnessState) -> Callable[[], float]:
    """The clock of a run started at ``start_s`` on its root's clock: that
    plus its wall seconds (active and parked)."""
    return lambda: start_s + state.active_s + state.parked_s


def finish_times(durations: Sequence[float], slots: int) -> list[float]:
    """When each of ``durations`` ends when they run ``slots`` at a time,
    each in order taking the first slot free (seconds from the start)."""
    free = [0.0] * min(slots, len(durations))
    ends = []
    for d in durations:
        start = heapq.heappop(free)
        ends.append(start + d)
        heapq.heappush(free, start + d)
    return ends


def makespan(durations: Sequence[float], slots: int) -> float:
    """Seconds until the last of ``durations`` ends when they run ``slots``
    at a time (:func:`finish_times`; 0 for none): the longest when all fit
    at once, the sum with one slot."""
    return max(finish_times(durations, slots), default=0.0)


def collected(background: list[tuple[float, ChildResult]], now: float, wait: bool
              ) -> ChildResults:
    """The results in ``background`` (``(end, result)`` pairs) that have
    ended by ``now``, in the order they ended, removed from it; with
    ``wait``, all of them and the seconds until the last ends."""
    ended = sorted(background, key=lambda pair: pair[0])
    if not wait:
        ended = [pair for pair in ended if pair[0] <= now]
    for pair in ended:
        background.remove(pair)
    last = max((end for end, _ in ended), default=now)
    return ChildResults([r for _, r in ended], max(0.0, last - now) if wait else 0.0)
