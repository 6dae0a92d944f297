"""The sweep's grid: its cells, their names and their scenarios.

A cell's scenario is derived from the validated base (:func:`with_values`)
without dumping it to a mapping and validating the whole again. Each changed
field's new value is validated alone, strictly on its JSON form as a scenario
file's would be (the field's type and bounds, with the documented default
shapes); then the sections holding it are rebuilt bottom up with their own
checks: a harness dataclass's ``__post_init__``, a pydantic section's
validators. Only a field that cannot be walked into (a union, a mapping, an
unset section: say ``harness.prices.input``) has its current value dumped and
the changed value set inside it.

A value that does not validate raises :class:`CellInvalid` holding
pydantic-shaped errors located from the scenario's root, so
:func:`sim.scenario.messages.describe` words them as it words a file's
errors (the same dotted paths and messages).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import json
from collections.abc import Sequence
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from sim.bad_input import InputError
from sim.harness.fields import ParameterError
from sim.scenario import limits
from sim.scenario.dotted import set_dotted
from sim.scenario.messages import describe
from sim.scenario.schema import Scenario, default_shapes, json_value
from sim.scenario.shared import is_section, schema_fields

__all__ = ["NOT_SWEEPABLE", "CellInvalid", "cell_names", "cell_scenario", "expand", "grid",
           "label", "with_values"]

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
    (:func:`with_values`); an InputError naming the
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


# ------------------------------------------------- a cell's scenario
Loc = tuple[str | int, ...]
_FIELDS: dict[type, dict[str, tuple[str, FieldInfo]]] = {}


def _fields(cls: type) -> dict[str, tuple[str, FieldInfo]]:
    """:func:`~sim.scenario.shared.schema_fields` of ``cls``, worked out once."""
    if cls not in _FIELDS:
        _FIELDS[cls] = schema_fields(cls)
    return _FIELDS[cls]


class CellInvalid(Exception):
    """Changed values that do not validate: ``errors`` as pydantic's error
    dicts, each ``loc`` from the scenario's root."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(f"{len(errors)} validation error(s)")
        self.errors = errors


def with_values(scenario: Scenario, values: Sequence[tuple[str, Any]], source: str) -> Scenario:
    """``scenario`` with each dotted path of ``values`` set to its value (a
    sweep cell), validated as described in the module. Raises
    :class:`CellInvalid` (every axis's errors, in the axes' order) or an
    :class:`~sim.bad_input.InputError` for a path that cannot be set (too
    deep, or through a value that is not a mapping)."""
    errors: list[dict[str, Any]] = []
    for path, value in values:
        parts = path.split(".")
        if len(parts) > limits.MAX_DEPTH:
            raise InputError(f"nests deeper than {limits.MAX_DEPTH} levels", source=source,
                             path=path[:200])
        try:
            scenario = _replaced(scenario, parts, value, (), source)
        except CellInvalid as invalid:
            errors.extend(invalid.errors)
    if errors:
        raise CellInvalid(sorted(errors, key=lambda e: _schema_order(e["loc"])))
    return scenario


def _schema_order(loc: Loc) -> list[int]:
    """Where ``loc`` comes in the schema's field order (pydantic reports a
    document's errors in that order)."""
    order: list[int] = []
    section: Any = Scenario
    for part in loc:
        if not is_section(section) or part not in _fields(section):
            break
        order.append(list(_fields(section)).index(part))
        section = _fields(section)[part][1].annotation
    return order


def _replaced(node: Any, parts: list[str], value: Any, loc: tuple[str, ...],
              source: str) -> Any:
    """``node`` (a pydantic section or a harness dataclass) with the field at
    ``parts`` set to ``value``, rebuilt with its own checks."""
    key, rest = parts[0], parts[1:]
    known = _fields(type(node))
    if key not in known:
        raise CellInvalid([{"type": "extra_forbidden", "loc": (*loc, key), "input": value,
                            "msg": "Extra inputs are not permitted"}])
    attr, info = known[key]
    current = getattr(node, attr)
    written = not isinstance(node, BaseModel) or attr in node.model_fields_set
    section: Any = info.annotation  # a class, or a typing form (pydantic >= 2.14 types it TypeForm)
    if rest and section is not None and is_section(section) and isinstance(current, section):
        new = _replaced(current, rest, value, (*loc, key), source)
    else:
        raw = value if not rest else _set_inside(type(node), key, current if written else None,
                                                 rest, value, (*loc, key), source)
        new = _field_value(type(node), key, default_shapes((*loc, key), raw), (*loc, key))
    return _rebuilt(node, attr, new, loc)


def _set_inside(cls: type, key: str, current: Any, rest: list[str], value: Any,
                loc: tuple[str, ...], source: str) -> Any:
    """The JSON form of the field ``current`` as a file wrote it (its fields
    set explicitly; nothing when None: a field the file left out) with
    ``value`` set at the dotted ``rest`` inside it, as a sweep sets a file's
    mapping (:func:`~sim.scenario.dotted.set_dotted`: the same errors)."""
    inner = None if current is None else _adapter(cls, key).dump_python(
        current, mode="json", exclude_unset=True)
    doc: Any = inner
    for part in reversed(loc):  # the field where it sits in a file: the errors' paths
        doc = {part: doc}
    set_dotted(doc, ".".join((*loc, *rest)), value, source)
    for part in loc:
        doc = doc[part]
    return doc


@functools.cache
def _adapter(cls: type, key: str) -> TypeAdapter[Any]:
    """A validator of the field ``key`` of the section ``cls`` alone: its
    type and its bounds."""
    _, info = _fields(cls)[key]
    if info.alias is not None:  # the key is the alias already; an alias means nothing here
        info = copy.copy(info)
        info.alias = info.validation_alias = info.serialization_alias = None
        info._attributes_set.pop("alias", None)
    form: Any = Annotated[info.annotation, info]  # a typing form, whatever pydantic's stubs say
    return TypeAdapter(form)


def _field_value(cls: type, key: str, raw: Any, loc: tuple[str, ...]) -> Any:
    """``raw`` validated as the field ``key`` of ``cls``, strictly on its
    JSON form (as :func:`~sim.scenario.schema.strict` validates a file)."""
    text = json.dumps(raw, default=json_value, allow_nan=False)
    try:
        return _adapter(cls, key).validate_json(text, strict=True)
    except ValidationError as error:
        raise CellInvalid(_located(error, loc)) from None


def _rebuilt(node: Any, attr: str, new: Any, loc: tuple[str, ...]) -> Any:
    """``node`` with ``attr`` replaced by the validated ``new``, its own checks
    run again: a dataclass's ``__post_init__``, a model's validators (in
    Python mode: its other fields are validated objects already)."""
    if isinstance(node, BaseModel):  # the fields the file set stay the only ones set
        values = {name: getattr(node, name) for name in node.model_fields_set}
        values[attr] = new
        try:
            return type(node).model_validate(values, strict=True)
        except ValidationError as error:
            raise CellInvalid(_located(error, loc)) from None
    assert dataclasses.is_dataclass(node) and not isinstance(node, type)
    try:
        return dataclasses.replace(node, **{attr: new})
    except ParameterError as error:  # as pydantic reports a dataclass's own refusal
        raise CellInvalid([{"type": "value_error", "loc": loc, "input": node,
                            "msg": f"Value error, {error}", "ctx": {"error": error}}]) from None


def _located(error: ValidationError, loc: Loc) -> list[dict[str, Any]]:
    """pydantic's errors with ``loc`` put in front of each location."""
    return [{**e, "loc": (*loc, *e["loc"])} for e in error.errors()]
