"""The one job layer: how a long job's work is cut into chunks, and its results put back in order.

Every long job on workers cuts its work here: a sweep's direct cells
(:mod:`sim.sweeps.plan`), a replay (:mod:`sim.api.replaying`), a trace import
(:mod:`sim.traces.importer`, :mod:`sim.traces.streaming`) and tune
(:mod:`sim.tuning.shards`: one share per worker, read a batch at a time); the
schedulers that run the chunks are :mod:`sim.sweeps.schedulers`. One rule
says how much work a chunk holds (:func:`chunk_size`): about :data:`PIECES`
chunks for a plan the same for every worker count (a sweep's, kept on disk
for ``--resume``; an import's), else :data:`PER_WORKER` per worker (so a slow
chunk does not leave the others idle) or one for a single worker, bounded by
the job's own ``least`` and ``most`` (a worker's memory, the progress bar's
step). Results come back in chunk order (:func:`in_order`) whatever order the
workers finish in, so no output depends on how the work was cut. A leaf of
the standard library.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import pairwise
from typing import TypeVar

__all__ = ["PER_WORKER", "PIECES", "chunk_size", "in_order", "shares", "spans"]

PIECES = 64
"""The chunks a plan the same for every worker count aims at (fewer when its
``least`` is reached, more when its ``most`` is)."""
PER_WORKER = 4
"""The chunks per worker a plan for a worker count aims at."""

T = TypeVar("T")


def chunk_size(count: int, *, most: int, least: int = 1, workers: int | None = None) -> int:
    """Units of work per chunk for ``count`` units: ``ceil(count / n)``
    bounded to ``[least, most]``, where ``n`` is :data:`PIECES` when
    ``workers`` is None (the plan is the same for every worker count), 1 for
    one worker (all the work in one chunk, up to ``most``) and
    :data:`PER_WORKER` times ``workers`` otherwise. At least 1 (no work: 1)."""
    pieces = PIECES if workers is None else 1 if workers <= 1 else PER_WORKER * workers
    return max(1, least, min(most, -(-count // pieces)))


def spans(stop: int, size: int, *, start: int = 0) -> list[tuple[int, int]]:
    """``[start, stop)`` cut into consecutive ranges ``(low, high)`` of
    ``size`` units (the last one shorter): empty when ``stop <= start``."""
    return [(low, min(low + size, stop)) for low in range(start, stop, size)]


def shares(count: int, parts: int) -> list[tuple[int, int]]:
    """``count`` units cut into ``parts`` consecutive ranges ``(low, high)``
    as even as possible (sizes differ by at most one; the larger ones last;
    some are empty when ``count < parts``): one per worker."""
    bounds = [count * k // parts for k in range(parts + 1)]
    return list(pairwise(bounds))


def in_order(finished: Iterable[tuple[int, T]],
             arrived: Callable[[T], object] | None = None) -> Iterator[T]:
    """The results of ``finished`` (``(index, result)`` pairs of the chunks
    0, 1, 2 ..., each once, in the order they finish, as a scheduler yields
    them) in chunk order: each result as soon as every one before it has
    come, the others held until then. ``arrived`` is called with each result
    as it comes (a progress bar's step)."""
    held: dict[int, T] = {}
    upcoming = 0
    for index, result in finished:
        if arrived is not None:
            arrived(result)
        held[index] = result
        while upcoming in held:
            yield held.pop(upcoming)
            upcoming += 1
