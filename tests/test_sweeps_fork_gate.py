"""The fork gate of --scheduler dask's LocalCluster (sim.sweeps.fork_gate):
a worker is forked only while the sweep's thread holds nothing, so no lock
that thread takes (an import's, say) is copied held into the worker."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

import pytest

from sim.sweeps.fork_gate import ForkGate

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the LocalCluster forks its workers on Linux only")


def _fork_trying(lock: threading.Lock, forked: threading.Event, status: list[int]) -> None:
    """Fork a child that exits 0 if it can take ``lock`` within a second, 1 if not."""
    pid = os.fork()
    if pid == 0:  # the child: one thread, the lock as it was copied
        os._exit(0 if lock.acquire(timeout=1.0) else 1)
    forked.set()
    status.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))


def test_a_fork_waits_until_the_sweeps_thread_parks_and_copies_no_held_lock() -> None:
    """A fork by another thread while this one holds a lock (mid-chunk) waits
    until this thread parks; the child then finds the lock free. Once the
    expected forks are done, later forks no longer wait."""
    gate, lock, forked, status = ForkGate(), threading.Lock(), threading.Event(), []
    gate.open(1)
    with lock:  # this thread mid-chunk, in an import say
        forker = threading.Thread(target=_fork_trying, args=(lock, forked, status))
        forker.start()
        assert not forked.wait(0.3)  # the fork waits
    gate.park_until_forked()  # returns once the fork happened
    forker.join(5)
    assert forked.is_set() and status == [0]  # the child could take the lock

    again, status2 = threading.Event(), []
    with lock:  # the gate is closed now: a late fork does not wait (and copies the held lock)
        late = threading.Thread(target=_fork_trying, args=(lock, again, status2))
        late.start()
        assert again.wait(5)
    late.join(5)
    assert status2 == [1]
    gate.end()


def test_a_closed_gate_lets_forks_through_and_parking_returns_at_once() -> None:
    """close (the cluster up, or its start failed) ends the waiting on both sides."""
    gate, lock, forked, status = ForkGate(), threading.Lock(), threading.Event(), []
    gate.open(2)
    forker = threading.Thread(target=_fork_trying, args=(lock, forked, status))
    forker.start()
    time.sleep(0.1)
    assert not forked.is_set()
    gate.close()
    forker.join(5)
    assert forked.is_set() and status == [0]
    started = time.perf_counter()
    gate.park_until_forked()  # one fork of two happened: a wait for the other never ends
    assert time.perf_counter() - started < 5.0  # at once (0.5 s was a bound load could break)
    gate.end()


class _Holding(logging.Handler):
    """Writes by holding ``stream`` (a stand-in for a buffered stream's lock)
    until ``done`` is set."""

    def __init__(self, stream: threading.Lock) -> None:
        super().__init__()
        self.stream, self.writing, self.done = stream, threading.Event(), threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        with self.stream:
            self.writing.set()
            self.done.wait(10)


def test_a_fork_waits_for_a_log_line_being_written_until_end() -> None:
    """While the gate guards (open until end), a fork by another thread waits
    for a log handler's write under way in a third thread to end, so the
    child finds the handler's stream free; after end a fork no longer waits
    (and copies the held stream)."""
    gate, stream = ForkGate(), threading.Lock()
    handler = _Holding(stream)
    logger = logging.getLogger("sim-test-fork-gate")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        gate.open(1)
        gate.park()  # the sweep's thread is parked: only the log line holds the fork
        writer = threading.Thread(target=logger.error, args=("a line",))
        writer.start()
        assert handler.writing.wait(5)
        forked, status = threading.Event(), []
        forker = threading.Thread(target=_fork_trying, args=(stream, forked, status))
        forker.start()
        assert not forked.wait(0.3)  # the fork waits for the line
        handler.done.set()
        forker.join(5)
        writer.join(5)
        assert forked.is_set() and status == [0]

        gate.end()
        handler.writing.clear()
        handler.done.clear()
        writer = threading.Thread(target=logger.error, args=("another line",))
        writer.start()
        assert handler.writing.wait(5)
        again, status2 = threading.Event(), []
        late = threading.Thread(target=_fork_trying, args=(stream, again, status2))
        late.start()
        assert again.wait(5)  # no wait once ended
        late.join(5)
        handler.done.set()
        writer.join(5)
        assert status2 == [1]
    finally:
        handler.done.set()
        logger.removeHandler(handler)
