"""GenAI spans with older names: OpenLLMetry / Traceloop before today's conventions.

OpenLLMetry (Traceloop's instrumentations) wrote two naming sets before the
GenAI conventions settled; both are read here (recognised by content: a span
with ``gen_ai.usage.prompt_tokens``, ``gen_ai.usage.completion_tokens``,
``gen_ai.usage.cache_read_input_tokens``, ``gen_ai.usage.cache_creation_input_tokens``,
``llm.usage.total_tokens`` or ``traceloop.span.kind``), assembled by
:mod:`sim.traces.spantree` (one run per trace):

- **first set**: ``gen_ai.usage.prompt_tokens`` and
  ``gen_ai.usage.completion_tokens``;
- **second set**: ``gen_ai.usage.input_tokens`` and
  ``gen_ai.usage.output_tokens`` with the cache counts still under their
  older names;
- in both, the cache counts are ``gen_ai.usage.cache_read_input_tokens`` and
  ``gen_ai.usage.cache_creation_input_tokens`` (today's dotted names are read
  too where a span mixes them in), and the prompt count *includes* them
  (OpenLLMetry's Anthropic instrumentation adds Anthropic's cache counts into
  the prompt; OpenAI's ``prompt_tokens`` includes its
  cached tokens): they are subtracted; reasoning
  (``gen_ai.usage.reasoning_tokens``, ``llm.usage.reasoning_tokens``) is
  subtracted from the output (the provenance as
  :func:`sim.traces.usage.from_totals` gives it: ``derived`` where
  subtracted; a call span without a count is kept, its columns ``unknown``);
- a **model call** is a span with ``llm.request.type`` (``chat``,
  ``completion``) or with those usage counts; the model from
  ``gen_ai.response.model`` else ``gen_ai.request.model``; the response's text,
  finish reason and requested tool calls from ``gen_ai.completion.{i}.content``,
  ``.finish_reason`` and ``.tool_calls.{j}.{id,name,arguments}``;
- ``traceloop.span.kind`` ``tool`` spans are tools (``traceloop.entity.name``,
  ``traceloop.entity.input``/``output``), ``agent`` spans agents.
"""

from __future__ import annotations

from typing import Any

from sim.traces import spantree
from sim.traces.otel import Span, finish_reasons
from sim.traces.usage import from_totals

SOURCE = "otel-genai"
"""Runs read with the older names are OpenTelemetry GenAI runs like any other."""
OLD_KEYS = frozenset({"gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens",
                      "gen_ai.usage.cache_read_input_tokens",
                      "gen_ai.usage.cache_creation_input_tokens", "llm.usage.total_tokens",
                      "traceloop.span.kind"})


def _claims(attributes: dict[str, Any]) -> bool:
    return not OLD_KEYS.isdisjoint(attributes)


def _call(span: Span) -> spantree.CallFacts | None:
    a = span.attributes
    prompt = a.get("gen_ai.usage.prompt_tokens", a.get("gen_ai.usage.input_tokens"))
    output = a.get("gen_ai.usage.completion_tokens", a.get("gen_ai.usage.output_tokens"))
    if a.get("llm.request.type") not in ("chat", "completion") and prompt is None \
            and output is None:
        return None
    names = (("gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens")
             if "gen_ai.usage.prompt_tokens" in a
             else ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"))
    counts, provenance = from_totals(
        prompt, output,
        cache_read=_first(a, "gen_ai.usage.cache_read_input_tokens",
                          "gen_ai.usage.cache_read.input_tokens"),
        cache_write=_first(a, "gen_ai.usage.cache_creation_input_tokens",
                           "gen_ai.usage.cache_creation.input_tokens"),
        reasoning=_first(a, "gen_ai.usage.reasoning_tokens", "llm.usage.reasoning_tokens",
                         "gen_ai.usage.reasoning.output_tokens"),
        where=f"span {span.span} ({span.name})", names=names)
    texts: list[str] = []
    tools: list[spantree.ToolFacts] = []
    finish = None
    for i in range(64):
        base = f"gen_ai.completion.{i}."
        if not any(k.startswith(base) for k in a):
            break
        if isinstance(a.get(base + "content"), str):
            texts.append(a[base + "content"])
        if finish is None and a.get(base + "finish_reason") is not None:
            finish = finish_reasons(a[base + "finish_reason"])
        for j in range(256):
            if not any(k.startswith(f"{base}tool_calls.{j}.") for k in a):
                break  # a tool call with any attribute is one (its name checked when written)
            name = a.get(f"{base}tool_calls.{j}.name", "")
            ident = a.get(f"{base}tool_calls.{j}.id")
            tools.append(spantree.ToolFacts(name, None if ident is None else str(ident),
                                            a.get(f"{base}tool_calls.{j}.arguments")))
    model = a.get("gen_ai.response.model", a.get("gen_ai.request.model"))
    return spantree.CallFacts(counts, model=None if model is None else str(model),
                              finish_reason=finish, text="".join(texts) if texts else None,
                              tools=tools, provenance=provenance)


def _first(attributes: dict[str, Any], *names: str) -> Any:
    """The value of the first of ``names`` present (None if none is)."""
    return next((attributes[n] for n in names if n in attributes), None)


def _tool(span: Span) -> spantree.ToolFacts | None:
    a = span.attributes
    if a.get("traceloop.span.kind") != "tool":
        return None
    return spantree.ToolFacts(a.get("traceloop.entity.name", span.name), None,
                              a.get("traceloop.entity.input"), a.get("traceloop.entity.output"))


DIALECT = spantree.Dialect(source=SOURCE, claims=_claims, call=_call, tool=_tool,
                           is_agent=lambda span: span.attributes.get("traceloop.span.kind")
                           == "agent")
