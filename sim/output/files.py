"""Files written atomically, with the same bytes for the same content: Parquet
(fixed schema and compression, no pandas index or metadata, the provenance in
the schema metadata) and JSON (sorted keys, ``repr`` floats).

Every file is written atomically (:mod:`sim.atomic`: a temporary file in the
same directory, flushed, fsynced, then renamed over the target), so a reader
never sees half a file and a failure never clobbers the previous one.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sim.atomic import StagedFile
from sim.parquet import (
    read_parquet as read_parquet,  # its home; re-exported for sim/tuning/inforce.py
)

if TYPE_CHECKING:  # frames come from callers; the chunk path imports this without pandas
    import pandas as pd

PARQUET_COMPRESSION = "zstd"
PARQUET_COMPRESSION_LEVEL = 3
_ARROW = {"int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_(),
          "string": pa.string(), "str": pa.string(), "object": pa.string(),
          "Int64": pa.int64(), "Float64": pa.float64(), "boolean": pa.bool_()}


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, *, durable: bool = True) -> Iterator[BinaryIO]:
    """A binary file to write ``path`` through, atomically (the one writer,
    :class:`sim.atomic.StagedFile`): a temporary file in the same directory
    (``.<name>.*.tmp``), ``os.replace``-d over ``path`` (mode 0644) when the
    block ends; with ``durable`` the file is flushed and fsynced first and
    the directory after (a temporary file, such as a sweep's chunk, skips
    both). On any failure the temporary file is removed and ``path`` keeps
    its previous content; a full or read-only disk is an InputError saying
    so (:func:`sim.output.folder.disk_errors`)."""
    from sim.output.folder import disk_errors

    target = Path(path)
    with disk_errors(target, f"{target.name} is as it was"), \
            StagedFile(target, durable=durable) as staged:
        yield staged.handle


def write_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically and durably (:func:`atomic_file`)."""
    with atomic_file(path) as handle:
        handle.write(data)


PROVENANCE_KEY = b"sim.provenance"
"""Parquet schema metadata key holding the provenance (JSON, :mod:`sim.output.provenance`)."""


def _arrow_table(frame: pd.DataFrame, metadata: Mapping[str, Any] | None = None) -> pa.Table:
    """``frame`` as an Arrow table with a fixed schema and no metadata but
    ``metadata`` (JSON under :data:`PROVENANCE_KEY`): no pandas index, no
    pandas or library versions."""
    fields = []
    for name, dtype in frame.dtypes.items():
        key = str(dtype)
        if key not in _ARROW:
            raise TypeError(f"column {name!r}: no Parquet type for dtype {key}")
        fields.append(pa.field(str(name), _ARROW[key]))
    schema = pa.schema(fields)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    extra = None if metadata is None else {PROVENANCE_KEY: json_bytes(dict(metadata))}
    return table.cast(schema).replace_schema_metadata(extra)


def parquet_bytes(frame: pd.DataFrame, metadata: Mapping[str, Any] | None = None) -> bytes:
    """The Parquet file of ``frame`` (with ``metadata`` as its provenance):
    identical bytes for identical input."""
    buffer = io.BytesIO()
    pq.write_table(_arrow_table(frame, metadata), buffer, compression=PARQUET_COMPRESSION,
                   compression_level=PARQUET_COMPRESSION_LEVEL, version="2.6")
    return buffer.getvalue()


def write_parquet(path: str | os.PathLike, frame: pd.DataFrame,
                  metadata: Mapping[str, Any] | None = None) -> None:
    """Write ``frame`` to ``path`` as Parquet, atomically, deterministic bytes."""
    write_atomic(path, parquet_bytes(frame, metadata))


def read_provenance(path: str | os.PathLike) -> dict[str, Any] | None:
    """The provenance in a Parquet file's metadata (None when it has none)."""
    metadata = pq.read_schema(path).metadata or {}
    raw = metadata.get(PROVENANCE_KEY)
    return None if raw is None else json.loads(raw)


def json_default(value: Any) -> Any:
    """JSON for numpy scalars and arrays and paths; anything else is an error."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def json_bytes(obj: Any) -> bytes:
    """UTF-8 JSON: sorted keys, indent 2, trailing newline, ``repr`` floats
    (shortest round-trip, stable); NaN and infinities are refused. A lone
    surrogate (a string read from ``"\\ud800"`` in a JSON file) is written as
    its JSON escape, the same JSON value, where UTF-8 cannot hold it."""
    text = json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False,
                      default=json_default)
    return (text + "\n").encode("utf-8", "backslashreplace")


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` to ``path`` as JSON (:func:`json_bytes`), atomically."""
    write_atomic(path, json_bytes(obj))
