"""sim: simulate LLM agent harnesses to forecast outcomes, cost and capacity.

The Python API (see :mod:`sim.api`)::

    from sim import load_scenario, simulate, sweep, compare

The API is imported on first use, so ``import sim.harness`` stays standard
library only. In the package namespace ``sim.sweep`` and ``sim.compare`` are
the API *functions*; import the modules of the same names with
``from sim.sweep import ...`` / ``from sim.compare import ...``.
"""

from __future__ import annotations

import importlib
import sys
import types

API = ("load_scenario", "simulate", "sweep", "compare", "summarize", "read_results",
       "with_overrides", "Comparison", "SweepFrames")
__all__ = list(API)


def _api_attribute(name: str) -> property:
    def get(module: types.ModuleType) -> object:
        return getattr(importlib.import_module("sim.api"), name)

    def ignore(module: types.ModuleType, value: object) -> None:
        """The import system binds submodules (sim.sweep, sim.compare) here:
        the name stays the API function; the module is in sys.modules."""

    return property(get, ignore, doc=f"sim.api.{name}")


class _Package(types.ModuleType):
    """The ``sim`` package: API names resolve to :mod:`sim.api`, lazily."""

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(API))


for _name in API:
    setattr(_Package, _name, _api_attribute(_name))

sys.modules[__name__].__class__ = _Package
