"""The Python API, for notebooks and scripts: the whole journey from recorded
runs to limits, and simulating, sweeping and comparing scenarios. Results
come back as pandas DataFrames; each step that writes files returns a small
frozen result with the data and the ``path`` it wrote.

>>> import sim
>>> imported = sim.import_traces("runs/", "traces/mine")          # doctest: +SKIP
>>> fit = sim.calibrate(imported.path, "worlds/mine.yaml")        # doctest: +SKIP
>>> replayed = sim.replay(imported.path, "replay",
...                       {"harness.budgets.tokens": 150_000})    # doctest: +SKIP
>>> frontier, recommendation = sim.tune(imported.path, world=fit)  # doctest: +SKIP

One module per step:

- :mod:`~sim.api.importing`: :func:`import_traces` (``traces import``) ->
  :class:`Imported` (runs, calls, the import report, the trace folder);
- :mod:`~sim.api.calibrating`: :func:`calibrate` (``calibrate``) ->
  :class:`Calibrated` (the verdict, the KS table, the scenario and report written;
  the report's files: :mod:`~sim.api.calibration_report`);
- :mod:`~sim.api.replaying`: :func:`replay` (``replay``) -> :class:`Replayed`
  (rows, per-cell summary and replay figures, the results folder);
- :mod:`~sim.api.tuning`: :func:`tune` (``tune``) -> :class:`Tuned` (the
  frontier, the recommendation, the output folder);
- :mod:`~sim.api.scenarios`: :func:`load_scenario`, :func:`with_overrides`;
- :mod:`~sim.api.simulating`: :func:`simulate`, :func:`sweep`,
  :func:`summarize`, :func:`read_results`;
- :mod:`~sim.api.comparing`: :func:`compare` (and its two halves,
  :func:`plan_comparison` and :func:`run_comparison`).

Overrides are a dict of dotted paths to Python values (``{"harness.budgets.tokens":
None}`` removes the token budget) or, as on the command line, a list of
``"dotted.path=value"`` strings with YAML values. Simulating functions take
``workers`` (processes; default all cores; results do not depend on it); every
function takes ``progress`` (a progress bar on stderr; default off). Bad input
raises :class:`sim.bad_input.InputError` with the message the command prints,
naming the file and field. A scenario that names a detector or verifier by
import path (code to import and run) is refused unless the call passes
``allow_plugins=True``.

Units, as everywhere: shares in [0, 1], tokens as counts, cost in USD, times
in seconds; percentiles are observed values at rank floor(q n) (:mod:`sim.analysis.stats`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim.api.calibrating import Calibrated, calibrate
    from sim.api.comparing import (
        Comparison,
        ComparisonPlan,
        compare,
        plan_comparison,
        run_comparison,
    )
    from sim.api.importing import Imported, import_traces
    from sim.api.replaying import Replayed, replay
    from sim.api.scenarios import Overrides, load_scenario, with_overrides
    from sim.api.simulating import SweepFrames, read_results, simulate, summarize, sweep
    from sim.api.tuning import Tuned, tune

HOMES = {"calibrating": ("Calibrated", "calibrate"),
         "comparing": ("Comparison", "ComparisonPlan", "compare", "plan_comparison",
                       "run_comparison"),
         "importing": ("Imported", "import_traces"),
         "replaying": ("Replayed", "replay"),
         "scenarios": ("Overrides", "load_scenario", "with_overrides"),
         "simulating": ("SweepFrames", "read_results", "simulate", "summarize", "sweep"),
         "tuning": ("Tuned", "tune")}
"""The module of :mod:`sim.api` each public name lives in; a name is imported
on first use (PEP 562), so a command that needs one step (``run``: simulating)
does not load the others' libraries (scipy, for comparing and calibrating)."""
HOME_OF = {name: module for module, names in HOMES.items() for name in names}

__all__ = ["Calibrated", "Comparison", "ComparisonPlan", "Imported", "Overrides", "Replayed",
           "SweepFrames", "Tuned", "calibrate", "compare", "import_traces", "load_scenario",
           "plan_comparison", "read_results", "replay", "run_comparison", "simulate",
           "summarize", "sweep", "tune", "with_overrides"]


def __getattr__(name: str) -> object:
    module = HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'sim.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"sim.api.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
