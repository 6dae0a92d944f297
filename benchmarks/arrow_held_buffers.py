"""Whether Arrow still holds a Python file's buffers when ``pq.read_table``
returns: the cause of ``replay``'s abort at exit, observed directly.

    python -m benchmarks.arrow_held_buffers PARQUET_FILE [--trials 200]

Reads the file ``trials`` times through a Python file object whose reads
return weakly referenceable buffers, and counts the trials in which a buffer
is still alive the moment ``read_table`` returns (Arrow's scan is torn down on
one of its threads afterwards, and that thread needs the GIL to drop the
buffer: at the interpreter's exit it is killed there and the process aborts,
apache/arrow#34314), and those in which one is still alive after the table is
dropped and garbage collected. Read by path (:func:`sim.parquet.read_parquet`)
Arrow holds no Python object at all. Prints the counts and the load average
(the race is far more frequent on a loaded machine).
"""

from __future__ import annotations

import argparse
import gc
import io
import os
import sys
import weakref
from pathlib import Path

import pyarrow.parquet as pq


class _Chunk(bytearray):
    """A buffer a weak reference can follow."""


class _TrackedFile(io.RawIOBase):
    """An in-memory file whose reads return :class:`_Chunk` s, all tracked."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self._file = io.BytesIO(data)
        self.chunks: list[weakref.ref[_Chunk]] = []

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def read(self, size: int | None = -1) -> _Chunk:
        chunk = _Chunk(self._file.read(-1 if size is None else size))
        self.chunks.append(weakref.ref(chunk))
        return chunk


def held(data: bytes) -> tuple[int, int]:
    """Buffers of one read alive when read_table returns, and after the table
    is dropped and garbage collected."""
    source = _TrackedFile(data)
    table = pq.read_table(source)
    at_return = sum(ref() is not None for ref in source.chunks)
    del table
    gc.collect()
    return at_return, sum(ref() is not None for ref in source.chunks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("parquet", type=Path, help="a Parquet file")
    parser.add_argument("--trials", type=int, default=200, help="reads (default 200)")
    args = parser.parse_args(argv)
    data = args.parquet.read_bytes()
    load = os.getloadavg()[0]
    counts = [held(data) for _ in range(args.trials)]
    print(f"{args.trials} reads through a Python file, load {load:.2f}: a buffer still held "
          f"by Arrow when read_table returned in {sum(1 for a, _ in counts if a)}, after the "
          f"table was dropped in {sum(1 for _, b in counts if b)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
