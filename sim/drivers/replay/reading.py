"""The one reader of recorded runs: a trace folder opened once, checked, and
its runs built as the trace model's own :class:`~sim.traces.model.RunRecord`
records a row range at a time, their calls its
:class:`~sim.traces.model.CallRecord` (what every importer writes). Replay,
calibration (the ladder's held-out runs) and tune all read recorded runs
here; the checks are the trace model's (:func:`sim.traces.reading.load_tables`,
or the same checks a batch at a time: :mod:`sim.traces.streaming`), so a bad
folder is refused with one message whichever command reads it.

Two ways to hold a folder, one set of records:

- **whole** (:class:`TraceTables`, :func:`folder_tables`): the folder read
  and checked once, kept as Arrow columns (a forked worker shares them), the
  records of runs ``start`` to ``stop - 1`` built when a chunk needs them
  (:meth:`TraceTables.recorded`); runs with a call of unknown usage are left
  out and counted (:func:`without_unknown_usage`);
- **streamed** (:class:`FolderIndex`, :func:`folder_index`,
  :func:`streamed_runs`): for a folder whose calls come in its runs' order
  (what sim and ``traces import`` write). The parent checks ``calls.parquet``
  a batch at a time (:func:`sim.traces.streaming.call_slices`: types,
  required values, bounds, every call the one the runs' order puts there,
  numbered ``0..steps-1``, each run's token sums; and the calls' ``purpose``)
  and keeps only what the replay reports folder-wide; a worker reads the calls
  of its runs ``start`` to ``stop - 1`` itself, rows ``ends[start - 1]`` to
  ``ends[stop - 1] - 1``, a row group at a time (the last two kept, since
  consecutive chunks share them). So no process holds more than a chunk's
  runs, a row group of calls and the runs table's few columns.

:func:`open_folder` chooses: streamed when :func:`folder_index` accepts the
folder, else whole (which refuses bad input with its message or reads the
folder as before), so the records never depend on how the folder was read.
Either way a folder's prices are :func:`~sim.drivers.replay.pricing.price_models`
of its records, read :data:`PRICING_CHUNK` runs at a time (:func:`every_run`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sim.bad_input import InputError
from sim.drivers.replay.pricing import ModelPricing, price_models
from sim.harness.messages import Usage
from sim.harness.params import HarnessParams, Prices
from sim.traces.model import CallRecord, RunRecord, ToolCallRecord
from sim.traces.reading import check_purposes, load_tables
from sim.traces.schema import CALLS_FILE, CALLS_SCHEMA, RUNS_FILE, TOKEN_COLUMNS
from sim.traces.streaming import Restart, call_slices, checked_calls, checked_runs

_CALL_COLUMNS = ("call", "model", "input_tokens", "cache_read_tokens", "cache_write_tokens",
                 "output_tokens", "reasoning_tokens", "cost_usd", "finish_reason", "latency_s",
                 "text_tokens", "observation_tokens", "text_sha256", "observation_sha256",
                 "purpose", "agent")
_TOOL_FIELDS = ("name", "arguments", "result_tokens", "result_sha256", "error", "duration_s")
_RUN_COLUMNS = ("run_id", "source", "task_id", "model", "exit", "resolved", "cost_usd", "steps")


# ------------------------------------------------------------ the records
def recorded_calls(part: pa.Table) -> list[CallRecord]:
    """The :class:`~sim.traces.model.CallRecord` of every row of ``part``
    (calls, in order), each value as the table holds it."""
    c = {name: part.column(name).to_pylist() for name in _CALL_COLUMNS}
    tools = part.column("tool_calls").combine_chunks()
    ends = tools.offsets.to_numpy().tolist()
    flat = tools.flatten()
    t = {name: flat.field(name).to_pylist() for name in _TOOL_FIELDS}
    made = [ToolCallRecord(name=t["name"][j], arguments=t["arguments"][j],
                           result_tokens=t["result_tokens"][j],
                           result_sha256=t["result_sha256"][j], error=t["error"][j],
                           duration_s=t["duration_s"][j]) for j in range(len(flat))]
    out = []
    for i in range(part.num_rows):
        out.append(CallRecord(
            usage=Usage(c["input_tokens"][i], c["output_tokens"][i], c["cache_read_tokens"][i],
                        c["cache_write_tokens"][i], c["reasoning_tokens"][i]),
            model=c["model"][i], cost_usd=c["cost_usd"][i], finish_reason=c["finish_reason"][i],
            latency_s=c["latency_s"][i], text_tokens=c["text_tokens"][i],
            tool_calls=made[ends[i]:ends[i + 1]],
            observation_tokens=c["observation_tokens"][i], purpose=c["purpose"][i],
            text_sha256=c["text_sha256"][i], observation_sha256=c["observation_sha256"][i],
            agent=c["agent"][i]))
    return out


def call_columns(calls: pa.Table) -> pa.Table:
    """The columns of ``calls`` a replay reads."""
    return calls.select(["run_id", *_CALL_COLUMNS, "tool_calls"])


# ------------------------------------------------------------ held whole
@dataclass(frozen=True)
class TraceTables:
    """The checked tables of one trace folder (``source``): ``runs`` in file
    order, ``calls`` as written, ``order`` the calls' rows sorted by run then
    call number, and ``offsets`` (length runs + 1): run i's calls are
    ``order[offsets[i]:offsets[i + 1]]``."""

    runs: pa.Table
    calls: pa.Table
    order: np.ndarray
    offsets: np.ndarray
    source: str
    refused: dict[str, int] = field(default_factory=dict)
    """Runs of the folder left out, by reason (:func:`without_unknown_usage`):
    the recording cannot answer a request with a usage it did not record."""

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> TraceTables:
        """Read and check ``folder`` (an :class:`InputError` naming the file,
        the column and the run for anything wrong)."""
        runs, calls = load_tables(folder)
        source = os.fspath(folder)
        check_purposes(calls, source)
        runs, calls, refused = without_unknown_usage(runs, calls)
        return cls.indexed(runs, calls, source, refused)

    @classmethod
    def indexed(cls, runs: pa.Table, calls: pa.Table, source: str,
                refused: dict[str, int] | None = None) -> TraceTables:
        """The tables of ``runs`` and their ``calls`` (checked), indexed."""
        codes = pc.index_in(calls.column("run_id"), value_set=runs.column("run_id"))
        code = codes.to_numpy(zero_copy_only=False).astype(np.int64)
        number = calls.column("call").to_numpy().astype(np.int64)
        order = np.lexsort((number, code))
        counts = np.bincount(code, minlength=runs.num_rows)
        offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        return cls(runs, call_columns(calls), order, offsets, source, refused or {})

    def __len__(self) -> int:
        return self.runs.num_rows

    def only(self, run_ids: Iterable[str]) -> TraceTables:
        """These tables with the runs ``run_ids`` only (in this object's order)."""
        keep = pa.array(list(run_ids), pa.string())
        runs = self.runs.filter(pc.is_in(self.runs.column("run_id"), value_set=keep))
        calls = self.calls.filter(pc.is_in(self.calls.column("run_id"), value_set=keep))
        return TraceTables.indexed(runs, calls, self.source, self.refused)

    @property
    def tool_calls(self) -> int:
        """Tool calls over all recorded calls."""
        return int(pc.sum(pc.list_value_length(self.calls.column("tool_calls"))).as_py() or 0)

    @property
    def text_hashes(self) -> bool:
        """Whether any call records a (non-empty) hash of its text."""
        return _hashed(self.calls)

    def pricing(self, template: HarnessParams,
                prices_for: Callable[[str | None], Prices | None] | None) -> ModelPricing:
        """:func:`~sim.drivers.replay.pricing.price_models` of every run."""
        return price_models(every_run(self), template, prices_for)

    def recorded(self, start: int, stop: int) -> list[RunRecord]:
        """The recorded runs ``start`` to ``stop - 1``, each with its calls in order."""
        rows = self.order[self.offsets[start]:self.offsets[stop]]
        part = self.calls.take(pa.array(rows))
        calls = recorded_calls(part)
        head = self.runs.slice(start, stop - start)
        ids = head.column("run_id").to_pylist()
        source, task, model, exit_, resolved, cost = (head.column(n).to_pylist() for n in (
            "source", "task_id", "model", "exit", "resolved", "cost_usd"))
        bounds = (self.offsets[start:stop + 1] - self.offsets[start]).tolist()
        return [RunRecord(run_id=str(ids[i]), source=source[i] or "", file="",
                          calls=calls[bounds[i]:bounds[i + 1]], task_id=task[i],
                          model=model[i], cost_usd=cost[i], exit=exit_[i],
                          resolved=resolved[i])
                for i in range(stop - start)]


USAGE_ABSENT = "per-call usage absent"
TOTALS_ONLY = "per-call usage absent (run totals only)"
SOME_UNKNOWN = "usage unknown for some calls"
"""Why a run is not replayed: none of its calls records usage (and the run
records no totals, or only run totals), or some do not."""


def read_trace_folder(folder: str | os.PathLike) -> list[RunRecord]:
    """The runs of a trace folder, in the order of ``runs.parquet``, read and
    checked by :meth:`TraceTables.load` (a missing folder or file, a file
    that is not Parquet, a missing column or a bad value is an
    :class:`InputError` naming the file); runs with a call whose usage is
    unknown are left out (``TraceTables.refused`` counts them)."""
    tables = TraceTables.load(folder)
    return tables.recorded(0, len(tables))


def without_unknown_usage(runs: pa.Table, calls: pa.Table
                          ) -> tuple[pa.Table, pa.Table, dict[str, int]]:
    """``(runs, calls, refused)``: the runs whose calls all record their
    usage (no null token count) and their calls, and the others counted by
    reason (:data:`USAGE_ABSENT`, :data:`TOTALS_ONLY`, :data:`SOME_UNKNOWN`)."""
    missing = None
    for name in TOKEN_COLUMNS:
        null = pc.is_null(calls.column(name))
        missing = null if missing is None else pc.or_(missing, null)
    if missing is None or not pc.any(missing).as_py():
        return runs, calls, {}
    counted = pc.value_counts(pc.filter(calls.column("run_id"), missing))
    unknown = dict(zip(counted.field("values").to_pylist(),
                       counted.field("counts").to_pylist(), strict=True))
    bad = pa.array(list(unknown), pa.string())
    ids, steps = runs.column("run_id").to_pylist(), runs.column("steps").to_pylist()
    totals = np.zeros(runs.num_rows, dtype=np.int64)
    for name in TOKEN_COLUMNS:
        totals += runs.column(name).to_numpy().astype(np.int64, copy=False)
    refused: dict[str, int] = {}
    for run, step, total in zip(ids, steps, totals.tolist(), strict=True):
        if run in unknown:
            why = (SOME_UNKNOWN if unknown[run] < step else TOTALS_ONLY if total
                   else USAGE_ABSENT)
            refused[why] = refused.get(why, 0) + 1
    runs = runs.filter(pc.invert(pc.is_in(runs.column("run_id"), value_set=bad)))
    calls = calls.filter(pc.invert(pc.is_in(calls.column("run_id"), value_set=bad)))
    return runs, calls, dict(sorted(refused.items(), key=lambda kv: (-kv[1], kv[0])))


def refused_note(refused: dict[str, int]) -> str | None:
    """The line that says which runs were not replayed, by reason (None: none)."""
    if not refused:
        return None
    n = sum(refused.values())
    reasons = ", ".join(f"{k:,} {why}" for why, k in refused.items())
    return (f"warning: {n:,} run{'' if n == 1 else 's'} not replayed: {reasons} "
            "(a replay answers each request with the call's recorded usage)")


def _stamp(folder: str) -> tuple[int, ...]:
    """Size and modification time of the folder's two files."""
    return tuple(n for name in (RUNS_FILE, CALLS_FILE)
                 for s in [os.stat(os.path.join(folder, name))]
                 for n in (s.st_size, s.st_mtime_ns))


_READ: dict[str, tuple[tuple[int, ...], TraceTables]] = {}
"""The trace folder this process read whole last, with the sizes and times of
its two files: a forked worker inherits it, so a chunk's runs are not sent to it."""


def folder_tables(folder: str) -> TraceTables:
    """The checked tables of the trace folder ``folder``
    (:meth:`TraceTables.load`), read once per process while its files stay
    the same (size and modification time of ``runs.parquet`` and
    ``calls.parquet``)."""
    try:
        stamp = _stamp(folder)
    except OSError:  # no such folder or file: the reader says so
        return TraceTables.load(folder)
    kept = _READ.get(folder)
    if kept is not None and kept[0] == stamp:
        return kept[1]
    tables = TraceTables.load(folder)
    _READ.clear()  # one folder at a time: memory stays that of one read
    _READ[folder] = (stamp, tables)
    return tables


# ------------------------------------------------------------ streamed
@dataclass(frozen=True)
class FolderIndex:
    """What a streamed replay holds of a checked trace folder ``source``:
    ``runs`` (their count), ``tool_calls`` over all calls and ``text_hashes``
    (whether any call records a non-empty hash of its text)."""

    source: str
    runs: int
    tool_calls: int
    text_hashes: bool
    refused: dict[str, int] = field(default_factory=dict)
    """Always empty: a folder with a call of unknown usage is read whole."""

    def __len__(self) -> int:
        return self.runs

    def pricing(self, template: HarnessParams,
                prices_for: Callable[[str | None], Prices | None] | None) -> ModelPricing:
        """:func:`~sim.drivers.replay.pricing.price_models` of every run."""
        return price_models(every_run(self), template, prices_for)

    def recorded(self, start: int, stop: int) -> list[RunRecord]:
        """The recorded runs ``start`` to ``stop - 1`` (:func:`streamed_runs`)."""
        return streamed_runs(self.source, start, stop)


def folder_index(folder: str) -> FolderIndex | None:
    """The :class:`FolderIndex` of the trace folder ``folder``, checked a
    batch of calls at a time; None when it must be read whole (missing or
    unreadable files, calls not in the runs' order, a call of unknown usage,
    a value the whole read refuses). A ``purpose`` outside
    :data:`~sim.traces.model.PURPOSES` is an InputError naming the run and
    call (:func:`~sim.traces.reading.check_purposes`)."""
    path = Path(folder)
    try:
        runs = checked_runs(path)
        calls = pq.ParquetFile(path / CALLS_FILE)
    except (InputError, OSError, pa.ArrowException, ValueError):  # ValueError: no row batch
        return None
    if runs is None:
        return None
    steps = runs.column("steps").to_numpy().astype(np.int64, copy=False)
    tools, hashes = 0, False
    try:
        for table in call_slices(path, calls, runs, steps, None):
            if any(table.column(name).null_count for name in TOKEN_COLUMNS):
                return None  # unknown usage: read whole, its runs left out (TraceTables)
            check_purposes(table, folder)
            tools += int(pc.sum(pc.list_value_length(table.column("tool_calls"))).as_py() or 0)
            hashes = hashes or _hashed(table)
    except Restart:
        return None
    finally:
        pa.default_memory_pool().release_unused()  # the batches' memory, back to the system
    return FolderIndex(folder, runs.num_rows, tools, hashes)


def _hashed(calls: pa.Table) -> bool:
    hashes = pc.drop_null(calls.column("text_sha256"))
    return bool(len(hashes)) and bool(pc.any(pc.greater(pc.utf8_length(hashes), 0)).as_py())


def streamed_runs(folder: str, start: int, stop: int) -> list[RunRecord]:
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


# ------------------------------------------------------------ either way
PRICING_CHUNK = 4096
"""Runs read at a time when a folder's runs are priced (:func:`every_run`)."""


def every_run(folder: TraceTables | FolderIndex) -> Iterator[RunRecord]:
    """Every recorded run of ``folder``, in order, read :data:`PRICING_CHUNK`
    runs at a time (so a streamed folder is never held whole)."""
    for start in range(0, len(folder), PRICING_CHUNK):
        yield from folder.recorded(start, min(start + PRICING_CHUNK, len(folder)))


def open_folder(folder: str) -> TraceTables | FolderIndex:
    """The trace folder ``folder`` opened for a replay: streamed
    (:func:`folder_index`) when its calls come in its runs' order and pass
    the checks a batch at a time, else read whole (:func:`folder_tables`,
    an :class:`InputError` for anything wrong)."""
    index = folder_index(folder)
    return folder_tables(folder) if index is None else index


def runs_of(folder: str, start: int, stop: int, streamed: bool) -> list[RunRecord]:
    """The recorded runs ``start`` to ``stop - 1`` of the folder
    :func:`open_folder` opened (``streamed``: as a :class:`FolderIndex`, the
    calls read here by row range; else from the whole read this process
    keeps or makes)."""
    return (streamed_runs(folder, start, stop) if streamed
            else folder_tables(folder).recorded(start, stop))


def forget() -> None:
    """Drop what this process keeps of the folders it read (the whole read,
    the row groups and runs of a streamed one): their Arrow tables are freed
    now, not at interpreter exit (where pyarrow may abort tearing down its
    thread pools: apache/arrow#34314)."""
    _READ.clear()
    _GROUPS.clear()
    _run_index.cache_clear()
