"""Trace folders as an input: sim's own simulated runs, or an earlier import.

A folder holding ``runs.parquet`` and ``calls.parquet`` (what ``python -m sim
run ... --traces`` writes beside ``results.parquet``, and what ``traces
import`` writes) is read back with :func:`~sim.traces.model.load_tables`,
checked, and its runs pass through unchanged, each keeping its ``source``
(``sim`` for simulated runs) and ``file``, its calls their provenance and its
run totals where some call's count is unknown. Columns beyond the model's are not
carried over.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sim.bad_input import InputError
from sim.traces.model import (
    CALL_COLUMNS,
    EXACT,
    RUN_COLUMNS,
    SOURCES,
    TOKEN_COLUMNS,
    UNKNOWN,
    USAGE_ATTRIBUTES,
    CallRecord,
    RunRecord,
    ToolCallRecord,
    Usage,
    load_tables,
)
from sim.traces.skips import UNREADABLE, Unusable

_RUN_FIELDS = tuple(n for n in RUN_COLUMNS if n not in ("steps", *TOKEN_COLUMNS))
_CALL_FIELDS = tuple(n for n in CALL_COLUMNS
                     if n not in ("run_id", "call", "tool_calls", "provenance", *TOKEN_COLUMNS))


def _load(folder: Path) -> tuple[pa.Table, pa.Table]:
    try:
        return load_tables(folder)
    except InputError as error:
        raise Unusable(UNREADABLE, error.message + (f" ({error.path})" if error.path else "")
                       ) from None


def tables(folder: Path) -> tuple[pa.Table, pa.Table] | None:
    """What :func:`runs` yields, as Arrow columns: the folder's runs (the
    model's columns, in its order) and their calls grouped by run in that
    order, each run's by call number. None when the runs could not pass
    through the writer unchanged (a run of an unknown source, a tool call
    without a name, a mini-swe-agent run whose verdict a report may still
    give): those are read with :func:`runs`. Unusable when the folder is not
    a readable, consistent trace folder."""
    runs_table, calls_table = _load(folder)
    runs_table = runs_table.select(list(RUN_COLUMNS))
    calls_table = calls_table.select(list(CALL_COLUMNS))
    source = runs_table.column("source")
    if not pc.all(pc.is_in(source, pa.array(SOURCES))).as_py() or pc.any(pc.and_(
            pc.equal(source, "mini-swe-agent"),
            pc.is_null(runs_table.column("resolved")))).as_py():
        return None
    tools = pc.list_flatten(calls_table.column("tool_calls"))
    if pc.struct_field(tools, "name").null_count:
        return None
    codes = pc.index_in(calls_table.column("run_id"), runs_table.column("run_id")).to_numpy()
    order = np.lexsort((calls_table.column("call").to_numpy(), codes))
    if np.any(order != np.arange(len(order))):
        calls_table = calls_table.take(pa.array(order))
    return runs_table, calls_table


def runs(folder: Path) -> Iterator[RunRecord]:
    """The runs of a trace folder, in its order, with their calls in order."""
    runs_table, calls_table = _load(folder)
    by_run: dict[str, list[CallRecord]] = {}
    numbers: dict[str, list[int]] = {}
    for row in calls_table.select(list(CALL_COLUMNS)).to_pylist():
        tools = [ToolCallRecord(**tool) for tool in row["tool_calls"]]
        usage = Usage(**{attribute: row[name] or 0  # an unknown count (null) is 0 in Usage
                         for name, attribute in USAGE_ATTRIBUTES.items()})
        listed = {name: how for name, how in row["provenance"].items() if how != EXACT}
        call = CallRecord(usage, **{name: row[name] for name in _CALL_FIELDS}, tool_calls=tools,
                          provenance=listed)
        by_run.setdefault(row["run_id"], []).append(call)
        numbers.setdefault(row["run_id"], []).append(row["call"])
    for row in runs_table.select(list(RUN_COLUMNS)).to_pylist():
        calls = by_run.get(row["run_id"], [])
        order = numbers.get(row["run_id"], [])
        if order != sorted(order):
            calls = [call for _, call in sorted(zip(order, calls, strict=True),
                                                key=lambda pair: pair[0])]
        unknown = {name for call in calls for name, how in call.provenance.items()
                   if how == UNKNOWN}
        totals = {name: row[name] for name in TOKEN_COLUMNS if name in unknown} or None
        yield RunRecord(**{name: row[name] for name in _RUN_FIELDS}, calls=calls, totals=totals)
