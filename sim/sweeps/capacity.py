"""The capacity of a scenario's DES cell: one DES run of its base cell,
measured (:func:`sim.analysis.capacity.measurements`), and with a target p95
wait first sized (:func:`sim.sweeps.sizing.size_capacity`: the fewest
sandboxes and model slots meeting it), the run reported being the one at the
sized capacity. The DES run shows its progress (tasks ended) on stderr.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from sim.engines.des_params import DesParams
from sim.scenario.model import Scenario
from sim.sweeps.sizing import Sizing
from sim.task_record import TaskRecord

__all__ = ["CapacityRun", "run_capacity"]


@dataclass(frozen=True)
class CapacityRun:
    """One measured DES run: the cell's ``name``, its ``records``,
    ``capacity`` (the measurements), ``series`` (each monitored quantity
    resampled over the horizon), ``des`` (the DES parameters it ran with: the
    sized capacity when sized), ``sizing`` (None without a target) and the
    engine invariants it breaks (``problems``, empty unless an engine bug)."""

    name: str
    records: list[TaskRecord]
    capacity: dict[str, Any]
    series: dict[str, Any]
    des: DesParams
    sizing: Sizing | None
    problems: list[str]


def run_capacity(base: Scenario, target_p95_wait_s: float | None = None, *,
                 workers: int = 1, progress: bool = False) -> CapacityRun:
    """Run the DES cell of ``base`` (its sweep and engine already set aside)
    and measure it; with ``target_p95_wait_s``, size sandboxes and model slots
    first (``workers`` processes probe capacities) and run at the sized
    capacity. ``progress`` shows what runs on stderr."""
    from sim.analysis.capacity import check_drained, measurements, resampled
    from sim.engines.arrivals import arrival_schedule
    from sim.engines.des import DesEngine
    from sim.progress import progress_bar
    from sim.sweeps.cells import CellRun, build_cell
    from sim.sweeps.sizing import size_capacity, with_capacity

    cell = build_cell(CellRun(base.name, base, ()))
    des = base.des
    arrivals = arrival_schedule(des, base.tasks, cell.seed)
    sizing = None
    if target_p95_wait_s is not None:
        if progress:
            print(f"sizing for a p95 wait of {target_p95_wait_s:g} s (every tenant) ...",
                  file=sys.stderr)
        sizing = size_capacity(cell, des, arrivals, target_p95_wait_s, workers=workers,
                               progress=progress)
        des = with_capacity(des, sizing.sandboxes, sizing.model_slots)
    bar = progress_bar(total=len(arrivals), unit="task", file=sys.stderr, disable=not progress,
                       desc="simulating (des)", mininterval=0.5)

    def task_done() -> None:
        bar.update(1)

    try:
        result = DesEngine(cell, des, arrivals, on_task_end=task_done).run()
    finally:
        bar.close()
    capacity = measurements(result, des.capacity.model_dump())
    series = {name: resampled(s, result.horizon_s) for name, s in result.series.items()}
    return CapacityRun(cell.name, result.records, capacity, series, des, sizing,
                       check_drained(result, des, arrivals))
