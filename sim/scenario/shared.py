"""The harness's parameter dataclasses as schema fields: one definition of each.

The scenario schema takes the harness's settings from
:mod:`sim.harness.params`. A section (``harness.budgets``) *is* the dataclass,
which pydantic validates directly, its bounds and descriptions read from each
field's metadata (:func:`sim.harness.fields.spec`). A top-level harness setting
(``harness.max_output_tokens``) is declared in the scenario with
:func:`from_harness`, which takes its default, bounds and description from
the dataclass field of that name. :func:`schema_fields` lists the fields of a
pydantic model or a parameter dataclass alike (the field reference and the
error messages walk both).
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, cast

from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo

_FIELD_KEYS = ("description", "gt", "ge", "lt", "le", "alias")


def _field(cls: type, name: str) -> dataclasses.Field[Any]:
    for f in dataclasses.fields(cls):
        if f.name == name:
            return f
    raise KeyError(f"{cls.__name__} has no field {name!r}")


def _kwargs(f: dataclasses.Field[Any]) -> dict[str, Any]:
    """A dataclass field's default and metadata as ``pydantic.Field`` arguments."""
    out: dict[str, Any] = {k: v for k, v in f.metadata.items() if k in _FIELD_KEYS}
    if f.default is not dataclasses.MISSING:
        out["default"] = f.default
    elif f.default_factory is not dataclasses.MISSING:
        out["default_factory"] = f.default_factory
    return out


def from_harness(cls: type, name: str, **changes: Any) -> Any:
    """A pydantic ``Field`` for the scenario's copy of the dataclass field
    ``cls.name``: its default, bounds and description (``changes`` replace
    some, e.g. ``default=None`` for an optional override)."""
    return Field(**{**_kwargs(_field(cls, name)), **changes})


def schema_fields(cls: type) -> dict[str, tuple[str, FieldInfo]]:
    """The fields of a pydantic model or a dataclass, in order, as ``{key in a
    scenario: (attribute name, FieldInfo)}`` (a key differs from the attribute
    where the field has an alias); a dataclass's fields not set at
    construction are left out."""
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        return {info.alias or name: (name, info) for name, info in cls.model_fields.items()}
    hints = typing.get_type_hints(cls)
    out: dict[str, tuple[str, FieldInfo]] = {}
    for f in dataclasses.fields(cast("Any", cls)):
        if not f.init:
            continue
        info = FieldInfo.from_annotated_attribute(hints[f.name], Field(**_kwargs(f)))
        out[info.alias or f.name] = (f.name, info)
    return out


def is_section(annotation: Any) -> bool:
    """True for a pydantic model class or a dataclass (a nested mapping)."""
    return isinstance(annotation, type) and (
        issubclass(annotation, BaseModel) or dataclasses.is_dataclass(annotation))
