"""Chunks as Dask tasks: ``--scheduler dask`` (a LocalCluster of ours) or a
running cluster's address (``tcp://HOST:PORT``, e.g. one started by
dask-jobqueue on Slurm or PBS, or by dask-kubernetes; its workers need sim
installed). Dask is imported only here, only then.

Where a Dask run spends more than the local pool (measured with
``benchmarks/bench_dask.py`` and ``sim run --tasks 200000`` on 2 cores), and
what this module does about it:

- **starting the LocalCluster**: the one place a Dask run waits. Timed per
  chunk in every process (100,000 tasks of bounded.yaml at load 13-14), the
  workers go from one chunk to the next with 0.6 s of gaps in 80 s and spend
  the CPU per chunk the local pool's workers do (within the noise: 0.43 s a
  chunk for Dask's workers and for this process's own, 0.38 s for the pool a
  minute before); Dask's extra wall time is the start, when one process
  computes instead of two. Workers forked from a fork server (a new
  interpreter importing Dask and sim: 3.8-4.1 s to a cluster up at load 14)
  are now forked from this process on Linux
  (:data:`~sim.sweeps.dask_workers.START_METHOD`: 0.5-0.8
  s), as the local pool's are. Where Dask's CPU goes (200,000 tasks at
  load 9-10, per thread from /proc and per chunk with ``thread_time``): a
  chunk costs a Dask worker what it costs a pool worker (median 0.457 s
  against 0.467 s of CPU), and Dask adds about 7%: this process's event
  loop (scheduler, nannies, client: 2.1 CPU-s in 140 s, 8 ms a second when
  idle) and each worker's own loop (1.0 CPU-s each; heartbeats twice a
  second, 3 ms a second idle). The CPU seconds a chunk takes grow with
  the machine's load (0.32 s at load 7, 0.46 s at load 10): the local
  pool's five runs below took 34.9-46.1 CPU-s for the same work, which is
  the 20-30% that earlier rounds saw on either side. (With the changes
  below, five interleaved rounds at load 10-20 measured 0.92x-1.17x wall,
  median 1.07x, and 0.87x-1.07x CPU seconds.) The cluster starts in a
  background thread while this process runs
  the first chunks itself, as :class:`~sim.sweeps.schedulers.InProcess`
  would; once it is up, every chunk not yet begun goes to it at once
  (:class:`_Handoff`), so no worker waits for this process's chunk. The
  workers are forked only while this process's thread is parked, before
  its first chunk (:mod:`sim.sweeps.fork_gate`: a worker forked mid-chunk
  could copy a lock held, pandas's import lock, and hang at its first
  chunk);
- **the arguments every chunk shares** (a cell's scenario and compiled
  world: 10 KB for bounded.yaml, 365 KB and 60 ms to unpickle for
  tau2.yaml) are scattered to the workers once, not sent with every chunk;
- **results through the scheduler**: each chunk's records (470 KB for
  2,000 tasks) come straight from its worker (:data:`CLIENT_OPTIONS`);
- **Dask's own housekeeping** (its statistical profiler, GIL monitor, work
  stealing, frequent ticks, the dashboard: :data:`LOCAL_CLUSTER_CONFIG`,
  :data:`CLUSTER_OPTIONS`), and the imports
  Distributed makes to choose the fork server's preload (pandas and every
  optional package, about a second in this process): off.

The chunks, hence the results, are the same wherever each one runs.

Ctrl-C (SIGINT to the sweep's process group) ends the workers of our
LocalCluster at once (:mod:`sim.sweeps.dask_workers`: their nannies leave
them ended) and raises KeyboardInterrupt in this process's main thread,
which then closes the cluster, the finished chunks kept. That thread never
waits inside Distributed's ``sync`` (every blocking call of its Client: a
result, a scatter) while a sweep runs: a KeyboardInterrupt landing there
before Distributed's event loop has begun the call makes Distributed log a
``NameError`` traceback (its ``sync`` cancels a future not yet made; seen
under load as a failure of the Ctrl-C test). It waits on a queue instead,
filled by a thread that fetches the results (:meth:`DaskScheduler._fetch`),
and chunks are submitted by the starting thread or one of their own.

Nothing waits for a cluster that does not come up. A worker forked while
another thread of this process held a stream's lock (a log line being
written) inherits the lock held and waits for it forever at its own first
log line (seen once: py-spy showed a worker stuck in a stream handler's
``flush``), and the cluster's start then never ends. :mod:`sim.sweeps.fork_gate`
forks no worker while one of this process's log handlers is writing, which
closes the common case, not a write to the stream outside logging (a
``print`` from another thread). So:

- :meth:`DaskScheduler.run` returns once every chunk has a result, wherever
  it ran: this process keeps running chunks while the cluster starts, and a
  sweep it finishes alone never waits for the cluster;
- the start has a time-out, :data:`START_S`: after it this process runs
  every chunk not yet handed to the cluster itself, stderr says once that
  the Dask workers did not start, and the workers forked so far are killed
  (the start then fails and ends; a cluster that comes up later is closed
  unused);
- :meth:`DaskScheduler.close` waits for a start under way until that
  time-out at most, then gives it up as above and waits :data:`START_END_S`
  at most for it to end, killing any worker process it forks meanwhile: no
  worker process of ours outlives the close.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sim.bad_input import InputError
from sim.sweeps.dask_workers import (
    FORKSERVER_PRELOAD,
    START_METHOD,
    CtrlCHandler,
    nanny_class,
    prepare_start,
)
from sim.sweeps.fork_gate import GATE
from sim.sweeps.lost_worker import LostWorker

__all__ = ["CLIENT_OPTIONS", "CLUSTER_OPTIONS", "FORKSERVER_PRELOAD", "LOCAL_CLUSTER_CONFIG",
           "START_END_S", "START_METHOD", "START_S", "DaskScheduler"]

LOCAL_CLUSTER_CONFIG: dict[str, Any] = {
    "distributed.worker.multiprocessing-method": START_METHOD,
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.gil.enabled": False,
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.admin.tick.interval": "1s",
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.scheduler.work-stealing": False,
    "distributed.admin.system-monitor.disk": False,
    "distributed.client.scheduler-info-interval": "10s",
}
"""Dask settings of the LocalCluster that ``--scheduler dask`` starts (measured
with ``benchmarks/bench_dask.py``): workers started by
:data:`~sim.sweeps.dask_workers.START_METHOD`
(forked from this process on Linux; elsewhere from a server that has
imported Dask and sim once, :data:`~sim.sweeps.dask_workers.FORKSERVER_PRELOAD`, the chunk path
importing no pandas), instead of each spawned worker importing them again
(on 2 cores at load 15-23: start and stop 4-12 s became about 5 s with the
fork server, and 0.5-0.8 s forked at load 14), and
neither the statistical profiler (it samples the running chunk's stack every
10 ms, taking the GIL: it made chunks 2x slower) nor the GIL monitor; the
event loops' housekeeping (ticks every 20 ms, memory checks every 100 ms,
work stealing, disk counters, the client's polls of the scheduler) runs
seldom or not at all, since a chunk is a fraction of a second of CPU and
every chunk is queued at once (together 25% more CPU than the local pool,
now a few percent: 40.5 s against 37.7 s in all processes for 200,000 tasks
of bounded.yaml). A remote cluster's workers take these from their
own configuration (see README: ``DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False``)."""

CLUSTER_OPTIONS: dict[str, Any] = {"threads_per_worker": 1, "processes": True,
                                   "dashboard_address": "127.0.0.1:0",
                                   "scheduler_kwargs": {"dashboard": False}}
"""How our LocalCluster is made: one single-threaded worker process per
``--workers`` (a chunk is pure Python, so threads would share one core), and
no dashboard (were Bokeh installed, it would serve plots nobody opens; the
scheduler's small HTTP server listens on this machine only, on a free port)."""

CLIENT_OPTIONS: dict[str, Any] = {"direct_to_workers": True}
"""How this process's client of our LocalCluster is made: it fetches each
chunk's result from the worker that has it, instead of through the
scheduler (which, in this same process, would read every result from the
worker and write it again to the client: 470 KB a chunk of 2,000 tasks)."""

_END = object()
"""What :meth:`DaskScheduler._fetch` puts on its queue last."""

FETCH_END_S = 5.0
"""The longest closing waits for the fetching thread to end (seconds): it
ends at its next cancelled future, at once; a thread still waiting after
this (a cluster gone mid-fetch) is left to end with the process."""


START_S = 60.0
"""The longest our LocalCluster may take to start (seconds, from the
scheduler's creation) before this process gives it up and runs the sweep's
chunks itself (see the module). Starts measured on 2 cores: 0.5-0.8 s with
forked workers at load 14, 4-12 s when every worker was a new interpreter at
load 15-23 (:data:`LOCAL_CLUSTER_CONFIG`); a start that has not ended in
five times the slowest of those has stalled."""

START_END_S = 10.0
"""The longest closing waits for a start given up to end (seconds), its
worker processes killed meanwhile; a start still under way after this (its
scheduler stalled, say) is left to end with the process."""

STALL_NOTE = ("note: the Dask workers did not start within {seconds:g} s; "
              "this process runs the chunks instead")
"""What stderr says, once, when the start is given up."""


class _Handoff:
    """Which chunks this process runs while the cluster starts: it claims
    them one at a time (:meth:`claim`) until the cluster, once up, takes
    every chunk not claimed yet (:meth:`rest`)."""

    def __init__(self, total: int) -> None:
        self._lock = threading.Lock()
        self._next = 0
        self._total = total
        self._closed = False
        self.all_here = False  # every chunk was claimed: the cluster has none

    def claim(self) -> int | None:
        """The next chunk for this process, or None once the cluster has the
        rest or this process has claimed every chunk (:attr:`all_here`)."""
        with self._lock:
            if self._closed:
                return None
            if self._next >= self._total:
                self._closed = self.all_here = True
                return None
            self._next += 1
            return self._next - 1

    def rest(self) -> range:
        """Every chunk not claimed yet; none can be claimed after."""
        with self._lock:
            self._closed = True
            return range(self._next, self._total)


def _shared_args(jobs: Iterable[tuple]) -> dict[int, Any]:
    """The argument objects (not plain values) that more than one of ``jobs``
    passes, by ``id``."""
    seen: dict[int, Any] = {}
    shared: dict[int, Any] = {}
    for job in jobs:
        for arg in job:
            if isinstance(arg, str | int | float | bool | type(None)):
                continue
            if id(arg) in seen:
                shared[id(arg)] = arg
            seen[id(arg)] = arg
    return shared


CONNECT_S = 30.0
"""The longest a connection to a running Dask scheduler may take (seconds),
handshake included: Dask's own timeout bounds the TCP connection, not the
handshake, and a server that accepts and never answers kept the sweep waiting
for ever."""


def _connect(address: str) -> Any:
    """A Dask client of the scheduler at ``address``, or an InputError naming
    ``--scheduler``: nothing answers there, what answers is not a Dask
    scheduler (its first bytes read as a message length of exabytes made Dask
    raise MemoryError), or no answer comes within :data:`CONNECT_S`. The
    connection is made in a daemon thread, which a server that never answers
    leaves behind."""
    from dask.distributed import Client

    made: list[Any] = []
    failed: list[BaseException] = []

    def connect() -> None:
        try:
            made.append(Client(address, timeout=f"{CONNECT_S:g}s"))
        except BaseException as error:  # reported in the caller's thread
            failed.append(error)

    thread = threading.Thread(target=connect, name="sim-dask-connect", daemon=True)
    thread.start()
    thread.join(CONNECT_S + 5.0)
    if made:
        return made[0]
    why = (f"{type(failed[0]).__name__}: {failed[0]}" if failed else
           f"no answer within {CONNECT_S + 5.0:g} s")
    raise InputError(f"cannot reach a Dask scheduler at {address} ({why})",
                     path="--scheduler")


class DaskScheduler:
    """Chunks as Dask tasks on a LocalCluster (``address`` None) or on the
    cluster whose scheduler listens at ``address`` (``tcp://HOST:PORT``)."""

    def __init__(self, address: str | None, workers: int) -> None:
        import importlib.util

        if not all(importlib.util.find_spec(name) for name in ("dask", "distributed")):
            raise InputError("--scheduler needs Dask: pip install 'sim[dask]' "
                             "(dask[distributed])")
        self._cluster: Any = None
        self._client: Any = None
        self._futures: list[Any] = []
        self._index: dict[str, int] = {}
        self._starting: threading.Thread | None = None
        self._failed: BaseException | None = None
        self._up = threading.Event()  # set once the start has ended, up or failed
        self._given_up = False  # the start outlasted START_S: its cluster is never used
        self._deadline = time.monotonic() + START_S
        self._timer: threading.Timer | None = None
        self._others: set[int | None] = set()  # child processes that are not our workers
        self._on_up: Any = None  # called in the starting thread once the cluster is up
        self._lock = threading.Lock()
        self._closing = False  # set by close: chunks not yet submitted never are
        self._stop = threading.Event()  # set when the sweep stops taking results
        self._fetcher: threading.Thread | None = None
        self._quiet = CtrlCHandler()  # until close
        self.workers = workers
        if address is None:
            self.name = f"a Dask LocalCluster of {workers} workers"
            if START_METHOD == "fork" and CLUSTER_OPTIONS["processes"]:
                GATE.open(workers)  # forks wait until this thread is parked (fork_gate)
            self._others = {child.pid for child in multiprocessing.active_children()}
            self._timer = threading.Timer(START_S, self._give_up)
            self._timer.name, self._timer.daemon = "sim-dask-start-time-out", True
            self._starting = threading.Thread(target=self._start, args=(workers,),
                                              name="sim-dask-start", daemon=True)
            self._timer.start()
            self._starting.start()  # it imports Dask too: this thread goes on to the chunks
            return
        try:
            self._client = _connect(address)
        except InputError:
            self._quiet.restore()
            raise
        self.name = f"the Dask cluster at {address}"
        self.workers = max(1, len(self._client.scheduler_info().get("workers", {})) or workers)
        self._up.set()

    def _start(self, workers: int) -> None:
        """Start our LocalCluster and its client (in the starting thread)."""
        import dask
        from dask.distributed import Client, LocalCluster

        try:
            with dask.config.set(LOCAL_CLUSTER_CONFIG):
                prepare_start()
                options = dict(CLUSTER_OPTIONS)
                if options["processes"]:  # worker processes: no restart after Ctrl-C
                    options["worker_class"] = nanny_class()
                self._cluster = LocalCluster(n_workers=workers, **options)
            self._client = Client(self._cluster, **CLIENT_OPTIONS)
        except BaseException as error:  # reported by run or close, in the caller's thread
            self._failed = error
        GATE.close()
        with self._lock:
            self._up.set()
            on_up, self._on_up = self._on_up, None
            if self._timer is not None:
                self._timer.cancel()
        if on_up is not None:
            on_up()

    def _start_left_s(self) -> float:
        """Seconds left of the start's time-out (:data:`START_S`), never negative."""
        return max(0.0, self._deadline - time.monotonic())

    def _give_up(self) -> None:
        """Give up a start that has not ended (in the time-out's thread, or in
        the caller's once it has waited :data:`START_S`): no chunk goes to the
        cluster from now on, stderr says so once, and the worker processes
        forked so far are killed. Nothing once the start has ended."""
        with self._lock:
            if self._up.is_set() or self._given_up:
                return
            self._given_up = True
            self._on_up = None
        GATE.close()  # forks still to come no longer wait for the sweep's thread
        print(STALL_NOTE.format(seconds=START_S), file=sys.stderr, flush=True)
        self._kill_workers()

    def _kill_workers(self) -> None:
        """Kill every child process of this one started since this scheduler
        was made (the worker processes of our LocalCluster's nannies)."""
        for child in multiprocessing.active_children():
            if child.pid not in self._others:
                child.kill()

    def _end_given_up_start(self) -> None:
        """Wait :data:`START_END_S` at most for a start given up to end,
        killing the worker processes it forks meanwhile."""
        assert self._starting is not None
        deadline = time.monotonic() + START_END_S
        while self._starting.is_alive() and time.monotonic() < deadline:
            self._kill_workers()
            self._starting.join(timeout=0.2)

    def wait_until_up(self) -> None:
        """Wait, parked (:mod:`sim.sweeps.fork_gate`: the workers are forked
        meanwhile), until the cluster is up or has failed to start, or its
        start is given up (:data:`START_S`); every chunk of a later
        :meth:`run` then goes to the cluster, if it is up."""
        GATE.park()
        if not self._up.wait(self._start_left_s()):
            self._give_up()

    def run(self, work: Any, jobs: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
        """``(index, work(*job))`` as chunks finish: in this process while our
        LocalCluster starts, then on the cluster (see the module); all in this
        process once its start is given up (:data:`START_S`). Returns as soon
        as every chunk has a result, wherever it ran."""
        handoff = _Handoff(len(jobs))
        submitted = threading.Event()

        def submit_rest() -> None:  # in the starting thread, or one of its own
            try:
                rest = handoff.rest()
                if rest and self._failed is None and not self._closing:
                    self._submit(work, jobs, rest)
            except BaseException as error:  # raised by run, in the caller's thread
                self._failed = error
            finally:
                submitted.set()

        with self._lock:
            if self._given_up:
                pass  # every chunk runs here
            elif self._up.is_set():  # not in this thread: it waits inside no Client call
                threading.Thread(target=submit_rest, name="sim-dask-submit", daemon=True).start()
            else:
                self._on_up = submit_rest
        GATE.park_until_forked()  # no worker is forked while this thread runs a chunk
        while (i := handoff.claim()) is not None:
            yield i, work(*jobs[i])
        if handoff.all_here:  # the cluster has no chunk of this run: it is not waited for
            with self._lock:
                if self._on_up is submit_rest:
                    self._on_up = None
            return
        submitted.wait()
        if self._failed is not None:
            raise self._failed
        yield from self._gather()

    def _submit(self, work: Any, jobs: Sequence[tuple], indices: range) -> None:
        """Submit ``jobs[indices]``, each argument object several jobs share
        (a cell's scenario and world) scattered to the workers once."""
        shared = {key: self._client.scatter(arg, broadcast=True, hash=False)
                  for key, arg in _shared_args(jobs[i] for i in indices).items()}
        token = os.urandom(6).hex()
        self._futures = [self._client.submit(work, *(shared.get(id(a), a) for a in jobs[i]),
                                             key=f"sim-chunk-{token}-{i}", pure=False)
                         for i in indices]
        self._index = {future.key: i for future, i in zip(self._futures, indices, strict=True)}

    def _gather(self) -> Iterator[tuple[int, Any]]:
        """The submitted chunks' results as they finish, fetched by
        :meth:`_fetch` in a thread of its own: this thread only waits on a
        queue (see the module), and raises what the fetching raised."""
        results: queue.Queue[Any] = queue.Queue()
        self._stop.clear()
        self._fetcher = threading.Thread(target=self._fetch, name="sim-dask-fetch", daemon=True,
                                         args=(self._futures, self._index, results))
        self._fetcher.start()
        try:
            while (item := results.get()) is not _END:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self._cancel()

    def _fetch(self, futures: list[Any], index: dict[str, int], results: queue.Queue[Any]
               ) -> None:
        """Put ``(index, result)`` of each of ``futures`` on ``results`` as they
        finish, then :data:`_END`; a lost chunk (a connection or time-out
        error) as :class:`LostWorker` and any other error as itself, then
        :data:`_END`. Ends early, quietly, once the sweep stops taking results."""
        from dask.distributed import as_completed

        try:
            for future in as_completed(futures):
                if self._stop.is_set():
                    return
                try:
                    result = future.result()
                except (OSError, TimeoutError) as error:
                    lost = LostWorker(f"the Dask cluster lost a chunk: {error}")
                    lost.__cause__ = error
                    results.put(lost)
                    return
                results.put((index[future.key], result))
                future.release()
        except BaseException as error:  # raised by _gather, in the sweep's thread
            results.put(error)
        finally:
            results.put(_END)

    def _cancel(self) -> None:
        self._stop.set()
        futures, self._futures = self._futures, []
        if futures and self._client is not None:
            self._client.cancel(futures, force=True)
        if self._fetcher is not None:  # it ends at its next cancelled future
            self._fetcher.join(timeout=FETCH_END_S)
            self._fetcher = None

    def close(self) -> None:
        """Cancel what still runs and disconnect (a LocalCluster of ours is shut
        down, once started: closing waits for a start under way until its
        time-out, :data:`START_S`, then gives it up, its workers killed (see
        the module); it does not wait for the chunks' submission that follows
        a start, which the close cuts short: a submission under way when
        Ctrl-C ended the workers scattered to them for 30 s, Distributed's
        time-out to connect, before it failed)."""
        self._closing = True
        if self._starting is not None:
            GATE.park()
            if not self._up.wait(self._start_left_s()):  # set once the start has ended
                self._give_up()
            if self._timer is not None:
                self._timer.cancel()
            if self._given_up:
                self._end_given_up_start()
        self._cancel()
        if self._client is not None:
            self._client.close(timeout=5)
        if self._cluster is not None:
            self._cluster.close(timeout=5)
        if self._starting is not None:  # a submission cut short ends with the cluster
            self._starting.join(timeout=FETCH_END_S)
            if self._given_up:
                self._kill_workers()
            GATE.end()
        self._failed = None  # its traceback may hold futures the close cut short
        self._quiet.restore()

    def __enter__(self) -> DaskScheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
