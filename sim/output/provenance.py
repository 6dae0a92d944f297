"""Provenance of results: what produced a results folder, recorded in it.

``summary.json`` (key ``provenance``), the Parquet files' metadata (key
``sim.provenance``) and ``comparison.json`` record:

* ``command``: the command that wrote the folder (``run``, ``sweep``,
  ``capacity``, ``compare``);
* ``scenario``: the resolved scenario, after ``--set``, ``--tasks`` and
  ``--seed`` (every field, defaults included), as plain JSON;
* ``overrides``: the overrides as given (``dotted.path=value``);
* ``seed``: the root seed; ``tasks``: tasks per cell;
* ``sim_version``: the installed version of sim (:func:`sim_version`);
* ``prices_date``: the date whose catalogue prices were used (the scenario's
  ``harness.prices_date``, or the UTC date of the run when it is null).

A comparison records ``base`` and ``candidate`` instead of ``scenario``, each
the resolved scenario of a simulated side or the folder of a results side; a
replay adds the ``traces`` folder it replayed.
:func:`identity` is the part that says *which run* a folder holds; two runs
with the same identity may share a folder (:mod:`sim.output.folder`).
"""

from __future__ import annotations

import datetime
import importlib.metadata
from collections.abc import Mapping, Sequence
from typing import Any

IDENTITY_KEYS = ("command", "scenario", "base", "candidate", "traces")


def sim_version() -> str:
    """The installed distribution's version (``importlib.metadata``), or
    ``0+unknown`` when sim runs from a source tree that is not installed."""
    try:
        return importlib.metadata.version("sim")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def prices_date(scenario) -> str:
    """The date of the catalogue prices a scenario's run uses (ISO format)."""
    day = scenario.harness.prices_date or datetime.datetime.now(datetime.UTC).date()
    return day.isoformat()


def run_provenance(scenario, *, command: str, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The provenance of a simulated scenario (see the module docstring)."""
    return {"command": command, "scenario": scenario.model_dump(mode="json"),
            "overrides": [str(o) for o in overrides], "seed": scenario.seed,
            "tasks": scenario.tasks, "sim_version": sim_version(),
            "prices_date": prices_date(scenario)}


def identity(provenance: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a provenance that names the run (not the version or the day)."""
    return {k: provenance[k] for k in IDENTITY_KEYS if k in provenance}
