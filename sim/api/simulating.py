"""Simulating from the API: the base cell (:func:`simulate`) or every cell of a
sweep grid (:func:`sweep`) as pandas DataFrames, and the rows and summary of a
results folder the commands wrote (:func:`read_results`).

With ``out``, :func:`simulate` and :func:`sweep` write a results folder as
``python -m sim run``/``sweep`` do, through the one function the commands call,
:func:`write_cells`: the cells run in chunks (:mod:`sim.sweeps.chunks`), records
(and with ``traces`` every run's calls) stream to Parquet as chunks finish,
finished chunks are kept for ``resume``, ``scheduler`` picks where they run, and
the folder is written whole (a temporary folder swapped in).

Every function takes ``workers`` (processes; default all cores; results do not
depend on it) and ``progress`` (a progress bar on stderr; default off). Units:
shares in [0, 1], tokens as counts, cost in USD, times in seconds.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from sim.api.scenarios import Overrides, prepare
from sim.bad_input import InputError
from sim.output.results import PARQUET_NAME, SUMMARY_NAME, cell_summary, table_frame
from sim.parquet import read_parquet
from sim.scenario.limits import check_workers
from sim.scenario.model import Scenario
from sim.sweeps.cells import CellRun, cells_of, default_workers

log = logging.getLogger(__name__)

__all__ = ["EXIT_INTERRUPTED", "EXIT_LOST_WORKER", "SweepFrames", "SweepStopped", "Written",
           "cell_changes", "read_folder", "read_results", "results_folder", "results_tables",
           "run_cells", "simulate", "summarize", "sweep", "write_cells"]

EXIT_INTERRUPTED = 130
"""Exit status of a sweep stopped by Ctrl-C (128 + SIGINT, as shells report it)."""
EXIT_LOST_WORKER = 75
"""Exit status of a sweep stopped by a lost worker (EX_TEMPFAIL: run it again with --resume)."""


class SweepStopped(Exception):
    """The sweep stopped early (its finished chunks kept for ``resume``);
    ``status`` is the exit status a command returns."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class Written(NamedTuple):
    """A results folder :func:`write_cells` wrote: its path ``out``, the
    ``summary`` written to its summary.json, the settings each cell of a
    sweep ``changes`` from the base (``{"path", "base", "value"}`` per
    change; empty for one cell), and whether it holds ``timeseries.parquet``
    and the traces (``runs.parquet``, ``calls.parquet``); ``spans``: the runs
    written as OpenTelemetry spans (None: none asked for)."""

    out: Path
    summary: dict[str, Any]
    changes: dict[str, list[dict[str, str]]]
    timeseries: bool
    traces: bool
    spans: int | None = None


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


def results_folder(name: str, command: str | None = None, overrides: Sequence[str] = (),
                   out: str | os.PathLike | None = None) -> Path:
    """``out``, or <root>/<folder> where the root is $SIM_OUT, else ``out`` of
    ``[tool.sim]`` in the nearest pyproject.toml, else ``reports``. The
    folder is ``name``; with ``command``, the run's own folder
    (:func:`sim.output.folder.run_folder_name` of ``name``, ``command`` and
    the overrides: ``bounded`` for a plain sweep, ``bounded-run``,
    ``bounded-harness.budgets.steps=30``...)."""
    from sim.scenario.project import out_root

    if out:
        return Path(out)
    if command is None:
        return out_root() / name
    from sim.output.folder import run_folder_name

    return out_root() / run_folder_name(name, command, list(overrides))


def cell_changes(scenario: Scenario, runs: list[CellRun]) -> dict[str, list[dict[str, str]]]:
    """Each cell of a sweep (more than one cell): the settings it changes from
    the scenario's own (:func:`sim.scenario.diff.setting_changes`), each
    ``{"path", "base", "value"}`` (values as a user reads them); empty for
    one cell. Written into each cell of summary.json (``changes``), its
    report section and its terminal table."""
    from sim.scenario.diff import setting_changes

    if len(runs) < 2:
        return {}
    base = scenario.model_copy(update={"sweep": {}}).model_dump(mode="json")
    return {run.name: [{"path": c.path, "base": c.base, "value": c.candidate}
                       for c in setting_changes(base, run.scenario.model_dump(mode="json"))]
            for run in runs}


