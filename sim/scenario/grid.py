"""The sweep's grid: its cells, their names and their scenarios."""

from __future__ import annotations

import itertools
from typing import Any

import yaml

from sim.bad_input import InputError
from sim.scenario import limits
from sim.scenario.changes import CellInvalid, with_values
from sim.scenario.messages import describe
from sim.scenario.schema import Scenario

__all__ = ["NOT_SWEEPABLE", "cell_names", "cell_scenario", "expand", "grid", "label"]

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
    scenario without a sweep is one cell named after the scenario. Each cell
    is derived from ``scenario`` (:func:`cell_scenario`), never dumped and
    parsed again."""
    combos = grid(scenario.sweep)
    if not combos:
        return [(scenario.name, scenario, ())]
    base = scenario.model_copy(update={"sweep": {}})
    names = cell_names(scenario.sweep, combos, scenario.name)
    return [(name, cell_scenario(base, values, scenario.name), values)
            for name, values in zip(names, combos, strict=True)]


def cell_scenario(base: Scenario, values: tuple[tuple[str, Any], ...], source: str) -> Scenario:
    """The sweep cell of ``values`` (``((dotted path, value), ...)``): ``base``
    (without its sweep) with those fields changed and validated
    (:func:`~sim.scenario.changes.with_values`); an InputError naming the
    cell, the field and what is wrong otherwise."""
    prefix = "in the sweep cell " + ", ".join(f"{k}={v!r}" for k, v in values) + ": "
    try:
        for path, value in values:
            limits.check_document(value, source, path)
    except InputError as error:
        raise InputError(prefix + error.message, source=source, path=error.path) from None
    try:  # a path that cannot be set (too deep, through a scalar) is the path's error
        return with_values(base, values, source)
    except CellInvalid as invalid:
        message, where = describe(invalid.errors)
        raise InputError(prefix + message, source=source, path=where) from None


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


