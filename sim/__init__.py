"""sim: simulate LLM agent harnesses to forecast outcomes, cost and capacity.

The Python API (see :mod:`sim.api`)::

    imported = sim.import_traces("runs/", "traces/mine")    # recorded runs in
    fit = sim.calibrate(imported.path, "worlds/mine.yaml")  # a world fitted to them
    replayed = sim.replay(imported.path, "replay", {"harness.budgets.tokens": 150_000})
    frontier, recommendation = sim.tune(imported.path, world=fit)  # limits to set
    from sim import load_scenario, simulate, sweep, compare

The API is imported on first use (PEP 562), so ``import sim.harness`` stays
standard library only and ``import sim`` loads neither pandas nor numpy.
"""

from __future__ import annotations

import importlib

API = ("load_scenario", "simulate", "sweep", "compare", "summarize", "read_results",
       "with_overrides", "Comparison", "SweepFrames", "import_traces", "calibrate", "replay",
       "tune", "Imported", "Calibrated", "Replayed", "Tuned")
__all__ = list(API)


def __getattr__(name: str) -> object:
    if name in API:
        return getattr(importlib.import_module("sim.api"), name)
    raise AttributeError(f"module 'sim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(API))
