"""Sweeps in memory: expand a scenario's grid into cells and run every task of every cell.

This is the Python API's path (traces included, when asked for), which returns every
record; the CLI's ``run`` and ``sweep`` run in chunks, streamed to disk and
resumable (:mod:`sim.sweeps`).

Tasks are split into chunks by index and run on ``workers`` processes; the
records are put back in (cell, task) order, so the results are identical for
any number of workers. Progress (tasks done) goes to stderr.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from sim.engines.cell import Cell
from sim.engines.direct import run_tasks
from sim.records import TaskRecord
from sim.scenario.model import (
    Scenario,
    build_verifier,
    build_world,
    expand,
    harness_params,
    resolve_detector,
)


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
    world; the world and the verifier are built once."""
    s = run.scenario
    verifier = build_verifier(s.harness.verifier)
    world = build_world(s.harness, s.world, verifier)
    return Cell(run.name, harness_params(s.harness, world, verifier=verifier), world,
                resolve_detector(s.harness.detector.name), s.seed, run.values)


def default_workers() -> int:
    """All cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@dataclass
class SweepResult:
    """Records by cell (tasks in index order) and, for DES cells, the capacity
    measurements (:func:`sim.analysis.capacity.measurements`) and resampled time series
    (``{series name: (bin start times in seconds, time-average values)}``).
    ``traces``: the runs in the trace model (:class:`sim.traces.model.RunRecord`,
    tasks in index order) by cell, when traces were asked for."""

    records: dict[str, list[TaskRecord]]
    capacity: dict[str, dict] = field(default_factory=dict)
    series: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = field(default_factory=dict)
    traces: dict[str, list] = field(default_factory=dict)


def run_cells(runs: list[CellRun], tasks: int, *, workers: int | None = None,
              progress: bool = True) -> dict[str, list[TaskRecord]]:
    """Run ``tasks`` tasks of every cell; records by cell name, tasks in index order."""
    return run_sweep(runs, tasks, workers=workers, progress=progress).records


def run_sweep(runs: list[CellRun], tasks: int, *, workers: int | None = None,
              progress: bool = True, traces: str | None = None) -> SweepResult:
    """Run ``tasks`` tasks of every cell with its scenario's engine. Direct
    cells are split into chunks of tasks; a DES cell (shared capacity) runs
    whole in one process. Results do not depend on ``workers``.

    ``traces``: when not None, every run is also recorded in the trace model
    (:mod:`sim.traces.recorder`; ``SweepResult.traces``), its ``file`` set to
    this string (the scenario file); otherwise the loops run unwrapped."""
    workers = workers or default_workers()
    cells = [build_cell(r) for r in runs]
    if any(r.scenario.engine == "des" for r in runs):
        return _run_des_cells(runs, cells, tasks, workers, progress, traces)
    chunk = max(25, -(-tasks // (workers * 8)))
    jobs = [(cell, start, min(start + chunk, tasks), traces) for cell in cells
            for start in range(0, tasks, chunk)]
    chunks = _run_jobs(_run_chunk, jobs, [stop - start for _, start, stop, _ in jobs],
                       workers=workers, progress=progress, desc="simulating")
    result = SweepResult({cell.name: [] for cell in cells})
    if traces is not None:
        result.traces = {cell.name: [] for cell in cells}
    for (cell, _, _, _), (chunk_records, chunk_traces) in zip(jobs, chunks, strict=True):
        result.records[cell.name].extend(chunk_records)
        if traces is not None:
            result.traces[cell.name].extend(chunk_traces)
    return result


def _run_des_cells(runs: list[CellRun], cells: list[Cell], tasks: int, workers: int,
                   progress: bool, traces: str | None) -> SweepResult:
    jobs = [(run, cell, tasks, traces) for run, cell in zip(runs, cells, strict=True)]
    out = _run_jobs(_run_des_cell, jobs, [tasks] * len(jobs), workers=workers,
                    progress=progress, desc="simulating (des)")
    result = SweepResult({})
    for cell, (records, capacity, series, traced) in zip(cells, out, strict=True):
        result.records[cell.name] = records
        if traces is not None:
            result.traces[cell.name] = traced
        if capacity is not None:
            result.capacity[cell.name] = capacity
            result.series[cell.name] = series
    return result


def _run_jobs(work, jobs: list[tuple], sizes: list[int], *, workers: int, progress: bool,
              desc: str) -> list:
    """``work(*job)`` for every job, in this process (one worker or one job) or
    on forked worker processes (each job, its cell included, is sent to the
    worker that runs it: no module state is shared); results in job order,
    whatever order they finish in. Progress (``sizes[i]`` tasks per job) goes
    to stderr."""
    results: list = [None] * len(jobs)
    bar = tqdm(total=sum(sizes), unit="task", file=sys.stderr, disable=not progress,
               desc=desc, mininterval=0.5)
    try:
        if workers == 1 or len(jobs) == 1:
            for i, job in enumerate(jobs):
                results[i] = work(*job)
                bar.update(sizes[i])
        else:
            context = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
                futures = {pool.submit(work, *job): i for i, job in enumerate(jobs)}
                for future in as_completed(futures):
                    i = futures[future]
                    results[i] = future.result()
                    bar.update(sizes[i])
    finally:
        bar.close()
    return results


def _run_des_cell(run: CellRun, cell: Cell, tasks: int, traces: str | None
                  ) -> tuple[list[TaskRecord], dict | None, dict, list]:
    from sim.analysis.capacity import measurements, resampled
    from sim.engines.des import DesEngine, arrival_schedule

    tracer = None if traces is None else RunTracer()
    if run.scenario.engine == "direct":  # a direct cell in a sweep that has DES cells
        records = run_tasks(cell, range(tasks), tracer)
        return records, None, {}, traced_runs(tracer, cell, records, traces)
    des = run.scenario.des
    arrivals = arrival_schedule(des, tasks, cell.seed)
    result = DesEngine(cell, des, arrivals, tracer).run()
    capacity = measurements(result, des.capacity.model_dump())
    series = {name: resampled(s, result.horizon_s) for name, s in result.series.items()}
    return result.records, capacity, series, traced_runs(tracer, cell, result.records, traces)


def _run_chunk(cell: Cell, start: int, stop: int, traces: str | None
               ) -> tuple[list[TaskRecord], list]:
    tracer = None if traces is None else RunTracer()
    records = run_tasks(cell, range(start, stop), tracer)
    return records, traced_runs(tracer, cell, records, traces)


class RunTracer:
    """A :data:`sim.engines.direct.Tracer` keeping one recorder per task index."""

    def __init__(self) -> None:
        self.recorders: dict[int, object] = {}

    def __call__(self, index: int, state, clock):
        from sim.traces.recorder import RunRecorder

        recorder = self.recorders[index] = RunRecorder(state, clock)
        return recorder.wrap


def traced_runs(tracer: RunTracer | None, cell: Cell, records: list[TaskRecord], file: str | None
            ) -> list:
    """The runs of ``records`` in the trace model (empty without a tracer)."""
    if tracer is None or file is None:
        return []
    from sim.traces.recorder import simulated_run

    budgets = cell.params.budgets
    return [simulated_run(
        tracer.recorders.get(r.task), run_id=f"{cell.name}/{r.task}", file=file,
        task_id=str(r.task), model=cell.params.model, status=r.state, reason=r.reason,
        cost_usd=r.cost_usd, resolved=r.truly_done, duration_s=r.wall_s,
        step_limit=budgets.steps, cost_limit_usd=budgets.money_usd) for r in records]