def write_cells(scenario: Scenario, command: str, out: str | os.PathLike | None = None, *,
                overrides: Sequence[str] = (),
                force: bool = False, workers: int | None = None, scheduler: str | None = None,
                resume: bool = False, progress: bool = False, traces: str | None = None,
                cost_ceiling: float | None = None,
                otel: str | os.PathLike | None = None) -> Written:
    """Run the cells of ``scenario`` in chunks and write their results folder
    whole: for ``command`` ``run`` the base cell (the sweep, if any, ignored),
    for ``sweep`` every cell of the grid (:func:`sim.sweeps.cells.cells_of`).
    ``out`` (default :func:`results_folder` of the scenario, ``command`` and
    ``overrides``) is checked before anything runs (another
    run's results are replaced only with ``force``), records stream to Parquet
    as chunks finish, finished chunks are kept for ``resume``, ``scheduler``
    picks where chunks run (:func:`sim.sweeps.schedulers.make_scheduler`), and
    with ``traces`` (the source named in them) every run's calls are written
    too. ``cost_ceiling`` (USD) rings cells in report.html. With ``otel`` (a
    file, checked before anything runs; it needs ``traces``) the simulated
    runs are also written there as OpenTelemetry GenAI spans (OTLP JSON) after
    the folder; a failure then keeps the folder and says so. A stop (Ctrl-C, a
    lost worker) raises :class:`SweepStopped` with the exit status."""
    from sim.output import folder
    from sim.output.provenance import run_provenance

    if command == "run":
        scenario = scenario.model_copy(update={"sweep": {}})
        runs = [CellRun(scenario.name, scenario, ())]
    else:
        runs = cells_of(scenario)
    target = results_folder(scenario.name, command, overrides, out)
    if otel:
        folder.check_file_target(otel, "--otel", results=(target,))
    provenance = run_provenance(scenario, command=command, overrides=overrides)
    folder.prepare(target, provenance, force=force)
    log.info("%d cell(s) into %s", len(runs), target)
    changed = cell_changes(scenario, runs)
    summary, series = _simulate_in_chunks(
        scenario, runs, target, provenance, changed, workers=workers, scheduler=scheduler,
        resume=resume, progress=progress, traces=traces, cost_ceiling=cost_ceiling)
    spans = None
    if otel:
        from sim.drivers.live.otel import write_trace_spans

        with folder.secondary_output(otel, "--otel",
                                     f"the run's results are in {target}/ as written"):
            spans = write_trace_spans(target, otel)
    return Written(target, summary, changed, series, traces is not None, spans)


def results_tables(written: Written) -> str:
    """What ``run`` and ``sweep`` print: each cell's table (with the settings
    a sweep's cell changes), the cells side by side for a sweep, and the line
    naming the folder and its files."""
    from sim.output.results import format_comparison, format_table
    from sim.output.safe_text import printable

    lines: list[str] = []
    for cell in written.summary["cells"]:
        lines.append(format_table(cell))
        if cell["name"] in written.changes:
            line = changes_line(written.changes[cell["name"]])
            lines.append(f"  {printable(line, newlines=False)}")
        lines.append("")
    if len(written.summary["cells"]) > 1:  # the answer of a sweep: its cells side by side
        lines.append(format_comparison(written.summary["cells"]))
        lines.append("")
    files = "results.parquet, summary.json, report.md, report.html" + (
        ", timeseries.parquet" if written.timeseries else "") + (
        ", runs.parquet, calls.parquet" if written.traces else "")
    lines.append(f"results in {printable(written.out)}/ ({files})")
    return "\n".join(lines)


