"""A trace folder streamed into the writer: its calls read, checked and written
a slice at a time, so an import's memory does not grow with the calls.

:func:`stream_folder` reads ``runs.parquet`` whole (one small row per run) and
``calls.parquet`` as record batches (a row group at a time on a scheduler's
workers, :func:`checked_group`; batches of :data:`BATCH_CALLS` in this process
without one), checks each slice as :func:`~sim.traces.reading.load_tables`
checks a folder (types, required values, bounds) and that the calls come
grouped by run in the runs' order and numbered ``0..steps-1`` (what sim and
``traces import`` write), and hands it to
:meth:`~sim.traces.writer.TraceWriter.add_stream`, which writes row groups of
the same size whatever the slices. Each run's token sums are added up as the
calls go by and compared at the end.

A folder whose runs cannot pass through as columns (an unknown source, a
mini-swe-agent run awaiting its verdict, a run id already imported) is left
to the caller before anything is written (None). A problem found once calls
are written (a value out of bounds, calls out of order, sums that disagree)
raises :class:`Restart`: the import starts again and reads that folder whole
(:func:`sim.traces.folder.tables`), which refuses or repairs exactly as
without streaming, so the result never depends on how the folder was read.
:func:`add_folder` is the import's entry: a folder streamed, or read whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sim.bad_input import InputError
from sim.jobs import in_order
from sim.traces import folder as trace_folder
from sim.traces import provenance
from sim.traces.import_report import ImportReport
from sim.traces.model import (
    CALL_COLUMNS,
    CALLS_FILE,
    CALLS_SCHEMA,
    LATER_CALL_COLUMNS,
    MAX_TOTAL,
    PROVENANCE_CALL_COLUMNS,
    RUN_COLUMNS,
    RUNS_FILE,
    RUNS_SCHEMA,
    SOURCES,
    SUBAGENT_CALL_COLUMNS,
    TOKEN_COLUMNS,
)
from sim.traces.reading import check_table, check_values, total_wrong
from sim.traces.writer import TraceWriter

BATCH_CALLS = 50_000
"""Calls read at a time when this process reads a folder itself."""

GROUP_CALLS = 4 * BATCH_CALLS
"""The largest row group sent to a worker whole: a folder with larger ones is
read in batches by this process (a worker would hold a row group at a time)."""

_LATER = LATER_CALL_COLUMNS | SUBAGENT_CALL_COLUMNS | PROVENANCE_CALL_COLUMNS


class Restart(Exception):
    """The folder ``folder`` must be read whole; what was written of it is void."""

    def __init__(self, folder: str, why: str) -> None:
        super().__init__(f"{folder}: {why}")
        self.folder = folder
        self.why = why


class Scheduler(Protocol):
    """What the import needs of a scheduler of :mod:`sim.sweeps.schedulers`."""

    def run(self, work: Callable[..., Any], jobs: Sequence[tuple]
            ) -> Iterator[tuple[int, Any]]: ...


def stream_folder(folder: Path, fits: Callable[[pa.Table], bool],
                  add: Callable[[pa.Table, Iterator[pa.Table]], None],
                  scheduler: Scheduler | None = None) -> pa.Table | None:
    """Stream the trace folder ``folder``: its checked runs table (the model's
    columns) goes with an iterator of its checked calls slices to ``add``;
    returns the runs table. None (nothing added) when the runs cannot pass
    through as columns, or ``fits(runs)`` says no, or the folder is not
    readable as a whole (the caller's whole read reports it). Raises
    :class:`Restart` when a problem shows only after calls were added."""
    try:
        runs = checked_runs(folder)
        calls = pq.ParquetFile(folder / CALLS_FILE)
    except (InputError, OSError, pa.ArrowException):
        return None
    if runs is None or not fits(runs):
        return None
    steps = runs.column("steps").to_numpy().astype(np.int64, copy=False)
    add(runs, call_slices(folder, calls, runs, steps, scheduler))
    return runs


def checked_runs(folder: Path) -> pa.Table | None:
    """runs.parquet checked alone (None when it must go the whole way); read
    in batches, which holds less memory than a whole read."""
    batches = pq.ParquetFile(folder / RUNS_FILE).iter_batches(batch_size=8192,
                                                               use_threads=False)
    runs = check_table(pa.Table.from_batches(list(batches)), RUNS_SCHEMA, folder / RUNS_FILE)
    runs = runs.select(list(RUN_COLUMNS))
    check_values(runs, CALLS_SCHEMA.empty_table(), folder)
    source = runs.column("source")
    if not pc.all(pc.is_in(source, pa.array(SOURCES))).as_py() or pc.any(pc.and_(
            pc.equal(source, "mini-swe-agent"),
            pc.is_null(runs.column("resolved")))).as_py():
        return None
    ids = runs.column("run_id")
    ordered = ids.take(pc.sort_indices(ids))  # a sort: far less memory than a hash table
    if len(ordered) > 1 and pc.any(pc.equal(ordered[1:], ordered[:-1])).as_py():
        return None
    if runs.num_rows and pc.min(runs.column("steps")).as_py() < 0:
        return None
    return runs


def call_slices(folder: Path, calls: pq.ParquetFile, runs: pa.Table, steps: np.ndarray,
            scheduler: Scheduler | None) -> Iterator[pa.Table]:
    """The checked calls, in order; the token sums checked at the end."""
    ends = np.cumsum(steps)
    sums = {name: np.zeros(runs.num_rows, dtype=np.int64) for name in TOKEN_COLUMNS}
    unknown = {name: np.zeros(runs.num_rows, dtype=bool) for name in TOKEN_COLUMNS}
    totals = dict.fromkeys(TOKEN_COLUMNS, 0.0)
    row = 0
    for table, first, partial in _checked(folder, calls, runs.column("run_id"), ends,
                                          scheduler):
        if first != row:  # pragma: no cover - the slices come in order
            raise Restart(str(folder), "calls out of order")
        row += table.num_rows
        for name, (codes, values, missing) in partial.items():
            sums[name][codes] += values
            unknown[name][codes] |= missing
            totals[name] += float(values.sum(dtype=np.float64))
        yield table
    if any(total > MAX_TOTAL for total in totals.values()):
        raise Restart(str(folder), "a token column's total is too large")
    if row != (int(ends[-1]) if len(ends) else 0):
        raise Restart(str(folder), "the runs' steps do not count the calls")
    for name in TOKEN_COLUMNS:
        if total_wrong(runs.column(name).to_numpy(), sums[name], unknown[name]).any():
            raise Restart(str(folder), f"{name}: a run's total is not the sum of its calls")


def _checked(folder: Path, calls: pq.ParquetFile, run_ids: Any, ends: np.ndarray,
             scheduler: Scheduler | None) -> Iterator[tuple[pa.Table, int, dict]]:
    """``(slice, its first row, its token sums by run)`` for every slice, in order."""
    groups = calls.metadata.num_row_groups
    largest = max((calls.metadata.row_group(g).num_rows for g in range(groups)), default=0)
    if scheduler is None or groups < 2 or largest > GROUP_CALLS:
        row = 0
        for batch in calls.iter_batches(batch_size=BATCH_CALLS, use_threads=False):
            yield check_slice(folder, pa.Table.from_batches([batch]), row, run_ids, ends)
            row += batch.num_rows
        return
    starts = np.concatenate(([0], np.cumsum([calls.metadata.row_group(g).num_rows
                                             for g in range(groups)])))
    jobs = [(str(folder), g, int(starts[g])) for g in range(groups)]
    yield from in_order(scheduler.run(checked_group, jobs))


def checked_group(folder: str, group: int, first: int) -> tuple[pa.Table, int, dict]:
    """In a worker: row group ``group`` of the folder's calls (its rows from
    ``first``), checked (:func:`check_slice`)."""
    path = Path(folder)
    run_ids, ends = _run_index(folder)
    table = pq.ParquetFile(path / CALLS_FILE).read_row_group(group)
    return check_slice(path, table, first, run_ids, ends)


@lru_cache(maxsize=2)
def _run_index(folder: str) -> tuple[Any, np.ndarray]:
    """A worker's copy of the folder's run ids and the end row of each run's calls."""
    runs = pq.read_table(Path(folder) / RUNS_FILE, columns=["run_id", "steps"])
    steps = runs.column("steps").to_numpy().astype(np.int64, copy=False)
    return runs.column("run_id"), np.cumsum(steps)


