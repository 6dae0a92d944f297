"""What differs between two resolved scenarios, as dotted paths with both values.

A comparison, a replay or a tune report says first what changed between its
base and its candidate: ``harness.detector.nudges: 1 -> 2``. Both sides are
resolved scenario documents (``Scenario.model_dump(mode="json")``, or the
``provenance.scenario`` a results folder's ``summary.json`` records); their
leaves are compared path by path, a list element by its index
(``world.classes.0.cache.read_share``). A field one side holds and the other
does not is shown as ``unset`` on the other. The scenario's ``name`` and
``description`` are labels, not settings, and are left out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["LABEL_FIELDS", "Change", "setting_changes"]

LABEL_FIELDS: frozenset[str] = frozenset({"name", "description"})
"""Top-level fields that name a scenario rather than set it."""

_UNSET = object()


@dataclass(frozen=True)
class Change:
    """One setting that differs: its dotted ``path`` and each side's value as
    text (``unset`` where that side does not hold the field)."""

    path: str
    base: str
    candidate: str

    def __str__(self) -> str:
        return f"{self.path}: {self.base} -> {self.candidate}"


def _text(value: Any) -> str:
    """A JSON value as a user reads it: numbers and strings plain, lists and
    objects as compact JSON, None as ``null``, a missing field as ``unset``."""
    if value is _UNSET:
        return "unset"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _leaves(doc: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    """``(dotted path, value)`` of every leaf of a JSON document; an empty
    object or list is a leaf of its own."""
    if isinstance(doc, Mapping) and doc:
        for key, value in doc.items():
            yield from _leaves(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(doc, list) and doc:
        for i, value in enumerate(doc):
            yield from _leaves(value, f"{prefix}.{i}" if prefix else str(i))
    else:
        yield prefix, doc


def setting_changes(base: Mapping[str, Any], candidate: Mapping[str, Any]
                    ) -> tuple[Change, ...]:
    """The settings in which ``candidate`` differs from ``base`` (two resolved
    scenario documents), in the order of the base document then the
    candidate's new fields; ``name`` and ``description`` left out.

    >>> [str(c) for c in setting_changes({"name": "a", "harness": {"detector": {"nudges": 1}}},
    ...                                  {"name": "b", "harness": {"detector": {"nudges": 2}}})]
    ['harness.detector.nudges: 1 -> 2']
    """
    def settings(doc: Mapping[str, Any]) -> dict[str, Any]:
        return dict(_leaves({k: v for k, v in doc.items() if k not in LABEL_FIELDS}, ""))

    old, new = settings(base), settings(candidate)
    changes = []
    for path in [*old, *(p for p in new if p not in old)]:
        a, b = old.get(path, _UNSET), new.get(path, _UNSET)
        if a != b or (type(a) is not type(b) and not _same_number(a, b)):
            changes.append(Change(path, _text(a), _text(b)))
    return tuple(changes)


def _same_number(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same number written as int and float."""
    numbers = (int, float)
    return (isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool)
            and not isinstance(b, bool) and a == b)
