"""Simulating a small scenario given as a mapping, with every call logged
(:class:`sim.world.call_log.RecordingTask`), for the world's tests."""

from __future__ import annotations

from typing import Any

from stats_helpers import z_of

from sim.engines.direct import run_task_with_world
from sim.scenario.model import validate
from sim.sweeps.cells import build_cell, cells_of
from sim.task_record import TaskRecord
from sim.world.call_log import RecordingTask
from sim.world.streams import StreamPool

ALPHA = 1e-3
Z = z_of(ALPHA)


def simulate(raw: dict[str, Any], tasks: int, seed: int = 0
             ) -> tuple[list[TaskRecord], list[RecordingTask]]:
    """Run ``tasks`` tasks of the scenario ``raw``; records and logged tasks."""
    scenario = validate({"seed": seed, **raw}, "test")
    cell = build_cell(cells_of(scenario)[0])
    pool = StreamPool()
    out = [run_task_with_world(cell, i, pool, task_type=RecordingTask) for i in range(tasks)]
    return [r for r, _ in out], [t for _, t in out]


QUIET = {"loop": 0.0, "transient": 0.0, "validation": 0.0, "premature": 0.0}
"""A policy that never errs, loops or claims early."""
