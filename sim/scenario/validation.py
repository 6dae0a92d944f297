"""Validating a raw scenario mapping: the schema, the sweep, and the checks
that span fields, each error one :class:`~sim.bad_input.InputError` naming the
file, the dotted field and, given the file's key lines, its YAML line.

The document is first held to the bounds of :mod:`sim.scenario.limits`
(finite numbers of bounded magnitude, bounded strings and sizes), then
validated strictly (:func:`sim.scenario.schema.strict`); then every sweep cell
is validated the same way, and the settings that span fields are checked by
compiling the harness's parameters (:mod:`sim.scenario.compilation`). A scenario
names code to import (a detector or verifier given as ``package.module:Class``)
only with ``allow_plugins``; otherwise that field is an error and nothing is
imported.
"""

from __future__ import annotations

import datetime
import math
import stat
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sim.bad_input import InputError
from sim.engines.des_params import DesParams
from sim.scenario import limits
from sim.scenario.compilation import (
    build_verifier,
    check_plugins,
    harness_params,
    resolve_detector,
)
from sim.scenario.grid import NOT_SWEEPABLE, cell_names, cell_scenario, grid, label
from sim.scenario.messages import describe
from sim.scenario.safeyaml import line_of
from sim.scenario.schema import Scenario, strict
from sim.user_paths import check_path
from sim.world.params import WorldParams
from sim.world.ranges import out_of_range

__all__ = ["MAX_ARRIVALS_BYTES", "validate"]


def validate(raw: dict[str, Any], source: str, *, allow_plugins: bool = False,
             lines: dict[str, int] | None = None) -> Scenario:
    """Validate a raw mapping as a scenario, including every sweep cell (at
    most :data:`~sim.scenario.limits.MAX_CELLS`, uniquely named). ``lines``
    (dotted path -> line, :func:`~sim.scenario.safeyaml.key_lines`) puts the
    YAML line of the field in the error."""
    try:
        return _validate(raw, source, allow_plugins=allow_plugins)
    except InputError as error:
        if error.line is None and error.path and lines:
            line = line_of(lines, error.path)
            if line is not None:
                raise InputError(error.message, source=error.source, path=error.path,
                                 line=line) from None
        raise


def _validate(raw: dict[str, Any], source: str, *, allow_plugins: bool = False) -> Scenario:
    scenario = _validate_one(raw, source, allow_plugins=allow_plugins)
    _check_sweep(scenario, source)
    combos = grid(scenario.sweep)
    cell_names(scenario.sweep, combos, source)
    try:
        _check_arrival_count(scenario)
    except InputError as error:
        raise InputError(error.message, source=source, path=error.path) from None
    base = scenario.model_copy(update={"sweep": {}})
    for cell_values in combos:
        shown = ", ".join(f"{k}={v!r}" for k, v in cell_values)
        _check(cell_scenario(base, cell_values, source), source,
               prefix=f"in the sweep cell {shown}: ", allow_plugins=allow_plugins)
    return scenario


def _check_sweep(scenario: Scenario, source: str) -> None:
    """Each axis sweeps a sweepable field over distinct values, and the grid's
    cells and tasks stay within the limits."""
    for key, values in scenario.sweep.items():
        if key.split(".")[0] in NOT_SWEEPABLE:
            raise InputError(f"{key.split('.')[0]!r} cannot be swept (it is one setting of the "
                             f"whole run; use --{key} or separate runs)", source=source,
                             path=f"sweep.{key}")
        labels = [label(v) for v in values]
        repeated = sorted({v for v in labels if labels.count(v) > 1})
        if repeated:
            raise InputError(f"repeated value(s) {', '.join(repeated)}: each cell must be "
                             f"distinct", source=source, path=f"sweep.{key}")
        numbers = [(v, text) for v, text in zip(values, labels, strict=True)
                   if isinstance(v, int | float) and not isinstance(v, bool)]
        equal = next(((a, b) for i, (x, a) in enumerate(numbers)
                      for y, b in numbers[i + 1:] if x == y), None)
        if equal:
            raise InputError(f"values {equal[0]} and {equal[1]} are the same number: each cell "
                             f"must be distinct", source=source, path=f"sweep.{key}")
    cells = math.prod(len(v) for v in scenario.sweep.values()) if scenario.sweep else 1
    if cells > limits.MAX_CELLS:
        raise InputError(f"the grid has {cells:,} cells; at most {limits.MAX_CELLS:,} are "
                         f"allowed", source=source, path="sweep")
    if cells * scenario.tasks > limits.MAX_TOTAL_TASKS:
        raise InputError(f"{cells:,} cells of {scenario.tasks:,} tasks is "
                         f"{cells * scenario.tasks:,} tasks; a run holds at most "
                         f"{limits.MAX_TOTAL_TASKS:,}", source=source, path="tasks")


def _validate_one(raw: dict[str, Any], source: str, *, allow_plugins: bool = False
                  ) -> Scenario:
    """``raw`` held to the limits, validated strictly and checked (:func:`_check`)."""
    try:
        limits.check_document(raw, source)
        scenario = strict(raw)
    except InputError as error:
        raise InputError(error.message, source=source, path=error.path) from None
    except ValidationError as error:
        message, path = describe(error.errors())
        raise InputError(message, source=source, path=path) from None
    _check_dates(raw, scenario, source)
    _check(scenario, source, prefix="", allow_plugins=allow_plugins)
    return scenario


