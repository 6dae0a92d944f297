"""A worker lost mid-sweep: the one failure every scheduler reports alike.

A local worker process that dies (killed, out of memory) or a Dask cluster
that goes away before a chunk finishes raises :class:`LostWorker`; the sweep
keeps the chunks finished before and the command exits 75 (run again with
``--resume``). Its own module so that each scheduler (:mod:`sim.sweeps.schedulers`,
:mod:`sim.sweeps.on_dask`) can raise it without importing the others.
"""

from __future__ import annotations


class LostWorker(RuntimeError):
    """A worker process (or the Dask cluster) went away before its chunk finished."""
