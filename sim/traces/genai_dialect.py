"""Today's OpenTelemetry GenAI spans as a span-tree dialect, for the traces
of another vendor that hold them.

A trace made by one vendor's SDK may hold the spans of every instrumentor on
its tracer provider: Langfuse's SDK exports a Pydantic AI or
``opentelemetry-instrumentation-openai-v2`` chat span under its own
observations. :mod:`sim.traces.spantree` reads such a span in the dialect
that claims it (:func:`sim.traces.spantree.mixed`); this is that dialect for
the GenAI names, read as :mod:`sim.traces.otel` reads them (a file of GenAI
spans alone goes to that importer, not here): a ``chat`` /
``text_completion`` / ``generate_content`` span is a model call
(:func:`sim.traces.otel.call_record`), an ``execute_tool`` span a tool call
and an ``invoke_agent`` span an agent.
"""

from __future__ import annotations

from typing import Any

from sim.traces import spantree
from sim.traces.otel import (
    AGENT_OPERATION,
    MODEL_OPERATIONS,
    SOURCE,
    TOOL_OPERATION,
    Span,
    call_record,
    output_text_parts,
    tool_fields,
)

_OPERATIONS = MODEL_OPERATIONS | {AGENT_OPERATION, TOOL_OPERATION}


def _claims(attributes: dict[str, Any]) -> bool:
    return attributes.get("gen_ai.operation.name") in _OPERATIONS


def _call(span: Span) -> spantree.CallFacts | None:
    if span.operation not in MODEL_OPERATIONS:
        return None
    record = call_record(span, span.start, [])
    parts = output_text_parts(span.attributes.get("gen_ai.output.messages"))
    return spantree.CallFacts(usage=record.usage, model=record.model,
                              finish_reason=record.finish_reason,
                              text=None if parts is None else "".join(parts),
                              provenance=dict(record.provenance))


def _tool(span: Span) -> spantree.ToolFacts | None:
    if span.operation != TOOL_OPERATION:
        return None
    name, call_id, arguments, result = tool_fields(span)
    return spantree.ToolFacts(name=str(name), id=call_id, arguments=arguments, result=result)


DIALECT = spantree.Dialect(source=SOURCE, claims=_claims, call=_call, tool=_tool,
                           is_agent=lambda span: span.operation == AGENT_OPERATION)
"""Read only inside another dialect's trace (never given a file of its own)."""
