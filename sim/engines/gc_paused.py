"""Pausing Python's cyclic garbage collector around a simulation run.

The engines' runs (direct, DES) and a replay's chunks make many short-lived
objects and next to no reference cycles, while the collector's passes walk
every object alive (the tasks in a DES system, a traced chunk's recorded
rows): :func:`gc_paused` switches it off for the block and back on after
(only if it was on), so the few cycles made meanwhile are collected then.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off inside the block, as it was after."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()
