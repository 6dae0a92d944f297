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
from dataclasses import dataclass

from tqdm import tqdm

from sim.engines.cell import Cell
from sim.engines.direct import run_tasks
from sim.records import TaskRecord
from sim.scenario import (
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


def run_cells(runs: list[CellRun], tasks: int, *, workers: int | None = None,
              progress: bool = True) -> dict[str, list[TaskRecord]]:
    """Run ``tasks`` tasks of every cell; records by cell name, tasks in index order."""
    workers = workers or default_workers()
    cells = [build_cell(r) for r in runs]
    chunk = max(25, -(-tasks // (workers * 8)))
    jobs = [(c, start, min(start + chunk, tasks)) for c in range(len(cells))
            for start in range(0, tasks, chunk)]
    results: dict[tuple[int, int], list[TaskRecord]] = {}
    bar = tqdm(total=tasks * len(cells), unit="task", file=sys.stderr, disable=not progress,
               desc="simulating", mininterval=0.5)
    try:
        if workers == 1 or len(jobs) == 1:
            for c, start, stop in jobs:
                results[(c, start)] = run_tasks(cells[c], range(start, stop))
                bar.update(stop - start)
        else:
            global _CELLS
            _CELLS = cells  # inherited by the forked workers
            context = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
                futures = {pool.submit(_run_chunk, c, start, stop): (c, start, stop)
                           for c, start, stop in jobs}
                for future in as_completed(futures):
                    c, start, stop = futures[future]
                    results[(c, start)] = future.result()
                    bar.update(stop - start)
    finally:
        bar.close()
    return {cell.name: [r for c2, start, _ in jobs if c2 == c for r in results[(c2, start)]]
            for c, cell in enumerate(cells)}


_CELLS: list[Cell] = []


def _run_chunk(cell_index: int, start: int, stop: int) -> list[TaskRecord]:
    return run_tasks(_CELLS[cell_index], range(start, stop))
