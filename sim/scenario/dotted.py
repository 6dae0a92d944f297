"""Dotted paths into a raw scenario mapping: ``--set`` overrides and sweep cells."""

from __future__ import annotations

from typing import Any

from sim.bad_input import InputError
from sim.scenario import limits
from sim.scenario.safeyaml import parse


def parse_override(item: str, source: str) -> tuple[str, Any]:
    """``dotted.path=value`` as (path, YAML-parsed value); text that is not
    YAML is the string it is."""
    key, sep, text = item.partition("=")
    if not sep or not key.strip():
        raise InputError(f"--set expects dotted.path=value, got {item!r}", source=source)
    return key.strip(), parse(text, source, malformed_as_text=True)


def set_dotted(raw: dict[str, Any], path: str, value: Any, source: str) -> None:
    """Set ``raw[a][b]... = value`` for ``path`` ``a.b...``, creating mappings."""
    parts = path.split(".")
    if len(parts) > limits.MAX_DEPTH:
        raise InputError(f"nests deeper than {limits.MAX_DEPTH} levels", source=source,
                         path=path[:200])
    node = raw
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise InputError(f"is not a mapping, cannot set {path!r}", source=source,
                             path=".".join(parts[:i + 1]))
        node = child
    node[parts[-1]] = value

