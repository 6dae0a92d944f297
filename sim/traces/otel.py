"""OpenTelemetry GenAI spans in OTLP JSON (collector file exporter, SDK JSON exporters).

A file holds one ``ExportTraceServiceRequest`` (``{"resourceSpans": [...]}``)
or a stream of them, one per line, as the collector's file exporter and the
SDK's ``FileSpanExporter`` write. Keys are read as protobuf's JSON mapping
reads them: lowerCamelCase (``startTimeUnixNano``, as OTLP/JSON writes them)
or the proto field names (``start_time_unix_nano``, as Arize Phoenix's
``/spans/otlpv1`` writes its spans, :func:`otlp_span`, with every field
present, null when unset); an ``AnyValue`` is its one non-null kind (None
when it has none). Spans are read with the GenAI semantic conventions:

- a **run** is a conversation: the spans sharing ``gen_ai.conversation.id``; a
  span without it takes its parent's (or, failing that, its trace's, when the
  trace has exactly one conversation), and spans with none at all are grouped
  by trace (``run_id`` is then the trace id). Conversations can span files:
  runs are assembled after every OTel input of the import has been read;
- a **model call** is a span whose ``gen_ai.operation.name`` is ``chat``,
  ``text_completion`` or ``generate_content``: ``gen_ai.usage.input_tokens``
  (which *includes* ``gen_ai.usage.cache_read.input_tokens`` and
  ``gen_ai.usage.cache_creation.input_tokens``: they are subtracted) and
  ``gen_ai.usage.output_tokens`` (which includes
  ``gen_ai.usage.reasoning.output_tokens``: the uncached input and the
  output without reasoning are so ``derived`` in the call's provenance when
  something was subtracted; a chat span without a count is kept, the
  count's columns ``unknown``: :func:`sim.traces.usage.from_totals`; a conversation any of whose
  calls has more cache than input, or more reasoning than output, as some
  instrumentations of Anthropic and Gemini report them, is read with those
  counted apart: :mod:`sim.traces.usage`); the model from
  ``gen_ai.response.model`` else ``gen_ai.request.model``;
  ``gen_ai.response.finish_reasons`` joined with commas (a list, or a string
  holding a JSON list: :func:`finish_reasons`); the span's start and
  length as ``started_s`` and ``latency_s``; ``text_tokens`` (the parts' sizes
  summed) and ``text_sha256`` (of the parts' texts concatenated in order) from
  the text parts of ``gen_ai.output.messages`` when content capture recorded
  it; the spans do not say which input messages are new to a call, so
  ``observation_tokens`` and ``observation_sha256`` stay null;
- a **tool call** is an ``execute_tool`` span: ``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments`` and
  ``gen_ai.tool.call.result`` (both opt-in content), an error when the span has
  ``error.type`` or an error status, and the span's length as its duration. It
  belongs to the last model call that started before it;
- a chat span inside another chat span is one request traced twice (a
  framework's instrumentation around the client library's): counted once
  (:func:`sim.traces.assemble.twice_seen`), the run's conventions say so;
- **subagents**: a call under an ``invoke_agent`` span other than the run's
  own agents (the outermost ones and the outermost one that made calls
  itself, :class:`sim.traces.assemble.AgentTree`, as the vendor span
  dialects read them: a nested agent, an agent run as a tool, a handoff's
  target) is marked with that span's id in ``agent``;
- ``exit`` is the ``error.type`` of the conversation's ``invoke_agent`` span
  (null when it ended without error); no cost, resolution or limits are in the
  conventions, so those stay null. A conversation with an ``invoke_agent``
  span and no chat span (the agent failed before its first model reply) is
  a run of zero calls with that exit; one with neither is no agent run.

**Spans as the SDK's ``ConsoleSpanExporter`` prints them.** The OpenTelemetry
tutorials' default exporter writes each span as ``ReadableSpan.to_json()`` gives
it: a pretty-printed JSON object (indent 4), one after another (not a list,
not one per line)::

    {
        "name": "chat gpt-4o",
        "context": {"trace_id": "0x5b8a...", "span_id": "0x0516...",
                    "trace_state": "[]"},
        "kind": "SpanKind.CLIENT",
        "parent_id": "0x3f2a...",            (null for a root span)
        "start_time": "2025-01-01T12:00:00.000000Z",
        "end_time": "2025-01-01T12:00:01.250000Z",
        "status": {"status_code": "UNSET"},  ("ERROR", with a "description")
        "attributes": {"gen_ai.operation.name": "chat", ...},
        "events": [...], "links": [...],
        "resource": {"attributes": {...}, "schema_url": ""}
    }

(opentelemetry-sdk 1.45; the shape has not changed since 1.0). The file's
values are read by :func:`sim.traces.sources.read_json` (concatenated JSON
values, with ``json.JSONDecoder.raw_decode``, bounded like every read);
:func:`is_printed_span` recognises them and :func:`printed_spans` turns them into the
:class:`Span` objects the OTLP JSON reading makes, so the same
assembly reads them: today's GenAI names (above, source
``otel-genai``) or a span dialect that claims them (OpenInference, older
OpenLLMetry names, Langfuse's SDK: :mod:`sim.traces.spantree`). Attributes are
plain JSON values here (not OTLP ``AnyValue``; a tuple attribute is a list).

- ids lose their ``0x`` prefix; times are UTC ISO strings with microseconds,
  read as Unix nanoseconds;
- a span printed twice, at its start (``end_time`` null: a processor that
  prints on start, or a custom one) and at its end, is kept once, as ended
  (the last ended print wins); a span printed only at its start (its process
  stopped before it ended) is kept with its end at its start (zero length);
- a span is an error when its ``status.status_code`` is ``ERROR`` or it has
  ``error.type``.
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cache, partial
from typing import Any

from sim.traces.assemble import NESTED_CALLS, AgentTree, ran_tool, twice_seen
from sim.traces.model import (
    CallRecord,
    RunRecord,
    ToolCallRecord,
    approx_tokens,
    as_dict,
    as_list,
    bounded_int,
    parse_utc,
    sha256_text,
    utc_from_unix,
)
from sim.traces.repairs import Repair
from sim.traces.skips import NO_CALLS, Skip, Unusable, or_skip
from sim.traces.usage import from_totals, read_apart

SOURCE = "otel-genai"
MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
TOOL_OPERATION = "execute_tool"
AGENT_OPERATION = "invoke_agent"
_STATUS_ERROR = (2, "STATUS_CODE_ERROR")
_SNAKE = re.compile("[A-Z]")


def detect(doc: Any) -> bool:
    """Whether ``doc`` is an OTLP JSON trace export (``resourceSpans``, or
    ``resource_spans``: see the module)."""
    return isinstance(doc, dict) and isinstance(_field(doc, "resourceSpans"), list)


def _field(raw: dict, name: str) -> Any:
    """The field ``name`` (lowerCamelCase) of an OTLP JSON object, else under
    its proto field name (snake_case); None when both are missing or null."""
    value = raw.get(name)
    if value is None:
        value = raw.get(_snake(name))
    return value


@cache
def _snake(name: str) -> str:
    """The proto field name (snake_case) of an OTLP JSON key (lowerCamelCase)."""
    return _SNAKE.sub(lambda m: "_" + m.group().lower(), name)


@dataclass(slots=True)
class Span:
    """The parts of one span an import needs (times in Unix nanoseconds)."""

    trace: str
    span: str
    parent: str
    name: str
    start: int
    end: int
    attributes: dict[str, Any]
    error: bool
    file: str
    operation: str = ""


@dataclass
class Collector:
    """Gathers spans from every OTel file of an import; :meth:`runs` assembles
    the conversations once all are read."""

    spans: list[Span] = field(default_factory=list)

    def add(self, doc: dict, file: str) -> int:
        """Add the spans of one OTLP JSON document; returns how many."""
        before = len(self.spans)
        for resource in as_list(_field(doc, "resourceSpans")):
            resource = as_dict(resource)
            scopes = _field(resource, "scopeSpans")
            if scopes is None:
                scopes = _field(resource, "instrumentationLibrarySpans")
            for scope in as_list(scopes):
                for raw in as_list(as_dict(scope).get("spans")):
                    span = otlp_span(raw, file)
                    if span is not None:
                        self.spans.append(span)
        return len(self.spans) - before

    def runs(self) -> Iterator[RunRecord | Skip]:
        """One run per conversation, ordered by start time then id."""
        groups = _group(self.spans)
        order = sorted(groups, key=lambda key: (min(s.start for s in groups[key]), key))
        for key in order:
            spans = sorted(groups[key], key=lambda s: (s.start, s.end, s.span))
            yield or_skip(partial(read_apart, partial(_run, key, spans)), spans[0].file, key)


def otlp_span(raw: Any, file: str) -> Span | None:
    """One OTLP JSON span (its keys lowerCamelCase or snake_case, see the
    module) as a :class:`Span`; None when it is not an object. A missing id
    is "" and a missing time 0."""
    if not isinstance(raw, dict):
        return None
    status = as_dict(raw.get("status"))
    attributes = _attributes(raw.get("attributes"))
    operation = attributes.get("gen_ai.operation.name")
    return Span(trace=_text(_field(raw, "traceId")), span=_text(_field(raw, "spanId")),
                parent=_text(_field(raw, "parentSpanId")), name=_text(raw.get("name")),
                start=_nanos(_field(raw, "startTimeUnixNano")),
                end=_nanos(_field(raw, "endTimeUnixNano")), attributes=attributes,
                error=status.get("code") in _STATUS_ERROR or "error.type" in attributes,
                file=file, operation=operation if isinstance(operation, str) else "")


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _attributes(items: Any) -> dict[str, Any]:
    out = {}
    for item in as_list(items):
        if isinstance(item, dict) and "key" in item:
            out[str(item["key"])] = _value(item.get("value"))
    return out


def _value(value: Any) -> Any:
    """An OTLP ``AnyValue`` as a Python value: its one non-null kind (int64
    may be a decimal string; a double may be a string, ``"NaN"``,
    ``"Infinity"``, or Phoenix's ``"inf"``, read as a float when it is one;
    bytes are kept as the text written, base64 or Phoenix's hex)."""
    if not isinstance(value, dict):
        return None
    if (text := _field(value, "stringValue")) is not None:
        return text
    if (number := _field(value, "intValue")) is not None:
        try:
            return int(number)
        except (TypeError, ValueError, OverflowError):
            return number
    if (double := _field(value, "doubleValue")) is not None:
        if isinstance(double, str):
            try:
                return float(double)
            except ValueError:
                return double
        return double
    if (flag := _field(value, "boolValue")) is not None:
        return flag
    if (array := _field(value, "arrayValue")) is not None:
        return [_value(v) for v in as_list(as_dict(array).get("values"))]
    if (pairs := _field(value, "kvlistValue")) is not None:
        return _attributes(as_dict(pairs).get("values"))
    return _field(value, "bytesValue")


def _nanos(value: Any) -> int:
    """A Unix time in nanoseconds (OTLP's fixed64), 0 when missing, not an
    integer or outside ``[0, 2**64)``."""
    if isinstance(value, bool) or (isinstance(value, float) and not math.isfinite(value)):
        return 0
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return 0
    return number if 0 <= number < 2**64 else 0


def _group(spans: list[Span]) -> dict[str, list[Span]]:
    """Spans by conversation id (inherited from the parent, else the trace)."""
    by_id = {(s.trace, s.span): s for s in spans}
    trace_conversations: dict[str, set[str]] = defaultdict(set)
    for s in spans:
        conversation = s.attributes.get("gen_ai.conversation.id")
        if conversation is not None:
            trace_conversations[s.trace].add(str(conversation))
    groups: dict[str, list[Span]] = defaultdict(list)
    for s in spans:
        key, seen = None, 0
        node: Span | None = s
        while node is not None and seen < 1000:
            conversation = node.attributes.get("gen_ai.conversation.id")
            if conversation is not None:
                key = str(conversation)
                break
            node = by_id.get((node.trace, node.parent)) if node.parent else None
            seen += 1
        if key is None:
            found = trace_conversations.get(s.trace, set())
            key = next(iter(found)) if len(found) == 1 else s.trace
        groups[key].append(s)
    return groups


def _run(key: str, spans: list[Span], apart: tuple[bool, bool] = (False, False)) -> RunRecord:
    start = spans[0].start
    end = max(s.end for s in spans)
    chats = [s for s in spans if s.operation in MODEL_OPERATIONS]
    if not chats and not any(s.operation == AGENT_OPERATION for s in spans):
        raise Unusable(NO_CALLS, f"{len(spans)} spans, none a chat or invoke_agent span")
    notes: list[Repair] = []
    calls = [call_record(s, start, notes, apart) for s in chats]
    tree = AgentTree(spans, lambda span: span.operation == AGENT_OPERATION)
    twice = twice_seen(chats, [c.provenance for c in calls], tree)
    chats = [s for i, s in enumerate(chats) if i not in twice]
    calls = [c for i, c in enumerate(calls) if i not in twice]
    agents = [tree.agent_of(s) for s in chats]
    outermost = tree.outermost(agents)
    calls = [replace(call, agent=None if agent in outermost else agent)
             for call, agent in zip(calls, agents, strict=True)]
    starts = [s.start for s in chats]  # sorted, as the spans are
    for tool in (s for s in spans if s.operation == TOOL_OPERATION):
        owner = bisect_right(starts, tool.start) - 1  # the last call started before it
        if owner >= 0:
            calls[owner].tool_calls.append(_tool(tool))
    model, exit_label = _agent_fields(spans, calls)
    return RunRecord(
        run_id=key, source=SOURCE, file=spans[0].file, calls=calls, model=model,
        exit=exit_label, started_at=utc_from_unix(start / 1e9) if start else None,
        duration_s=(end - start) / 1e9 if start and end else None, repairs=notes,
        conventions={"calls": NESTED_CALLS} if twice else {})


def _agent_fields(spans: list[Span], calls: list[CallRecord]) -> tuple[str | None, str | None]:
    """``(model, exit)``: the invoke_agent span's requested model (else the
    first call's) and its ``error.type``."""
    model = next((c.model for c in calls if c.model), None)
    agent = next((s for s in spans if s.operation == AGENT_OPERATION), None)
    if agent is None:
        return model, None
    exit_label = agent.attributes.get("error.type")
    return (agent.attributes.get("gen_ai.request.model", model),
            None if exit_label is None else str(exit_label))


def call_record(span: Span, start: int, notes: list[Repair],
                apart: tuple[bool, bool] = (False, False)) -> CallRecord:
    """The call a chat span records (times from ``start``, Unix ns; see the
    module for the attributes read); repairs go to ``notes``, ``apart`` reads
    the cache and reasoning as counted apart."""
    a = span.attributes
    counts, provenance = from_totals(
        a.get("gen_ai.usage.input_tokens"), a.get("gen_ai.usage.output_tokens"),
        cache_read=a.get("gen_ai.usage.cache_read.input_tokens"),
        cache_write=a.get("gen_ai.usage.cache_creation.input_tokens"),
        reasoning=a.get("gen_ai.usage.reasoning.output_tokens"),
        where=f"span {span.span} ({span.name})",
        names=("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"), notes=notes,
        apart=apart)
    model = a.get("gen_ai.response.model", a.get("gen_ai.request.model"))
    parts = output_text_parts(a.get("gen_ai.output.messages"))
    return CallRecord(
        usage=counts, model=None if model is None else str(model),
        finish_reason=finish_reasons(a.get("gen_ai.response.finish_reasons")),
        started_s=(span.start - start) / 1e9, latency_s=(span.end - span.start) / 1e9,
        provenance=provenance, **_text_fields(parts))


def finish_reasons(value: Any) -> str | None:
    """A span's finish reasons as one plain string: a list joined with commas
    (``["tool_calls"]`` gives ``tool_calls``), a string holding a JSON list
    (an instrumentation that stores the list as JSON text) read so, any other
    string as is; None when none is recorded (missing or an empty list).

    >>> finish_reasons('["tool_calls"]'), finish_reasons(["stop", "length"]), finish_reasons("stop")
    ('tool_calls', 'stop,length', 'stop')
    """
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            parsed = json.loads(value, parse_int=bounded_int)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, list):
            value = parsed
    if isinstance(value, (list, tuple)):
        reasons = [str(r) for r in value if r is not None]
        return ",".join(reasons) if reasons else None
    return None if value is None else str(value)


