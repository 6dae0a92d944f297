"""Where a sweep's chunks run: this process, local worker processes, or Dask.

A scheduler runs ``work(*job)`` for every job and yields ``(index, result)``
pairs as jobs finish, in whatever order they finish; the sweep puts results
back in order, so they never depend on the scheduler or the worker count.

- :class:`InProcess`: one after another in this process (``--workers 1``);
- :class:`LocalPool`: forked worker processes (``--workers N``). Workers
  ignore SIGINT: on Ctrl-C the parent stops them at once (they are
  terminated, not waited for), so an interrupted sweep stops within a
  second. A worker that dies (killed, out of memory) fails the sweep with
  :class:`LostWorker`; the chunks finished before are kept. Workers exit
  when the parent dies (a SIGKILL of the sweep leaves nothing running);
- :class:`DaskScheduler`: chunks as Dask tasks (``--scheduler dask`` starts a
  ``distributed.LocalCluster`` of ``--workers`` single-threaded worker
  processes; ``--scheduler tcp://HOST:PORT`` connects to a running cluster,
  e.g. one started by dask-jobqueue on Slurm or PBS, or by dask-kubernetes;
  its workers need sim installed). Dask is imported only here, only then.

Closing a scheduler (or leaving its ``with`` block) stops whatever is still
running.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from types import TracebackType
from typing import Any

from sim.bad_input import InputError

Work = Callable[..., Any]


class LostWorker(RuntimeError):
    """A worker process (or the Dask cluster) went away before its chunk finished."""


class InProcess:
    """Run the jobs one after another in this process."""

    name = "this process"
    workers = 1

    def run(self, work: Work, jobs: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
        """``(index, work(*job))`` for each job, in order."""
        for i, job in enumerate(jobs):
            yield i, work(*job)

    def close(self) -> None:
        """Nothing runs between jobs: nothing to stop."""

    def __enter__(self) -> InProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _start_worker(parent: int) -> None:
    """In each worker: ignore Ctrl-C (the parent decides) and exit as soon as
    the parent is gone (killed with SIGKILL, say), never left running."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(1)

    threading.Thread(target=watch, name="sim-parent-watch", daemon=True).start()


class LocalPool:
    """Forked worker processes; results as they finish (see the module)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.name = f"{workers} local worker processes"
        self._pool: ProcessPoolExecutor | None = None

    def run(self, work: Work, jobs: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
        """``(index, work(*job))`` as jobs finish; at most two jobs per worker
        are queued at a time, so a stop leaves little work thrown away. A
        single job runs in this process (no pool to start for it)."""
        if len(jobs) <= 1:
            yield from InProcess().run(work, jobs)
            return
        context = multiprocessing.get_context("fork")
        self._pool = pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=context,
                                                initializer=_start_worker,
                                                initargs=(os.getpid(),))
        pending: dict[Any, int] = {}
        upcoming = iter(enumerate(jobs))

        def submit() -> None:
            for i, job in upcoming:
                pending[pool.submit(work, *job)] = i
                if len(pending) >= 2 * self.workers:
                    return

        try:
            submit()
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    yield pending.pop(future), future.result()
                submit()
        except BrokenProcessPool as error:
            raise LostWorker("a worker process died before its chunk finished "
                             "(killed, or out of memory)") from error
        finally:
            self.close()

    def close(self) -> None:
        """Stop the workers now: queued jobs are cancelled, running ones killed."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        processes = list(getattr(pool, "_processes", {}).values())  # no public handle in 3.11
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            if process.is_alive():
                process.terminate()
        for process in processes:
            process.join(timeout=1.0)
            if process.is_alive():  # pragma: no cover - ignores SIGTERM
                process.kill()

    def __enter__(self) -> LocalPool:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()


LOCAL_CLUSTER_CONFIG: dict[str, Any] = {
    "distributed.worker.multiprocessing-method": "forkserver",
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.gil.enabled": False,
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.admin.tick.interval": "1s",
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.scheduler.work-stealing": False,
}
"""Dask settings of the LocalCluster that ``--scheduler dask`` starts (measured
with ``benchmarks/bench_dask.py``): workers forked from a server that has
imported Dask and sim once (:data:`FORKSERVER_PRELOAD`; the chunk path
imports no pandas), instead of each spawned worker importing them again (on
2 cores at load 15-23: start and stop 4-12 s became about 5 s for the first
cluster of a process, which starts the fork server, and 1-1.5 s after), and
neither the statistical profiler (it samples the running chunk's stack every
10 ms, taking the GIL: it made chunks 2x slower) nor the GIL monitor; the
event loops' housekeeping (ticks every 20 ms, memory checks every 100 ms,
work stealing) runs seldom, since a chunk is a fraction of a second of CPU
and every chunk is queued at once (together 25% more CPU than the local
pool, now a few percent). A remote cluster's workers take these from their
own configuration (see README: ``DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False``)."""


