"""A Parquet file written as its rows arrive, in fixed row groups, atomically.

:class:`ParquetStream` takes Arrow tables in row order (a sweep's chunks, as
they finish and their turn comes) and writes them into a temporary file
beside the target, in row groups of exactly ``row_group_rows`` rows (the last
one shorter). The bytes depend only on the rows, their order and the schema,
never on how the rows were cut into tables: a run on one worker, on many,
on a Dask cluster or resumed from kept chunks writes the same file. Only
:meth:`ParquetStream.close` puts the file in place (fsync, then rename: the
one atomic writer, :class:`sim.atomic.StagedFile`, which names the temporary
file and sets its mode); :meth:`ParquetStream.abort`, or leaving the ``with``
block on an exception, removes the temporary file, so a reader never sees
half a file.

Compression is that of :mod:`sim.output.files` (zstd level 3; Parquet 2.6).
Memory: at most one row group of rows is buffered.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from sim.atomic import TEMP_SUFFIX, StagedFile
from sim.output.files import PARQUET_COMPRESSION, PARQUET_COMPRESSION_LEVEL

ROW_GROUP_ROWS = 131_072


class ParquetStream:
    """Write ``path`` from tables of ``schema`` appended in order (see the module)."""

    def __init__(self, path: str | os.PathLike, schema: pa.Schema, *,
                 metadata: Mapping[str, Any] | Mapping[bytes, Any] | None = None,
                 row_group_rows: int = ROW_GROUP_ROWS, plain: Sequence[str] = ()) -> None:
        """``plain``: the columns (Parquet paths, e.g. ``started_s`` or
        ``tool_calls.list.element.duration_s``) written without a dictionary
        (values nearly all distinct, where one would be tried and given up
        per page); every other column gets one."""
        if row_group_rows < 1:
            raise ValueError(f"row_group_rows must be >= 1, got {row_group_rows}")
        self.path = Path(path)
        self.rows = 0
        self._group = row_group_rows
        self._schema = schema.with_metadata(dict(metadata)) if metadata else schema
        self._file = StagedFile(self.path)
        try:  # a stream that never opened (Ctrl-C, a full disk) leaves no temporary file
            self._writer: pq.ParquetWriter | None = pq.ParquetWriter(
                self._file.handle, self._schema, compression=PARQUET_COMPRESSION,
                compression_level=PARQUET_COMPRESSION_LEVEL, version="2.6",
                use_dictionary=dictionary_columns(schema, plain) if plain else True)
        except BaseException:
            self._file.discard()
            raise
        self._buffer: list[pa.Table] = []
        self._buffered = 0

    def write(self, table: pa.Table) -> None:
        """Append ``table``'s rows (its schema must be the stream's, metadata aside)."""
        if self._writer is None:
            raise ValueError("the stream is closed")
        if not table.schema.equals(self._schema, check_metadata=False):
            raise ValueError(f"table schema {table.schema} is not the stream's {self._schema}")
        if table.num_rows == 0:
            return
        self._buffer.append(table)
        self._buffered += table.num_rows
        self.rows += table.num_rows
        while self._buffered >= self._group:
            self._flush(self._group)

    def _flush(self, rows: int) -> None:
        whole = pa.concat_tables(self._buffer)
        group, rest = whole.slice(0, rows), whole.slice(rows)
        assert self._writer is not None
        self._writer.write_table(group, row_group_size=rows)
        self._buffer = [rest] if rest.num_rows else []
        self._buffered = rest.num_rows

    def close(self) -> Path:
        """Write what is buffered and put the file in place (durable:
        :meth:`sim.atomic.StagedFile.commit`)."""
        if self._writer is None:
            raise ValueError("the stream is closed")
        try:
            if self._buffered:
                self._flush(self._buffered)
            self._writer.close()
            self._writer = None
        except BaseException:
            self.abort()
            raise
        return self._file.commit()

    def abort(self) -> None:
        """Drop everything written: the temporary file is removed, the target untouched."""
        if self._writer is not None:
            with contextlib.suppress(Exception):  # the file is being thrown away
                self._writer.close()
            self._writer = None
        self._file.discard()
        self._buffer, self._buffered = [], 0

    def __enter__(self) -> ParquetStream:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if kind is not None:
            self.abort()
        elif self._writer is not None:
            self.close()


def dictionary_columns(schema: pa.Schema, plain: Sequence[str]) -> list[str]:
    """The Parquet paths of ``schema``'s leaf columns (a list's items under
    ``NAME.list.element``, a struct's fields under ``NAME.FIELD``), but those in
    ``plain`` (a name there that is no column of ``schema`` is a ValueError)."""
    paths = [path for field in schema for path in _leaves(field.name, field.type)]
    unknown = set(plain) - set(paths)
    if unknown:
        raise ValueError(f"no such columns: {sorted(unknown)}")
    return [path for path in paths if path not in plain]


def _leaves(path: str, kind: pa.DataType) -> Iterator[str]:
    """The Parquet paths of the leaf columns of a column ``path`` of type ``kind``."""
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        yield from _leaves(f"{path}.list.element", kind.value_type)
    elif pa.types.is_struct(kind):
        for field in kind:
            yield from _leaves(f"{path}.{field.name}", field.type)
    elif pa.types.is_map(kind):
        yield from _leaves(f"{path}.key_value.key", kind.key_type)
        yield from _leaves(f"{path}.key_value.value", kind.item_type)
    else:
        yield path


def stale_temporaries(folder: str | os.PathLike, name: str) -> list[Path]:
    """Temporary files a killed stream of ``folder/name`` left behind."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(folder.glob(f".{name}.*{TEMP_SUFFIX}"))
