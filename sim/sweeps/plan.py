"""A sweep's chunk plan: which tasks of which cell each chunk runs, in write order.

A direct cell is cut into ranges of tasks (:func:`chunk_size`, a function of
the task count alone, never of the workers); a DES cell is one chunk (one
shared-capacity system is one simulation). :class:`Job` names a chunk;
:data:`Sink` is what receives the finished chunks in plan order
(:mod:`sim.sweeps.chunks`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from sim.sweeps.cells import CellRun

CHUNK_TASKS = 2_000
"""The most tasks of a direct cell in one chunk (a fraction of a second of work)."""
MIN_CHUNK_TASKS = 50


def chunk_size(tasks: int) -> int:
    """Tasks per chunk of a direct cell of ``tasks`` tasks: about 64 chunks,
    at least :data:`MIN_CHUNK_TASKS` and at most :data:`CHUNK_TASKS` tasks.
    It depends on the task count only, so every scheduler and worker count
    runs the same chunks."""
    return max(MIN_CHUNK_TASKS, min(CHUNK_TASKS, -(-tasks // 64)))


@dataclass(frozen=True)
class Job:
    """One chunk: tasks ``[start, stop)`` of cell number ``cell``; ``des``
    when the cell runs on the DES engine (then the chunk is the whole cell)."""

    cell: int
    start: int
    stop: int
    des: bool

    @property
    def key(self) -> str:
        """The chunk's name in the store."""
        return f"c{self.cell:05d}-t{self.start:010d}"

    @property
    def tasks(self) -> int:
        """Tasks in the chunk."""
        return self.stop - self.start


def plan(runs: Sequence[CellRun], tasks: int) -> list[Job]:
    """The sweep's chunks, in the order their records are written."""
    size = chunk_size(tasks)
    jobs = []
    for c, run in enumerate(runs):
        if run.scenario.engine == "des":
            jobs.append(Job(c, 0, tasks, True))
        else:
            jobs.extend(Job(c, start, min(start + size, tasks), False)
                        for start in range(0, tasks, size))
    return jobs



Sink = Callable[[Job, pa.Table, "dict[str, Any] | None", "dict[str, pa.Table] | None"], None]
"""Receives a finished chunk in plan order: its job, its records, a DES cell's
extras (capacity measurements, series) and its side tables (traces)."""
