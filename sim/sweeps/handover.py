"""A sweep's finished chunks handed to its sink in plan order.

:class:`Handover` takes chunks in whatever order they finish, keeps each in
the store (:class:`~sim.output.chunks.Store`) unless its worker kept it there
itself, and gives them to the sink in plan order, reading each back from the
store once; a chunk kept on disk whose turn is at most :data:`HELD_CHUNKS`
away when it arrives is held in memory until then and handed over as it came
(not read back), so the parent holds a few chunks at most.
:func:`worker_files` says which chunks the workers keep themselves: the traced
chunks of direct cells, when the workers write to this machine's disk (their
tables are large: they are not pickled to the parent and written again there).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from sim.output.chunks import ChunkStore, Store
from sim.sweeps.plan import Job, Sink
from sim.sweeps.uninterrupted import held_ctrl_c

HELD_CHUNKS = 4
"""A chunk kept on disk whose turn to be written is at most this many chunks
away when it arrives is also held in memory until then, not read back."""


class Handover:
    """The chunks of ``jobs`` (in plan order) to ``sink``, with their side
    tables when ``traces``; ``done`` holds the keys of the chunks kept so far
    (those kept earlier, then every one :meth:`keep` is given)."""

    def __init__(self, jobs: Sequence[Job], store: Store, sink: Sink, traces: str | None,
                 done: set[str]) -> None:
        self.jobs, self.store, self.sink, self.traces, self.done = jobs, store, sink, traces, done
        self.written = 0  # chunks given to the sink
        self._hold = isinstance(store, ChunkStore)  # (a MemoryStore holds them anyway)
        self._order = {job.key: n for n, job in enumerate(jobs)}
        self._held: dict[str, tuple[pa.Table, dict[str, Any] | None,
                                    dict[str, pa.Table]]] = {}

    def keep(self, job: Job, table: pa.Table | None, extras: dict[str, Any] | None,
             side: dict[str, pa.Table] | None) -> None:
        """Chunk ``job`` finished: keep it in the store (``table`` None: its
        worker kept it there); :meth:`drain` gives it to the sink in its turn."""
        if table is not None:
            with held_ctrl_c():  # no temporary file left by a Ctrl-C
                self.store.put(job.key, table, extras, side)
            if self._hold and self._order[job.key] < self.written + HELD_CHUNKS:
                self._held[job.key] = (table, extras, side or {})
        self.done.add(job.key)

    def drain(self) -> None:
        """Give the sink the kept chunks whose turn has come, in plan order."""
        jobs, held = self.jobs, self._held
        while self.written < len(jobs) and jobs[self.written].key in self.done:
            job = jobs[self.written]
            table, extras, side = held.pop(job.key) if job.key in held else self.store.take(job.key)
            self.sink(job, table, extras, None if self.traces is None else side)
            self.written += 1


def worker_files(store: Store, scheduler: Any, traces: str | None
                 ) -> Callable[[Job], str | None]:
    """For each chunk, the file its worker keeps it in itself (None: the worker
    sends its tables back): a traced chunk of a direct cell, when ``store`` is
    on disk and ``scheduler``'s workers write to this machine's disk
    (``shares_disk``)."""
    if traces is None or not isinstance(store, ChunkStore) or not getattr(
            scheduler, "shares_disk", False):
        return lambda job: None
    where: Callable[[str], Path] = store.chunk_path
    return lambda job: None if job.des else str(where(job.key))
