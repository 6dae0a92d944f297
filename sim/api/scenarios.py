"""Scenarios for the API: load one, apply overrides (a dict of dotted paths
or ``"path=value"`` strings, as on the command line), validate.

Overrides are a dict of dotted paths to Python values (``{"harness.budgets.tokens":
None}`` removes the token budget) or a list of ``"dotted.path=value"`` strings
with YAML values. A scenario that names a detector or verifier by import path
(code to import and run) is refused unless the call passes ``allow_plugins=True``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from sim.bad_input import InputError
from sim.scenario.model import Scenario, set_dotted, validate
from sim.scenario.model import load_scenario as _load_yaml

Overrides = Mapping[str, Any] | Sequence[str] | None
"""``{"dotted.path": value}`` or ``["dotted.path=value", ...]`` (YAML values)."""

__all__ = ["Overrides", "catalog", "catalog_text", "load_for_command", "load_scenario",
           "prepare", "settings", "with_overrides"]


def with_overrides(scenario: Scenario, overrides: Overrides = None, *,
                   allow_plugins: bool = False) -> Scenario:
    """A copy of ``scenario`` with ``overrides`` applied and validated (a
    detector or verifier named by import path needs ``allow_plugins``).

    >>> s = load_scenario("scenarios/bounded.yaml")
    >>> with_overrides(s, {"harness.detector.nudges": 0}).harness.detector.nudges
    0
    """
    if not overrides:
        return scenario
    from sim.scenario.dotted import apply_overrides, blame

    raw = scenario.model_dump(mode="python")
    source = scenario.name or "scenario"
    given: dict[str, str] = {}
    if isinstance(overrides, Mapping):
        for key, value in overrides.items():
            try:
                set_dotted(raw, str(key), value, source)
            except InputError as error:
                raise InputError(error.message, source=f"override {key}={value!r}",
                                 path=error.path) from None
            given[str(key)] = f"override {key}={value!r}"
    else:
        if isinstance(overrides, str):
            raise InputError("overrides must be a dict or a list of 'path=value' strings, "
                             f"got the string {overrides!r}")
        given = apply_overrides(raw, overrides, source, flag="override")
    try:
        return validate(raw, source, allow_plugins=allow_plugins)
    except InputError as error:  # a bad override is its own fault, not the scenario's
        raise blame(error, given, source) from None


def load_scenario(source: str | os.PathLike | Scenario, overrides: Overrides = None, *,
                  allow_plugins: bool = False) -> Scenario:
    """A validated :class:`~sim.scenario.Scenario` from a YAML file (or a
    Scenario), with ``overrides`` applied. A scenario file names code to run
    (a detector or verifier by import path) only with ``allow_plugins=True``.

    >>> load_scenario("scenarios/bounded.yaml", {"tasks": 100}).tasks
    100
    """
    scenario = (source if isinstance(source, Scenario)
                else _load_yaml(source, allow_plugins=allow_plugins))
    return with_overrides(scenario, overrides, allow_plugins=allow_plugins)


def load_for_command(source: str | os.PathLike, overrides: Sequence[str], labels: Sequence[str],
                     *, allow_plugins: bool = False) -> Scenario:
    """The scenario a command line names (a file, or a scenario's name), as a
    command loads it: ``overrides`` as typed (``path=value``, YAML values)
    applied and validated; a bad override's message names it by its
    ``labels`` entry (the flag as typed: ``--set path=value``, ``--tasks 5``)."""
    return _load_yaml(source, list(overrides), allow_plugins=allow_plugins, labels=list(labels))


def settings(tasks: int | None, seed: int | None) -> dict[str, int]:
    out = {}
    if tasks is not None:
        if tasks < 1:
            raise InputError(f"tasks must be >= 1, got {tasks}")
        out["tasks"] = tasks
    if seed is not None:
        if seed < 0:
            raise InputError(f"seed must be >= 0, got {seed}")
        out["seed"] = seed
    return out


def prepare(scenario: str | os.PathLike | Scenario, overrides: Overrides, tasks: int | None,
             seed: int | None, allow_plugins: bool = False) -> Scenario:
    return with_overrides(load_scenario(scenario, overrides, allow_plugins=allow_plugins),
                          settings(tasks, seed), allow_plugins=allow_plugins)


def catalog() -> list[dict[str, str]]:
    """The scenarios commands find by name (:func:`sim.scenario.catalog.entries`:
    the built-in ones, ./scenarios/, $SIM_SCENARIOS, ``[tool.sim] scenarios``),
    each ``{"name", "path", "origin", "summary"}`` (its first header line)."""
    from sim.scenario.catalog import entries

    return [{"name": e.name, "path": str(e.path), "origin": e.origin, "summary": e.summary}
            for e in entries()]


def catalog_text(found: list[dict[str, str]]) -> str:
    """What ``scenarios`` prints: one line per scenario of :func:`catalog`, the
    name, its first header line and, unless built in, where it is (relative
    to the current folder when below it); control characters as escapes."""
    from pathlib import Path

    from sim.output.safe_text import printable

    def short(path: str) -> str:
        try:
            return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
        except ValueError:
            return path

    names = [printable(e["name"], newlines=False) for e in found]
    width = max(map(len, names), default=0)
    lines = []
    for e, name in zip(found, names, strict=True):
        where = "" if e["origin"] == "built-in" else f"  ({short(e['path'])})"
        lines.append(printable(f"{name:<{width}}  {e['summary']}{where}", newlines=False))
    return "\n".join(lines)
