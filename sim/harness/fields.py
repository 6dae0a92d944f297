"""How a parameter field states what it takes, and the check that holds it to that.

A parameter dataclass field carries its documentation and bounds as plain data
in ``dataclasses.field(metadata=...)``, made by :func:`spec`: a
``description`` (with the unit) and at most one lower (``gt``/``ge``) and one
upper (``lt``/``le``) bound. These are the argument names of
``pydantic.Field``, so a schema that validates the dataclass (the scenario's)
reads the same bounds and descriptions without a second definition, while the
harness itself imports only the standard library. ``alias`` names the field
in such a schema where the name differs (``detector.nudges``); ``report``
says how a report writes a set value (``"{}-step budget"``).

:func:`check` yields every bound a dataclass instance breaks; each parameter
dataclass calls it from ``__post_init__`` through :func:`validated`, so an
instance that exists is valid. Bad values raise :class:`ParameterError`, a
ValueError naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import field, fields
from typing import Any

BOUND_KEYS = ("gt", "ge", "lt", "le")
PYDANTIC_CONFIG: Mapping[str, Any] = {"extra": "forbid", "serialize_by_alias": True}
"""The validation settings a schema applies to every parameter dataclass
(``__pydantic_config__``): unknown fields are errors; a field with an alias
is written under its alias."""


class ParameterError(ValueError):
    """Incompatible or out-of-range harness parameters (raised before the loop).
    ``problems`` lists ``(dotted field path, message)`` pairs, the path relative
    to the object that raised it."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{path}: {message}" for path, message in problems))


def spec(description: str, *, report: str = "", alias: str = "", gt: float | None = None,
         ge: float | None = None, lt: float | None = None,
         le: float | None = None) -> dict[str, Any]:
    """The metadata of one parameter field: its ``description`` (with the
    unit), its bounds (``gt``, ``ge``, ``lt``, ``le``: numbers), how a report
    writes a set value (``report``, a format with one ``{}``) and the name a
    schema gives it (``alias``)."""
    bounds = {"gt": gt, "ge": ge, "lt": lt, "le": le}
    meta: dict[str, Any] = {"description": description,
                            **{k: v for k, v in bounds.items() if v is not None}}
    if report:
        meta["report"] = report
    if alias:
        meta["alias"] = alias
    return meta


def param(default: Any, description: str, **kwargs: Any) -> Any:
    """A parameter field with a ``default`` and the metadata of :func:`spec`
    (``description`` and the keywords ``kwargs``): ``dataclasses.field``, so
    it goes where a field's default goes."""
    return field(default=default, metadata=spec(description, **kwargs))


def bounds_text(meta: Mapping[str, Any]) -> str:
    """A field's bounds in words: ``> 0``, ``>= 1``, ``in [0, 2]``, ``in (0, 1)``."""
    low = next(((k, meta[k]) for k in ("gt", "ge") if k in meta), None)
    high = next(((k, meta[k]) for k in ("lt", "le") if k in meta), None)
    if low and high:
        return (f"in {'(' if low[0] == 'gt' else '['}{low[1]:g}, "
                f"{high[1]:g}{')' if high[0] == 'lt' else ']'}")
    key, value = low or high or ("", 0)
    return {"gt": "> ", "ge": ">= ", "lt": "< ", "le": "<= "}.get(key, "") + f"{value:g}"


def within(value: float, meta: Mapping[str, Any]) -> bool:
    """True when ``value`` is a finite number within the bounds of ``meta``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return False
    return not (("gt" in meta and not value > meta["gt"])
                or ("ge" in meta and not value >= meta["ge"])
                or ("lt" in meta and not value < meta["lt"])
                or ("le" in meta and not value <= meta["le"]))


def check(obj: Any) -> Iterator[tuple[str, str]]:
    """Every bounded field of the dataclass instance ``obj`` whose value (when
    not None) is not a finite number within its bounds, as ``(field, message)``.
    A NaN or an infinity is refused: it would switch off the check that reads it."""
    for f in fields(obj):
        meta = f.metadata
        if not any(k in meta for k in BOUND_KEYS):
            continue
        value = getattr(obj, f.name)
        if value is not None and not within(value, meta):
            yield f.name, f"must be a finite number {bounds_text(meta)}, got {value!r}"


def validated(obj: Any, *more: Iterable[tuple[str, str]]) -> None:
    """Raise ParameterError naming every problem of ``obj``: its bounds
    (:func:`check`), then the problems of ``more`` (its own invariants)."""
    problems = [*check(obj), *(p for group in more for p in group)]
    if problems:
        raise ParameterError(problems)