def _check_dates(raw: dict[str, Any], scenario: Scenario, source: str) -> None:
    """A YAML date (``name: 2024-01-01``, unquoted) only where the schema
    takes a date: where it became text (a name, a description), it is an
    InputError saying to quote it. (The schema validates the document's JSON
    form, in which a date is ISO text, so a text field alone cannot tell.)
    The sweep's values are not walked: an axis may sweep a date field."""
    stack: list[tuple[str, Any, Any]] = [
        (key, value, getattr(scenario, key, None)) for key, value in raw.items()
        if key != "sweep"]
    while stack:
        path, value, parsed = stack.pop()
        if isinstance(value, datetime.date):
            if isinstance(parsed, str):
                raise InputError(f"{value.isoformat()} is a YAML date here, where text is "
                                 f"expected: quote it ('{value.isoformat()}') to mean the "
                                 f"text", source=source, path=path)
        elif isinstance(value, dict):
            for key, item in value.items():
                inner = (parsed.get(key) if isinstance(parsed, dict)
                         else getattr(parsed, str(key), None))
                stack.append((f"{path}.{key}", item, inner))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                inner = (parsed[i] if isinstance(parsed, list | tuple) and i < len(parsed)
                         else None)
                stack.append((f"{path}[{i}]", item, inner))


def _check(scenario: Scenario, source: str, prefix: str, *, allow_plugins: bool) -> None:
    """The checks that span fields (plugins allowed, the world's ranges, the
    conversation, the harness's parameters compiled, the detector and
    verifier built, the arrivals file), each error prefixed by ``prefix``."""
    try:
        check_plugins(scenario.harness, allow_plugins)
        _check_ranges(scenario.world)
        _check_conversation(scenario)
        harness_params(scenario.harness, scenario.world)
        resolve_detector(scenario.harness.detector.name)
        build_verifier(scenario.harness.verifier)
        _check_arrivals(scenario.des)
    except InputError as error:
        raise InputError(f"{prefix}{error.message}", source=source, path=error.path) from None


def _check_arrivals(des: DesParams) -> None:
    """An arrivals CSV must be a readable regular file, at a path a file can
    have (no NUL byte, no name too long), checked before anything runs."""
    if des.arrivals.kind != "csv":
        return
    assert des.arrivals.path is not None  # ArrivalParams: kind csv needs a path
    path = Path(des.arrivals.path)
    where = "des.arrivals.path"
    check_path(path, "arrivals file", field=where)  # a NUL byte: ValueError from stat
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # stat first: opening a FIFO blocks
            raise InputError(f"{str(path)!r} is not a file", path=where)
        with path.open("rb"):
            pass
    except FileNotFoundError:
        raise InputError(f"arrivals file {str(path)!r} not found", path=where) from None
    except OSError as error:
        raise InputError(f"cannot read {str(path)!r} ("
                         f"{error.strerror or error})", path=where) from None


MAX_ARRIVALS_BYTES = 100_000_000
"""The largest arrivals CSV read (bytes)."""


def _check_arrival_count(scenario: Scenario) -> None:
    """An arrivals CSV (engine des) must hold at least ``tasks`` valid rows:
    read, bounded, before anything runs (not found short after simulating)."""
    des = scenario.des
    if des.arrivals.kind != "csv" or (scenario.engine != "des" and "engine" not in scenario.sweep):
        return
    assert des.arrivals.path is not None
    where = "des.arrivals.path"
    path = Path(des.arrivals.path)
    size = path.stat().st_size  # a regular file: _check_arrivals ran
    if size > MAX_ARRIVALS_BYTES:
        raise InputError(f"{str(path)!r} is larger than {MAX_ARRIVALS_BYTES:,} bytes",
                         path=where)
    from sim.engines.arrivals import arrival_schedule

    try:
        arrivals = arrival_schedule(des, scenario.tasks, scenario.seed)
    except InputError as error:  # a bad row: the CSV's name and line, at this field
        raise InputError(f"{error.source}: {error.message}" if error.source else error.message,
                         path=where) from None
    if len(arrivals) < scenario.tasks:
        raise InputError(f"{str(path)!r} holds {len(arrivals):,} arrivals, fewer than the "
                         f"{scenario.tasks:,} tasks per cell: give more rows or fewer tasks",
                         path=where)


def _check_ranges(world: WorldParams) -> None:
    """Every lognormal of the world within the ranges of :mod:`sim.world.ranges`."""
    found = out_of_range(world)
    if found is not None:
        raise InputError(found[1], path=found[0])


def _check_conversation(scenario: Scenario) -> None:
    """Messages to a task-giver need the harness's conversation mode."""
    if scenario.harness.conversation.enabled:
        return
    world = scenario.world
    for path, policy in [("world.policy", world.policy)] + [
            (f"world.classes[{i}].policy", c.policy) for i, c in enumerate(world.classes)]:
        if policy is not None and policy.talk > 0:
            raise InputError("messages to the task-giver (talk > 0) need "
                             "harness.conversation.enabled", path=f"{path}.talk")


