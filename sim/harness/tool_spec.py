"""Tools as the harness knows them: what calling one does, and how a provider
call declares it (frozen dataclasses)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sim.harness.fields import param, validated

EffectClass = Literal["read", "reversible_write", "external", "irreversible"]
EFFECT_CLASSES: tuple[str, ...] = ("read", "reversible_write", "external", "irreversible")


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the model may call.

    ``effect``: what running it does to the world (read, reversible write,
    external side effect, irreversible); ``timeout_s``: per-call timeout in
    seconds (seed 000: file 5, shell 30, network 15, code 60);
    ``polling``: the tool is expected to repeat (build status, job poll), so the
    no-progress detector keys it on unchanged *results*, not on repeated calls;
    ``definition_tokens``: size of its definition (name, description, schema)
    in the prompt prefix; ``required_args``: argument names the policy layer
    checks before running it; ``description``: what the tool does, as the
    model reads it; ``input_schema``: the JSON Schema of its arguments object as
    JSON text (kept as text so the parameters stay hashable), or empty for the
    schema implied by ``required_args``.
    """

    name: str
    effect: EffectClass = "read"
    timeout_s: float = param(30.0, "per-call timeout (seconds)", gt=0)
    polling: bool = False
    definition_tokens: int = 200
    required_args: tuple[str, ...] = ()
    description: str = ""
    input_schema: str = ""

    def __post_init__(self) -> None:
        validated(self, self._problems())

    def _problems(self) -> Iterator[tuple[str, str]]:
        if self.effect not in EFFECT_CLASSES:
            yield "effect", f"must be one of {EFFECT_CLASSES}, got {self.effect!r}"
        if not self.input_schema:
            return
        try:
            value = json.loads(self.input_schema)
        except ValueError as error:
            yield "input_schema", f"must be JSON text of a JSON Schema object: {error}"
            return
        if not isinstance(value, dict):
            yield "input_schema", f"must be a JSON object, got {type(value).__name__}"

    def definition(self) -> ToolDefinition:
        """The tool as a provider call declares it (see :class:`ToolDefinition`)."""
        if self.input_schema:
            schema: dict[str, Any] = json.loads(self.input_schema)
        else:
            schema = {"type": "object",
                      "properties": {name: {} for name in self.required_args},
                      "required": list(self.required_args)}
        return ToolDefinition(self.name, self.description, schema)


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool as the model is told about it in a provider call: ``name``,
    ``description`` and ``input_schema`` (a JSON Schema object describing the
    arguments). Anthropic takes these as ``tools=[{"name", "description",
    "input_schema"}]``; OpenAI as ``tools=[{"type": "function", "function":
    {"name", "description", "parameters": input_schema}}]``."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
