"""Simulating from the API: the base cell (:func:`simulate`) or every cell of a
sweep grid (:func:`sweep`) as pandas DataFrames, and the rows and summary of a
results folder the commands wrote (:func:`read_results`).

Every function takes ``workers`` (processes; default all cores; results do not
depend on it) and ``progress`` (a progress bar on stderr; default off). Units:
shares in [0, 1], tokens as counts, cost in USD, times in seconds.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from sim.api.scenarios import Overrides, prepare
from sim.bad_input import InputError
from sim.output.files import read_parquet
from sim.output.html import summary_frame
from sim.output.results import PARQUET_NAME, SUMMARY_NAME, cell_summary, table_frame
from sim.scenario.limits import check_workers
from sim.scenario.model import Scenario
from sim.sweeps.cells import CellRun, cells_of, default_workers

__all__ = ["SweepFrames", "read_folder", "read_results", "run_cells", "simulate", "summarize",
           "sweep"]


class SweepFrames(NamedTuple):
    """The results of a sweep: ``rows`` (one per task of every cell, the
    columns of :class:`sim.task_record.TaskRecord`) and ``summary`` (one per cell,
    see :func:`sim.output.html.summary_frame`). Unpacks as ``rows, summary``."""

    rows: pd.DataFrame
    summary: pd.DataFrame


def run_cells(scenario: Scenario, runs: list[CellRun], workers: int | None, progress: bool
         ) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Run the cells in chunks (:func:`sim.sweeps.chunks.run_collected`: workers send
    Arrow columns, no record objects) and return the rows of every cell and
    the cells' summaries."""
    check_workers(workers, "workers")
    from sim.sweeps.chunks import run_collected

    result = run_collected(runs, scenario.tasks, workers=workers or default_workers(),
                           progress=progress)
    frames, cells = [], []
    for run in runs:
        frame = table_frame(result.tables.pop(run.name))  # each table freed once converted
        frames.append(frame)
        cell = cell_summary(run.name, run.params(), frame)
        if run.name in result.capacity:
            cell["capacity"] = result.capacity[run.name]
        cells.append(cell)
    return pd.concat(frames, ignore_index=True), cells


def simulate(scenario: str | os.PathLike | Scenario, overrides: Overrides = None, *,
             tasks: int | None = None, seed: int | None = None, workers: int | None = None,
             progress: bool = False, allow_plugins: bool = False) -> pd.DataFrame:
    """Simulate the scenario's base cell (its ``sweep``, if any, is ignored):
    one row per task, the columns of :class:`sim.task_record.TaskRecord` (``cell``,
    ``task``, ``outcome``, ``steps``, ``input_tokens``, ``cost_usd``, ...).

    ``tasks`` and ``seed`` override the scenario's; the same scenario and seed
    give the same rows. ``allow_plugins`` lets the scenario name a detector or
    verifier by import path (code that is imported and run).

    >>> rows = simulate("scenarios/bounded.yaml", tasks=50, workers=1)
    >>> len(rows), rows["task"].tolist()[:3]
    (50, [0, 1, 2])
    """
    s = prepare(scenario, overrides, tasks, seed, allow_plugins).model_copy(
        update={"sweep": {}})
    rows, _ = run_cells(s, [CellRun(s.name, s, ())], workers, progress)
    return rows


def sweep(scenario: str | os.PathLike | Scenario, overrides: Overrides = None, *,
          tasks: int | None = None, seed: int | None = None, workers: int | None = None,
          progress: bool = False, allow_plugins: bool = False) -> SweepFrames:
    """Simulate every cell of the scenario's sweep grid (one cell without a
    sweep): ``(rows, summary)``, see :class:`SweepFrames`. Add or replace the
    grid with an override: ``{"sweep": {"harness.budgets.tokens": [5e5, 1e6, 2e6]}}``.

    >>> rows, summary = sweep("scenarios/bounded.yaml", {"sweep": {
    ...     "harness.detector.nudges": [0, 1]}}, tasks=50, workers=1)
    >>> summary["cell"].tolist()
    ['nudges=0', 'nudges=1']
    """
    s = prepare(scenario, overrides, tasks, seed, allow_plugins)
    rows, cells = run_cells(s, cells_of(s), workers, progress)
    return SweepFrames(rows, summary_frame(cells))


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    """The per-cell summary (as :func:`sweep` returns it) of task rows, cells
    in order of first appearance; sweep parameters are not known from rows."""
    cells = [cell_summary(str(name), {}, group.reset_index(drop=True))
             for name, group in rows.groupby("cell", sort=False)]
    return summary_frame(cells)


def read_folder(folder: Path) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    parquet, summary = folder / PARQUET_NAME, folder / SUMMARY_NAME
    for path in (parquet, summary):
        if not path.is_file():
            raise InputError(f"not a results folder: {path.name} is missing",
                             source=str(folder))
    try:
        rows = read_parquet(parquet)  # never pd.read_parquet: see read_parquet
        cells = json.loads(summary.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise InputError(f"cannot read the results ({error.__class__.__name__}: {error})",
                         source=str(folder)) from None
    return rows, cells


def read_results(folder: str | os.PathLike) -> SweepFrames:
    """The rows and per-cell summary of a results folder written by ``python -m
    sim sweep``/``run`` (``results.parquet`` and ``summary.json``)."""
    rows, cells = read_folder(Path(folder))
    return SweepFrames(rows, summary_frame(cells))
