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

On ``--resume`` every kept chunk is read back first: one that cannot be read
whole (truncated by a full disk or a copy cut short) is removed and computed
again, never fatal.

The folder records a fingerprint of the run (the resolved scenario, task
count, seed, chunk plan and sim version): kept chunks of a different run are
never mixed in. A finished sweep removes the folder.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from sim.bad_input import InputError
from sim.output.files import json_bytes, write_atomic

MANIFEST = "manifest.json"
FORMAT = 1
_TABLE = ".arrow"
_EXTRAS = ".json"
_SIDE = ".side"


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

    def side(self, key: str, name: str) -> pa.Table: ...


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


class ChunkStore:
    """The kept chunks of one run (see the module). ``resume`` False starts
    afresh (chunks of an earlier attempt are removed); True keeps the chunks
    of the same run and refuses those of another (an InputError)."""

    def __init__(self, folder: str | os.PathLike, fingerprint: str, *, resume: bool) -> None:
        self.folder = Path(folder)
        self.fingerprint = fingerprint
        self.resumed = 0
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
        dropped = []
        for key in sorted(self.keys()):
            files = [p for p in self.folder.iterdir() if p.name.startswith(f"{key}.")]
            try:
                for path in files:
                    if path.suffix in (_TABLE, _SIDE):
                        _read_ipc(path)
                    elif path.suffix == _EXTRAS:
                        json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError, pa.ArrowException):
                for path in files:
                    path.unlink(missing_ok=True)
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

    def put(self, key: str, table: pa.Table, extras: dict[str, Any] | None = None,
            side: dict[str, pa.Table] | None = None) -> None:
        """Keep chunk ``key``: its extras and ``side`` tables (by name: the
        runs and calls of a traced sweep) first, then its records, each
        written atomically (a chunk counts as kept once its records are there)."""
        if extras is not None:  # NaN allowed: a measurement may be undefined
            write_atomic(self.folder / f"{key}{_EXTRAS}", json.dumps(
                extras, sort_keys=True, allow_nan=True, default=_plain).encode("utf-8"))
        for name, side_table in sorted((side or {}).items()):
            write_atomic(self.folder / f"{key}.{name}{_SIDE}", _ipc_bytes(side_table))
        write_atomic(self.folder / f"{key}{_TABLE}", _ipc_bytes(table))

    def get(self, key: str) -> tuple[pa.Table, dict[str, Any] | None]:
        """Chunk ``key``'s records (memory-mapped) and extras (None without)."""
        table = _read_ipc(self.folder / f"{key}{_TABLE}")
        extras_path = self.folder / f"{key}{_EXTRAS}"
        extras = (json.loads(extras_path.read_text(encoding="utf-8"))
                  if extras_path.is_file() else None)
        return table, extras

    def side(self, key: str, name: str) -> pa.Table:
        """Chunk ``key``'s side table ``name`` (memory-mapped)."""
        return _read_ipc(self.folder / f"{key}.{name}{_SIDE}")

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

    def side(self, key: str, name: str) -> pa.Table:
        """Chunk ``key``'s side table ``name``."""
        return self._chunks[key][2][name]

    def remove(self) -> None:
        """Drop every chunk."""
        self._chunks.clear()


def _ipc_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _read_ipc(path: Path) -> pa.Table:
    return pa.ipc.open_file(pa.memory_map(str(path))).read_all()
