"""Trace folders as an input: sim's own simulated runs, or an earlier import.

A folder holding ``runs.parquet`` and ``calls.parquet`` (what ``python -m sim
run ... --traces`` writes beside ``results.parquet``, and what ``traces
import`` writes) is read back with :func:`~sim.traces.model.load_tables`,
checked, and its runs pass through unchanged, each keeping its ``source``
(``sim`` for simulated runs) and ``file``. Columns beyond the model's are not
carried over.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from sim.bad_input import InputError
from sim.traces.model import (
    CALL_COLUMNS,
    RUN_COLUMNS,
    TOKEN_COLUMNS,
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
                     if n not in ("run_id", "call", "tool_calls", *TOKEN_COLUMNS))


def runs(folder: Path) -> Iterator[RunRecord]:
    """The runs of a trace folder, in its order, with their calls in order."""
    try:
        runs_table, calls_table = load_tables(folder)
    except InputError as error:
        raise Unusable(UNREADABLE, error.message + (f" ({error.path})" if error.path else "")
                       ) from None
    by_run: dict[str, list[CallRecord]] = {}
    numbers: dict[str, list[int]] = {}
    for row in calls_table.select(list(CALL_COLUMNS)).to_pylist():
        tools = [ToolCallRecord(**tool) for tool in row["tool_calls"]]
        usage = Usage(**{attribute: row[name] for name, attribute in USAGE_ATTRIBUTES.items()})
        call = CallRecord(usage, **{name: row[name] for name in _CALL_FIELDS}, tool_calls=tools)
        by_run.setdefault(row["run_id"], []).append(call)
        numbers.setdefault(row["run_id"], []).append(row["call"])
    for row in runs_table.select(list(RUN_COLUMNS)).to_pylist():
        calls = by_run.get(row["run_id"], [])
        order = numbers.get(row["run_id"], [])
        if order != sorted(order):
            calls = [call for _, call in sorted(zip(order, calls, strict=True),
                                                key=lambda pair: pair[0])]
        yield RunRecord(**{name: row[name] for name in _RUN_FIELDS}, calls=calls)
