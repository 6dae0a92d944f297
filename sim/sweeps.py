"""Sweeps in chunks: run anywhere, kept as they finish, streamed to Parquet in order.

A sweep's work is cut into :class:`Job` chunks by :func:`plan`: a direct cell
into ranges of tasks (:func:`chunk_size`, a function of the task count alone,
never of the workers), a DES cell whole (one shared-capacity system is one
simulation, so it runs in one process; independent DES cells, such as the
replications of a sweep over ``seed``, run side by side). A scheduler
(:mod:`sim.schedulers`) runs the chunks in this process, on local worker
processes or on Dask; each worker sends back its chunk as Arrow columns
(:mod:`sim.output.table`), never record objects.

:func:`run_chunks` keeps every finished chunk in a :class:`~sim.output.chunks.ChunkStore`
as it arrives, then hands the chunks to a sink in plan order (cells in
order, tasks by index), reading each back from the store, so the parent
holds no more than one chunk whatever the order chunks finish in. The
records therefore reach the sink identically for any scheduler, worker count
or resumption; a sweep stopped by Ctrl-C, a SIGKILL or a lost worker keeps
its finished chunks, and run again with ``resume`` runs only the missing ones.

Progress (tasks done, tasks/s and the time left) goes to stderr as chunks
finish: a chunk is at most :data:`CHUNK_TASKS` tasks, a fraction of a second
of work.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import numpy as np
import pyarrow as pa
from tqdm import tqdm

from sim.engines.cell import Cell
from sim.engines.direct import run_tasks
from sim.output.chunks import ChunkStore
from sim.output.table import records_table
from sim.runner import CellRun, build_cell
from sim.schedulers import LostWorker

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


def fingerprint(runs: Sequence[CellRun], tasks: int, jobs: Sequence[Job]) -> str:
    """A digest of everything the records depend on: every cell's resolved
    scenario and axis values, the task count, the chunk plan and sim's
    version. Kept chunks are reused only under the same fingerprint."""
    try:
        version = metadata.version("sim")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a checkout
        version = "unknown"
    cells = [{"name": r.name, "values": [[k, repr(v)] for k, v in r.values],
              "scenario": r.scenario.model_dump(mode="json")} for r in runs]
    text = json.dumps({"cells": cells, "tasks": tasks, "version": version,
                       "chunks": [[j.cell, j.start, j.stop, j.des] for j in jobs]},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------- workers
def run_chunk(run: CellRun, cell: Cell, job: Job) -> tuple[pa.Table, dict[str, Any] | None]:
    """Run one chunk (in a worker): its records as Arrow columns, and for a DES
    cell its extras (``capacity``: the measurements; ``series``: the resampled
    time series as ``[[name, bin start times, values], ...]`` in the engine's order)."""
    if not job.des:
        return records_table(run_tasks(cell, range(job.start, job.stop))), None
    from sim.analysis.capacity import measurements, resampled
    from sim.engines.des import DesEngine, arrival_schedule

    des = run.scenario.des
    result = DesEngine(cell, des, arrival_schedule(des, job.tasks, cell.seed)).run()
    extras = {
        "capacity": measurements(result, des.capacity.model_dump()),
        "series": [[name, *(a.tolist() for a in resampled(s, result.horizon_s))]
                   for name, s in result.series.items()],  # a list: the series keep their order
    }
    return records_table(result.records), extras


def series_of(extras: dict[str, Any]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The time series kept in a DES chunk's extras, as arrays again."""
    return {name: (np.asarray(t, dtype=np.float64), np.asarray(v, dtype=np.float64))
            for name, t, v in extras["series"]}


# ---------------------------------------------------------------- the parent
class Interrupted(Exception):
    """The sweep stopped before every chunk finished (Ctrl-C, a lost worker):
    ``kept`` of ``total`` chunks are in ``folder``; ``--resume`` continues."""

    def __init__(self, why: str, kept: int, total: int, folder: str) -> None:
        self.why, self.kept, self.total, self.folder = why, kept, total, folder
        super().__init__(f"{why}: {kept} of {total} chunks finished and kept in {folder}; "
                         f"run the same command with --resume to run only the rest")


Sink = Callable[[Job, pa.Table, "dict[str, Any] | None"], None]


def run_chunks(runs: Sequence[CellRun], tasks: int, scheduler: Any, store: ChunkStore,
               sink: Sink, *, progress: bool = True) -> None:
    """Run the chunks of :func:`plan` that ``store`` does not hold yet on
    ``scheduler``, keep each in ``store`` as it finishes, and give every chunk
    (kept earlier or now) to ``sink`` in plan order. Raises
    :class:`Interrupted` on Ctrl-C or a lost worker (finished chunks stay kept)."""
    jobs = plan(runs, tasks)
    cells = [build_cell(r) for r in runs]
    missing = [j for j in jobs if not store.has(j.key)]
    done = {j.key for j in jobs} - {j.key for j in missing}
    bar = tqdm(total=sum(j.tasks for j in jobs), initial=sum(j.tasks for j in jobs
                                                             if j.key in done),
               unit="task", file=sys.stderr, disable=not progress, desc="simulating",
               mininterval=0.25, smoothing=0.1)
    written = 0

    def drain() -> None:
        nonlocal written
        while written < len(jobs) and jobs[written].key in done:
            job = jobs[written]
            table, extras = store.get(job.key)
            sink(job, table, extras)
            written += 1

    try:
        drain()
        work = [(runs[j.cell], cells[j.cell], j) for j in missing]
        finished = scheduler.run(run_chunk, work)
        try:
            for i, (table, extras) in finished:
                job = missing[i]
                store.put(job.key, table, extras)
                done.add(job.key)
                bar.update(job.tasks)
                drain()
        finally:
            finished.close()  # stops the workers when the sweep stops early
    except KeyboardInterrupt:
        raise Interrupted("interrupted", len(done), len(jobs), str(store.folder)) from None
    except LostWorker as error:
        raise Interrupted(str(error), len(done), len(jobs), str(store.folder)) from None
    finally:
        bar.close()


# ---------------------------------------------------------- to a results file
@dataclass
class Streamed:
    """A sweep's records streamed to ``path`` (cells in order, tasks by index):
    the tasks of each cell in order (``cells``: ``[(name, tasks)]``), DES cells'
    capacity measurements and time series, and the store of kept chunks (to
    remove once the results folder is written)."""

    path: Any
    cells: list[tuple[str, int]]
    capacity: dict[str, dict[str, Any]]
    series: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]
    store: ChunkStore


def run_to_file(runs: Sequence[CellRun], tasks: int, out_dir: Any, scheduler: Any, *,
                resume: bool = False, progress: bool = True,
                metadata: dict[bytes, bytes] | None = None) -> Streamed:
    """Run the sweep (or, with ``resume``, what an interrupted run of it left)
    and stream its records into ``results.parquet`` inside the folder of kept
    chunks beside ``out_dir`` (:func:`~sim.output.chunks.partial_folder`),
    with ``metadata`` in its schema. Raises :class:`Interrupted` when stopped
    early; the results file then does not exist."""
    from sim.output.chunks import partial_folder
    from sim.output.stream import ParquetStream, stale_temporaries
    from sim.output.table import RECORD_SCHEMA

    jobs = plan(runs, tasks)
    store = ChunkStore(partial_folder(out_dir), fingerprint(runs, tasks, jobs), resume=resume)
    for leftover in stale_temporaries(store.folder, "results.parquet"):
        leftover.unlink(missing_ok=True)  # a stream a SIGKILL cut short
    result = Streamed(store.folder / "results.parquet", [(r.name, tasks) for r in runs], {}, {},
                      store)

    with ParquetStream(result.path, RECORD_SCHEMA, metadata=metadata) as stream:
        def sink(job: Job, table: pa.Table, extras: dict[str, Any] | None) -> None:
            stream.write(table)
            if extras is not None:
                name = runs[job.cell].name
                result.capacity[name] = extras["capacity"]
                result.series[name] = series_of(extras)

        run_chunks(runs, tasks, scheduler, store, sink, progress=progress)
    return result
