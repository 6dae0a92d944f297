"""A LocalCluster whose workers never start (sim.sweeps.on_dask): the sweep
still ends, with every chunk's result, and leaves no worker process behind.

The hazard (session 12): a worker is forked while another thread of this
process holds a stream's lock (a log line being written); the child inherits
the lock held and waits for it forever at its own first log line, so the
cluster never comes up. Here a log handler on Distributed's logger stands in
for that stream: in a forked child its ``emit`` waits for a lock the test
holds for its whole length, so every worker of the cluster hangs at its first
log line ("Start worker at ..."), deterministically. In this process the
handler writes nothing.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"),
                       reason="the LocalCluster forks its workers on Linux only"),
]

START_S = 5.0
"""The start's time-out these tests set (seconds): the workers never start
here, so its size changes when the note comes, not what the sweep returns;
long enough that both workers are forked (and hang) before it, at about
0.5 s, even on a loaded machine."""

BOUND_S = 60.0
"""How long a test waits for what must end before it calls it a hang
(seconds): the time-out plus room for a loaded 2-core machine; the hang it
catches lasts forever."""


class _HeldInChild(logging.Handler):
    """A log handler whose ``emit``, in a process forked from this one, waits
    for ``held`` (taken by the test for its whole length: copied held into
    every child, as a stream's lock held by another thread at the fork is);
    in this process it writes nothing. Not a StreamHandler, so the
    LocalCluster's silencing of Distributed's stream handlers leaves it on."""

    def __init__(self, held: threading.Lock) -> None:
        super().__init__(logging.DEBUG)
        self._held = held
        self._parent = os.getpid()

    def emit(self, record: logging.LogRecord) -> None:
        if os.getpid() != self._parent:
            self._held.acquire()  # forever: the lock was held at the fork


@pytest.fixture
def stalled(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every worker of a LocalCluster started in the test hangs at its first
    log line; the start's time-out is :data:`START_S`."""
    pytest.importorskip("distributed")
    from sim.sweeps import on_dask

    monkeypatch.setattr(on_dask, "START_S", START_S, raising=False)
    held = threading.Lock()
    held.acquire()
    handler = _HeldInChild(held)
    logger = logging.getLogger("distributed")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        held.release()


def _square(i: int) -> int:
    """A chunk stand-in of 20 ms: i squared."""
    time.sleep(0.02)
    return i * i


def _slow_square(i: int) -> int:
    """A chunk stand-in of 0.2 s: i squared."""
    time.sleep(0.2)
    return i * i


def _in_thread(call: Any, seconds: float) -> tuple[bool, list[Any]]:
    """(whether ``call()`` returned within ``seconds``, what it returned or
    raised), ``call`` run in a daemon thread (a hang is left behind)."""
    out: list[Any] = []

    def target() -> None:
        try:
            out.append(call())
        except BaseException as error:  # reported to the test
            out.append(error)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive(), out


def _worker_processes() -> list[int]:
    """The pids of this process's living children that Distributed's nannies
    started (from /proc: a child's parent is this process)."""
    me = str(os.getpid())
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me and fields[0] != "Z":  # the parent's pid; not a zombie
            pids.append(int(entry))
    return pids


def test_run_returns_every_result_when_the_workers_never_start(stalled: None) -> None:
    """With every worker hung at its first log line, ``run`` yields each of
    40 chunks' results exactly once, as this process computes them (the
    results of InProcess), and returns once the last is computed; it used to
    wait for the cluster to take the chunks forever."""
    from sim.sweeps.schedulers import InProcess, make_scheduler

    jobs = [(i,) for i in range(40)]
    expected = sorted(InProcess().run(_square, jobs))
    where = make_scheduler("dask", 2)
    ended, out = _in_thread(lambda: sorted(where.run(_square, jobs)), BOUND_S)
    assert ended, "run waited for a cluster that never came up"
    assert out == [expected]
    closed, _ = _in_thread(where.close, BOUND_S)
    assert closed, "close waited for a start that never ended"


def test_after_the_start_time_out_this_process_runs_the_rest_and_says_so_once(
        stalled: None, capsys: pytest.CaptureFixture[str]) -> None:
    """Chunks that outlast the start's time-out (40 of 0.2 s against 5 s) all
    run here, each once, with their results (i, i squared); stderr says once
    that the Dask workers did not start."""
    from sim.sweeps.schedulers import make_scheduler

    jobs = [(i,) for i in range(40)]
    expected = [(i, i * i) for i in range(40)]
    with make_scheduler("dask", 2) as where:
        ended, out = _in_thread(lambda: sorted(where.run(_slow_square, jobs)), BOUND_S)
        assert ended, "run waited for a cluster that never came up"
    assert out == [expected]
    err = capsys.readouterr().err
    assert err.count("Dask workers did not start") == 1, err


def test_close_after_a_stalled_start_returns_and_leaves_no_worker_process(
        stalled: None) -> None:
    """Waiting for a cluster whose workers hang ends at the start's
    time-out; closing the scheduler then returns within the bound, and
    neither hung worker process is left alive."""
    from sim.sweeps.schedulers import make_scheduler

    before = set(_worker_processes())
    where = make_scheduler("dask", 2)
    waiting = threading.Thread(target=where.wait_until_up, daemon=True)
    waiting.start()  # parked: the workers are forked, and hang
    hung: set[int] = set()
    deadline = time.monotonic() + BOUND_S
    while len(hung) < 2 and waiting.is_alive() and time.monotonic() < deadline:
        hung |= set(_worker_processes()) - before
        time.sleep(0.05)
    assert len(hung) == 2
    waiting.join(BOUND_S)
    assert not waiting.is_alive(), "wait_until_up waited for a start that never ended"
    closed, _ = _in_thread(where.close, BOUND_S)
    assert closed, "close waited for a start that never ended"
    assert not hung & set(_worker_processes())


_FORKING = threading.Event()
"""Set by the fork hook below (while armed) when a fork begins."""

_ARMED = threading.Event()
"""Whether the fork hook below sets :data:`_FORKING`."""


def _on_fork() -> None:
    if _ARMED.is_set():
        _FORKING.set()


@functools.cache
def _hook_after_the_gate() -> None:
    """Register :func:`_on_fork` once, after the fork gate's hooks (they are
    registered by the gate's first ``open``): a later one runs first at a
    fork, so :data:`_FORKING` is set before the gate's hook waits."""
    os.register_at_fork(before=_on_fork)


class _SlowWriter(logging.Handler):
    """A log handler whose write holds ``stream`` (a stand-in for a buffered
    stream's lock) until a fork has begun and a second has passed: the fork
    would happen then, the stream held."""

    def __init__(self, stream: threading.Lock) -> None:
        super().__init__(logging.DEBUG)
        self.stream = stream
        self.writing = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        with self.stream:
            self.writing.set()
            _FORKING.wait(BOUND_S)
            time.sleep(1.0)


class _SameStream(logging.Handler):
    """A second handler on the same stream (Distributed's logger): in a
    process forked from this one its write waits for ``stream``, forever if
    the fork copied it held; in this process it writes nothing."""

    def __init__(self, stream: threading.Lock) -> None:
        super().__init__(logging.DEBUG)
        self.stream = stream
        self._parent = os.getpid()

    def emit(self, record: logging.LogRecord) -> None:
        if os.getpid() != self._parent:
            with self.stream:
                pass


def _pid(i: int) -> int:
    """A chunk stand-in: the process it ran in."""
    return os.getpid()


def test_no_worker_is_forked_while_a_log_line_is_being_written(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A thread of this process writes a log line through a handler, holding
    its stream, when the LocalCluster forks its workers: the forks wait for
    the write to end (sim.sweeps.fork_gate), so the workers do not inherit
    the stream's lock held, start, and run every chunk; without that wait
    both hang at their first log line (through Distributed's handler on the
    same stream) and the start is given up."""
    pytest.importorskip("distributed")
    from sim.sweeps.schedulers import make_scheduler

    stream = threading.Lock()
    slow, same = _SlowWriter(stream), _SameStream(stream)
    writing, distributed = logging.getLogger("sim-test-writer"), logging.getLogger("distributed")
    writing.addHandler(slow)
    writing.propagate = False
    distributed.addHandler(same)
    writer = threading.Thread(target=writing.error, args=("a line",), daemon=True)
    _ARMED.set()
    try:
        with make_scheduler("dask", 2) as where:
            _hook_after_the_gate()  # the forks wait for this thread to park
            writer.start()
            assert slow.writing.wait(BOUND_S)
            where.wait_until_up()  # parked: the forks happen now
            pids = {pid for _, pid in where.run(_pid, [(i,) for i in range(8)])}
    finally:
        _ARMED.clear()
        _FORKING.clear()
        distributed.removeHandler(same)
        writing.removeHandler(slow)
    writer.join(BOUND_S)
    assert "did not start" not in capsys.readouterr().err
    assert pids and os.getpid() not in pids  # every chunk ran on the cluster


@pytest.mark.parametrize("answer", [None, b"\xff" * 64])
def test_a_scheduler_address_where_no_dask_answers_is_an_input_error(monkeypatch, answer) -> None:
    """``--scheduler tcp://...`` at a server that accepts and never answers
    (Dask's timeout does not bound its handshake: the sweep waited for ever),
    or answers bytes Dask reads as a message of exabytes (a MemoryError), is
    an InputError naming ``--scheduler`` within the connection's bound."""
    import socket

    import sim.sweeps.on_dask as on_dask
    from sim.bad_input import InputError
    from sim.sweeps.schedulers import make_scheduler

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                peer, _ = server.accept()
            except OSError:
                return
            held.append(peer)
            if answer:
                peer.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    monkeypatch.setattr(on_dask, "CONNECT_S", 1.0)
    start = time.monotonic()
    try:
        with pytest.raises(InputError, match="cannot reach a Dask scheduler") as refused:
            make_scheduler(f"tcp://127.0.0.1:{server.getsockname()[1]}", 2)
    finally:
        server.close()
        for peer in held:
            peer.close()
    assert refused.value.path == "--scheduler"
    assert time.monotonic() - start < 30