def checked_calls(table: pa.Table, path: Path) -> pa.Table:
    """A slice of ``calls.parquet`` (at ``path``) with the model's columns
    typed (an InputError otherwise) and first; a column added later that an
    older folder lacks is added, all null."""
    return check_table(table, CALLS_SCHEMA, path, _LATER)


def check_slice(folder: Path, table: pa.Table, first: int, run_ids: Any, ends: np.ndarray
                ) -> tuple[pa.Table, int, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Calls ``first..first+len(table)`` of the folder checked: the model's
    columns with their types and values in bounds, each call the one the
    runs' order puts there (run and number), and no tool call without a
    name. Returns the slice (the model's columns), ``first`` and, per token
    column, the runs it touches and its sums of their calls. :class:`Restart`
    when any check fails."""
    try:
        table = checked_calls(table, folder / CALLS_FILE)
        table = table.select(list(CALL_COLUMNS))
        check_values(RUNS_SCHEMA.empty_table(), table, folder)
        provenance.check(table, folder / CALLS_FILE)
    except InputError as error:
        raise Restart(str(folder), error.message) from None
    rows = np.arange(first, first + table.num_rows, dtype=np.int64)
    codes = np.searchsorted(ends, rows, side="right")
    if table.num_rows and codes[-1] >= len(ends):
        raise Restart(str(folder), "more calls than the runs' steps")
    starts = ends - np.diff(ends, prepend=0)
    numbers = table.column("call").to_numpy()
    if not np.array_equal(numbers, rows - starts[codes]):
        raise Restart(str(folder), "calls not numbered in the runs' order")
    if table.num_rows and not pc.all(pc.equal(table.column("run_id"),
                                              run_ids.take(pa.array(codes)))).as_py():
        raise Restart(str(folder), "calls not grouped by run in the runs' order")
    tools = pc.list_flatten(table.column("tool_calls"))
    if pc.struct_field(tools, "name").null_count:
        raise Restart(str(folder), "a tool call without a name")
    partial = {}
    if table.num_rows:
        bounds = np.flatnonzero(np.diff(codes, prepend=-1))
        touched = codes[bounds]
        for name in TOKEN_COLUMNS:
            column = table.column(name)
            missing = (pc.is_null(column).to_numpy(zero_copy_only=False) if column.null_count
                       else np.zeros(table.num_rows, dtype=bool))
            values = pc.fill_null(column, 0).to_numpy().astype(np.int64, copy=False)
            partial[name] = (touched, np.add.reduceat(values, bounds),
                             np.add.reduceat(missing, bounds) > 0)
    return table, first, partial


def add_folder(path: Path, writer: TraceWriter, report: ImportReport,
               first_file: dict[str, str], whole: bool = True,
               scheduler: Scheduler | None = None) -> bool:
    """Add a trace folder's runs as Arrow columns, straight through (the same
    rows as one by one, far faster): streamed (:mod:`sim.traces.streaming`,
    its row groups read on ``scheduler``'s workers when given), or read
    ``whole`` at once; False when they must go one by one (a run_id already
    imported, a folder total too large, or runs
    :func:`~sim.traces.folder.tables` leaves to the records)."""
    if whole:
        found = trace_folder.tables(path)
        if found is None or not writer.tables_fit(found[0]):
            return False
        runs, calls = found
        writer.add_tables(runs, calls)
        calls_count = calls.num_rows
    else:
        streamed = stream_folder(path, writer.tables_fit, writer.add_stream, scheduler)
        if streamed is None:
            return add_folder(path, writer, report, first_file)
        runs, calls_count = streamed, int(pc.sum(streamed.column("steps")).as_py() or 0)
    files = runs.column("file").combine_chunks().dictionary_encode()
    names = files.dictionary.to_pylist()  # one string per file, shared by its runs
    first_file.update(zip(runs.column("run_id").to_pylist(),
                          map(names.__getitem__, files.indices.to_numpy()), strict=True))
    report.runs += runs.num_rows
    report.calls += calls_count
    report.runs_by_source.update(_counts(runs.column("source")))
    for name, n in _counts(runs.column("file")).items():
        report.run_files[name] = report.run_files.get(name, 0) + n
    return True


def _counts(column: Any) -> dict[str, int]:
    """``Counter(column)`` without a Python object per row: each value's count,
    in the order values first appear."""
    counts = pc.value_counts(column)
    return dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(),
                    strict=True))
