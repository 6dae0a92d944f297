"""Pydantic's validation errors in a scenario author's words: the dotted
field path (without pydantic's tags of union members), what is wrong, and
"did you mean" for an unknown field."""

from __future__ import annotations

import re
from typing import Any

from sim.harness.fields import ParameterError
from sim.scenario.schema import Scenario
from sim.scenario.shared import is_section, schema_fields

__all__ = ["describe", "did_you_mean", "dotted", "problem"]


_UNKNOWN_FIELD = frozenset({"extra_forbidden", "unexpected_keyword_argument"})
"""Error types of a key the schema does not know (a model's; a dataclass's)."""


def _own_problem(error: Any) -> tuple[str, str] | None:
    """The first ``(field, message)`` of a harness dataclass that refused its
    own values (:class:`~sim.harness.fields.ParameterError` in ``__post_init__``)."""
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, ParameterError) and cause.problems:
        return cause.problems[0]
    return None


def describe(errors: list[Any]) -> tuple[str, str]:
    """pydantic's errors of one scenario in words, as ``(message, dotted path
    of the first)``: the first's problem, then ``; also path: problem`` for
    each other; the path is empty for the document itself."""
    first = dotted(errors[0])
    more = "".join(f"; also {dotted(e)}: {problem(e)}" for e in errors[1:])
    return f"{problem(errors[0])}{more}", first if first != "(top level)" else ""


def problem(error: Any) -> str:
    """One pydantic error in words, with "did you mean" for an unknown field."""
    if error.get("type") in _UNKNOWN_FIELD:
        return f"unknown field{did_you_mean(dotted(error))}"
    own = _own_problem(error)
    if own is not None:
        return own[1]
    return f"{_yaml_words(error['msg'])} (got {_show(error.get('input'))})"


def did_you_mean(path: str) -> str:
    """``; did you mean 'x'?`` naming the documented field closest to the
    unknown field ``path`` (a sibling first, else the same name elsewhere), and
    the fields allowed there otherwise."""
    import difflib

    from sim.scenario.docs import field_docs  # it imports this module

    known = sorted({f.path for f in field_docs()})
    generic = re.sub(r"\[\d+\]", "[]", path)
    parent, _, leaf = generic.rpartition(".")
    siblings = sorted({k.rpartition(".")[2] for k in known
                       if k.rpartition(".")[0] == parent})
    elsewhere = [k for k in known if k.rpartition(".")[2] == leaf and k != generic]
    if elsewhere:
        return f"; did you mean {elsewhere[0]!r}?"
    close = difflib.get_close_matches(leaf, siblings, n=1, cutoff=0.6)
    if close:
        return f"; did you mean {close[0]!r}?"
    if siblings:
        return f"; the fields here are {', '.join(siblings)}"
    return ""


_JSON_WORDS = (("Input should be an object", "Input should be a mapping"),
               ("Input should be a valid array", "Input should be a list"),
               ("JSON input", "input"))


def _yaml_words(message: str) -> str:
    """A pydantic message in YAML's words (validation runs on the JSON form)."""
    for json_word, yaml_word in _JSON_WORDS:
        message = message.replace(json_word, yaml_word)
    return message


def _discriminator_tags() -> frozenset[str]:
    """The tags pydantic puts in error paths of tagged unions (not fields)."""
    from typing import get_args

    from sim.world import distributions as wd
    from sim.world import params as wp

    tags = set()
    for union in (wp.Difficulty, wd.Distribution, wd.Component):
        for member in get_args(get_args(union)[0]):
            tags.add(member.model_fields["distribution"].default)
    return frozenset(tags)


def _union_members() -> frozenset[str]:
    """Names pydantic puts in error paths for the members of a union (a
    model's class name, ``str``, ``int``, ...): not fields."""
    from typing import get_args

    names = {"str", "int", "float", "bool", "none", "date", "list", "dict", "tuple"}
    stack: list[Any] = [Scenario]  # annotations: classes, unions, aliases
    seen: set[type] = set()
    while stack:
        annotation = stack.pop()
        if is_section(annotation):
            if annotation in seen:
                continue
            seen.add(annotation)
            names.add(annotation.__name__)
            stack.extend(info.annotation for _, info in schema_fields(annotation).values())
        else:
            stack.extend(get_args(annotation))
    return frozenset(names)


_DISCRIMINATOR_TAGS = _discriminator_tags()
_UNION_MEMBERS = _union_members()
_SCHEMA_TAG_PREFIXES = ("constrained-", "function-", "lax-or-strict", "json-or-python")
"""pydantic-core schema names that tag a union member in error paths
(``constrained-int`` for an ``int`` with bounds in ``int | Distribution``)."""


def dotted(error: Any) -> str:
    """The dotted scenario path of one pydantic error (``harness.budgets.steps``),
    ``(top level)`` for the document itself."""
    own = _own_problem(error)
    loc = (*error["loc"], *_parts(own[0])) if own is not None else error["loc"]
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif (part in _DISCRIMINATOR_TAGS or part in _UNION_MEMBERS or "[" in str(part)
              or str(part).startswith(_SCHEMA_TAG_PREFIXES)):
            continue  # pydantic's tag of a union member, not a field
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _parts(path: str) -> list[str | int]:
    """A harness field path (``tiers[0].input``) as loc parts (``tiers``, 0, ``input``)."""
    return [int(p) if p.isdigit() else p for p in re.split(r"[.\[\]]+", path) if p]


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


