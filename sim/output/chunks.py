"""Finished chunks of a sweep, kept on disk as they complete (resumable sweeps).

A sweep is cut into chunks (a range of tasks of one cell, or a whole DES
cell). As each chunk finishes, :class:`ChunkStore` writes its records (an
Arrow table), any extras (a DES cell's capacity measurements and time
series, as JSON) and any side tables (the runs and calls of a sweep run with
``--traces``) atomically into a hidden folder beside the results folder.
A sweep interrupted by Ctrl-C, SIGKILL or a lost worker leaves the finished
chunks there; run again with ``--resume`` and only the missing chunks run,
and the results are the same bytes as an uninterrupted run's (each chunk's
records depend only on its tasks, and the results file only on the records).

A chunk is one file, ``<key>.arrow``: its records and side tables as Arrow
IPC streams laid end to end, then a trailer (their byte lengths, their count
and a magic string), written to a temporary file and renamed into place, so
after a kill a chunk is whole or absent (a worker on this machine may write
its chunk's file itself, :func:`write_chunk`, the same way; a temporary file a
kill left is removed on resume). (A DES cell's extras are a JSON file
written before it.) The file is not fsynced: a kill leaves the page cache
with the kernel, and what a power loss could cut short is caught on resume.

On ``--resume`` every kept chunk is read back first: one that cannot be read
whole (truncated by a full disk, a power loss or a copy cut short), or that
is not a file at all (a folder, a FIFO made in its place), is removed and
computed again, never fatal. The kept-chunks folder is sim's own: whatever
stands in place of it or of a chunk is removed.

The folder records a fingerprint of the run (the resolved scenario, task
count, seed, chunk plan and sim version): kept chunks of a different run are
never mixed in. A finished sweep removes the folder.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from sim.bad_input import InputError
from sim.output.files import atomic_file, json_bytes, json_default, write_atomic

MANIFEST = "manifest.json"
FORMAT = 3
_TABLE = ".arrow"
_EXTRAS = ".json"
_MAGIC = b"SIMCHNK3"
_COUNTS = struct.Struct("<II")  # tables, bytes of the side tables' names
_LENGTH = struct.Struct("<Q")


def partial_folder(out_dir: str | os.PathLike) -> Path:
    """Where the kept chunks of a sweep writing ``out_dir`` live: a hidden
    folder beside it (``reports/.bounded.partial`` for ``reports/bounded``)."""
    out = Path(out_dir)
    return out.parent / f".{out.name}.partial"


class Store(Protocol):
    """What :func:`sim.sweeps.chunks.run_chunks` keeps finished chunks in: a
    :class:`ChunkStore` (on disk, resumable) or a :class:`MemoryStore`.
    ``folder`` is where running DES chunks count their finished tasks."""

    folder: Path

    def has(self, key: str) -> bool: ...

    def put(self, key: str, table: pa.Table, extras: dict[str, Any] | None = None,
            side: dict[str, pa.Table] | None = None) -> None: ...

    def get(self, key: str) -> tuple[pa.Table, dict[str, Any] | None]: ...

    def sides(self, key: str) -> dict[str, pa.Table]: ...

    def take(self, key: str) -> tuple[pa.Table, dict[str, Any] | None, dict[str, pa.Table]]: ...


class ChunkStore:
    """The kept chunks of one run (see the module). ``resume`` False starts
    afresh (chunks of an earlier attempt are removed); True keeps the chunks
    of the same run and refuses those of another (an InputError)."""

    def __init__(self, folder: str | os.PathLike, fingerprint: str, *, resume: bool) -> None:
        self.folder = Path(folder)
        self.fingerprint = fingerprint
        self.resumed = 0
        if self.folder.is_symlink() or (self.folder.exists() and not self.folder.is_dir()):
            _remove(self.folder)  # sim's own hidden name, taken by a file: nothing to resume
        if self.folder.exists():
            kept = self._recorded()
            if resume and kept is not None and kept != fingerprint:
                raise InputError(f"{self.folder} holds the kept chunks of a different run "
                                 f"(another scenario, task count, seed or --traces); run without "
                                 f"--resume to start again")
            if not resume or kept is None:
                shutil.rmtree(self.folder)
        if not self.folder.exists():
            self.folder.mkdir(parents=True)
            write_atomic(self.folder / MANIFEST, json_bytes(
                {"format": FORMAT, "fingerprint": fingerprint}))
        self.dropped = self._drop_unreadable() if resume else []
        self.resumed = len(self.keys())

    def _drop_unreadable(self) -> list[str]:
        """Remove every kept chunk that cannot be read back whole (a truncated
        or corrupt file: a full disk, a copy cut short, a bad sector), so it
        is computed again; return their keys."""
        for leftover in self.folder.glob(f".*{_TABLE}.*.tmp"):  # a write a kill cut short
            leftover.unlink(missing_ok=True)
        dropped = []
        for key in sorted(self.keys()):
            files = [p for p in self.folder.iterdir() if p.name.startswith(f"{key}.")]
            try:
                for path in files:
                    if not path.is_file():  # a folder, a FIFO (never opened: it would block)
                        raise ValueError(f"{path} is not a file")
                    if path.suffix == _TABLE:
                        _read_chunk(path)
                    elif path.suffix == _EXTRAS:
                        json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError, pa.ArrowException):
                for path in files:
                    _remove(path)
                dropped.append(key)
        return dropped

    def _recorded(self) -> str | None:
        try:
            data = json.loads((self.folder / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            return None
        fingerprint = data.get("fingerprint")
        return fingerprint if isinstance(fingerprint, str) else None

    def keys(self) -> set[str]:
        """The chunks kept so far."""
        return {p.name.removesuffix(_TABLE) for p in self.folder.glob(f"*{_TABLE}")}

    def has(self, key: str) -> bool:
        """Whether chunk ``key`` is kept."""
        return (self.folder / f"{key}{_TABLE}").is_file()

    def chunk_path(self, key: str) -> Path:
        """The file of chunk ``key``: a worker on this machine may keep a chunk
        without extras itself, with :func:`write_chunk` there."""
        return self.folder / f"{key}{_TABLE}"

    def put(self, key: str, table: pa.Table, extras: dict[str, Any] | None = None,
            side: dict[str, pa.Table] | None = None) -> None:
        """Keep chunk ``key``: its extras first, then one file holding its
        records and ``side`` tables (by name: the runs and calls of a traced
        sweep), written atomically (a chunk counts as kept once that file is
        there)."""
        if extras is not None:  # NaN allowed: a measurement may be undefined
            write_atomic(self.folder / f"{key}{_EXTRAS}", json.dumps(
                extras, sort_keys=True, allow_nan=True, default=json_default).encode("utf-8"))
        write_chunk(self.folder / f"{key}{_TABLE}", table, side or {})

    def get(self, key: str) -> tuple[pa.Table, dict[str, Any] | None]:
        """Chunk ``key``'s records and extras (None without)."""
        return _read_chunk(self.folder / f"{key}{_TABLE}")[0], self._extras(key)

    def _extras(self, key: str) -> dict[str, Any] | None:
        """Chunk ``key``'s extras (None without)."""
        path = self.folder / f"{key}{_EXTRAS}"
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    def sides(self, key: str) -> dict[str, pa.Table]:
        """Chunk ``key``'s side tables by name."""
        return _read_chunk(self.folder / f"{key}{_TABLE}")[1]

    def take(self, key: str) -> tuple[pa.Table, dict[str, Any] | None, dict[str, pa.Table]]:
        """Chunk ``key``'s records, extras (None without) and side tables by
        name, from one read of its file."""
        table, side = _read_chunk(self.folder / f"{key}{_TABLE}")
        return table, self._extras(key), side

    def remove(self) -> None:
        """Delete the folder (the sweep finished and its results are written)."""
        shutil.rmtree(self.folder, ignore_errors=True)