def _text_fields(parts: list[str] | None) -> dict[str, Any]:
    """``text_tokens`` (summed over the parts) and ``text_sha256`` of the text parts."""
    if parts is None:
        return {"text_tokens": None, "text_sha256": None}
    return {"text_tokens": sum(approx_tokens(p) for p in parts),
            "text_sha256": sha256_text("".join(parts))}


def tool_fields(span: Span) -> tuple[Any, str | None, Any, Any]:
    """An ``execute_tool`` span's tool name, call id, arguments and result."""
    a = span.attributes
    call_id = a.get("gen_ai.tool.call.id")
    return (a.get("gen_ai.tool.name", span.name), None if call_id is None else str(call_id),
            a.get("gen_ai.tool.call.arguments"), a.get("gen_ai.tool.call.result"))


def _tool(span: Span) -> ToolCallRecord:
    return ran_tool(*tool_fields(span), error=span.error,
                    duration_s=(span.end - span.start) / 1e9)


def output_text_parts(messages: Any) -> list[str] | None:
    """The texts of the text parts of ``gen_ai.output.messages`` (a JSON string
    of ``[{"role", "parts": [{"type": "text", "content"}...]}]``), in order, or
    None when no such content was captured."""
    if messages is None:
        return None
    if isinstance(messages, str):
        try:
            messages = json.loads(messages, parse_int=bounded_int)
        except (ValueError, RecursionError):
            return None
    if not isinstance(messages, list):
        return None
    return [str(part.get("content", ""))
            for message in messages for part in as_list(as_dict(message).get("parts"))
            if isinstance(part, dict) and part.get("type") == "text"]


