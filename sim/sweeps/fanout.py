"""A cell's children table: its tasks run in the direct engine, each parent's
final harness state tallied (:class:`sim.analysis.fanout.FanoutTable`).

Running lives here, with the other jobs that run cells; the table and its
tallies are analysis's, which computes from results and runs no engine.
"""

from __future__ import annotations

from collections.abc import Iterable

from sim.analysis.fanout import FanoutTable, tally
from sim.engines.cell import Cell
from sim.engines.direct import run_task_state

__all__ = ["fanout_table"]


def fanout_table(cell: Cell, indices: Iterable[int]) -> FanoutTable:
    """Run tasks ``indices`` of ``cell`` in the direct engine (each on its own
    random streams, as a sweep runs it) and tally their parents and children
    (see :class:`~sim.analysis.fanout.FanoutTable`)."""
    table = FanoutTable(cell.name)
    for index in indices:
        record, state = run_task_state(cell, index)
        tally(table, record.outcome, state)
    return table