def changes_line(changes: list[dict[str, str]]) -> str:
    """``changed from the base: PATH: base -> value; ...`` (``nothing``)."""
    return "changed from the base: " + ("; ".join(
        f"{c['path']}: {c['base']} -> {c['value']}" for c in changes) if changes else "nothing")


def _extras(capacity: dict[str, Any], changed: dict[str, list[dict[str, str]]]
            ) -> dict[str, dict[str, Any]]:
    """What each cell's summary adds: its ``capacity`` (DES cells) and the
    settings it ``changes`` from the base (a sweep of several cells)."""
    out: dict[str, dict[str, Any]] = {}
    for name, c in capacity.items():
        out.setdefault(name, {})["capacity"] = c
    for name, changes in changed.items():
        out.setdefault(name, {})["changes"] = changes
    return out


def _simulate_in_chunks(scenario: Scenario, runs: list[CellRun], out: Path,
                        provenance: dict[str, Any], changed: dict[str, list[dict[str, str]]],
                        *, workers: int | None, scheduler: str | None, resume: bool,
                        progress: bool, traces: str | None, cost_ceiling: float | None
                        ) -> tuple[dict[str, Any], bool]:
    from sim.output import folder
    from sim.output.results import parquet_metadata, timeseries_frame, write_streamed_results
    from sim.sweeps.chunks import Interrupted, run_to_file
    from sim.sweeps.schedulers import make_scheduler

    try:
        with make_scheduler(scheduler, workers or default_workers()) as where:
            streamed = run_to_file(runs, scenario.tasks, out, where, resume=resume,
                                   progress=progress, metadata=parquet_metadata(provenance),
                                   traces=traces)
    except Interrupted as stopped:
        status = EXIT_INTERRUPTED if stopped.why == "interrupted" else EXIT_LOST_WORKER
        raise SweepStopped(f"{stopped}; no results were written to {out}", status) from None
    from sim.output.html import write_sweep_html  # matplotlib: only when a report is written

    try:
        with folder.replace(out) as staging:
            summary, rows = write_streamed_results(
                staging, streamed.path, streamed.cells, {r.name: r.params() for r in runs},
                title=f"Results: {scenario.name}",
                extras_by_cell=_extras(streamed.capacity, changed),
                timeseries=timeseries_frame(streamed.series) if streamed.series else None,
                seed=scenario.seed, description=scenario.description, provenance=provenance)
            write_sweep_html(staging, summary, rows, title=f"Results: {scenario.name}",
                             ceiling=cost_ceiling)
            for name, path in streamed.traces.items():  # runs.parquet, calls.parquet
                os.replace(path, staging / name)
    except KeyboardInterrupt:  # every chunk is kept: --resume only writes the folder
        raise SweepStopped(f"interrupted while writing {out}; the previous results are "
                           f"intact and the finished chunks kept in {streamed.store.folder}: "
                           f"run the same command with --resume", EXIT_INTERRUPTED) from None
    except BaseException:  # the folder is as it was; nothing is left beside it
        streamed.store.remove()
        raise
    streamed.store.remove()
    return summary, bool(streamed.series)


def _overrides_named(overrides: Overrides) -> list[str]:
    """Overrides as ``path=value`` strings (the provenance of a written folder)."""
    if not overrides:
        return []
    if isinstance(overrides, Mapping):
        return [f"{key}={value!r}" for key, value in overrides.items()]
    return [str(item) for item in overrides]


def _written_frames(scenario: str | os.PathLike | Scenario, s: Scenario, command: str,
                    overrides: Overrides, out: str | os.PathLike, *,
                    force: bool, workers: int | None, scheduler: str | None, resume: bool,
                    progress: bool, traces: bool) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """:func:`write_cells` into ``out``, then the rows and cells it wrote."""
    check_workers(workers, "workers")
    source = s.name if isinstance(scenario, Scenario) else str(scenario)
    written = write_cells(s, command, out, overrides=_overrides_named(overrides),
                          force=force, workers=workers, scheduler=scheduler, resume=resume,
                          progress=progress, traces=source if traces else None)
    return read_folder(written.out)