class MemoryStore:
    """A :class:`ChunkStore` that keeps chunks in memory, for a sweep whose
    results are gathered in memory (the Python API): nothing is written, so
    nothing can be resumed. ``folder`` is where a running DES chunk may count
    its finished tasks (an existing folder the caller removes)."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder)
        self.resumed = 0
        self._chunks: dict[str, tuple[pa.Table, dict[str, Any] | None,
                                      dict[str, pa.Table]]] = {}

    def keys(self) -> set[str]:
        """The chunks kept so far."""
        return set(self._chunks)

    def has(self, key: str) -> bool:
        """Whether chunk ``key`` is kept."""
        return key in self._chunks

    def put(self, key: str, table: pa.Table, extras: dict[str, Any] | None = None,
            side: dict[str, pa.Table] | None = None) -> None:
        """Keep chunk ``key``."""
        self._chunks[key] = (table, extras, dict(side or {}))

    def get(self, key: str) -> tuple[pa.Table, dict[str, Any] | None]:
        """Chunk ``key``'s records and extras, handed over: the store lets go of them."""
        table, extras, side = self._chunks[key]
        self._chunks[key] = (table.schema.empty_table(), None, side)
        return table, extras

    def sides(self, key: str) -> dict[str, pa.Table]:
        """Chunk ``key``'s side tables by name."""
        return self._chunks[key][2]

    def take(self, key: str) -> tuple[pa.Table, dict[str, Any] | None, dict[str, pa.Table]]:
        """Chunk ``key``'s records, extras and side tables, handed over (see :meth:`get`)."""
        table, extras = self.get(key)
        return table, extras, self._chunks[key][2]

    def remove(self) -> None:
        """Drop every chunk."""
        self._chunks.clear()


