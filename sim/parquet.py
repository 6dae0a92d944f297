"""Reading a Parquet file into pandas without handing Arrow a Python file
object (the one way sim reads a Parquet file into a DataFrame).

A leaf, below every part that reads results or traces (output, calibration,
api), so that reading a file does not pull in a writer's part.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["read_parquet"]


def read_parquet(path: str | os.PathLike, columns: list[str] | None = None) -> pd.DataFrame:
    """The Parquet file ``path`` (its ``columns``, default all) as the DataFrame
    ``pandas.read_parquet`` returns, read by Arrow from the path with its own
    file. Never hand Arrow a Python file object (which ``pandas.read_parquet``
    does with a local path): every buffer Arrow then reads is a Python object,
    and the threaded reader behind ``pq.read_table`` is torn down on one of
    Arrow's threads after the read returns; when that thread drops the last
    buffer while the interpreter exits, it is killed asking for the GIL inside
    a C++ destructor and the process aborts ("terminate called without an
    active exception", exit 134; apache/arrow#34314)."""
    table = pq.read_table(os.fspath(path), columns=columns, use_pandas_metadata=True)
    return table.to_pandas()
