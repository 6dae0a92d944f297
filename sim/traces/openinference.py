"""OpenInference spans (Arize Phoenix and the ``openinference-instrumentation-*`` packages).

OTLP JSON spans carrying ``openinference.span.kind`` (recognised by content),
assembled by :mod:`sim.traces.spantree`: one run per trace, or per
``session.id`` when spans carry one (a session's traces are one run); calls
under a nested ``AGENT`` span are a subagent's. Per span kind:

- ``LLM``: a model call. ``llm.token_count.prompt`` is the whole prompt
  (cached or not: ``llm.token_count.prompt_details.cache_read`` and
  ``cache_write`` are subtracted), ``llm.token_count.completion`` the output
  (``llm.token_count.completion_details.reasoning`` is subtracted);
  ``llm.model_name``; ``llm.cost.total`` as the recorded cost when present;
  the provenance as :func:`sim.traces.usage.from_totals` gives it (the
  uncached input ``derived`` when cache was subtracted, a missing count
  ``unknown``);
  the response's text and requested tool calls from
  ``llm.output_messages.{i}.message.content`` and
  ``...message.tool_calls.{j}.tool_call.{id,function.name,function.arguments}``;
  the finish reason from ``llm.finish_reason``, else from ``output.value``
  (the provider's response as JSON: ``choices[0].finish_reason`` or
  ``stop_reason``), a JSON list read as its reasons
  (:func:`sim.traces.otel.finish_reasons`);
- ``TOOL``: a tool the application ran (``tool.name``, its ``input.value``
  (else ``tool.parameters``) the arguments, ``output.value`` the result,
  ``tool_call.id`` when recorded): it answers the requested tool call of
  the same id (else the first unanswered one of the same name) of the call
  before it, or is added to that call;
- ``AGENT``: an agent.
"""

from __future__ import annotations

from typing import Any

from sim.traces import spantree
from sim.traces.otel import Span, finish_reasons
from sim.traces.usage import from_totals

SOURCE = "openinference"
KIND = "openinference.span.kind"


def _claims(attributes: dict[str, Any]) -> bool:
    return KIND in attributes or "llm.token_count.prompt" in attributes


def _kind(span: Span) -> str:
    return str(span.attributes.get(KIND, "")).upper()


def _call(span: Span) -> spantree.CallFacts | None:
    a = span.attributes
    if _kind(span) != "LLM" and not (KIND not in a and "llm.token_count.prompt" in a):
        return None
    counts, provenance = from_totals(
        a.get("llm.token_count.prompt"), a.get("llm.token_count.completion"),
        cache_read=a.get("llm.token_count.prompt_details.cache_read"),
        cache_write=a.get("llm.token_count.prompt_details.cache_write"),
        reasoning=a.get("llm.token_count.completion_details.reasoning"),
        where=f"span {span.span} ({span.name})",
        names=("llm.token_count.prompt", "llm.token_count.completion"))
    texts, tools = _output_messages(a)
    model = a.get("llm.model_name")
    return spantree.CallFacts(counts, model=None if model is None else str(model),
                              cost_usd=_number(a.get("llm.cost.total")),
                              finish_reason=_finish(a.get("llm.finish_reason"),
                                                    a.get("output.value")),
                              text="".join(texts) if texts else None, tools=tools,
                              provenance=provenance)


def _output_messages(a: dict[str, Any]) -> tuple[list[str], list[spantree.ToolFacts]]:
    """Texts and requested tool calls of ``llm.output_messages.*`` (flattened keys)."""
    texts: list[str] = []
    tools: list[spantree.ToolFacts] = []
    for i in range(64):
        base = f"llm.output_messages.{i}.message."
        if not any(k.startswith(base) for k in a):
            break
        content = a.get(base + "content")
        if isinstance(content, str):
            texts.append(content)
        for j in range(256):
            call = f"{base}tool_calls.{j}.tool_call."
            if not any(k.startswith(call) for k in a):
                break  # a tool call with any attribute is one (its name checked when written)
            name = a.get(call + "function.name", "")
            ident = a.get(call + "id")
            tools.append(spantree.ToolFacts(name, None if ident is None else str(ident),
                                            a.get(call + "function.arguments")))
    return texts, tools


def _finish(recorded: Any, output: Any) -> str | None:
    if recorded is not None:
        return finish_reasons(recorded)
    value = spantree.json_value(output)
    if not isinstance(value, dict):
        return None
    choices = value.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return finish_reasons(choices[0].get("finish_reason"))
    return finish_reasons(value.get("stop_reason"))


def _number(value: Any) -> float | None:
    from sim.traces.model import finite_or_none

    return finite_or_none(value)


def _tool(span: Span) -> spantree.ToolFacts | None:
    if _kind(span) != "TOOL":
        return None
    a = span.attributes
    ident = a.get("tool_call.id")
    return spantree.ToolFacts(a.get("tool.name", span.name),
                              None if ident is None else str(ident),
                              a.get("input.value", a.get("tool.parameters")),
                              a.get("output.value"))


def _session(span: Span) -> str | None:
    session = span.attributes.get("session.id")
    return None if session is None else str(session)


DIALECT = spantree.Dialect(source=SOURCE, claims=_claims, call=_call, tool=_tool,
                           is_agent=lambda span: _kind(span) == "AGENT", session=_session)
