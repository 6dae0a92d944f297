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
replay adds the ``traces`` folder it replayed. A folder is recorded by
:func:`folder_record`: its resolved path and the SHA-256 of its data files.
:func:`identity` is the part that says *which run* a folder holds; two runs
with the same identity may share a folder (:mod:`sim.output.folder`). A
folder's identity is its content hash, so the same run spelled from another
folder (``traces/tau2``, ``../sim/traces/tau2``, a link) is the same run.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
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
    from sim.cost.prices import prices_day

    return prices_day(scenario.harness.prices_date).isoformat()


def run_provenance(scenario, *, command: str, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The provenance of a simulated scenario (see the module docstring)."""
    return {"command": command, "scenario": scenario.model_dump(mode="json"),
            "overrides": [str(o) for o in overrides], "seed": scenario.seed,
            "tasks": scenario.tasks, "sim_version": sim_version(),
            "prices_date": prices_date(scenario)}


TRACE_FILES = ("runs.parquet", "calls.parquet")
RESULT_FILES = ("results.parquet",)


def folder_record(folder: str | os.PathLike[str],
                  names: Sequence[str] = TRACE_FILES) -> dict[str, str]:
    """A data folder as provenance records it: ``path`` (resolved: no
    relative spelling, no links) and ``sha256``, the SHA-256 over each of
    ``names`` that exists, in order (its name, then its bytes)."""
    path = Path(folder).resolve()
    digest = hashlib.sha256()
    for name in names:
        file = path / name
        if file.is_file():
            digest.update(name.encode() + b"\0")
            with file.open("rb") as data:
                digest.update(hashlib.file_digest(data, "sha256").digest())
    return {"path": str(path), "sha256": digest.hexdigest()}


def _content(value: Any) -> Any:
    """A provenance value with every folder record reduced to its hash."""
    if isinstance(value, Mapping):
        if set(value) == {"path", "sha256"}:
            return {"sha256": value["sha256"]}
        return {k: _content(v) for k, v in value.items()}
    return value


def identity(provenance: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a provenance that names the run (not the version or the
    day; a folder by its content, not its path)."""
    return {k: _content(provenance[k]) for k in IDENTITY_KEYS if k in provenance}
