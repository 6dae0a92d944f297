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

from sim.task_record import RECORD_FIELDS, TaskRecord

_ARROW_TYPES = {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "str": pa.string()}


def _schema() -> pa.Schema:
    hints = typing.get_type_hints(TaskRecord)
    fields = []
    for name in RECORD_FIELDS:
        hint = getattr(hints[name], "__name__", str(hints[name]))
        if hint not in _ARROW_TYPES:
            raise TypeError(f"TaskRecord.{name}: no column type for {hints[name]!r}")
        fields.append(pa.field(name, _ARROW_TYPES[hint]))
    return pa.schema(fields)


RECORD_SCHEMA: pa.Schema = _schema()
"""One column per :class:`~sim.task_record.TaskRecord` field, in field order, no metadata."""


def records_table(records: list[TaskRecord]) -> pa.Table:
    """The records as a table of :data:`RECORD_SCHEMA`, rows in the given order."""
    columns = [pa.array([getattr(r, name) for r in records], type=field.type)
               for name, field in zip(RECORD_FIELDS, RECORD_SCHEMA, strict=True)]
    return pa.Table.from_arrays(columns, schema=RECORD_SCHEMA)


def empty_table() -> pa.Table:
    """A table of :data:`RECORD_SCHEMA` with no rows."""
    return RECORD_SCHEMA.empty_table()
