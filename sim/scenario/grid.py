"""The sweep's grid: its cells, their names and their scenarios."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import yaml

from sim.bad_input import InputError
from sim.scenario.dotted import set_dotted
from sim.scenario.schema import Scenario, strict

__all__ = ["NOT_SWEEPABLE", "cell_names", "expand", "grid", "label"]

NOT_SWEEPABLE = frozenset({"tasks", "name", "description", "sweep"})
"""Top-level fields that are one setting of the whole run, never an axis."""


def grid(sweep: dict[str, list[Any]]) -> list[tuple[tuple[str, Any], ...]]:
    """Every combination of the sweep's axis values, as ``((path, value), ...)``
    in the axes' order (the last axis varies fastest); empty without a sweep."""
    if not sweep:
        return []
    keys = list(sweep)
    return [tuple(zip(keys, combo, strict=True))
            for combo in itertools.product(*(sweep[k] for k in keys))]


def expand(scenario: Scenario) -> list[tuple[str, Scenario, tuple[tuple[str, Any], ...]]]:
    """The sweep's cells as ``(name, scenario of the cell, axis values)``; a
    scenario without a sweep is one cell named after the scenario."""
    combos = grid(scenario.sweep)
    if not combos:
        return [(scenario.name, scenario, ())]
    base = scenario.model_dump(mode="json", exclude={"sweep"})
    names = cell_names(scenario.sweep, combos, scenario.name)
    cells = []
    for name, values in zip(names, combos, strict=True):
        raw = copy.deepcopy(base)
        for key, value in values:
            set_dotted(raw, key, value, scenario.name)
        cells.append((name, strict(raw), values))
    return cells


def cell_names(sweep: dict[str, list[Any]], combos: list[tuple[tuple[str, Any], ...]],
               source: str) -> list[str]:
    """The grid's cell names, ``last_part=value`` joined by commas (with the
    parent for a generic last part: ``detector.enabled=false``; the whole
    dotted path for axes whose shown parts coincide); an InputError at
    ``sweep`` when two cells would still share a name."""
    leaves = [_shown_leaf(key) for key in sweep]
    shown = {key: key if leaves.count(leaf) > 1 else leaf
             for key, leaf in zip(sweep, leaves, strict=True)}
    names = [",".join(f"{shown[key]}={label(value)}" for key, value in values)
             for values in combos]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise InputError(f"two cells would share the name {twice[0]!r}: give the values "
                         f"distinct labels", source=source, path="sweep")
    return names


_GENERIC_LEAVES = frozenset({"enabled", "name", "kind", "distribution", "mode", "value",
                             "values", "weight", "weights", "share", "mean_s", "median_s",
                             "sigma", "mu", "min", "max", "options", "automatic"})
"""Field names that do not say which setting they are alone (``enabled``):
a cell name shows them with their parent (``detector.enabled=false``)."""


def _shown_leaf(key: str) -> str:
    """The part of a sweep axis's dotted path a cell name shows: the last
    part, with its parent when the last part alone is a generic word."""
    parts = key.split(".")
    if len(parts) > 1 and parts[-1] in _GENERIC_LEAVES:
        return ".".join(parts[-2:])
    return parts[-1]


def label(value: Any) -> str:
    """A value as it reads in YAML (``null``, ``true``), for cell names."""
    if value is None or isinstance(value, bool):
        return yaml.safe_dump(value).splitlines()[0]
    return str(value)