# ------------------------------------------ the SDK's ConsoleSpanExporter
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def is_printed_span(value: Any) -> bool:
    """Whether ``value`` is one span as ``ReadableSpan.to_json()`` writes it: an
    object with a ``context`` holding ``span_id`` and a ``kind`` naming a
    ``SpanKind``."""
    if not isinstance(value, dict):
        return False
    kind = value.get("kind")
    return (isinstance(kind, str) and kind.startswith("SpanKind.")
            and "span_id" in as_dict(value.get("context")))


def printed_spans(values: list[Any], file: str) -> list[Span]:
    """The spans of a file's printed values (those :func:`is_printed_span` accepts), in
    print order, each span once (its ended print kept)."""
    kept: dict[tuple[str, str], Span] = {}
    ended: set[tuple[str, str]] = set()
    for value in values:
        if not is_printed_span(value):
            continue
        span, has_end = _printed_span(value, file)
        key = (span.trace, span.span)
        if has_end or key not in ended:
            kept[key] = span
        if has_end:
            ended.add(key)
    return list(kept.values())


def _printed_span(raw: dict, file: str) -> tuple[Span, bool]:
    """One printed span, and whether it was printed with its end."""
    context = as_dict(raw.get("context"))
    status = as_dict(raw.get("status"))
    attributes = {str(k): v for k, v in as_dict(raw.get("attributes")).items()}
    start = unix_nanos(raw.get("start_time"))
    end = unix_nanos(raw.get("end_time"))
    operation = attributes.get("gen_ai.operation.name")
    return Span(trace=_hex(context.get("trace_id")), span=_hex(context.get("span_id")),
                parent=_hex(raw.get("parent_id")), name=str(raw.get("name", "")),
                start=start, end=end if end else start, attributes=attributes,
                error=status.get("status_code") == "ERROR" or "error.type" in attributes,
                file=file, operation=operation if isinstance(operation, str) else ""), \
        bool(end)


def _hex(value: Any) -> str:
    """An id as printed (``0x``-prefixed hex) without its prefix; "" for none."""
    if value is None:
        return ""
    text = str(value)
    return text[2:] if text.lower().startswith("0x") else text


def unix_nanos(value: Any) -> int:
    """A time (an ISO 8601 string, a naive one taken as UTC, or a datetime)
    as Unix nanoseconds (to the microsecond); 0 when missing, not a time or
    before 1970."""
    moment = parse_utc(value)
    if moment is None or moment < _EPOCH:
        return 0
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1000
