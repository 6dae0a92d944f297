"""Fork our LocalCluster's workers only while the sweep's own thread is parked.

On Linux ``--scheduler dask`` forks the LocalCluster's worker processes from
this process (:data:`sim.sweeps.on_dask.START_METHOD`), in a thread of
Distributed's, while the sweep's thread goes on with the first chunks. A
fork copies every lock as it is at that instant, and a lock another thread
holds stays held in the child forever. The sweep's thread takes such locks
as it works: the first ``pyarrow.array`` of a process imports pandas, and
a child forked during that import holds the module's import lock taken and
hangs at its own first ``pyarrow.array`` (seen at load 5-6: both workers of
a 50,000-task sweep blocked in ``records_table`` for 12 minutes, the sweep
waiting for them).

:data:`GATE` makes every fork of those workers wait (in Distributed's
thread, just before the fork) until the sweep's thread is parked at a point
where it holds nothing: :meth:`ForkGate.park_until_forked`, called when the
sweep's thread reaches the scheduler's ``run`` (or its ``close``), returns
once every worker is forked, and only then does the thread run chunks. The
forks happen within the cluster's start either way; the thread waits for
them (the scheduler's start, then one fork per worker: a few tenths of a
second) instead of computing through them.

Other threads write log lines meanwhile (Distributed's event loop logs as
the cluster starts), and a stream's own lock (a buffered file's: logging
re-makes its handlers' locks in a forked child, not their streams') held by
a write under way at the fork stays held in the child: the worker then
waits at its first log line forever (seen once, with pytest's log handler on
the root logger). So from :meth:`ForkGate.open` until :meth:`ForkGate.end`
(the LocalCluster's life, its nannies' restarts of a worker included) each
fork also takes every log handler's lock first (a handler holds it while it
writes), waiting :data:`LOG_WAIT_S` at most, and lets them go once forked:
no log line is being written at the fork. A write to a stream outside
logging (a ``print`` from another thread) is not covered; the scheduler's
start time-out (:data:`sim.sweeps.on_dask.START_S`) is the net for that.
(One order of locks is not ours to choose: logging's own fork hook then
takes its module lock, which ``logging.config``'s reconfiguration holds while
it flushes the handlers; a reconfiguration in another thread at the instant
of a worker's fork would wait for the fork, and the fork for it.)
"""

from __future__ import annotations

import logging
import os
import threading
import time

WAIT_S = 120.0
"""The longest a fork waits for the sweep's thread to park (seconds): a
safety net against a caller that neither runs nor closes the scheduler (nor
waits for it with :meth:`~sim.sweeps.on_dask.DaskScheduler.wait_until_up`).
Every wait that ends so is counted (:attr:`ForkGate.timed_out`): it is a
stall of that long, a bug of the caller's (a test once waited for the cluster
without parking, and each run took 120 s)."""

LOG_WAIT_S = 5.0
"""The longest a fork waits for the log lines being written to end (seconds,
all handlers together): a write takes microseconds, unless its stream is
blocked (a full pipe), and then the fork goes ahead without that handler's
lock."""


def _log_handlers() -> list[logging.Handler]:
    """Every handler of the root logger and of every logger made so far, once
    each, in the order of the loggers' names (every fork takes them so)."""
    loggers = [logging.getLogger()] + [
        logger for _, logger in sorted(list(logging.root.manager.loggerDict.items()))
        if isinstance(logger, logging.Logger)]
    handlers: dict[int, logging.Handler] = {}
    for logger in loggers:
        for handler in logger.handlers:
            handlers.setdefault(id(handler), handler)
    return list(handlers.values())


def _hold_log_handlers(seconds: float) -> list[logging.Handler]:
    """Take every log handler's lock, waiting ``seconds`` at most in all;
    the handlers whose lock was taken."""
    deadline = time.monotonic() + seconds
    held = []
    for handler in _log_handlers():
        lock = handler.lock
        if lock is not None and lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            held.append(handler)
    return held


class ForkGate:
    """Forks that wait for one thread to park (see the module). Inactive
    until :meth:`open`; closed again once the expected forks have happened.
    ``timed_out`` counts the forks that went ahead after :data:`WAIT_S`
    without the thread parking. From :meth:`open` until :meth:`end` every
    fork also waits for the log lines being written (see the module)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._guarding = False  # forks take the log handlers' locks
        self._held = threading.local()  # the handlers the forking thread holds
        self._active = False
        self._parked = False
        self._forks = 0
        self._expected = 0
        self._owner = 0
        self._hooked = False
        self.timed_out = 0

    def open(self, forks: int) -> None:
        """From now on forks by other threads wait for this thread to park,
        until ``forks`` of them have happened or :meth:`close`."""
        if not self._hooked:
            os.register_at_fork(before=self._before, after_in_parent=self._after_in_parent,
                                after_in_child=self._after_in_child)
            self._hooked = True
        with self._cond:
            self._active, self._parked = True, False
            self._forks, self._expected = 0, forks
            self._owner = threading.get_ident()
            self._guarding = True

    def end(self) -> None:
        """The LocalCluster is closed: forks no longer wait for anything."""
        with self._cond:
            self._active = self._guarding = False
            self._cond.notify_all()

    def close(self) -> None:
        """Forks no longer wait (the cluster is up, or failed to start)."""
        with self._cond:
            self._active = False
            self._cond.notify_all()

    def park_until_forked(self) -> None:
        """In the thread that opened the gate, at a point where it holds no
        lock: let the forks through and return once they have all happened
        (or the gate is closed); forks after that no longer wait."""
        with self._cond:
            if not self._active or self._owner != threading.get_ident():
                return
            self._parked = True
            self._cond.notify_all()
            self._cond.wait_for(lambda: not self._active or self._forks >= self._expected)
            self._active = False

    def park(self) -> None:
        """Let every fork through from now on (this thread is about to wait
        for the cluster, holding nothing)."""
        with self._cond:
            self._parked = True
            self._cond.notify_all()

    def _before(self) -> None:
        with self._cond:
            if (self._active and threading.get_ident() != self._owner
                    and not self._cond.wait_for(lambda: self._parked or not self._active,
                                                timeout=WAIT_S)):
                self.timed_out += 1
            guarding = self._guarding
        self._held.handlers = _hold_log_handlers(LOG_WAIT_S) if guarding else []

    def _after_in_parent(self) -> None:
        for handler in getattr(self._held, "handlers", ()):
            handler.release()
        self._held.handlers = []
        with self._cond:
            if self._active:
                self._forks += 1
                self._cond.notify_all()

    def _after_in_child(self) -> None:
        # logging has made its handlers' locks anew in the child (its hook runs first)
        self._held = threading.local()
        self._cond = threading.Condition()  # another thread may have held the old one's lock
        self._active = self._guarding = False


GATE = ForkGate()
"""The gate of this process's LocalCluster workers."""
