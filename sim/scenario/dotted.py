"""Dotted paths into a raw scenario mapping: ``--set`` overrides and sweep cells.

A path is field names joined by dots; a part that is a whole number indexes
a list the scenario holds (``world.classes.0.cache.read_share``, also written
``world.classes[0].cache.read_share``: the first task class's field). An
index picks an item the scenario has; it never makes a list or an item.

When a scenario with overrides does not validate, :func:`blame` puts the
error on the override that caused it (``--set harness.budgets.stepz=30:
harness.budgets.stepz: unknown field; did you mean 'steps'?``) rather than
on the scenario file, which is not at fault.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from sim.bad_input import InputError
from sim.scenario import limits
from sim.scenario.safeyaml import parse

_INDEX = re.compile(r"\[(\d+)\]")


def parse_override(item: str, source: str) -> tuple[str, Any]:
    """``dotted.path=value`` as (path, YAML-parsed value); text that is not
    YAML is the string it is. A value the strict loader refuses (an integer
    of 301 digits) is an InputError at the path, inside the value where it
    has one."""
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise InputError(f"--set expects dotted.path=value, got {item!r}", source=source)
    try:
        return key, parse(text, source, malformed_as_text=True)
    except InputError as error:
        inner = error.path if error.path and error.path != "(top level)" else ""
        raise InputError(error.message, source=source,
                         path=limits.join(key, inner) if inner else key) from None


def split_path(path: str) -> list[str]:
    """The parts of a dotted path; ``a[0].b`` is ``a.0.b``."""
    return _INDEX.sub(r".\1", path).split(".")


def set_dotted(raw: dict[str, Any], path: str, value: Any, source: str) -> None:
    """Set ``raw[a][b]... = value`` for ``path`` ``a.b...``, creating mappings;
    a whole-number part indexes a list (or tuple: replaced by a list) already
    there (see the module docstring)."""
    parts = split_path(path)
    if len(parts) > limits.MAX_DEPTH:
        raise InputError(f"nests deeper than {limits.MAX_DEPTH} levels", source=source,
                         path=path[:200])
    node: Any = raw
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            index = _index(node, part, ".".join(parts[:i]), source)
            if last:
                node[index] = value
                return
            child = node[index]
        else:
            if last:
                node[part] = value
                return
            child = node.get(part)
            if child is None:
                if parts[i + 1].isdigit():
                    raise InputError(f"is not set, so it has no item {parts[i + 1]} to "
                                     f"change (cannot set {path!r})", source=source,
                                     path=".".join(parts[:i + 1]))
                child = node[part] = {}
        if isinstance(child, tuple):  # a dumped model's tuple: set inside a copy as a list
            child = list(child)
            if isinstance(node, list):
                node[index] = child
            else:
                node[part] = child
        if not isinstance(child, (dict, list)):
            raise InputError(f"is not a mapping, cannot set {path!r}", source=source,
                             path=".".join(parts[:i + 1]))
        node = child


def _index(items: list[Any], part: str, where: str, source: str) -> int:
    """``part`` as an index of ``items`` (the list at ``where``)."""
    if not part.isdigit():
        raise InputError(f"is a list: the next part must be an item's index (0 to "
                         f"{len(items) - 1}), got {part!r}", source=source, path=where)
    index = int(part)
    if index >= len(items):
        raise InputError(f"has {len(items)} item(s): index {index} is out of range",
                         source=source, path=where)
    return index


def apply_overrides(raw: dict[str, Any], overrides: Sequence[str], source: str, *,
                    flag: str = "--set", labels: Sequence[str] | None = None
                    ) -> dict[str, str]:
    """Set each ``path=value`` of ``overrides`` in ``raw`` (in order); return
    each path with the override as it is named in messages, for :func:`blame`:
    its label (``labels``, one per override: ``--tasks 5`` for an override a
    flag made), else ``FLAG path=value`` (``--set path=value``). An override
    that cannot be set is an InputError on it."""
    given: dict[str, str] = {}
    for i, item in enumerate(overrides):
        name = labels[i] if labels is not None and i < len(labels) else f"{flag} {item}"
        try:
            key, value = parse_override(item, source)
            set_dotted(raw, key, value, source)
        except InputError as error:
            if not error.path:  # not dotted.path=value at all: said of the item
                raise
            raise InputError(error.message, source=name, path=error.path) from None
        given[key] = name
    return given


def blame(error: InputError, given: Mapping[str, str], source: str = "") -> InputError:
    """``error`` put on the override of ``given`` (path -> the override as
    named in messages, :func:`apply_overrides`) whose path holds, or lies
    inside, the field in error; ``error`` itself when no override touches
    that field. The message says which scenario the override was applied to
    (``source``)."""
    if not error.path:
        return error
    wrong = split_path(error.path)
    for key, item in reversed(list(given.items())):  # the last override of a field wins
        parts = split_path(key)
        shorter = min(len(parts), len(wrong))
        if parts[:shorter] == wrong[:shorter]:
            applied = f" (applied to {source})" if source else ""
            return InputError(f"{error.message}{applied}", source=item, path=error.path)
    return error
