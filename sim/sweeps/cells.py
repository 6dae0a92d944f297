"""A scenario's cells: expand its grid into cells, build each cell for the
engines, and record runs in the trace model.

:func:`cells_of` expands a scenario's sweep into :class:`CellRun` cells,
:func:`build_cell` builds the engines' view of one, and :class:`RunTracer` /
:func:`traced_tables` record a chunk's runs for ``--traces``. Running the cells
is :mod:`sim.sweeps.chunks`' work (in chunks, on any scheduler), for the CLI and the
Python API alike.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sim.engines.cell import Cell
from sim.harness.params import HarnessParams
from sim.scenario.limits import MAX_RUN_RETRIES, MAX_RUN_STEPS
from sim.scenario.model import (
    Scenario,
    build_verifier,
    build_world,
    expand,
    harness_params,
    resolve_detector,
)
from sim.task_record import TaskRecord

if TYPE_CHECKING:  # the trace model is imported when a run is traced
    import pyarrow as pa


@dataclass(frozen=True)
class CellRun:
    """One cell of a sweep: its name, its scenario and the axis values that made it."""

    name: str
    scenario: Scenario
    values: tuple[tuple[str, object], ...]

    def params(self) -> dict[str, object]:
        """The cell's axis values, for the summary (``{dotted path: value}``)."""
        return dict(self.values)


def cells_of(scenario: Scenario) -> list[CellRun]:
    """The sweep's cells, in grid order (one cell without a sweep)."""
    return [CellRun(name, cell, values) for name, cell, values in expand(scenario)]


def build_cell(run: CellRun) -> Cell:
    """The engine's view of a cell: validated harness parameters, compiled
    world; the world and the verifier are built once. A simulated run always
    ends: without a step or retry budget it gets the ceilings
    :data:`~sim.scenario.limits.MAX_RUN_STEPS` and
    :data:`~sim.scenario.limits.MAX_RUN_RETRIES` as those budgets."""
    s = run.scenario
    verifier = build_verifier(s.harness.verifier)
    world = build_world(s.harness, s.world, verifier)
    params = with_run_ceilings(harness_params(s.harness, world, verifier=verifier))
    return Cell(run.name, params, world, resolve_detector(s.harness.detector.name), s.seed,
                run.values)


def with_run_ceilings(params: HarnessParams) -> HarnessParams:
    """``params`` with the simulation's ceilings as the step and retry budgets
    where those are unset or looser (a doom loop that no detector, budget or
    context overflow stops would otherwise run for ever)."""
    budgets = params.budgets
    steps = MAX_RUN_STEPS if budgets.steps is None else min(budgets.steps, MAX_RUN_STEPS)
    retries = (MAX_RUN_RETRIES if budgets.retries is None
               else min(budgets.retries, MAX_RUN_RETRIES))
    if steps == budgets.steps and retries == budgets.retries:
        return params
    return replace(params, budgets=replace(budgets, steps=steps, retries=retries))


def default_workers() -> int:
    """All cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class RunTracer:
    """A :data:`sim.engines.direct.Tracer` giving each task a recorder (an
    observer of the pump that drives it), all writing into one
    :class:`~sim.traces.columns.CallColumns` (a chunk's) under the task's
    index; the direct and the DES engine record the same way."""

    def __init__(self) -> None:
        from sim.traces.columns import CallColumns
        from sim.traces.simulated import RunRecorder

        self.columns = CallColumns()
        self._recorder = RunRecorder  # imported once, not per task

    def __call__(self, index: int, state, clock):
        return self._recorder(state, clock, self.columns, index)


def traced_tables(tracer: RunTracer | None, cell: Cell, records: list[TaskRecord],
                  file: str | None) -> tuple[pa.Table, pa.Table] | None:
    """The runs of ``records`` as the trace tables (runs, calls), built from
    the tracer's columns (None without a tracer)."""
    if tracer is None or file is None:
        return None
    from sim.traces.simulated import simulated_tables

    budgets = cell.params.budgets
    runs: dict[str, list] = {"run_id": [f"{cell.name}/{r.task}" for r in records],
            "task_id": [str(r.task) for r in records],
            "cost_usd": [r.cost_usd for r in records],
            "exit": [f"{r.state}:{r.reason}" for r in records],
            "resolved": [r.truly_done for r in records],
            "duration_s": [r.wall_s for r in records]}
    constants = {"file": file, "model": cell.params.model, "step_limit": budgets.steps,
                 "cost_limit_usd": budgets.money_usd}
    return simulated_tables(tracer.columns, [r.task for r in records], runs, constants,
                            lambda: traced_runs(tracer, cell, records, file))


def traced_runs(tracer: RunTracer | None, cell: Cell, records: list[TaskRecord], file: str | None
            ) -> list:
    """The runs of ``records`` in the trace model, as objects (empty without a tracer)."""
    if tracer is None or file is None:
        return []
    from sim.traces.simulated import simulated_run

    calls = tracer.columns.records()
    budgets = cell.params.budgets
    return [simulated_run(
        calls.get(r.task, []), run_id=f"{cell.name}/{r.task}", file=file,
        task_id=str(r.task), model=cell.params.model, status=r.state, reason=r.reason,
        cost_usd=r.cost_usd, resolved=r.truly_done, duration_s=r.wall_s,
        step_limit=budgets.steps, cost_limit_usd=budgets.money_usd) for r in records]
