"""OpenTelemetry spans as the SDK's ``ConsoleSpanExporter`` prints them.

The OpenTelemetry tutorials' default exporter writes each span as
``ReadableSpan.to_json()`` gives it: a pretty-printed JSON object (indent 4),
one after another (not a list, not one per line)::

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
:func:`detect` recognises them and :func:`spans` turns them into the
:class:`sim.traces.otel.Span` objects the OTLP JSON reading makes, so the same
assembly reads them: today's GenAI names (:mod:`sim.traces.otel`, source
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

from datetime import UTC, datetime
from typing import Any

from sim.traces.model import as_dict, parse_utc
from sim.traces.otel import Span

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def detect(value: Any) -> bool:
    """Whether ``value`` is one span as ``ReadableSpan.to_json()`` writes it: an
    object with a ``context`` holding ``span_id`` and a ``kind`` naming a
    ``SpanKind``."""
    if not isinstance(value, dict):
        return False
    kind = value.get("kind")
    return (isinstance(kind, str) and kind.startswith("SpanKind.")
            and "span_id" in as_dict(value.get("context")))


def spans(values: list[Any], file: str) -> list[Span]:
    """The spans of a file's printed values (those :func:`detect` accepts), in
    print order, each span once (its ended print kept)."""
    kept: dict[tuple[str, str], Span] = {}
    ended: set[tuple[str, str]] = set()
    for value in values:
        if not detect(value):
            continue
        span, has_end = _span(value, file)
        key = (span.trace, span.span)
        if has_end or key not in ended:
            kept[key] = span
        if has_end:
            ended.add(key)
    return list(kept.values())


def _span(raw: dict, file: str) -> tuple[Span, bool]:
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
