"""Task records as Arrow columns: what a worker sends back for a chunk of tasks.

A chunk of :class:`~sim.task_record.TaskRecord` becomes one :class:`pyarrow.Table`
with :data:`RECORD_SCHEMA` (a column per record field, in ``RECORD_FIELDS``
order: int64, float64, bool or string), built column by column without
pandas. Tables are what travels from a worker to the parent, what the chunk
store keeps and what the Parquet stream writes, so the parent never holds
record objects, only columns.
"""

from __future__ import annotations

import typing

import pyarrow as pa

from sim.task_record import ALL_FIELDS, RECORD_FIELDS, TaskRecord

_ARROW_TYPES = {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "str": pa.string()}


def _schema(names: tuple[str, ...]) -> pa.Schema:
    hints = typing.get_type_hints(TaskRecord)
    fields = []
    for name in names:
        hint = getattr(hints[name], "__name__", str(hints[name]))
        if hint not in _ARROW_TYPES:
            raise TypeError(f"TaskRecord.{name}: no column type for {hints[name]!r}")
        fields.append(pa.field(name, _ARROW_TYPES[hint]))
    return pa.schema(fields)


RECORD_SCHEMA: pa.Schema = _schema(RECORD_FIELDS)
"""One column per :data:`~sim.task_record.RECORD_FIELDS` field, in field order, no metadata."""

CHILDREN_SCHEMA: pa.Schema = _schema(ALL_FIELDS)
""":data:`RECORD_SCHEMA` followed by the subagent columns
(:data:`~sim.task_record.CHILDREN_FIELDS`): a sweep whose harness has subagents."""


def record_schema(children: bool) -> pa.Schema:
    """:data:`CHILDREN_SCHEMA` with ``children``, else :data:`RECORD_SCHEMA`."""
    return CHILDREN_SCHEMA if children else RECORD_SCHEMA


def records_table(records: list[TaskRecord], children: bool = False) -> pa.Table:
    """The records as a table of :func:`record_schema` (``children``: with
    the subagent columns), rows in the given order."""
    schema = record_schema(children)
    columns = [pa.array([getattr(r, field.name) for r in records], type=field.type)
               for field in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def as_schema(table: pa.Table, children: bool) -> pa.Table:
    """``table`` (of :data:`CHILDREN_SCHEMA`) with the columns of
    :func:`record_schema` (``children``), in its order."""
    return table if children else table.select(list(RECORD_FIELDS))


def empty_table() -> pa.Table:
    """A table of :data:`RECORD_SCHEMA` with no rows."""
    return RECORD_SCHEMA.empty_table()
