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
- :class:`~sim.sweeps.on_dask.DaskScheduler`: chunks as Dask tasks
  (``--scheduler dask`` starts a ``distributed.LocalCluster`` of
  ``--workers`` single-threaded worker processes; ``--scheduler
  tcp://HOST:PORT`` connects to a running cluster), in :mod:`sim.sweeps.on_dask`,
  imported (with Dask) only then.

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
from typing import TYPE_CHECKING, Any

from sim.bad_input import InputError
from sim.sweeps.lost_worker import LostWorker

if TYPE_CHECKING:
    from sim.sweeps.on_dask import DaskScheduler

Work = Callable[..., Any]

__all__ = ["InProcess", "LocalPool", "LostWorker", "Work", "make_scheduler"]


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
    """Forked worker processes; results as they finish (see the module).
    They write to this machine's disk (``shares_disk``)."""

    shares_disk = True

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
        calls = getattr(pool, "_call_queue", None)  # likewise
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            if process.is_alive():
                process.terminate()
        if calls is not None:
            # The jobs still queued for the killed workers are dropped: the queue's
            # feeder thread may be blocked writing one into a full pipe nobody reads
            # any more, and the executor joins that thread at exit (an interrupted
            # sweep then hung at exit, rarely: once in some 25 runs of its Ctrl-C test).
            calls.cancel_join_thread()
        for process in processes:
            process.join(timeout=1.0)
            if process.is_alive():  # pragma: no cover - ignores SIGTERM
                process.kill()

    def __enter__(self) -> LocalPool:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()


def make_scheduler(scheduler: str | None, workers: int
                   ) -> InProcess | LocalPool | DaskScheduler:
    """The scheduler an option names: None (local: in this process for one
    worker, else a pool), ``"dask"`` (a LocalCluster of ``workers``) or a
    Dask scheduler address (``tcp://HOST:PORT``). Raises InputError for
    anything else."""
    if scheduler is None or scheduler == "local":
        return InProcess() if workers == 1 else LocalPool(workers)
    if scheduler == "dask" or "://" in scheduler:
        from sim.sweeps.on_dask import DaskScheduler

        return DaskScheduler(None if scheduler == "dask" else scheduler, workers)
    raise InputError(f"unknown scheduler {scheduler!r}: expected 'local', 'dask' or a Dask "
                     f"scheduler address such as tcp://10.0.0.5:8786", path="--scheduler")
