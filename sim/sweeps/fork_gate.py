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
"""

from __future__ import annotations

import os
import threading

WAIT_S = 120.0
"""The longest a fork waits for the sweep's thread to park (seconds): a
safety net against a caller that neither runs nor closes the scheduler (nor
waits for it with :meth:`~sim.sweeps.on_dask.DaskScheduler.wait_until_up`).
Every wait that ends so is counted (:attr:`ForkGate.timed_out`): it is a
stall of that long, a bug of the caller's (a test once waited for the cluster
without parking, and each run took 120 s)."""


class ForkGate:
    """Forks that wait for one thread to park (see the module). Inactive
    until :meth:`open`; closed again once the expected forks have happened.
    ``timed_out`` counts the forks that went ahead after :data:`WAIT_S`
    without the thread parking."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
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

    def _after_in_parent(self) -> None:
        with self._cond:
            if self._active:
                self._forks += 1
                self._cond.notify_all()

    def _after_in_child(self) -> None:
        self._cond = threading.Condition()  # another thread may have held the old one's lock
        self._active = False


GATE = ForkGate()
"""The gate of this process's LocalCluster workers."""