FORKSERVER_PRELOAD = ("distributed", "sim.sweeps.chunks")
"""Modules the LocalCluster's fork server imports before forking workers:
Dask and everything a chunk needs, so a worker runs its first chunk at once."""


def _preload_forkserver() -> None:
    """Have the fork server that starts our LocalCluster's workers import
    :data:`FORKSERVER_PRELOAD`. Distributed sets its own preload list on its
    first call of ``get_mp_context``; called here first, ours replaces it.
    Without that function (another Distributed), the workers start without
    the preload: slower to start, the same results."""
    try:
        from distributed.utils import get_mp_context
    except ImportError:  # pragma: no cover - depends on the Distributed version
        return
    context = get_mp_context()
    if context.get_start_method() == "forkserver":
        context.set_forkserver_preload(list(FORKSERVER_PRELOAD))


class DaskScheduler:
    """Chunks as Dask tasks on a LocalCluster (``address`` None) or on the
    cluster whose scheduler listens at ``address`` (``tcp://HOST:PORT``)."""

    def __init__(self, address: str | None, workers: int) -> None:
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError:
            raise InputError("--scheduler needs Dask: pip install 'sim[dask]' "
                             "(dask[distributed])") from None
        self._cluster = None
        if address is None:
            import dask

            with dask.config.set(LOCAL_CLUSTER_CONFIG):
                _preload_forkserver()
                self._cluster = LocalCluster(n_workers=workers, threads_per_worker=1,
                                             processes=True, dashboard_address=":0")
            self._client = Client(self._cluster)
            self.name = f"a Dask LocalCluster of {workers} workers"
        else:
            try:
                self._client = Client(address, timeout="10s")
            except (OSError, TimeoutError, ValueError) as error:
                raise InputError(f"cannot reach the Dask scheduler at {address}: {error}",
                                 path="--scheduler") from None
            self.name = f"the Dask cluster at {address}"
        self.workers = max(1, len(self._client.scheduler_info().get("workers", {})) or workers)
        self._futures: list[Any] = []

    def run(self, work: Work, jobs: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
        """``(index, work(*job))`` as the cluster finishes them."""
        from dask.distributed import as_completed

        token = os.urandom(6).hex()
        futures = [self._client.submit(work, *job, key=f"sim-chunk-{token}-{i}", pure=False)
                   for i, job in enumerate(jobs)]
        self._futures = futures
        index = {future.key: i for i, future in enumerate(futures)}
        try:
            for future in as_completed(futures):
                try:
                    result = future.result()
                except (OSError, TimeoutError) as error:
                    raise LostWorker(f"the Dask cluster lost a chunk: {error}") from error
                yield index[future.key], result
                future.release()
        finally:
            self._cancel()

    def _cancel(self) -> None:
        futures, self._futures = self._futures, []
        if futures:
            self._client.cancel(futures, force=True)

    def close(self) -> None:
        """Cancel what still runs and disconnect (a LocalCluster of ours is shut down)."""
        self._cancel()
        self._client.close(timeout=5)
        if self._cluster is not None:
            self._cluster.close(timeout=5)

    def __enter__(self) -> DaskScheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_scheduler(scheduler: str | None, workers: int) -> InProcess | LocalPool | DaskScheduler:
    """The scheduler an option names: None (local: in this process for one
    worker, else a pool), ``"dask"`` (a LocalCluster of ``workers``) or a
    Dask scheduler address (``tcp://HOST:PORT``). Raises InputError for
    anything else."""
    if scheduler is None or scheduler == "local":
        return InProcess() if workers == 1 else LocalPool(workers)
    if scheduler == "dask":
        return DaskScheduler(None, workers)
    if "://" in scheduler:
        return DaskScheduler(scheduler, workers)
    raise InputError(f"unknown scheduler {scheduler!r}: expected 'local', 'dask' or a Dask "
                     f"scheduler address such as tcp://10.0.0.5:8786", path="--scheduler")
