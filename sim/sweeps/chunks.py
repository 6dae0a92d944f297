"""Sweeps in chunks: run anywhere, kept as they finish, streamed to Parquet in order.

A sweep's work is cut into :class:`~sim.sweeps.plan.Job` chunks by
:func:`~sim.sweeps.plan.plan` (:mod:`sim.sweeps.plan`): a direct cell into
ranges of tasks (a function of the task count alone, never of the
workers), a DES cell whole (one shared-capacity system is one simulation, so
it runs in one process; independent DES cells, such as the
replications of a sweep over ``seed``, run side by side). A scheduler
(:mod:`sim.sweeps.schedulers`) runs the chunks in this process, on local worker
processes or on Dask; each worker sends back its chunk as Arrow columns
(:mod:`sim.output.table`), never record objects. A traced chunk of a direct
cell on this machine's worker processes is instead kept in the store by the
worker itself (its tables are large: they are not pickled to the parent and
written again there).

:func:`run_chunks` keeps every finished chunk in a store
(:class:`~sim.output.chunks.Store`: on disk, or in memory for the Python API)
as it arrives, then hands the chunks to a sink in plan order (cells in order,
tasks by index), reading each back from the store once or handing it over
from memory when its turn is near (:class:`Handover`), so the parent
holds a few chunks at most whatever the order chunks finish in. The
records therefore reach the sink identically for any scheduler, worker count
or resumption; a sweep stopped by Ctrl-C, a SIGKILL or a lost worker keeps
its finished chunks, and run again with ``resume`` runs only the missing ones.

Progress (tasks done, tasks/s and the time left) goes to stderr as chunks
finish: a chunk is at most :data:`~sim.sweeps.plan.CHUNK_TASKS` tasks, a fraction of a second
of work. A DES cell, one chunk however long, counts its finished tasks into a
small file beside the kept chunks as it runs (:class:`TaskCounter`), and the
parent reads those counts four times a second, so its progress moves too
(on this machine's workers and a local Dask cluster; workers of a remote
cluster report at the end of the cell).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from sim.engines.cell import Cell
from sim.engines.direct import run_tasks
from sim.output.chunks import ChunkStore, Store
from sim.output.table import (
    CHILDREN_SCHEMA,
    RECORD_SCHEMA,
    as_schema,
    record_schema,
    records_table,
)
from sim.progress import progress_bar
from sim.sweeps.cells import CellRun, build_cell
from sim.sweeps.plan import Job, Sink, plan
from sim.sweeps.progress import ChunkProgress, TaskCounter
from sim.sweeps.schedulers import LostWorker
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


def fingerprint(runs: Sequence[CellRun], tasks: int, jobs: Sequence[Job],
                traces: str | None = None) -> str:
    """A digest of everything the kept chunks depend on: every cell's resolved
    scenario and axis values, the task count, the chunk plan, whether (and
    under which file name) runs are traced, the schemas of the kept tables
    (records, and the trace tables when traced: chunks kept by a sim whose
    columns differ are not mixed in, whatever its version says) and sim's
    version. Kept chunks are reused only under the same fingerprint."""
    try:
        version = metadata.version("sim")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a checkout
        version = "unknown"
    cells = [{"name": r.name, "values": [[k, repr(v)] for k, v in r.values],
              "scenario": r.scenario.model_dump(mode="json")} for r in runs]
    schemas = [RECORD_SCHEMA, CHILDREN_SCHEMA]  # the sweep's columns; the kept ones
    if traces is not None:
        from sim.traces.model import CALLS_SCHEMA, RUNS_SCHEMA

        schemas += [RUNS_SCHEMA, CALLS_SCHEMA]
    text = json.dumps({"cells": cells, "tasks": tasks, "version": version,
                       "chunks": [[j.cell, j.start, j.stop, j.des] for j in jobs],
                       "traces": traces, "schemas": [str(schema) for schema in schemas]},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------- workers
TRACE_TABLES = ("runs", "calls")
"""The side tables of a traced chunk, in the order of their files
(:data:`sim.traces.model.RUNS_FILE`, :data:`~sim.traces.model.CALLS_FILE`)."""
DISTINCT_COLUMNS = {"runs": ("run_id", "task_id", "duration_s"),
                    "calls": ("started_s", "tool_calls.list.element.duration_s")}
"""The columns of the side tables whose values are nearly all distinct
(ids, times on a continuous clock): written to Parquet without a dictionary,
which would be built and abandoned page by page (the values are the same)."""


def run_chunk(run: CellRun, cell: Cell, job: Job, traces: str | None = None,
              progress_file: str | None = None, keep: str | None = None
              ) -> tuple[pa.Table | None, dict[str, Any] | None, dict[str, pa.Table] | None]:
    """Run one chunk (in a worker): its records as Arrow columns; for a DES
    cell its extras (``capacity``: the measurements; ``series``: the resampled
    time series as ``[[name, bin start times, values], ...]`` in the engine's
    order); with ``traces`` (the name recorded as each run's ``file``) its runs
    in the trace model as the ``runs`` and ``calls`` tables. A DES cell with
    ``progress_file`` counts its finished tasks there as it runs
    (:class:`TaskCounter`). With ``keep`` (the chunk's file in the store, on
    this machine) a traced chunk without extras is written there by the
    worker (:func:`~sim.output.chunks.write_chunk`: atomically) and
    :data:`KEPT` returned, so its tables never travel to the parent; if that
    write fails, the tables are returned (the parent keeps them, or says
    why it cannot)."""
    from sim.sweeps.cells import RunTracer, traced_tables

    tracer = None if traces is None else RunTracer()
    extras = None
    if not job.des:
        records = run_tasks(cell, range(job.start, job.stop), tracer)
    else:
        from sim.analysis.capacity import measurements, resampled
        from sim.engines.des import DesEngine, arrival_schedule

        des = run.scenario.des
        counter = None if progress_file is None else TaskCounter(progress_file)
        result = DesEngine(cell, des, arrival_schedule(des, job.tasks, cell.seed), tracer,
                           on_task_end=counter).run()
        records = result.records
        extras = {
            "capacity": measurements(result, des.capacity.model_dump()),
            "series": [[name, *(a.tolist() for a in resampled(s, result.horizon_s))]
                       for name, s in result.series.items()],  # a list: the series keep order
        }
    tables = traced_tables(tracer, cell, records, traces)
    side = None if tables is None else dict(zip(TRACE_TABLES, tables, strict=True))
    table = records_table(records, children=True)  # the sink keeps the columns it writes
    if keep is not None and side is not None and extras is None:
        from sim.bad_input import InputError
        from sim.output.chunks import write_chunk

        with contextlib.suppress(OSError, InputError):  # (a full disk: the parent says so)
            write_chunk(Path(keep), table, side)
            return KEPT
    return table, extras, side


KEPT = (None, None, None)
"""What :func:`run_chunk` returns for a chunk the worker kept in the store itself."""


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


def run_chunks(runs: Sequence[CellRun], tasks: int, scheduler: Any, store: Store,
               sink: Sink, *, progress: bool = True, traces: str | None = None) -> None:
    """Run the chunks of :func:`plan` that ``store`` does not hold yet on
    ``scheduler``, keep each in ``store`` as it finishes, and give every chunk
    (kept earlier or now) to ``sink`` in plan order, with its side tables when
    ``traces`` (see :func:`run_chunk`). Raises :class:`Interrupted` on Ctrl-C
    or a lost worker (finished chunks stay kept). Workers and the store keep
    every record column; ``sink`` gets the sweep's
    (:func:`~sim.output.table.record_schema` of :func:`with_children`)."""
    jobs = plan(runs, tasks)
    children = with_children(runs)

    def shaped(job: Job, table: pa.Table, extras: dict[str, Any] | None,
               side: dict[str, pa.Table] | None) -> None:
        sink(job, as_schema(table, children), extras, side)

    cells = [build_cell(r) for r in runs]
    missing = [j for j in jobs if not store.has(j.key)]
    done = {j.key for j in jobs} - {j.key for j in missing}
    with held_ctrl_c():  # a bar half made says so at exit, with a traceback
        bar = progress_bar(total=sum(j.tasks for j in jobs),
                           initial=sum(j.tasks for j in jobs if j.key in done),
                           unit="task", file=sys.stderr, disable=not progress,
                           desc="simulating", mininterval=0.25, smoothing=0.1)
    counting = {j.key: store.folder / f"{j.key}.count" for j in missing if j.des and progress}
    watch = ChunkProgress(bar, counting)
    handover = Handover(jobs, store, shaped, traces, done)
    kept_by_worker = worker_files(store, scheduler, traces)
    try:
        handover.drain()
        work = [(runs[j.cell], cells[j.cell], j, traces,
                 str(counting[j.key]) if j.key in counting else None, kept_by_worker(j))
                for j in missing]
        watch.start()
        finished = scheduler.run(run_chunk, work)
        try:
            for i, (table, extras, side) in finished:
                handover.keep(missing[i], table, extras, side)
                watch.finished(missing[i])
                handover.drain()
        finally:
            finished.close()  # stops the workers when the sweep stops early
    except KeyboardInterrupt:
        raise Interrupted("interrupted", len(done), len(jobs), str(store.folder)) from None
    except LostWorker as error:
        raise Interrupted(str(error), len(done), len(jobs), str(store.folder)) from None
    finally:
        watch.stop()
        bar.close()


def with_children(runs: Sequence[CellRun]) -> bool:
    """Whether the sweep's results carry the subagent columns
    (:data:`~sim.task_record.CHILDREN_FIELDS`): when any cell's harness has
    subagents (every cell then has the columns, zeros where it has none)."""
    return any(r.scenario.harness.subagents is not None for r in runs)


# ---------------------------------------------------------- to a results file
@dataclass
class Streamed:
    """A sweep's records streamed to ``path`` (cells in order, tasks by index):
    the tasks of each cell in order (``cells``: ``[(name, tasks)]``), DES cells'
    capacity measurements and time series, the streamed trace files beside
    ``path`` (``traces``: runs.parquet and calls.parquet by file name; empty
    without traces) and the store of kept chunks (to remove once the results
    folder is written)."""

    path: Any
    cells: list[tuple[str, int]]
    capacity: dict[str, dict[str, Any]]
    series: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]
    store: ChunkStore
    traces: dict[str, Any] = field(default_factory=dict)


def run_to_file(runs: Sequence[CellRun], tasks: int, out_dir: Any, scheduler: Any, *,
                resume: bool = False, progress: bool = True,
                metadata: dict[bytes, bytes] | None = None, traces: str | None = None
                ) -> Streamed:
    """:func:`_run_to_file`; when it fails, the lock of ``out_dir`` taken by
    :func:`sim.output.folder.prepare` is released (the folder will not be
    written: the next command may have it)."""
    from sim.output.folder import unlock

    try:
        return _run_to_file(runs, tasks, out_dir, scheduler, resume=resume,
                            progress=progress, metadata=metadata, traces=traces)
    except BaseException:
        unlock(out_dir)
        raise


def _run_to_file(runs: Sequence[CellRun], tasks: int, out_dir: Any, scheduler: Any, *,
                 resume: bool = False, progress: bool = True,
                 metadata: dict[bytes, bytes] | None = None, traces: str | None = None
                 ) -> Streamed:
    """Run the sweep (or, with ``resume``, what an interrupted run of it left)
    and stream its records into ``results.parquet`` inside the folder of kept
    chunks beside ``out_dir`` (:func:`~sim.output.chunks.partial_folder`),
    with ``metadata`` in its schema; with ``traces`` (the name recorded as
    each run's ``file``), every run in the trace model too, streamed into
    runs.parquet and calls.parquet there. Raises :class:`Interrupted` when
    stopped early; the results and trace files then do not exist."""
    from sim.output.chunks import partial_folder
    from sim.output.stream import ParquetStream, stale_temporaries

    jobs = plan(runs, tasks)
    children = with_children(runs)
    with held_ctrl_c():  # no temporary manifest left by a Ctrl-C
        store = ChunkStore(partial_folder(out_dir), fingerprint(runs, tasks, jobs, traces),
                           resume=resume)
    names = ["results.parquet"]
    if traces is not None:
        from sim.traces.model import CALLS_FILE, CALLS_SCHEMA, RUNS_FILE, RUNS_SCHEMA

        names += [RUNS_FILE, CALLS_FILE]
    for name in names:
        for leftover in stale_temporaries(store.folder, name):
            leftover.unlink(missing_ok=True)  # a stream a SIGKILL cut short
    result = Streamed(store.folder / "results.parquet", [(r.name, tasks) for r in runs], {}, {},
                      store)

    from sim.output.folder import disk_errors

    kept = (f"the finished chunks are kept in {store.folder}: make room and run the same "
            f"command with --resume; {out_dir} is as it was")
    with disk_errors(store.folder, kept), contextlib.ExitStack() as files:
        with held_ctrl_c():  # each stream open and in the stack, or neither
            stream = files.enter_context(ParquetStream(result.path, record_schema(children),
                                                       metadata=metadata))
        side_streams: dict[str, ParquetStream] = {}
        if traces is not None:
            for table_name, file_name, schema in (("runs", RUNS_FILE, RUNS_SCHEMA),
                                                  ("calls", CALLS_FILE, CALLS_SCHEMA)):
                path = store.folder / file_name
                with held_ctrl_c():
                    side_streams[table_name] = files.enter_context(
                        ParquetStream(path, schema, plain=DISTINCT_COLUMNS[table_name]))
                result.traces[file_name] = path

        def sink(job: Job, table: pa.Table, extras: dict[str, Any] | None,
                 side: dict[str, pa.Table] | None) -> None:
            stream.write(table)
            for table_name, side_table in (side or {}).items():
                side_streams[table_name].write(side_table)
            if extras is not None:
                name = runs[job.cell].name
                result.capacity[name] = extras["capacity"]
                result.series[name] = series_of(extras)

        run_chunks(runs, tasks, scheduler, store, sink, progress=progress, traces=traces)
    return result


# ------------------------------------------------------------- to memory
@dataclass
class Collected:
    """A sweep's records gathered in memory as Arrow columns (the Python
    API's results): one table per cell (tasks by index), and DES cells'
    capacity measurements and time series."""

    tables: dict[str, pa.Table]
    capacity: dict[str, dict[str, Any]]
    series: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]


def run_collected(runs: Sequence[CellRun], tasks: int, *, workers: int,
                  progress: bool = False) -> Collected:
    """Run the sweep in chunks on ``workers`` local processes (one: in this
    process) and gather every cell's records as one Arrow table. Workers send
    columns, never record objects; chunks are held in memory
    (:class:`~sim.output.chunks.MemoryStore`) only until their turn comes, so
    the records are those :func:`run_to_file` writes, whatever the worker count."""
    import tempfile

    from sim.output.chunks import MemoryStore
    from sim.sweeps.schedulers import make_scheduler

    parts: dict[str, list[pa.Table]] = {r.name: [] for r in runs}
    result = Collected({}, {}, {})
    children = with_children(runs)

    def sink(job: Job, table: pa.Table, extras: dict[str, Any] | None,
             side: dict[str, pa.Table] | None) -> None:
        name = runs[job.cell].name
        parts[name].append(table)
        if extras is not None:
            result.capacity[name] = extras["capacity"]
            result.series[name] = series_of(extras)

    with (tempfile.TemporaryDirectory(prefix="sim-sweep-") as folder,  # DES progress counts
          make_scheduler(None, workers) as scheduler):
        run_chunks(runs, tasks, scheduler, MemoryStore(folder), sink, progress=progress)
    for name, tables in parts.items():
        result.tables[name] = (pa.concat_tables(tables).combine_chunks() if tables
                               else record_schema(children).empty_table())
    return result