def _remove(path: Path) -> None:
    """Remove ``path`` whatever it is (a file, a link, a FIFO, or a folder and
    everything in it); a path already gone is no error."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def write_chunk(path: Path, table: pa.Table, side: dict[str, pa.Table]) -> None:
    """Write ``table`` and ``side`` (in the order of their names) to ``path``
    as one chunk file (see the module): IPC streams end to end, then the side
    tables' names (JSON), each stream's length, the counts and the magic;
    to a temporary file beside it, renamed into place. A full or read-only
    disk is an InputError saying so (:func:`sim.output.folder.disk_errors`)."""
    names = sorted(side)
    # Arrow writes its buffers straight into the file (no copy in between); a
    # full disk is Python's OSError, told as such. Not fsynced (durable=False),
    # as a sweep's many chunk files never were
    with atomic_file(path, durable=False) as raw, pa.PythonFile(raw, mode="w") as handle:
        lengths, at = [], 0
        for part in (table, *(side[name] for name in names)):
            with pa.ipc.new_stream(handle, part.schema) as writer:
                writer.write_table(part)
            lengths.append(handle.tell() - at)
            at = handle.tell()
        named = json.dumps(names).encode("utf-8")
        handle.write(named + b"".join(_LENGTH.pack(n) for n in lengths)
                     + _COUNTS.pack(len(lengths), len(named)) + _MAGIC)


def _read_chunk(path: Path) -> tuple[pa.Table, dict[str, pa.Table]]:
    """The records and side tables of the chunk file ``path``, each in memory
    of its own (read through a memory map; a table that stayed a slice of the
    map would keep the whole file mapped while a stream holds it for its row
    group: every chunk of a sweep, side tables and all, for the small tables);
    a ValueError if it is not a whole chunk file."""
    data = pa.memory_map(str(path)).read_buffer()
    end = data.size - len(_MAGIC) - _COUNTS.size
    if end < 0 or data.slice(end + _COUNTS.size).to_pybytes() != _MAGIC:
        raise ValueError(f"{path} is not a whole chunk file")
    count, named = _COUNTS.unpack(data.slice(end, _COUNTS.size).to_pybytes())
    lengths_at = end - count * _LENGTH.size
    start = lengths_at - named
    if count < 1 or start < 0:
        raise ValueError(f"{path} is not a whole chunk file")
    names = json.loads(data.slice(start, named).to_pybytes())
    lengths = [n for (n,) in _LENGTH.iter_unpack(data.slice(lengths_at, end - lengths_at)
                                                  .to_pybytes())]
    if not isinstance(names, list) or len(names) != count - 1 or sum(lengths) != start:
        raise ValueError(f"{path} is not a whole chunk file")
    tables, offset = [], 0
    for length in lengths:
        part = pa.py_buffer(data.slice(offset, length).to_pybytes())
        tables.append(pa.ipc.open_stream(part).read_all())
        offset += length
    return tables[0], dict(zip(names, tables[1:], strict=True))
