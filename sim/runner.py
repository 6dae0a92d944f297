"""Sweeps: expand a scenario's grid into cells and run every task of every cell.

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
    expand,
    harness_params,
    resolve_detector,
)
from sim.world.world import World


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
    """The engine's view of a cell: validated harness parameters, compiled world."""
    s = run.scenario
    world = World(s.world, build_verifier(s.harness.verifier))
    return Cell(run.name, harness_params(s.harness, s.world), world,
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
    (``{series name: (bin start times in seconds, time-average values)}``)."""

    records: dict[str, list[TaskRecord]]
    capacity: dict[str, dict] = field(default_factory=dict)
    series: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = field(default_factory=dict)


def run_cells(runs: list[CellRun], tasks: int, *, workers: int | None = None,
              progress: bool = True) -> dict[str, list[TaskRecord]]:
    """Run ``tasks`` tasks of every cell; records by cell name, tasks in index order."""
    return run_sweep(runs, tasks, workers=workers, progress=progress).records


def run_sweep(runs: list[CellRun], tasks: int, *, workers: int | None = None,
              progress: bool = True) -> SweepResult:
    """Run ``tasks`` tasks of every cell with its scenario's engine. Direct
    cells are split into chunks of tasks; a DES cell (shared capacity) runs
    whole in one process. Results do not depend on ``workers``."""
    workers = workers or default_workers()
    cells = [build_cell(r) for r in runs]
    if any(r.scenario.engine == "des" for r in runs):
        return _run_des_cells(runs, cells, tasks, workers, progress)
    chunk = max(25, -(-tasks // (workers * 8)))
    jobs = [(c, start, min(start + chunk, tasks)) for c in range(len(cells))
            for start in range(0, tasks, chunk)]
    global _CELLS
    _CELLS = cells  # inherited by forked workers
    chunks = _run_jobs(_run_chunk, jobs, [stop - start for _, start, stop in jobs],
                       workers=workers, progress=progress, desc="simulating")
    records: dict[str, list[TaskRecord]] = {cell.name: [] for cell in cells}
    for (c, _, _), chunk_records in zip(jobs, chunks, strict=True):
        records[cells[c].name].extend(chunk_records)
    return SweepResult(records)


def _run_des_cells(runs: list[CellRun], cells: list[Cell], tasks: int, workers: int,
                   progress: bool) -> SweepResult:
    global _DES
    _DES = list(zip(runs, cells, strict=True))  # inherited by forked workers
    jobs = [(c, tasks) for c in range(len(cells))]
    out = _run_jobs(_run_des_cell, jobs, [tasks] * len(jobs), workers=workers,
                    progress=progress, desc="simulating (des)")
    result = SweepResult({})
    for cell, (records, capacity, series) in zip(cells, out, strict=True):
        result.records[cell.name] = records
        if capacity is not None:
            result.capacity[cell.name] = capacity
            result.series[cell.name] = series
    return result


def _run_jobs(work, jobs: list[tuple], sizes: list[int], *, workers: int, progress: bool,
              desc: str) -> list:
    """``work(*job)`` for every job, in this process (one worker or one job) or
    on forked worker processes; results in job order, whatever order they
    finish in. Progress (``sizes[i]`` tasks per job) goes to stderr."""
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


_DES: list[tuple[CellRun, Cell]] = []


def _run_des_cell(index: int, tasks: int) -> tuple[list[TaskRecord], dict, dict]:
    from sim.analysis.capacity import measurements, resampled
    from sim.engines.des import DesEngine, arrival_schedule

    run, cell = _DES[index]
    if run.scenario.engine == "direct":  # a direct cell in a sweep that has DES cells
        return run_tasks(cell, range(tasks)), None, {}
    des = run.scenario.des
    arrivals = arrival_schedule(des, tasks, cell.seed)
    result = DesEngine(cell, des, arrivals).run()
    capacity = measurements(result, des.capacity.model_dump())
    series = {name: resampled(s, result.horizon_s) for name, s in result.series.items()}
    return result.records, capacity, series


_CELLS: list[Cell] = []


def _run_chunk(cell_index: int, start: int, stop: int) -> list[TaskRecord]:
    return run_tasks(_CELLS[cell_index], range(start, stop))
