"""Writing trace tables: run records in, ``runs.parquet`` and ``calls.parquet`` out.

:class:`TraceWriter` takes :class:`~sim.traces.model.RunRecord` objects one at
a time: each run's calls go straight into ``calls.parquet`` in row groups (so a
long import never holds every call in memory), while the run rows, one small
tuple per run, are kept until :meth:`TraceWriter.close` writes
``runs.parquet`` (an importer may still fill in a run's ``resolved`` from a
report it meets later). A run's ``steps`` and token sums are computed here from
its calls, so the two tables always agree. Before a run is written, its
impossible values are set to null (:func:`~sim.traces.repairs.repair_run`;
the writer counts them, with the importer's own repairs, in
:attr:`TraceWriter.repairs`), and a run whose token counts are impossible is
refused (:class:`~sim.traces.skips.Unusable`), so the reader accepts whatever
is written.

Files are written into a folder given by the caller; :func:`atomic_folder`
builds a whole trace folder in a temporary folder beside the target and renames
it into place only when everything succeeded, so a failed import writes
nothing. The same records give the same bytes (fixed compression, no metadata).
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sim.bad_input import InputError
from sim.traces.model import (
    CALLS_FILE,
    CALLS_SCHEMA,
    EXACT,
    MAX_COUNT,
    MAX_TOTAL,
    PROVENANCE_FIELDS,
    RUNS_FILE,
    RUNS_SCHEMA,
    SOURCES,
    TOKEN_COLUMNS,
    UNKNOWN,
    USAGE_ATTRIBUTES,
    RunRecord,
)
from sim.traces.provenance import (
    UNKNOWN_CODE,
    add_counts,
    codes_of,
    count,
    default_codes,
    record_codes,
)
from sim.traces.provenance import column as provenance_column
from sim.traces.reading import check_values
from sim.traces.repairs import repair_run
from sim.traces.skips import BAD_COUNT, Unusable
from sim.user_paths import check_path

COMPRESSION = "zstd"
COMPRESSION_LEVEL = 3
ROW_GROUP_CALLS = 50_000
_CALL_FIELDS = tuple(name for name in CALLS_SCHEMA.names
                     if name not in ("run_id", "call", "provenance", *TOKEN_COLUMNS))
_TOKENS = tuple(USAGE_ATTRIBUTES.items())
_TOKEN_GETTERS = tuple((name, attrgetter(attribute)) for name, attribute in _TOKENS)
_CALL_GETTERS = tuple((name, attrgetter(name)) for name in _CALL_FIELDS if name != "tool_calls")
_TOOL_FIELDS = ("id", "name", "arguments", "result_tokens", "result_sha256", "error",
                "duration_s")


class TraceWriter:
    """Streams runs into ``folder/calls.parquet`` and, on :meth:`close`,
    ``folder/runs.parquet``. ``run_id`` must be unique (:meth:`has`)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.runs: list[dict[str, Any]] = []
        """The rows of the runs added one by one since the last table (may be
        updated until :meth:`close`)."""
        self._pieces: list[pa.Table | list[dict[str, Any]]] = []
        self.calls = 0
        self._ids: set[str] = set()
        self._buffer: dict[str, list] = {name: [] for name in CALLS_SCHEMA.names}
        self._writer: pq.ParquetWriter | None = None
        self._calls_path = self.folder / CALLS_FILE
        self._totals = dict.fromkeys(TOKEN_COLUMNS, 0)
        self.repairs: Counter[tuple[str, str]] = Counter()
        """``{(dotted field, reason): count}`` of the values repaired or
        nulled in the runs added (the importer's notes and the writer's own)."""
        self.provenance: dict[str, dict[str, Counter[str]]] = {}
        """``{source: {field: Counter(provenance)}}``: the calls added, by
        their runs' source, counted per figure of :data:`PROVENANCE_FIELDS`
        by how it was obtained (as written: a null figure unknown)."""
        self.conventions: dict[str, dict[str, Counter[str]]] = {}
        """``{source: {what: Counter(how)}}``: the runs added, counted by
        each convention note of theirs (``RunRecord.conventions``)."""

    def has(self, run_id: str) -> bool:
        """Whether a run with this id was added."""
        return run_id in self._ids

    def add(self, run: RunRecord) -> dict[str, Any]:
        """Add one run; returns its row (a dict of runs.parquet's columns),
        which may be updated until :meth:`close`. Unusable (nothing added)
        when its token counts are impossible."""
        if run.run_id in self._ids:
            raise ValueError(f"duplicate run_id {run.run_id!r}")
        repairs = repair_run(run)
        given = run.totals or {}
        sums = {name: sum(getattr(call.usage, attribute) for call in run.calls)
                for name, attribute in _TOKENS}
        for name, total in sums.items():  # the reader refuses a folder total past MAX_TOTAL
            recorded = given.get(name)
            if type(recorded) is int and recorded > total:  # at most what the row holds
                total = min(recorded, MAX_COUNT)
            if self._totals[name] + total > MAX_TOTAL:
                raise Unusable(BAD_COUNT, f"the folder's {name} would total "
                                          f"{self._totals[name] + total:.3g}, "
                                          f"above {MAX_TOTAL:,}")
        row = _add_run(run, self._buffer, checked=True)
        for name in TOKEN_COLUMNS:
            self._totals[name] += row[name]
        self._count(run)
        self.repairs.update(run.repairs)
        self.repairs.update(repairs)
        self._ids.add(run.run_id)
        self.calls += row["steps"]
        if len(self._buffer["run_id"]) >= ROW_GROUP_CALLS:
            self._flush()
        self.runs.append(row)
        return row

    def _count(self, run: RunRecord) -> None:
        """Count ``run``'s calls' provenance and its conventions, by source."""
        counts = self.provenance.setdefault(run.source, {})
        tally = [counts.setdefault(name, Counter()) for name in PROVENANCE_FIELDS]
        calls = run.calls
        if not any(call.provenance for call in calls):
            for name_counts in tally[:_COST]:
                name_counts[EXACT] += len(calls)
            unknown = sum(call.cost_usd is None for call in calls)
            tally[_COST].update({EXACT: len(calls) - unknown, UNKNOWN: unknown})
        else:
            for call in calls:
                listed = call.provenance
                for name, name_counts in zip(PROVENANCE_FIELDS, tally, strict=True):
                    name_counts[UNKNOWN if name == "cost_usd" and call.cost_usd is None
                                else listed.get(name, EXACT)] += 1
        conventions = self.conventions.setdefault(run.source, {})
        for what, how in run.conventions.items():
            conventions.setdefault(what, Counter())[how] += 1

    def _count_tables(self, runs: pa.Table, calls: pa.Table) -> None:
        """Count the provenance of ``calls`` (of the runs ``runs``), by source."""
        sources = runs.column("source")
        names = pc.unique(sources).to_pylist()
        codes = codes_of(calls.column("provenance"))
        if len(names) == 1:
            add_counts(self.provenance.setdefault(names[0], {}), count(codes))
            return
        of_call = pc.take(sources, pc.index_in(calls.column("run_id"), runs.column("run_id")))
        of_call = of_call.to_numpy(zero_copy_only=False)
        for name in names:
            add_counts(self.provenance.setdefault(name, {}), count(codes[:, of_call == name]))

    def add_tables(self, runs: pa.Table, calls: pa.Table) -> None:
        """Add whole runs as Arrow tables of :data:`RUNS_SCHEMA` and
        :data:`CALLS_SCHEMA` (a checked trace folder's, or what a worker
        built): ``calls`` grouped by run in ``runs``' order, each run's calls
        numbered from 0, every value possible and ``run_id`` new to this
        writer (the caller checks all of it, :func:`tables_fit`). The
        same content as adding the runs one by one."""
        ids = runs.column("run_id").to_pylist()
        for name in TOKEN_COLUMNS:
            self._totals[name] += int(pc.sum(runs.column(name)).as_py() or 0)
        self._ids.update(ids)
        self.calls += calls.num_rows
        if self.runs:
            self._pieces.append(self.runs)
            self.runs = []
        self._pieces.append(runs.select(RUNS_SCHEMA.names).cast(RUNS_SCHEMA))
        self._flush()
        self._count_tables(runs, calls)
        self._write_calls(calls.select(CALLS_SCHEMA.names).cast(CALLS_SCHEMA),
                          row_group_size=ROW_GROUP_CALLS)

    def add_stream(self, runs: pa.Table, calls: Iterator[pa.Table]) -> None:
        """:meth:`add_tables` with the calls arriving as consecutive slices
        (any sizes: the row groups written are those of the whole table), so
        that only a row group's worth of calls is held at a time. Should the
        slices stop with an exception, the writer is unusable (the caller
        discards the folder)."""
        for name in TOKEN_COLUMNS:
            self._totals[name] += int(pc.sum(runs.column(name)).as_py() or 0)
        self._ids.update(runs.column("run_id").to_pylist())
        if self.runs:
            self._pieces.append(self.runs)
            self.runs = []
        self._flush()
        held: list[pa.Table] = []
        rows = 0
        for piece in calls:
            self._count_tables(runs, piece)
            held.append(piece.select(CALLS_SCHEMA.names).cast(CALLS_SCHEMA))
            rows += piece.num_rows
            self.calls += piece.num_rows
            if rows >= ROW_GROUP_CALLS:
                table = pa.concat_tables(held)
                whole = rows - rows % ROW_GROUP_CALLS
                self._write_calls(table.slice(0, whole), row_group_size=ROW_GROUP_CALLS)
                held, rows = [table.slice(whole)], rows - whole
        if rows:
            self._write_calls(pa.concat_tables(held), row_group_size=ROW_GROUP_CALLS)
        self._pieces.append(runs.select(RUNS_SCHEMA.names).cast(RUNS_SCHEMA))

    def tables_fit(self, runs: pa.Table) -> bool:
        """Whether ``runs`` (a runs table) can be added as a whole: no run_id
        already added and no folder total past MAX_TOTAL."""
        if any(self.has(i) for i in runs.column("run_id").to_pylist()):
            return False
        return all(self._totals[name] + int(pc.sum(runs.column(name)).as_py() or 0)
                   <= MAX_TOTAL for name in TOKEN_COLUMNS)

    def close(self) -> None:
        """Write what is buffered and ``runs.parquet``; the files are complete."""
        self._flush(final=True)
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        pieces = [piece if isinstance(piece, pa.Table) else
                  _table(lambda rows: pa.Table.from_pylist(rows, schema=RUNS_SCHEMA), piece)
                  for piece in (*self._pieces, self.runs)]
        table = pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]
        pq.write_table(table, self.folder / RUNS_FILE, compression=COMPRESSION,
                       compression_level=COMPRESSION_LEVEL)

    def abort(self) -> None:
        """Close the calls file without finishing (the caller discards the folder)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _flush(self, final: bool = False) -> None:
        buffer = self._buffer
        if not buffer["run_id"] and not (final and self._writer is None):
            return
        table = _table(calls_table, buffer)
        for values in buffer.values():
            values.clear()
        self._write_calls(table, final)

    def _write_calls(self, table: pa.Table, final: bool = False,
                     row_group_size: int | None = None) -> None:
        """Write ``table`` into calls.parquet (opened at the first table)."""
        if not table.num_rows and not (final and self._writer is None):
            return
        if self._writer is None:
            self._writer = pq.ParquetWriter(self._calls_path, CALLS_SCHEMA,
                                            compression=COMPRESSION,
                                            compression_level=COMPRESSION_LEVEL)
        self._writer.write_table(table, row_group_size=row_group_size)


def _add_run(run: RunRecord, buffer: dict[str, list], checked: bool = False
             ) -> dict[str, Any]:
    """Append ``run``'s calls to ``buffer`` (a list per calls.parquet column;
    ``provenance`` a tuple of codes per call that lists any, else None) and
    return its runs.parquet row, with ``steps`` and the token sums computed
    from those calls (:func:`run_totals`; its impossible values nulled first,
    unless ``checked``). A figure whose provenance is unknown is written null."""
    if run.source not in SOURCES:
        raise ValueError(f"unknown source {run.source!r}")
    if not checked:
        repair_run(run)
    if run.totals and not run.totals.keys() <= set(TOKEN_COLUMNS):
        raise ValueError(f"run totals: {sorted(run.totals)} are not all token columns")
    calls = run.calls
    codes = listed_codes(run)
    buffer["run_id"].extend([run.run_id] * len(calls))
    buffer["call"].extend(range(len(calls)))
    usages = [call.usage for call in calls]
    sums: dict[str, int] = {}
    unknown: set[str] = set()
    for field, (name, get) in enumerate(_TOKEN_GETTERS):
        values = list(map(get, usages))
        if codes is not None:
            values = [None if c is not None and c[field] == UNKNOWN_CODE else v
                      for v, c in zip(values, codes, strict=True)]
            if None in values:
                unknown.add(name)
            sums[name] = sum(v for v in values if v is not None)
        else:
            sums[name] = sum(values)
        buffer[name].extend(values)
    for name, get in _CALL_GETTERS:
        values = list(map(get, calls))
        if name == "cost_usd" and codes is not None:
            values = [None if c is not None and c[_COST] == UNKNOWN_CODE else v
                      for v, c in zip(values, codes, strict=True)]
        buffer[name].extend(values)
    buffer["provenance"].extend(codes if codes is not None else [None] * len(calls))
    buffer["tool_calls"].extend([[
        {"id": t.id, "name": t.name, "arguments": t.arguments, "result_tokens": t.result_tokens,
         "result_sha256": t.result_sha256, "error": t.error, "duration_s": t.duration_s}
        for t in call.tool_calls] for call in calls])
    row = {name: getattr(run, name, None) for name in RUNS_SCHEMA.names}
    row.update(run_totals(run, sums, unknown), steps=len(run.calls),
               started_at=_utc(run.started_at))
    return row


_COST = PROVENANCE_FIELDS.index("cost_usd")

TOTAL_IGNORED = "run total disagrees with the calls' counts: the calls' sum kept"
"""Why a run's recorded total (``RunRecord.totals``) was not written: its
calls all record the column (their sum is the total), or it is below the sum
of their known counts or not a count."""


def listed_codes(run: RunRecord) -> list[tuple[int, ...] | None] | None:
    """Each call's listed provenance as codes (None for a call listing none),
    or None when no call of ``run`` lists any (sim's own runs)."""
    if not any(call.provenance for call in run.calls):
        return None
    return [record_codes(call.provenance) if call.provenance else None for call in run.calls]


def run_totals(run: RunRecord, sums: dict[str, int], unknown: set[str]) -> dict[str, int]:
    """The run row's token columns: the sums of its calls' known counts
    (``sums``), except a column some call does not know (``unknown``) for
    which the source records a run total (``run.totals``) of at least that
    sum. A recorded total that cannot be used is noted in ``run.repairs``
    (:data:`TOTAL_IGNORED`)."""
    if not run.totals:
        return sums
    out = dict(sums)
    for name, given in run.totals.items():
        usable = (type(given) is int and sums[name] <= given <= MAX_COUNT
                  and name in unknown)
        if usable:
            out[name] = given
        elif given != sums[name]:
            run.repairs.append((f"runs.{name}", TOTAL_IGNORED))
    return out


def calls_table(columns: dict[str, list]) -> pa.Table:
    """A table of :data:`CALLS_SCHEMA` from a buffer of columns (see
    :func:`_add_run`): its ``provenance`` the listed codes, and for calls
    listing none (and any null figure) the defaults
    (:func:`~sim.traces.provenance.default_codes`)."""
    listed = columns["provenance"]
    plain = pa.Table.from_pydict({k: v for k, v in columns.items() if k != "provenance"},
                                 schema=_PLAIN_SCHEMA)
    codes = default_codes(plain)
    rows = [i for i, c in enumerate(listed) if c is not None]
    if rows:
        missing = codes == UNKNOWN_CODE
        codes[:, rows] = np.array([listed[i] for i in rows], dtype=np.int8).T
        codes[missing] = UNKNOWN_CODE
    return plain.append_column(CALLS_SCHEMA.field("provenance"), provenance_column(codes))


_PLAIN_SCHEMA = CALLS_SCHEMA.remove(CALLS_SCHEMA.get_field_index("provenance"))


def trace_tables(runs: Iterable[RunRecord]) -> tuple[pa.Table, pa.Table]:
    """``runs`` as the rows of runs.parquet and calls.parquet: two tables of
    :data:`RUNS_SCHEMA` and :data:`CALLS_SCHEMA`, runs in the given order
    (what a sweep's worker sends back for a chunk of tasks). The tables are
    built as they are and their values checked as columns (the reader's
    bounds); only when some value is impossible are the runs built again
    with their impossible values nulled, run by run, as :class:`TraceWriter`
    does (the same rows either way)."""
    records = list(runs)
    tables = _tables(records, checked=True)
    try:
        check_values(*tables, Path("."))
    except InputError:
        tables = _tables(records, checked=False)
    return tables


def _tables(runs: list[RunRecord], checked: bool) -> tuple[pa.Table, pa.Table]:
    buffer: dict[str, list] = {name: [] for name in CALLS_SCHEMA.names}
    rows = [_add_run(run, buffer, checked) for run in runs]
    return (_table(lambda r: pa.Table.from_pylist(r, schema=RUNS_SCHEMA), rows),
            _table(calls_table, buffer))


def _table(build: Any, data: Any) -> pa.Table:
    """``build(data)``; if some text cannot be stored as UTF-8 (a lone
    surrogate from a JSON escape), again with such characters replaced."""
    try:
        return build(data)
    except (pa.ArrowException, UnicodeEncodeError):
        return build(_clean(data))


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _utc(moment: datetime | None) -> datetime | None:
    """``moment`` in UTC; a naive time is taken as UTC."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def write_runs(folder: str | os.PathLike, runs: list[RunRecord]) -> None:
    """Write ``runs`` as ``runs.parquet`` and ``calls.parquet`` into an existing
    folder (a results folder), each file atomically (temporary name, then
    renamed over any previous one)."""
    target = Path(folder)
    with tempfile.TemporaryDirectory(dir=target, prefix=".traces.") as tmp:
        writer = TraceWriter(Path(tmp))
        for run in runs:
            writer.add(run)
        writer.close()
        for name in (CALLS_FILE, RUNS_FILE):
            os.chmod(Path(tmp) / name, 0o644)
            os.replace(Path(tmp) / name, target / name)


@contextmanager
def atomic_folder(target: str | os.PathLike, *, force: bool = False) -> Iterator[Path]:
    """A temporary folder beside ``target`` to build a folder in; renamed to
    ``target`` when the block ends without an exception, deleted otherwise.

    An existing non-empty ``target`` is an InputError unless ``force`` (then
    it is replaced, only once the new folder is complete). A disk that is
    full or read-only is an InputError too (exit status 2), the temporary
    folder removed and ``target`` as it was."""
    check_path(target, "the trace folder")
    final = Path(target)
    if final.exists() and not final.is_dir():
        raise InputError("exists and is not a folder", source=str(final))
    if final.is_dir() and any(final.iterdir()) and not force:
        raise InputError("folder exists and is not empty (use --force to replace it)",
                         source=str(final))
    kept = "the folder is as it was" if final.exists() else "nothing was written"
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp"))
    except OSError as error:
        _raise_write_error(error, final, kept)
        text = error.strerror or str(error)  # not a disk's failure: a parent that cannot be
        raise InputError(f"cannot make a folder in {final.parent}: {text[:1].lower()}"
                         f"{text[1:]}; {kept}", source=str(final)) from None
    try:
        yield tmp
        os.chmod(tmp, 0o755)
        if final.exists():
            old = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.",
                                        suffix=".old"))
            os.replace(final, old / final.name)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
    except BaseException as error:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(error, OSError):
            _raise_write_error(error, final, kept)
        raise


_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
                           errno.EIO, errno.EFBIG})
_WRITE_WORDS = ("no space left", "read-only file system", "disk quota", "permission denied")


def _raise_write_error(error: OSError, target: Path, kept: str) -> None:
    """An InputError (exit status 2) for a disk that is full, read-only or
    failing (by errno, or by pyarrow's words); other errors return."""
    known = (error.errno in _WRITE_ERRNOS if error.errno is not None
             else any(w in str(error).lower() for w in _WRITE_WORDS))
    if known:
        text = (error.strerror or str(error)).splitlines()[0]
        raise InputError(f"cannot write {target}: {text[:1].lower()}{text[1:]}; {kept}") \
            from None
