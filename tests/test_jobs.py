"""The one job layer (sim/jobs.py): how much work a chunk holds, the ranges
the work is cut into, and results put back in chunk order. The expected
sizes are worked by hand from the rule: ``ceil(count / n)`` bounded to
``[least, most]``, ``n`` 64 for a plan the same for every worker count, 1 for
one worker, 4 per worker otherwise."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise

import pytest

from sim.api.replaying import MAX_CHUNK
from sim.jobs import chunk_size, in_order, shares, spans
from sim.sweeps.plan import CHUNK_TASKS, MIN_CHUNK_TASKS
from sim.traces.importer import FILES_PER_CHUNK


def test_an_import_cuts_about_64_chunks_of_at_most_32_files_whatever_the_workers() -> None:
    """1 and 64 files: chunks of 1; 65: ceil(65/64) = 2; 640: 10; a million: 32."""
    sizes = [chunk_size(n, most=FILES_PER_CHUNK) for n in (1, 64, 65, 640, 10**6)]
    assert sizes == [1, 1, 2, 10, 32]


def test_a_sweep_cuts_about_64_chunks_of_50_to_2000_tasks() -> None:
    """1 task: 50 (the fewest; the cell is one chunk); 3,200: ceil(3200/64) = 50;
    3,201: 51; 128,000: 2,000; a million: 2,000 (the most)."""
    sizes = [chunk_size(n, least=MIN_CHUNK_TASKS, most=CHUNK_TASKS)
             for n in (1, 3_200, 3_201, 128_000, 10**6)]
    assert sizes == [50, 50, 51, 2_000, 2_000]


def test_a_replay_cuts_four_chunks_per_worker_or_one_for_a_single_worker() -> None:
    """One worker: every run in one chunk (100 runs: 100), up to 2,000 (5,000
    runs: 2,000); three workers: ceil(100/12) = 9; eight workers and 100,000
    runs: ceil(100000/32) = 3,125, so 2,000; no runs: 1."""
    assert chunk_size(100, most=MAX_CHUNK, workers=1) == 100
    assert chunk_size(5_000, most=MAX_CHUNK, workers=1) == 2_000
    assert chunk_size(100, most=MAX_CHUNK, workers=3) == 9
    assert chunk_size(100_000, most=MAX_CHUNK, workers=8) == 2_000
    assert chunk_size(0, most=MAX_CHUNK, workers=4) == 1


@pytest.mark.parametrize("workers", [None, 1, 2, 3, 8])
def test_the_chunks_cover_every_unit_once_in_order(workers: int | None) -> None:
    """Whatever the count and workers: consecutive ranges from 0 to the count,
    none empty, none longer than ``most``; for a worker count, at least two
    chunks per worker when there is work for them (or chunks of ``most``)."""
    for count in (1, 7, 40, 2_001, 10_000, 100_000):
        size = chunk_size(count, most=MAX_CHUNK, workers=workers)
        cut = spans(count, size)
        assert cut[0][0] == 0 and cut[-1][1] == count
        assert all(a[1] == b[0] for a, b in pairwise(cut))
        assert all(0 < high - low <= MAX_CHUNK for low, high in cut)
        if workers == 1:
            assert len(cut) == -(-count // MAX_CHUNK)
        elif workers is not None:
            assert len(cut) >= min(count, 2 * workers) or size == MAX_CHUNK


def test_spans_cut_a_range_into_consecutive_pieces() -> None:
    assert spans(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert spans(10, 4, start=3) == [(3, 7), (7, 10)]
    assert spans(10, 20) == [(0, 10)]
    assert spans(0, 4) == [] and spans(5, 4, start=5) == []


def test_shares_are_one_per_worker_as_even_as_possible() -> None:
    """10 runs in 3 shares: 3, 3, 4 (floor(10k/3) for k = 0..3); 2 runs in 3: one empty."""
    assert shares(10, 3) == [(0, 3), (3, 6), (6, 10)]
    assert shares(2, 3) == [(0, 0), (0, 1), (1, 2)]
    assert shares(7, 1) == [(0, 7)]


def test_results_come_back_in_chunk_order_each_as_soon_as_its_turn_comes() -> None:
    """Chunks finishing 2, 0, 3, 1: chunk 0 is given as soon as it arrives
    (before chunk 3 is asked for), 1, 2 and 3 when 1 arrives; ``arrived``
    sees them in the order they finished."""
    asked: list[int] = []

    def finished() -> Iterator[tuple[int, str]]:
        for index in (2, 0, 3, 1):
            asked.append(index)
            yield index, "abcd"[index]

    seen: list[str] = []
    given = []
    for result in in_order(finished(), arrived=seen.append):
        given.append((result, list(asked)))
    assert given == [("a", [2, 0]), ("b", [2, 0, 3, 1]), ("c", [2, 0, 3, 1]),
                     ("d", [2, 0, 3, 1])]
    assert seen == ["c", "a", "d", "b"]
