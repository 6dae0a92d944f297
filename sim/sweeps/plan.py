"""A sweep's chunk plan: which tasks of which cell each chunk runs, in write order.

A direct cell is cut into ranges of tasks (:func:`sim.jobs.chunk_size` between
:data:`MIN_CHUNK_TASKS` and :data:`CHUNK_TASKS`: about 64 chunks, a function of
the task count alone, never of the workers, so every scheduler and worker
count runs the same chunks and kept chunks serve ``--resume``); a DES cell is
one chunk (one shared-capacity system is one simulation). :class:`Job` names
a chunk; :data:`Sink` is what receives the finished chunks in plan order
(:mod:`sim.sweeps.chunks`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from sim.jobs import chunk_size, spans

if TYPE_CHECKING:
    from sim.sweeps.cells import CellRun

CHUNK_TASKS = 2_000
"""The most tasks of a direct cell in one chunk (a fraction of a second of work)."""
MIN_CHUNK_TASKS = 50
"""The fewest tasks of a direct cell in one chunk (a smaller cell is one chunk)."""


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
    size = chunk_size(tasks, least=MIN_CHUNK_TASKS, most=CHUNK_TASKS)
    jobs = []
    for c, run in enumerate(runs):
        if run.scenario.engine == "des":
            jobs.append(Job(c, 0, tasks, True))
        else:
            jobs.extend(Job(c, start, stop, False) for start, stop in spans(tasks, size))
    return jobs



Sink = Callable[[Job, pa.Table, "dict[str, Any] | None", "dict[str, pa.Table] | None"], None]
"""Receives a finished chunk in plan order: its job, its records, a DES cell's
extras (capacity measurements, series) and its side tables (traces)."""
