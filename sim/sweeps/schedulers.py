"""Where a sweep's chunks run: this process, local worker processes, or Dask.

A scheduler runs ``work(*job)`` for every job and yields ``(index, result)``
pairs as jobs finish, in whatever order they finish; the sweep puts results
back in order, so they never depend on the scheduler or the worker count.

- :class:`InProcess`: one after another in this process (``--workers 1``);
- :class:`LocalPool`: forked worker processes (``--workers N``), one job
  at a time each, over a pipe of its own that only the parent's thread
  reads. Workers ignore SIGINT: on Ctrl-C the parent stops them at once
  (they are terminated, not waited for), so an interrupted sweep stops
  within a second. A worker that dies (killed, out of memory) fails the
  sweep with :class:`LostWorker`; the chunks finished before are kept.
  Workers exit when the parent dies (a SIGKILL of the sweep leaves nothing
  running);
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
import pickle
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
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


class RemoteTraceback(Exception):
    """The traceback of an exception raised by a job in a worker process, set
    as that exception's ``__cause__`` when the parent raises it."""

    def __str__(self) -> str:
        return "\n" + str(self.args[0])


def _serve(connection: Connection, parent: int, work: Work) -> None:
    """A worker's loop: receive ``(index, job)``, send back ``(index, True,
    work(*job))``, or ``(index, False, error, traceback)`` when it raises; end
    when the parent sends None or closes its end."""
    _start_worker(parent)
    while True:
        try:
            message = connection.recv()
        except EOFError:
            return
        if message is None:
            return
        index, job = message
        try:
            answer: tuple = (index, True, work(*job))
        except BaseException as error:  # the parent raises it; this worker goes on
            answer = (index, False, error, traceback.format_exc())
        try:
            connection.send(answer)
        except Exception as error:  # a result (or an exception) that does not pickle
            connection.send((index, False, RuntimeError(
                f"job {index}'s answer could not be sent back from its worker process: "
                f"{type(error).__name__}: {error}"), traceback.format_exc()))


class LocalPool:
    """Forked worker processes; results as they finish (see the module).
    They write to this machine's disk (``shares_disk``).

    Each worker has its own pipe and holds one job at a time; the parent hands
    a worker its next job as soon as it takes the worker's result, before
    yielding that result. Nothing but the parent's own thread reads or writes
    the pipes: a worker killed halfway through writing its result leaves a
    torn message only in its own pipe, which is closed with it. (A
    ``concurrent.futures.ProcessPoolExecutor`` shares one result pipe among
    its workers and reads it in a thread that the interpreter joins at exit:
    a worker terminated on Ctrl-C while writing its result left that thread
    waiting for the rest of the message, and the interrupted sweep hung at
    exit: 2 of some 85 Ctrl-Cs sent at random to sweeps of small chunks.)"""

    shares_disk = True

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.name = f"{workers} local worker processes"
        self._workers: list[tuple[BaseProcess, Connection]] = []

    def run(self, work: Work, jobs: Sequence[tuple]) -> Iterator[tuple[int, Any]]:
        """``(index, work(*job))`` as jobs finish. A job that raises raises
        here (its worker's traceback as the cause); a worker that dies raises
        :class:`LostWorker`. A single job runs in this process (no workers to
        start for it)."""
        if len(jobs) <= 1:
            yield from InProcess().run(work, jobs)
            return
        try:
            self._start(work, min(self.workers, len(jobs)))
            upcoming = iter(enumerate(jobs))
            busy: dict[Connection, BaseProcess] = {}
            for process, connection in self._workers:
                if self._hand(connection, upcoming):
                    busy[connection] = process
            while busy:
                ready = wait([*busy, *(p.sentinel for p in busy.values())])
                for connection in [c for c in busy if c in ready]:
                    try:
                        message = connection.recv_bytes()
                    except (EOFError, OSError) as error:
                        raise _lost() from error
                    answer = _read(message)
                    process = busy.pop(connection)
                    if self._hand(connection, upcoming):
                        busy[connection] = process
                    yield _result(answer)
                if any(p.sentinel in ready for p in busy.values()):
                    raise _lost()
        finally:
            self.close()

    def _start(self, work: Work, count: int) -> None:
        """Fork ``count`` workers serving ``work``."""
        context = multiprocessing.get_context("fork")
        for _ in range(count):
            mine, theirs = context.Pipe()
            process = context.Process(target=_serve, args=(theirs, os.getpid(), work),
                                      name="sim-worker")
            self._workers.append((process, mine))
            process.start()
            theirs.close()  # the worker holds it; later workers must not inherit it

    @staticmethod
    def _hand(connection: Connection, upcoming: Iterator[tuple[int, tuple]]) -> bool:
        """Send the next job to an idle worker; False when none is left."""
        for index, job in upcoming:
            try:
                connection.send((index, job))
            except (BrokenPipeError, ConnectionResetError) as error:  # it died idle
                raise _lost() from error
            return True
        return False

    def close(self) -> None:
        """Stop the workers now: running jobs are killed, nothing is waited for
        beyond their exit."""
        workers, self._workers = self._workers, []
        for process, _ in workers:
            if process.is_alive():
                process.terminate()
        for process, connection in workers:
            connection.close()
            process.join(timeout=1.0)
            if process.is_alive():  # pragma: no cover - ignores SIGTERM
                process.kill()
                process.join()

    def __enter__(self) -> LocalPool:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()


def _lost() -> LostWorker:
    return LostWorker("a worker process died before its chunk finished "
                      "(killed, or out of memory)")


def _read(message: bytes) -> tuple:
    """A worker's answer unpickled; RuntimeError when it cannot be (an
    exception class whose arguments do not rebuild it, say)."""
    try:
        return pickle.loads(message)  # our own worker's answer: no file is read here
    except Exception as error:
        raise RuntimeError(f"a worker process's answer could not be read back: "
                           f"{type(error).__name__}: {error}") from error


def _result(answer: tuple) -> tuple[int, Any]:
    """``(index, result)`` of a worker's answer, or its job's exception raised."""
    if answer[1]:
        return answer[0], answer[2]
    error = answer[2]
    error.__cause__ = RemoteTraceback(answer[3])
    raise error


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
