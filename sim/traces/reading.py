"""Reading a trace folder back, checked: :func:`load_tables` (Arrow) and
:func:`read_traces` (pandas). Both are importable from :mod:`sim.traces.model`
too; every check failure is an :class:`~sim.bad_input.InputError` naming the
file, the column (dotted for a tool call's field) and the run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from sim.bad_input import InputError
from sim.traces import provenance
from sim.traces import schema as layout


def read_traces(directory: str | os.PathLike[str], *,
                purposes: bool = False) -> tuple[Any, Any]:
    """``(runs, calls)`` pandas DataFrames of a trace folder, checked.

    Checks (:func:`load_tables`; with ``purposes``, :func:`check_purposes`
    too, as the readers of recorded runs check), each failure an
    :class:`~sim.bad_input.InputError` naming the file and the column or run.
    Columns come back with pandas' nullable dtypes (``Int64``, ``Float64``,
    ``boolean``, ``string``; the timestamp as ``datetime64[us, UTC]``),
    ``tool_calls`` as lists of dicts; columns other than the model's are
    kept, after them.
    """
    runs, calls = load_tables(directory)
    if purposes:
        check_purposes(calls, os.fspath(directory))
    tools = calls.column("tool_calls").to_pylist()  # plain dicts with ints kept as ints
    calls_frame = calls.drop_columns(["tool_calls"]).to_pandas(types_mapper=_pandas_type)
    calls_frame.insert(calls.schema.get_field_index("tool_calls"), "tool_calls",
                       _object_series(tools, calls_frame.index))
    return runs.to_pandas(types_mapper=_pandas_type), calls_frame


def _object_series(values: list, index: Any) -> Any:
    """A pandas object Series of ``values`` (lists stay lists)."""
    import pandas as pd

    return pd.Series(values, index=index, dtype=object)


def load_tables(directory: str | os.PathLike[str]) -> tuple[pa.Table, pa.Table]:
    """``(runs, calls)`` Arrow tables of a trace folder, checked: both files
    exist and are Parquet; every column of :data:`RUN_COLUMNS` /
    :data:`CALL_COLUMNS` is present with its type (those of
    :data:`LATER_CALL_COLUMNS` may be absent, as in a folder written before
    them: they are added, all null; a missing ``provenance`` is added as
    exact for every value and unknown for every null); required columns have no
    nulls; ``run_id`` is unique in runs; counts are non-negative; every call
    belongs to a run; each run's calls are numbered ``0..steps-1``; each
    run's token columns are the sums of its calls' (at least the sum of
    their known counts when some call's count is unknown, null); the
    provenance agrees with the values (:func:`sim.traces.provenance.check`);
    and every value is
    possible (the bounds above: token counts at most :data:`MAX_COUNT`, a
    column's total over the folder at most :data:`MAX_TOTAL`, so no sum wraps
    around; finite times and costs in range, limits at least 1, a start in
    ``[EARLIEST, LATEST)``)."""
    import pyarrow.parquet as pq

    folder = Path(directory)
    if not folder.is_dir():
        raise InputError("not a trace folder (no such directory)", source=str(folder))
    tables = []
    for name, schema, later in ((layout.RUNS_FILE, layout.RUNS_SCHEMA, frozenset()),
                                (layout.CALLS_FILE, layout.CALLS_SCHEMA, LATER)):
        path = folder / name
        if not path.is_file():
            raise InputError(f"missing {name}: not a trace folder", source=str(folder))
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowException) as error:
            raise InputError(f"not a readable Parquet file ({error})", source=str(path)) from None
        tables.append(check_table(table, schema, path, later))
    runs, calls = tables
    check_values(runs, calls, folder)
    provenance.check(calls, folder / layout.CALLS_FILE)
    _check_consistency(runs, calls, folder)
    return runs, calls


def check_purposes(calls: pa.Table, source: str) -> None:
    """Every call's ``purpose`` one of :data:`~sim.traces.schema.PURPOSES` (or
    null: a step), and every tool call named; else an InputError naming the
    run and call. The one such check: replay, calibrate and tune read
    recorded runs through it (:mod:`sim.drivers.replay.reading`), ``traces
    summary`` through :func:`read_traces`."""
    import pyarrow.compute as pc

    purpose = calls.column("purpose")
    bad = pc.and_(pc.is_valid(purpose),
                  pc.invert(pc.is_in(purpose, value_set=pa.array(layout.PURPOSES))))
    if pc.any(bad).as_py():
        i = pc.index(bad, True).as_py()
        raise InputError(f"purpose is {purpose[i].as_py()!r}: expected one of "
                         f"{', '.join(layout.PURPOSES)}", source=source,
                         path=_where(calls, i))
    tools = calls.column("tool_calls")
    names = pc.struct_field(pc.list_flatten(tools), ["name"])
    if names.null_count:
        j = pc.index(pc.is_null(names), True).as_py()
        parents = pc.list_parent_indices(tools).to_numpy()
        i = int(parents[j])
        first = int(np.flatnonzero(parents == i)[0])
        raise InputError("a tool call must be a record with a name", source=source,
                         path=f"{_where(calls, i)}, tool call {j - first}")


def _where(calls: pa.Table, i: int) -> str:
    row: dict[str, Any] = {n: calls.column(n)[i].as_py() for n in ("run_id", "call")}
    return f"calls.parquet, run {row['run_id']!r}, call {row['call']}"


LATER: frozenset[str] = (layout.LATER_CALL_COLUMNS | layout.SUBAGENT_CALL_COLUMNS
                         | layout.PROVENANCE_CALL_COLUMNS)
"""The call columns a folder written before them may lack."""


def check_values(runs: pa.Table, calls: pa.Table, folder: Path) -> None:
    """Every value of the model's columns within its bounds, or an InputError
    naming the file, the column (dotted for a tool call's field) and the run."""
    import pyarrow.compute as pc

    def refuse(table: pa.Table, path: str, column: str, mask: Any, what: str,
               run_ids: Any = None) -> None:
        mask = pc.fill_null(mask, False)
        if not pc.any(mask).as_py():
            return
        index = pc.index(mask, True).as_py()
        ids = table.column("run_id") if run_ids is None else run_ids
        raise InputError(f"{what} in run {ids[index].as_py()!r}: "
                         f"{_shown(table, column, index, run_ids)}", source=path, path=column)

    runs_path, calls_path = str(folder / layout.RUNS_FILE), str(folder / layout.CALLS_FILE)
    for table, path in ((runs, runs_path), (calls, calls_path)):
        for name in layout.TOKEN_COLUMNS:
            values = table.column(name)
            refuse(table, path, name, pc.less(values, 0), "negative token count")
            refuse(table, path, name, pc.greater(values, layout.MAX_COUNT),
                   f"token count above {layout.MAX_COUNT:,}")
    for name in layout.TOKEN_COLUMNS:  # exact: float64 sums of values below 2**53 cannot wrap
        total = pc.sum(pc.cast(calls.column(name), pa.float64())).as_py() or 0.0
        if total > layout.MAX_TOTAL:
            raise InputError(f"the calls' total of {total:.3g} tokens is above "
                             f"{layout.MAX_TOTAL:,} (sums would wrap around)",
                             source=calls_path, path=name)
    tools = pc.list_flatten(calls.column("tool_calls"))
    tool_runs = pc.take(calls.column("run_id"), pc.list_parent_indices(
        calls.column("tool_calls")))
    tables = {"runs": (runs, runs_path, None, ""), "calls": (calls, calls_path, None, ""),
              "tool_calls": (pa.Table.from_arrays(
                  [pc.struct_field(tools, [i]) for i in range(tools.type.num_fields)],
                  names=[f.name for f in tools.type]), calls_path, tool_runs, "tool_calls.")}
    for kind, (table, path, ids, prefix) in tables.items():
        for columns, high, what in ((layout.SECONDS_COLUMNS, layout.MAX_SECONDS, "seconds"),
                                    (layout.MONEY_COLUMNS, layout.MAX_USD, "USD"),
                                    (layout.SIZE_COLUMNS, layout.MAX_COUNT, "tokens")):
            for name in columns[kind]:
                values = table.column(name)
                if pa.types.is_floating(values.type):
                    refuse(table, path, prefix + name, pc.invert(pc.is_finite(values)),
                           "not a finite number", ids)
                low = 1e-300 if name == "cost_limit_usd" else 0
                refuse(table, path, prefix + name, pc.or_(pc.less(values, low),
                                                          pc.greater(values, high)),
                       f"{what} outside [{low:g}, {high:g}]", ids)
    for name in layout.LIMIT_COLUMNS:
        values = runs.column(name)
        refuse(runs, runs_path, name,
               pc.or_(pc.less(values, 1), pc.greater(values, layout.MAX_LIMIT)),
               f"limit outside [1, {layout.MAX_LIMIT:,}]")
    started = runs.column("started_at")
    refuse(runs, runs_path, "started_at", pc.or_(
        pc.less(started, pa.scalar(layout.EARLIEST, started.type)),
        pc.greater_equal(started, pa.scalar(layout.LATEST, started.type))),
        f"start outside [{layout.EARLIEST:%Y-%m-%d}, {layout.LATEST:%Y-%m-%d})")


def _shown(table: pa.Table, column: str, index: int, ids: Any) -> str:
    name = column.split(".")[-1]
    return f"{name} is {table.column(name)[index].as_py()!r}"


def _pandas_type(kind: pa.DataType) -> Any:
    import pandas as pd

    mapping = {pa.int64(): pd.Int64Dtype(), pa.float64(): pd.Float64Dtype(),
               pa.bool_(): pd.BooleanDtype(), pa.string(): pd.StringDtype()}
    return mapping.get(kind)


def check_table(table: pa.Table, schema: pa.Schema, path: Path,
                 later: frozenset[str] = frozenset()) -> pa.Table:
    """The table with the model's columns first (extras after), or an InputError;
    a missing column named in ``later`` is added, all null."""
    names = set(table.schema.names)
    for spec in schema:
        if spec.name not in names:
            if spec.name in later:  # a folder written before the column existed
                added = (provenance.default_column(table) if spec.name == "provenance"
                         else pa.nulls(table.num_rows, spec.type))
                table = table.append_column(spec, pa.chunked_array([added], spec.type))
                continue
            raise InputError("missing column", source=str(path), path=spec.name)
        actual = table.schema.field(spec.name).type
        if actual != spec.type and spec.name == "provenance":  # written by another tool
            table = table.set_column(table.schema.get_field_index(spec.name), spec,
                                     provenance.conform(table.column(spec.name), path))
            actual = spec.type
        if actual != spec.type:
            if pa.types.is_null(actual) and spec.nullable:  # an all-null column
                table = table.set_column(table.schema.get_field_index(spec.name), spec.name,
                                         table.column(spec.name).cast(spec.type))
                continue
            raise InputError(f"column has type {actual}, expected {spec.type}",
                             source=str(path), path=spec.name)
        if not spec.nullable and table.column(spec.name).null_count:
            raise InputError("required column has null values", source=str(path),
                             path=spec.name)
    order = list(schema.names) + [n for n in table.schema.names if n not in schema.names]
    return table.select(order)


def _check_consistency(runs: pa.Table, calls: pa.Table, folder: Path) -> None:
    import pyarrow.compute as pc

    runs_path, calls_path = str(folder / layout.RUNS_FILE), str(folder / layout.CALLS_FILE)
    run_ids = runs.column("run_id").to_pylist()
    index: dict[str, int] = {}
    for i, run in enumerate(run_ids):
        if run in index:
            raise InputError(f"run_id {run!r} appears more than once", source=runs_path,
                             path="run_id")
        index[run] = i
    call_runs = calls.column("run_id").to_pylist()
    codes = np.empty(len(call_runs), dtype=np.int64)
    for i, run in enumerate(call_runs):
        code = index.get(run)
        if code is None:
            raise InputError(f"call of unknown run {run!r}", source=calls_path, path="run_id")
        codes[i] = code

    def column(table: pa.Table, name: str) -> np.ndarray:  # a null (unknown) count as 0
        values = table.column(name)
        if values.null_count:
            values = pc.fill_null(values, 0)
        return values.to_numpy().astype(np.int64, copy=False)

    for table, path, ids, extra in ((runs, runs_path, run_ids, "steps"),
                                    (calls, calls_path, call_runs, "call")):
        for name in (*layout.TOKEN_COLUMNS, extra):
            negative = np.flatnonzero(column(table, name) < 0)
            if negative.size:
                raise InputError(f"negative value in run {ids[negative[0]]!r}", source=path,
                                 path=name)
    steps = column(runs, "steps")
    counts = np.bincount(codes, minlength=len(run_ids))
    wrong = np.flatnonzero(counts != steps)
    if wrong.size:
        i = wrong[0]
        raise InputError(f"run {run_ids[i]!r} has steps {steps[i]} but {counts[i]} calls",
                         source=runs_path, path="steps")
    number = column(calls, "call")
    order = np.lexsort((number, codes))
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])) if len(run_ids) else counts
    expected = np.arange(len(order)) - starts[codes[order]]
    broken = np.flatnonzero(number[order] != expected)
    if broken.size:
        run = run_ids[codes[order][broken[0]]]
        raise InputError(f"calls of run {run!r} are not numbered 0..steps-1",
                         source=calls_path, path="call")
    for name in layout.TOKEN_COLUMNS:
        sums = np.zeros(len(run_ids), dtype=np.int64)
        np.add.at(sums, codes, column(calls, name))
        unknown = np.zeros(len(run_ids), dtype=bool)
        missing = calls.column(name).null_count
        if missing:
            unknown[codes[pc.is_null(calls.column(name)).to_numpy(zero_copy_only=False)]] = True
        wrong = np.flatnonzero(total_wrong(column(runs, name), sums, unknown))
        if wrong.size:
            raise InputError(f"run {run_ids[wrong[0]]!r}: the total is not the sum of its "
                             "calls" + (" (nor at least the sum of their known counts)"
                                        if unknown[wrong[0]] else ""),
                             source=runs_path, path=name)


def total_wrong(totals: np.ndarray, sums: np.ndarray, unknown: np.ndarray) -> np.ndarray:
    """Which runs' token totals disagree with their calls: ``totals`` must
    equal ``sums`` (of the known counts) where no call's count is
    ``unknown``, and be at least ``sums`` where some is."""
    return np.where(unknown, totals < sums, totals != sums)
