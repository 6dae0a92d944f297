"""A trace folder replayed without holding it whole: :func:`folder_index` in
the parent, :func:`streamed_runs` in each worker.

The parent reads ``runs.parquet`` and passes over ``calls.parquet`` a batch
at a time (:func:`sim.traces.streaming.stream_folder`'s checks: types,
required values, bounds, every call the one the runs' order puts there,
numbered ``0..steps-1``, each run's token sums; and the calls' ``purpose``),
keeping only what the replay reports folder-wide (:class:`FolderIndex`: the
run count, tool calls, whether text hashes are recorded, the call-level
models in order of first appearance). A worker then reads the calls of its
chunk of runs ``start`` to ``stop - 1`` itself: they are rows
``ends[start - 1]`` to ``ends[stop - 1] - 1`` of ``calls.parquet``, read a
row group at a time (the last two kept, since consecutive chunks share
them). So no process holds more than a chunk's runs, a row group of calls
and the runs table's few columns, whatever the folder's size.

A folder whose calls do not come in the runs' order (or that fails a check)
gets None from :func:`folder_index`: the caller reads it whole
(:class:`~sim.drivers.replay.tables.TraceTables`), which refuses bad input
with its message or replays it as before, so the rows never depend on how
the folder was read.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sim.bad_input import InputError
from sim.drivers.recorded_runs import RecordedCall, RecordedRun
from sim.drivers.replay.pricing import ModelPricing, models_pricing
from sim.drivers.replay.tables import (
    TraceTables,
    call_columns,
    check_purposes,
    named,
    recorded_calls,
)
from sim.harness.params import HarnessParams, Prices
from sim.traces.schema import CALLS_FILE, CALLS_SCHEMA, RUNS_FILE, TOKEN_COLUMNS
from sim.traces.streaming import Restart, call_slices, checked_calls, checked_runs

_RUN_COLUMNS = ("run_id", "source", "task_id", "model", "exit", "resolved", "cost_usd", "steps")


@dataclass(frozen=True)
class FolderIndex:
    """What a streamed replay holds of a checked trace folder ``source``:
    ``runs`` (their count), ``tool_calls`` over all calls, ``text_hashes``
    (whether any call records a non-empty hash of its text) and ``models``:
    each call's model (its own, else its run's; None: neither names one) in
    order of first appearance."""

    source: str
    runs: int
    tool_calls: int
    text_hashes: bool
    models: tuple[str | None, ...]

    def __len__(self) -> int:
        return self.runs

    def pricing(self, template: HarnessParams,
                prices_for: Callable[[str | None], Prices | None] | None) -> ModelPricing:
        """:func:`~sim.drivers.replay.pricing.price_models` of every run (a
        call naming no model is the template's), the calls of a model the
        catalogue does not know read again for their recorded costs."""
        names = list(dict.fromkeys(m or template.model for m in self.models))
        return models_pricing(names, lambda name: _costed(self.source, name, template.model),
                              template, prices_for)


def folder_index(folder: str) -> FolderIndex | None:
    """The :class:`FolderIndex` of the trace folder ``folder``, checked a
    batch of calls at a time; None when it must be read whole (missing or
    unreadable files, calls not in the runs' order, a value the whole read
    refuses). A ``purpose`` outside :data:`~sim.drivers.recorded_runs.PURPOSES`
    is an InputError naming the run and call."""
    path = Path(folder)
    try:
        runs = checked_runs(path)
        calls = pq.ParquetFile(path / CALLS_FILE)
    except (InputError, OSError, pa.ArrowException):
        return None
    if runs is None:
        return None
    steps = runs.column("steps").to_numpy().astype(np.int64, copy=False)
    ends = np.cumsum(steps)
    run_models = named(runs.column("model"))
    tools, hashes, row = 0, False, 0
    models: dict[str | None, None] = {}
    try:
        for table in call_slices(path, calls, runs, steps, None):
            if any(table.column(name).null_count for name in TOKEN_COLUMNS):
                return None  # unknown usage: read whole, its runs left out (TraceTables)
            check_purposes(table, folder)
            tools += int(pc.sum(pc.list_value_length(table.column("tool_calls"))).as_py() or 0)
            hashes = hashes or _hashed(table)
            codes = np.searchsorted(ends, np.arange(row, row + table.num_rows), side="right")
            own = pc.coalesce(named(table.column("model")), run_models.take(pa.array(codes)))
            models.update(dict.fromkeys(pc.unique(own).to_pylist()))
            row += table.num_rows
    except Restart:
        return None
    finally:
        pa.default_memory_pool().release_unused()  # the batches' memory, back to the system
    return FolderIndex(folder, runs.num_rows, tools, hashes, tuple(models))


def _hashed(calls: pa.Table) -> bool:
    hashes = pc.drop_null(calls.column("text_sha256"))
    return bool(len(hashes)) and bool(pc.any(pc.greater(pc.utf8_length(hashes), 0)).as_py())


def _costed(folder: str, name: str, default: str) -> list[RecordedCall]:
    """The calls of ``folder`` answered by ``name`` (their own model, else
    their run's, else ``default``) that record a cost, in order: read again a
    batch at a time (asked only for a model the catalogue does not know)."""
    runs, ends = _run_index(folder, _stamp(folder))
    run_models = named(runs.column("model"))
    out: list[RecordedCall] = []
    row = 0
    for batch in pq.ParquetFile(Path(folder) / CALLS_FILE).iter_batches(
            batch_size=50_000, use_threads=False):
        table = _calls_table(pa.Table.from_batches([batch]), folder)
        codes = np.searchsorted(ends, np.arange(row, row + table.num_rows), side="right")
        models = pc.coalesce(named(table.column("model")), run_models.take(pa.array(codes)),
                             pa.scalar(default))
        mask = pc.and_(pc.equal(models, name), pc.is_valid(table.column("cost_usd")))
        out += recorded_calls(table.filter(mask))
        row += table.num_rows
    return out


# ------------------------------------------------------------ in a worker
def streamed_runs(folder: str, start: int, stop: int) -> list[RecordedRun]:
    """The recorded runs ``start`` to ``stop - 1`` of a folder
    :func:`folder_index` accepted, read from its files here (the runs'
    columns once per process, the calls of these runs by row range)."""
    runs, ends = _run_index(folder, _stamp(folder))
    first = int(ends[start - 1]) if start else 0
    last = int(ends[stop - 1]) if stop > start else first
    calls = _call_rows(folder, first, last)
    offsets = np.concatenate(([0], ends[start:stop] - first)).astype(np.int64)
    tables = TraceTables(runs.slice(start, stop - start), calls,
                         np.arange(last - first, dtype=np.int64), offsets, folder)
    return tables.recorded(0, stop - start)


def _stamp(folder: str) -> tuple[int, ...]:
    """Size and modification time of the folder's two files."""
    return tuple(n for name in (RUNS_FILE, CALLS_FILE)
                 for s in [os.stat(os.path.join(folder, name))]
                 for n in (s.st_size, s.st_mtime_ns))


@lru_cache(maxsize=2)
def _run_index(folder: str, stamp: tuple[int, ...]) -> tuple[pa.Table, np.ndarray]:
    """The runs' columns a replay reads, and the end row of each run's calls."""
    runs = pq.read_table(Path(folder) / RUNS_FILE, columns=list(_RUN_COLUMNS))
    steps = runs.column("steps").to_numpy().astype(np.int64, copy=False)
    return runs, np.cumsum(steps)


_GROUPS: dict[tuple[str, tuple[int, ...], int], pa.Table] = {}
"""The row groups of calls this process read last (at most two)."""


def _call_rows(folder: str, first: int, last: int) -> pa.Table:
    """Rows ``first`` to ``last - 1`` of the folder's calls (the columns a
    replay reads), from the row groups that hold them."""
    stamp = _stamp(folder)
    file = pq.ParquetFile(Path(folder) / CALLS_FILE)
    sizes = [file.metadata.row_group(g).num_rows for g in range(file.metadata.num_row_groups)]
    starts = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    parts = []
    for g in range(len(sizes)):
        low, high = max(first, int(starts[g])), min(last, int(starts[g + 1]))
        if low >= high:
            continue
        key = (folder, stamp, g)
        group = _GROUPS.get(key)
        if group is None:
            group = _calls_table(file.read_row_group(g, use_threads=False), folder)
            while len(_GROUPS) >= 2:
                del _GROUPS[next(iter(_GROUPS))]
            _GROUPS[key] = group
        parts.append(group.slice(low - int(starts[g]), high - low))
    if not parts:
        return _calls_table(CALLS_SCHEMA.empty_table(), folder)
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def _calls_table(table: pa.Table, folder: str) -> pa.Table:
    """The columns a replay reads of a slice of calls (a later column a folder
    lacks added, all null)."""
    return call_columns(checked_calls(table, Path(folder) / CALLS_FILE))


def forget_groups() -> None:
    """Drop the row groups and runs this process keeps."""
    _GROUPS.clear()
    _run_index.cache_clear()

