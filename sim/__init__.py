"""sim: simulate LLM agent harnesses to forecast outcomes, cost and capacity.

The Python API (see :mod:`sim.api`)::

    from sim import load_scenario, simulate, sweep, compare
    frontier, recommendation = sim.tune("traces/tau2")   # limits from recorded runs

The API is imported on first use (PEP 562), so ``import sim.harness`` stays
standard library only and ``import sim`` loads neither pandas nor numpy.
"""

from __future__ import annotations

import importlib

API = ("load_scenario", "simulate", "sweep", "compare", "summarize", "read_results",
       "with_overrides", "Comparison", "SweepFrames", "tune")
__all__ = list(API)


def __getattr__(name: str) -> object:
    if name in API:
        return getattr(importlib.import_module("sim.api"), name)
    raise AttributeError(f"module 'sim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(API))
