"""Tool policy: the code between a proposed call and its execution.

Checks that the tool exists, that its arguments are a JSON object (a model
can send anything there: null, a list, a string) holding the required
arguments, and decides whether a human must approve it (by effect class).
Decisions are plain strings so the loop can branch on them explicitly; a
rejection's message goes back to the model as a validation error.
"""

from __future__ import annotations

from sim.harness.messages import ToolUseBlock
from sim.harness.params import HarnessParams, ToolSpec

ALLOW = "allow"
APPROVE = "approve"
REJECT = "reject"
_ALLOWED = (ALLOW, "")  # the decisions without a message, made once
_APPROVED = (APPROVE, "")
_NESTED = (dict, list)  # argument values that nest (made once, not per call)


def check_call(params: HarnessParams, call: ToolUseBlock, spec: ToolSpec | None = None
               ) -> tuple[str, str]:
    """``(decision, message)``: ``allow``, ``approve`` (ask a human first) or
    ``reject`` with an actionable message for the model. ``spec`` is the
    called tool's specification when the caller already looked it up."""
    spec = spec if spec is not None else params.tool(call.name)
    if spec is None:
        names = ", ".join(t.name for t in params.tools) or "none"
        return REJECT, f"There is no tool named {call.name!r}. Available tools: {names}."
    arguments = call.input
    if not isinstance(arguments, dict):
        return REJECT, _not_an_object(call.name, type(arguments).__name__)
    for key in arguments:
        if type(key) is not str:
            return REJECT, _not_an_object(call.name, "an object with non-string keys")
    for value in arguments.values():  # scalar values (the common case) need no walk
        if isinstance(value, _NESTED):
            if not argument_depth_ok(arguments):
                return REJECT, (f"{call.name} rejected its arguments: they nest deeper than "
                                f"{MAX_ARGUMENT_DEPTH} levels. Call it again with flatter "
                                f"arguments.")
            break
    missing = [a for a in spec.required_args if a not in arguments] if spec.required_args else ()
    if missing:
        return REJECT, (f"{call.name} needs the argument(s) {', '.join(missing)}; "
                        f"call it again with them.")
    if spec.effect in params.approval_required:
        return _APPROVED
    return _ALLOWED



MAX_ARGUMENT_DEPTH = 64
"""The deepest nesting of a tool call's arguments (objects and lists) the
harness accepts: deeper ones are sent back to the model as a validation
error, and no part of the harness ever recurses through them."""


def argument_depth_ok(value: object, limit: int = MAX_ARGUMENT_DEPTH) -> bool:
    """True when ``value`` (parsed JSON) nests at most ``limit`` levels of
    objects and lists; walked without recursion, stopping at the first level
    past the limit."""
    level: list[object] = [value]
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return False
        nested: list[object] = []
        for item in level:
            if isinstance(item, dict):
                nested.extend(v for v in item.values() if isinstance(v, dict | list))
            elif isinstance(item, list):
                nested.extend(v for v in item if isinstance(v, dict | list))
        level = nested
    return True


def _not_an_object(name: str, what: str) -> str:
    return (f"{name} rejected its arguments: they must be a JSON object of named arguments, "
            f"got {what}. Call it again with an object.")