def simulate(scenario: str | os.PathLike | Scenario, overrides: Overrides = None, *,
             tasks: int | None = None, seed: int | None = None, workers: int | None = None,
             progress: bool = False, allow_plugins: bool = False,
             out: str | os.PathLike | None = None, force: bool = False, resume: bool = False,
             traces: bool = False, scheduler: str | None = None) -> pd.DataFrame:
    """Simulate the scenario's base cell (its ``sweep``, if any, is ignored):
    one row per task, the columns of :class:`sim.task_record.TaskRecord` (``cell``,
    ``task``, ``outcome``, ``steps``, ``input_tokens``, ``cost_usd``, ...).

    ``tasks`` and ``seed`` override the scenario's; the same scenario and seed
    give the same rows. ``allow_plugins`` lets the scenario name a detector or
    verifier by import path (code that is imported and run). With ``out``, the
    results folder of ``python -m sim run`` is written there too
    (:func:`write_cells`: ``force``, ``resume``, ``traces``, ``scheduler``)
    and the rows are read back from it.

    >>> rows = simulate("scenarios/bounded.yaml", tasks=50, workers=1)
    >>> len(rows), rows["task"].tolist()[:3]
    (50, [0, 1, 2])
    """
    s = prepare(scenario, overrides, tasks, seed, allow_plugins).model_copy(
        update={"sweep": {}})
    runs = [CellRun(s.name, s, ())]
    if out is not None:
        rows, _ = _written_frames(scenario, s, "run", overrides, out, force=force,
                                  workers=workers, scheduler=scheduler, resume=resume,
                                  progress=progress, traces=traces)
        return rows
    rows, _ = run_cells(s, runs, workers, progress)
    return rows


def sweep(scenario: str | os.PathLike | Scenario, overrides: Overrides = None, *,
          tasks: int | None = None, seed: int | None = None, workers: int | None = None,
          progress: bool = False, allow_plugins: bool = False,
          out: str | os.PathLike | None = None, force: bool = False, resume: bool = False,
          traces: bool = False, scheduler: str | None = None) -> SweepFrames:
    """Simulate every cell of the scenario's sweep grid (one cell without a
    sweep): ``(rows, summary)``, see :class:`SweepFrames`. Add or replace the
    grid with an override: ``{"sweep": {"harness.budgets.tokens": [5e5, 1e6, 2e6]}}``.

    >>> rows, summary = sweep("scenarios/bounded.yaml", {"sweep": {
    ...     "harness.detector.nudges": [0, 1]}}, tasks=50, workers=1)
    >>> summary["cell"].tolist()
    ['nudges=0', 'nudges=1']

    With ``out``, the results folder of ``python -m sim sweep`` is written
    there too (see :func:`simulate`) and the frames are read back from it.
    """
    from sim.output.html import summary_frame  # matplotlib: when a frame is made

    s = prepare(scenario, overrides, tasks, seed, allow_plugins)
    if out is not None:
        rows, cells = _written_frames(scenario, s, "sweep", overrides, out,
                                      force=force, workers=workers, scheduler=scheduler,
                                      resume=resume, progress=progress, traces=traces)
        return SweepFrames(rows, summary_frame(cells))
    rows, cells = run_cells(s, cells_of(s), workers, progress)
    return SweepFrames(rows, summary_frame(cells))


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    """The per-cell summary (as :func:`sweep` returns it) of task rows, cells
    in order of first appearance; sweep parameters are not known from rows."""
    from sim.output.html import summary_frame  # matplotlib: when a frame is made

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
    from sim.output.html import summary_frame  # matplotlib: when a frame is made

    rows, cells = read_folder(Path(folder))
    return SweepFrames(rows, summary_frame(cells))
