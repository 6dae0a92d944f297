"""How the field reference writes a field: its type, default, bounds and
description as Markdown table cells (:mod:`sim.scenario.docs` walks the
schema; this module renders what it finds)."""

from __future__ import annotations

import datetime
import inspect
import json
import re
import types
import typing
from typing import Any, Literal

import annotated_types
import yaml
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from sim.scenario.shared import is_section, schema_fields
from sim.world.distributions import BaseDistribution


def field_default(info: FieldInfo) -> Any:
    if info.is_required():
        return PydanticUndefined
    return info.get_default(call_default_factory=True)


def is_sequence(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return is_sequence(typing.get_args(annotation)[0])
    return origin in (tuple, list)


def type_text(annotation: Any) -> str:
    """A reader's name for a field's type."""
    if annotation is type(None):
        return "null"
    if annotation is Any:
        return "any value"
    simple = {bool: "boolean", int: "integer", float: "number", str: "string",
              datetime.date: "date (YYYY-MM-DD)"}
    if annotation in simple:
        return simple[annotation]
    if isinstance(annotation, type) and issubclass(annotation, BaseDistribution):
        return "distribution"
    if is_section(annotation):
        return "mapping"
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_text(args[0])
    if origin is Literal:
        kinds = {type(a) for a in args}
        return type_text(kinds.pop()) if len(kinds) == 1 else "value"
    if origin in (typing.Union, types.UnionType):
        parts = []
        for a in args:
            text = type_text(a)
            if text not in parts:
                parts.append(text)
        return " or ".join(parts)
    if origin is tuple and (len(args) != 2 or args[1] is not Ellipsis):
        return "[" + ", ".join(type_text(a) for a in args) + "]"  # a fixed-size pair
    if origin in (tuple, list):
        return f"list of {_plural(type_text(args[0]))}"
    if origin is dict:
        return f"mapping of {_plural(type_text(args[0]))} to {_plural(type_text(args[1]))}"
    return getattr(annotation, "__name__", str(annotation))


def _plural(text: str) -> str:
    if text == "any value":
        return "values"
    if text.startswith(("list of ", "mapping of ", "[")) or " or " in text:
        return text
    return text + "s"


def allowed_text(info: FieldInfo) -> str:
    """Constraints on a field: interval bounds, allowed values, sizes, patterns."""
    low = high = ""
    parts = []
    for m in info.metadata:
        if isinstance(m, annotated_types.Gt):
            low = f"> {_number(m.gt)}"
        elif isinstance(m, annotated_types.Ge):
            low = f">= {_number(m.ge)}"
        elif isinstance(m, annotated_types.Lt):
            high = f"< {_number(m.lt)}"
        elif isinstance(m, annotated_types.Le):
            high = f"<= {_number(m.le)}"
        elif isinstance(m, annotated_types.MinLen):
            parts.append(f"at least {m.min_length} item{'s' if m.min_length != 1 else ''}")
        elif isinstance(m, annotated_types.MaxLen):
            unit = "characters" if info.annotation is str else "items"
            parts.append(f"at most {m.max_length} {unit}")
        elif getattr(m, "pattern", None):
            parts.append(f"matches `{m.pattern}`")
    if low and high:
        parts.insert(0, _interval(low, high))
    elif low or high:
        parts.insert(0, low or high)
    choices = literals(info.annotation)
    if choices:
        parts.insert(0, ", ".join(f"`{as_yaml(v)}`" for v in choices))
    return "; ".join(parts)


def _interval(low: str, high: str) -> str:
    left = "[" if low.startswith(">=") else "("
    right = "]" if high.startswith("<=") else ")"
    return f"{left}{low.split(' ', 1)[1]}, {high.split(' ', 1)[1]}{right}"


def literals(annotation: Any) -> list[Any]:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return list(args)
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        return [v for a in args for v in literals(a)]
    return []


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def default_text(value: Any, info: FieldInfo, models: list[type]) -> str:
    if value is PydanticUndefined:
        return "required"
    if is_section(type(value)) and not is_sequence(info.annotation):
        return "see below"
    if models and is_sequence(info.annotation) and value:
        return f"{len(value)} entr{'y' if len(value) == 1 else 'ies'} (see below)"
    return f"`{as_yaml(value)}`"


def as_yaml(value: Any) -> str:
    """``value`` as a YAML flow value; a model shows only its non-default fields."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, str):
        plain = value and value.strip() == value and _loads(value) == value
        return value if plain else json.dumps(value)
    if is_section(type(value)):
        return "{" + ", ".join(f"{k}: {as_yaml(v)}" for k, v in _non_default(value)) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{as_yaml(k)}: {as_yaml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, tuple | list | set | frozenset):
        return "[" + ", ".join(as_yaml(v) for v in value) + "]"
    return json.dumps(str(value))


def _loads(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def _non_default(model: Any) -> list[tuple[str, Any]]:
    """The fields of ``model`` whose values differ from the class defaults."""
    out = []
    for key, (name, info) in schema_fields(type(model)).items():
        value = getattr(model, name)
        default = field_default(info)
        if default is PydanticUndefined or value != default:
            out.append((key, value))
    return out


def description(info: FieldInfo, models: list[type]) -> str:
    if info.description:
        return info.description
    if info.discriminator and models:
        default = field_default(info)
        shape = getattr(default, str(info.discriminator), None)
        chosen = (f"; without it, `{as_yaml(shape)}`" if isinstance(shape, str) else "")
        return (f"one of {len(models)} shapes, chosen by `{info.discriminator}`{chosen} "
                f"(see below)")
    if literals(info.annotation) and len(literals(info.annotation)) == 1:
        return "selects this shape"
    if models:
        summary = _first_sentence(docstring(models[0]))
        where = "each entry: see below" if is_sequence(info.annotation) else "see below"
        return f"{summary} ({where})" if summary else where
    return ""


def docstring(model: type) -> str:
    """The model's docstring as Markdown: Sphinx roles and ``literals`` become
    code spans; paragraphs are kept, lines within a paragraph joined."""
    doc = model.__dict__.get("__doc__") or ""
    doc = inspect.cleandoc(doc)
    doc = re.sub(r":\w+:`~?([^`]+)`", lambda m: f"`{m.group(1)}`", doc)
    doc = doc.replace("``", "`")
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", doc) if p.strip()]
    return "\n\n".join(paragraphs)


def _first_sentence(text: str) -> str:
    """The first sentence of ``text`` without its final stop or a trailing
    ``(see ...)`` cross-reference."""
    first = text.split("\n\n", 1)[0]
    match = re.match(r"(.+?[.:])(\s|$)", first)
    sentence = (match.group(1) if match else first).rstrip(".:")
    return re.sub(r"\s*\(see [^)]*\)$", "", sentence)


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
