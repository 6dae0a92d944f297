"""How the worker processes of ``--scheduler dask``'s LocalCluster start and end.

On Linux they are forked from the sweep's process (:data:`START_METHOD`), as
the local pool's are; elsewhere a fork server that has imported Dask and sim
once (:data:`FORKSERVER_PRELOAD`) starts them. Either way a Ctrl-C ends them
at once and silently, with SIGINT's default action (:class:`_ForkedWorkers`
gives a forked worker that action back), while the sweep's process closes the
cluster and keeps the finished chunks.

Each worker process has a nanny (in the sweep's process) that starts it again
whenever it ends. On Ctrl-C that restart was wasted work racing the cluster's
close: the nannies logged ``Restarting worker`` twice, forked two fresh
workers (from a process that may be mid-write, the case
:mod:`sim.sweeps.fork_gate` exists for) and killed them again a moment later,
and a restart that failed because the cluster was closing logged a traceback.
:func:`nanny_class` gives the nanny of our LocalCluster, which does not
restart a worker ended by SIGINT (only Ctrl-C ends one so: the sweep's
process hears it too and closes the cluster; a worker dying of anything
else, killed or out of memory, is restarted as before).

While our LocalCluster lives, :class:`CtrlCHandler` is SIGINT's handler in
the sweep's process. It raises KeyboardInterrupt as Python's does, with two
differences. Once Ctrl-C has ended the workers, Dask's reports of what that
did (a worker removed, the scattered cell lost, a result it could not fetch,
as ERROR and WARNING lines) say nothing the user did not ask for: they are
kept off stderr from the Ctrl-C on, so a stopped sweep says only what was
kept. And a Ctrl-C that comes while the main thread runs the import
system's own code is raised a moment later, outside it: raised there, it can
leave the global import lock taken (``importlib._bootstrap`` takes it, then
enters the ``try`` that releases it), and the thread starting the cluster
then waits at its next import forever, while the main thread, closing the
scheduler, waits for that thread (seen: a sweep stopped 1-2 s after its
start hung with both threads so, in ``_get_module_lock``). Dask is imported
only when these are used.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
import threading
from functools import cache
from typing import Any

START_METHOD = "fork" if sys.platform.startswith("linux") else "forkserver"
"""How our LocalCluster's worker processes start: forked from this process
on Linux (everything a chunk needs is imported already, as for the local
pool's workers), elsewhere from a fork server that imports Dask and sim once
(:data:`FORKSERVER_PRELOAD`; fork is unsafe on macOS). A fork copies the
locks other threads hold (:mod:`sim.sweeps.fork_gate` forks while none of
ours and no log handler's is held; :data:`sim.sweeps.on_dask.START_S` ends
a start that hangs anyway); a fork server's or a spawned worker would copy
none, but a 2-worker cluster took 2.7-2.9 s to come up from a fork server
and 2.8-2.9 s spawned, against 1.1 s forked (three fresh processes each, on
2 cores at load 7.5)."""

FORKSERVER_PRELOAD = ("distributed", "sim.sweeps.chunks")
"""Modules the LocalCluster's fork server imports before forking workers:
Dask and everything a chunk needs, so a worker runs its first chunk at once."""


class _ForkedWorkers:
    """Registered with :mod:`multiprocessing` (once, by the first LocalCluster
    of ours started with fork) so that Ctrl-C ends every process it forks from
    this one at once, without a word, as it ended the fork server's workers
    (SIGINT's default action); this process, which hears it too, closes the
    cluster and keeps the finished chunks. A forked worker otherwise keeps
    this process's handler and answers Ctrl-C with a KeyboardInterrupt
    traceback on stderr (2.5-2.8 s to stop at load 21, against 1.7 s with
    the fork server's workers), and one ignoring it finishes its chunk first
    (3.1 s, 2 CPU-s)."""

    registered = False

    @staticmethod
    def end_on_ctrl_c(_: object) -> None:
        """In the forked child: SIGINT's default action (the process ends),
        unless this process ignores SIGINT (a background job): then the
        workers ignore it too, and ``kill`` stops the sweep."""
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.SIG_DFL)

    @classmethod
    def register(cls) -> None:
        """Register :meth:`end_on_ctrl_c` to run in every process forked from now on."""
        if not cls.registered:
            from multiprocessing import util

            util.register_after_fork(_FORKED_WORKERS, cls.end_on_ctrl_c)
            cls.registered = True


_FORKED_WORKERS = _ForkedWorkers()  # multiprocessing holds its hooks' objects weakly


def prepare_start() -> None:
    """Before our LocalCluster starts its workers: a forked worker ends on
    Ctrl-C (:class:`_ForkedWorkers`), or the fork server preloads
    :data:`FORKSERVER_PRELOAD`."""
    if START_METHOD == "forkserver":
        _preload_forkserver()
    else:
        _ForkedWorkers.register()


def _preload_forkserver() -> None:
    """Have the fork server that starts our LocalCluster's workers import
    :data:`FORKSERVER_PRELOAD`. Distributed sets its own preload list on its
    first call of ``get_mp_context``, importing every optional package it
    knows in this process to build it (pandas among them); we mark that done
    and set ours instead. Another Distributed (no such mark) sets its list
    first and ours replaces it: slower to start, the same results."""
    import multiprocessing

    try:
        from distributed import utils
    except ImportError:  # pragma: no cover - checked by the caller
        return
    if hasattr(utils, "_forkserver_preload_set"):
        utils._forkserver_preload_set = True  # type: ignore[attr-defined]
        context: Any = multiprocessing.get_context("forkserver")
    else:  # pragma: no cover - depends on the Distributed version
        context = utils.get_mp_context()
    if context.get_start_method() == "forkserver":
        context.set_forkserver_preload(list(FORKSERVER_PRELOAD))


ENDED_BY_CTRL_C = -signal.SIGINT
"""The exit code :mod:`multiprocessing` gives a process that SIGINT ended."""


@cache
def nanny_class() -> type:
    """Distributed's ``Nanny``, except that a worker process ended by SIGINT
    (:data:`ENDED_BY_CTRL_C`) is neither restarted nor reported: the sweep
    is stopping (see the module). The hook it overrides,
    ``Nanny._on_worker_exit``, is Distributed's own (private; a test checks
    that this Distributed has it)."""
    from distributed import Nanny

    class CtrlCNanny(Nanny):  # type: ignore[misc]
        """A nanny that leaves a worker ended by Ctrl-C ended."""

        async def _on_worker_exit(self, exitcode: int) -> None:
            if exitcode == ENDED_BY_CTRL_C:
                return
            await super()._on_worker_exit(exitcode)

    return CtrlCNanny


def _critical_only(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.CRITICAL


IMPORT_CODE = "<frozen importlib"
"""How the file names of the import system's own code begin."""

AGAIN_S = 0.01
"""How long after a Ctrl-C that came during the import system's code it is
taken again (seconds)."""


class CtrlCHandler:
    """SIGINT's handler while our LocalCluster lives (see the module), until
    :meth:`restore`: KeyboardInterrupt, as Python's handler raises, but a
    Ctrl-C during the import system's code is sent again :data:`AGAIN_S`
    later, and from the first one raised on, Distributed's log handlers pass
    only CRITICAL records (Tornado's loggers are left alone: an error there
    is a bug). Installed only in the main thread while SIGINT has Python's
    own handler (a background job ignoring SIGINT is left as it is)."""

    def __init__(self) -> None:
        self._before: Any = None
        self._handlers: list[logging.Handler] = []
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self._before = signal.signal(signal.SIGINT, self._on_ctrl_c)

    def _on_ctrl_c(self, signum: int, frame: Any) -> None:
        if frame is not None and frame.f_code.co_filename.startswith(IMPORT_CODE):
            threading.Timer(AGAIN_S, os.kill, (os.getpid(), signum)).start()
            return
        if not self._handlers:
            loggers = [logger for name, logger in list(logging.root.manager.loggerDict.items())
                       if name.split(".")[0] == "distributed"
                       and isinstance(logger, logging.Logger)]
            self._handlers = [handler for logger in loggers for handler in logger.handlers]
            for handler in self._handlers:
                handler.addFilter(_critical_only)
            logging.getLogger("asyncio").addFilter(_critical_only)  # its futures cut short
        signal.default_int_handler(signum, frame)

    def restore(self) -> None:
        """SIGINT's handler and the log handlers as they were (after a Ctrl-C,
        once the asyncio futures it cut short are collected: each would say
        at collection, with a traceback, that its error was never read)."""
        if self._before is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, self._before)
            self._before = None
        if self._handlers:
            gc.collect()
            logging.getLogger("asyncio").removeFilter(_critical_only)
        for handler in self._handlers:
            handler.removeFilter(_critical_only)
        self._handlers = []
