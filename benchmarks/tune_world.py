"""A known world for the tune tests: simulated runs written as traces, and the
brute-force optimum of a step cap computed on the world itself."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from sim.cli import main
from sim.engines.direct import run_tasks
from sim.scenario.model import validate
from sim.sweeps.cells import build_cell, cells_of

WORLD_DOC = {
    "name": "known", "description": "seed 001's world, a harness with a step backstop only",
    "harness": {"prices": "seed001", "max_output_tokens": 600, "verifier": {"name": "oracle"},
                "detector": {"enabled": False}, "prices_date": "2026-12-01",
                "budgets": {"steps": 60}},
    "world": {}}
"""The known world: seed 001's process under a harness whose only limit is a
backstop of 60 steps (doom loops end there rather than at the context window)."""
STEP_GRID = (8, 12, 16, 20, 25, 30, 40, 50)


def write_scenario(folder: Path) -> Path:
    """The known world's scenario file in ``folder``."""
    path = folder / "known.yaml"
    path.write_text(yaml.safe_dump(WORLD_DOC), encoding="utf-8")
    return path


def simulated_traces(folder: Path, tasks: int, seed: int) -> Path:
    """``tasks`` runs of the known world at ``seed``, as a trace folder."""
    scenario = write_scenario(folder)
    out = folder / f"traces_{seed}"
    status = main(["run", str(scenario), "--tasks", str(tasks), "--seed", str(seed), "--traces",
                   "--out", str(out), "--quiet", "--workers", "1"])
    assert status == 0
    return out


def brute_force_step_cap(tasks: int, seed: int, keep: float, grid=STEP_GRID) -> int:
    """The cheapest step cap of ``grid`` (mean cost) that loses at most
    ``1 - keep`` of the world's successes, from ``tasks`` tasks run under each
    cap on common random numbers."""
    best = None
    base = None
    for cap in (60, *grid):
        doc = {**WORLD_DOC, "tasks": tasks, "seed": seed,
               "harness": {**WORLD_DOC["harness"], "budgets": {"steps": cap}}}
        cell = build_cell(cells_of(validate(doc, "known"))[0])
        records = run_tasks(cell, range(tasks))
        success = np.array([r.outcome == "succeeded" for r in records])
        cost = float(np.mean([r.cost_usd for r in records]))
        if base is None:
            base = success
            continue
        lost = (base & ~success).sum() / base.sum()
        if lost <= 1 - keep and (best is None or cost < best[1]):
            best = (cap, cost)
    assert best is not None
    return best[0]
