"""Arize Phoenix span exports: the spans dataframe, span JSON Lines, the REST spans lists.

Phoenix stores OpenInference spans and hands them out in these shapes (read
from Phoenix's source, ``src/phoenix/trace/dsl/query.py`` ``get_spans_dataframe``
and ``src/phoenix/server/api/routers/v1/spans.py``, at 9478f95, 2026-08):

- **the spans dataframe** (``px.Client().get_spans_dataframe()``, the
  ``arize-phoenix-client``'s ``spans.get_spans_dataframe``), saved by the user
  with ``df.to_parquet(...)`` or ``df.to_json(orient="records", lines=True)``:
  one row per span with the columns ``name``, ``span_kind`` (the
  OpenInference kind: ``LLM``, ``TOOL``, ``AGENT``, ``CHAIN``...),
  ``parent_id``, ``start_time``, ``end_time``, ``status_code`` (``OK``,
  ``ERROR``, ``UNSET``), ``status_message``, ``events``, ``context.span_id``,
  ``context.trace_id`` and one ``attributes.*`` column per attribute. Phoenix
  un-flattens the attributes below the semantic-convention names, so a column
  is either a value (``attributes.llm.token_count.prompt``) or a list of
  objects (``attributes.llm.output_messages``: ``[{"message.role",
  "message.content", "message.tool_calls": [{"tool_call.id",
  "tool_call.function.name", "tool_call.function.arguments"}]}]``); a span
  without an attribute has null (NaN for a numeric column) there. Times are
  timestamps in Parquet; in JSON, ISO strings or (pandas' default) Unix
  milliseconds;
- **the REST list** (``GET /v1/projects/{project}/spans``): ``{"data": [span,
  ...], "next_cursor"}``, each span ``{"id", "name", "context": {"trace_id",
  "span_id"}, "span_kind", "parent_id", "start_time", "end_time",
  "status_code", "status_message", "attributes": {...}, "events"}`` with the
  attributes fully flattened (``llm.output_messages.0.message.content``) and
  ``openinference.span.kind`` moved out of them into ``span_kind``;
- **the OTLP list** (``GET /v1/projects/{project}/spans/otlpv1``, Phoenix
  20.26.1's ``span_search_otlpv1``): ``{"data": [span, ...], "next_cursor"}``,
  each span snake_case OTLP JSON with every field present (null when unset):
  ``{"trace_id", "span_id", "parent_span_id", "name", "kind",
  "start_time_unix_nano", "end_time_unix_nano", "status": {"code",
  "message"}, "attributes": [{"key", "value": {"string_value",
  "int_value", "double_value", "bool_value", "bytes_value", "array_value",
  "kvlist_value"}}], "events", ...}``, the attributes flattened as in the
  REST list but with ``openinference.span.kind`` kept among them; one kind
  of each value is non-null (``int_value`` an integer or decimal string,
  ``double_value`` a number or ``"inf"``/``"nan"``, ``bytes_value`` hex,
  ``array_value`` ``{"values": [...]}``; ``kvlist_value`` is always null);
  ``status.code`` 0 unset, 1 ok, 2 error; the times are
  ``int(timestamp * 1e9)`` of Phoenix's microsecond times. These spans are
  read by the OTLP JSON reading (:func:`sim.traces.otel.otlp_span`), then
  as the REST list gives them: a value of no kind (null) or NaN is absent, a
  kind ``UNKNOWN`` is dropped, the times are read to the nearest
  microsecond;
- **span JSON Lines** (``phoenix.trace.span_json_encoder.spans_to_jsonl``, the
  ``trace.jsonl`` a ``TraceDataset`` is read from): one span per line in the
  REST list's shape (``conversation`` instead of ``id``), its attributes
  possibly nested (``{"llm": {"token_count": {"prompt": 10}}}``);
- **a JSON list of such spans**, as ``json.dump`` writes what the
  ``arize-phoenix-client``'s ``spans.get_spans()`` returns (the REST list's
  ``data``).

A list's pages may be saved one per file, or as JSON Lines of pages (an
empty page among them holds nothing): the spans of every file are one
import, so a trace split across pages is one run. A span (trace and span id)
given twice in a file is read once.

The dataframe's and the REST list's spans are turned back into the
flattened attributes OpenInference's OTLP spans carry (a list of objects
under ``key`` becomes ``key.0.…``, ``key.1.…``; objects Phoenix parsed from
JSON strings, ``metadata``, ``tool.parameters``,
``llm.prompt_template.variables``, stay whole; null and NaN values, and
values nested more than 64 levels deep, are absent), with
``openinference.span.kind`` from ``span_kind`` (unless it is ``UNKNOWN``),
as :class:`sim.traces.otel.Span` objects: the runs are then assembled
exactly as for OpenInference's OTLP JSON
(:mod:`sim.traces.openinference`, source ``openinference``: one run per trace
or ``session.id``). Spans without OpenInference attributes (GenAI spans sent
to Phoenix) go to the reading that claims them, as their OTLP JSON would: a
file's spans all go to the first reading that claims one of them.

A number given for a time is read by its size as Unix seconds, milliseconds,
microseconds or nanoseconds (a time between 1973 and 2286 has one reading).
A span id or trace id missing from a row or span leaves it out.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sim.traces.model import as_dict, as_list
from sim.traces.openinference import KIND
from sim.traces.otel import Span, otlp_span, unix_nanos
from sim.traces.skips import TOO_LARGE, UNREADABLE, Unusable
from sim.traces.sources import MAX_FILE_BYTES

SPAN_ID = "context.span_id"
TRACE_ID = "context.trace_id"
OTLP_KEYS = frozenset({"trace_id", "span_id", "start_time_unix_nano"})
PREFIX = "attributes."
WHOLE = ("metadata", "tool.parameters", "llm.prompt_template.variables")
"""Attributes Phoenix parses from JSON strings into objects (its
``JSON_STRING_ATTRIBUTES``), kept whole rather than flattened."""
_MAX_DEPTH = 64


def detect(values: list[Any]) -> bool:
    """Whether a JSON file's values are Phoenix spans: dataframe rows (objects
    with ``context.span_id`` and ``span_kind``), spans (objects with a
    ``context`` object and ``span_kind``, or OTLP spans: ``trace_id``,
    ``span_id`` and ``start_time_unix_nano``) or pages (``data``, a list of
    spans, beside ``next_cursor``; some span in the file) or lists of spans."""
    return bool(values) and (all(_is_row(v) for v in values)
                             or all(_is_span(v) for v in values)
                             or (all(_is_page(v) or _is_list(v) for v in values)
                                 and any(_is_list(_data(v)) for v in values)))


def _is_row(value: Any) -> bool:
    return isinstance(value, dict) and SPAN_ID in value and "span_kind" in value


def _is_span(value: Any) -> bool:
    return _is_rest_span(value) or _is_otlp_span(value)


def _is_rest_span(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("context"), dict)
            and "span_kind" in value)


def _is_otlp_span(value: Any) -> bool:
    """A span of ``/spans/otlpv1`` (snake_case OTLP JSON)."""
    return isinstance(value, dict) and value.keys() >= OTLP_KEYS


def _is_page(value: Any) -> bool:
    """A page: its ``data`` a list of spans (empty: a page past the last span)."""
    if not isinstance(value, dict) or "next_cursor" not in value:
        return False
    data = value.get("data")
    return data == [] or _is_list(data)


def _data(value: Any) -> Any:
    return value.get("data") if isinstance(value, dict) else value


def _is_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(_is_span(s) for s in value)


def spans(values: list[Any], file: str) -> list[Span]:
    """The spans of a JSON file's values (those :func:`detect` accepts), each
    span (trace and span id) once: the first kept."""
    out: list[Span | None] = []
    for value in values:
        if _is_page(value) or _is_list(value):
            out.extend(_any_span(raw, file) for raw in _data(value))
        elif _is_span(value):
            out.append(_any_span(value, file))
        elif _is_row(value):
            out.append(_row(value, file))
    kept: dict[tuple[str, str], Span] = {}
    for span in out:
        if span is not None:
            kept.setdefault((span.trace, span.span), span)
    return list(kept.values())


def _any_span(raw: dict, file: str) -> Span | None:
    return _span_json(raw, file) if _is_rest_span(raw) else _otlp_span(raw, file)


def _otlp_span(raw: dict, file: str) -> Span | None:
    """A span of ``/spans/otlpv1``, read by the OTLP JSON reading
    (:func:`sim.traces.otel.otlp_span`), its kind and times as the REST
    list's would be (see the module)."""
    span = otlp_span(raw, file)
    if span is None or not span.trace or not span.span:
        return None
    span.attributes = {k: v for k, v in span.attributes.items() if not _missing(v)}
    kind = span.attributes.get(KIND)
    if isinstance(kind, str) and kind.upper() == "UNKNOWN":
        del span.attributes[KIND]
    span.start, span.end = _microsecond(span.start), _microsecond(span.end)
    span.end = max(span.end, span.start)
    return span


def _microsecond(nanos: int) -> int:
    return (nanos + 500) // 1000 * 1000


def _span_json(raw: dict, file: str) -> Span | None:
    """A span in the REST list's (or span JSON's) shape."""
    context = as_dict(raw.get("context"))
    return _span(raw, context.get("trace_id"), context.get("span_id"),
                 flatten(as_dict(raw.get("attributes"))), file)


def is_dataframe(path: Path) -> bool:
    """Whether the Parquet file at ``path`` is a saved spans dataframe (its
    columns include ``context.span_id`` and ``span_kind``); False for any
    other, or unreadable, Parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        names = set(pq.read_schema(path).names)
    except (pa.ArrowException, OSError, ValueError):
        return False
    return {SPAN_ID, "span_kind"} <= names


def parquet_spans(path: Path, file: str) -> list[Span]:
    """The spans of a saved spans dataframe (a Parquet file at most
    :data:`~sim.traces.sources.MAX_FILE_BYTES` long)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if os.path.getsize(path) > MAX_FILE_BYTES:
        raise Unusable(TOO_LARGE, f"more than {MAX_FILE_BYTES:,} bytes (the import reads at "
                                  f"most {MAX_FILE_BYTES // 2**20:,} MiB per file)")
    try:
        rows = pq.read_table(path).to_pylist()
    except (pa.ArrowException, OSError, ValueError) as error:
        raise Unusable(UNREADABLE, f"a Parquet file that cannot be read ({error})") from None
    return [s for row in rows if (s := _row(row, file)) is not None]


def _row(row: dict, file: str) -> Span | None:
    """A dataframe row (``attributes.*`` columns) as a span."""
    attributes: dict[str, Any] = {}
    for column, value in row.items():
        if isinstance(column, str) and column.startswith(PREFIX):
            attributes.update(flatten({column[len(PREFIX):]: value}))
    return _span(row, row.get(TRACE_ID), row.get(SPAN_ID), attributes, file)


def _span(raw: dict, trace: Any, span: Any, attributes: dict[str, Any], file: str
          ) -> Span | None:
    if _missing(trace) or _missing(span):
        return None
    kind = raw.get("span_kind")
    if isinstance(kind, str) and kind and kind.upper() != "UNKNOWN":
        attributes.setdefault(KIND, kind)
    start = time_nanos(raw.get("start_time"))
    end = time_nanos(raw.get("end_time"))
    parent = raw.get("parent_id")
    operation = attributes.get("gen_ai.operation.name")
    return Span(trace=str(trace), span=str(span),
                parent="" if _missing(parent) else str(parent), name=str(raw.get("name") or ""),
                start=start, end=end if end >= start else start, attributes=attributes,
                error=raw.get("status_code") == "ERROR" or "error.type" in attributes,
                file=file, operation=operation if isinstance(operation, str) else "")


def flatten(attributes: dict[str, Any]) -> dict[str, Any]:
    """Attributes as OpenInference's flattened keys (see the module)."""
    return dict(_pairs(attributes, "", 0))


def _pairs(value: Any, key: str, depth: int) -> Iterator[tuple[str, Any]]:
    if _missing(value) or depth > _MAX_DEPTH:
        return
    if isinstance(value, dict) and not key.endswith(WHOLE):
        for sub, item in value.items():
            yield from _pairs(item, f"{key}.{sub}" if key else str(sub), depth + 1)
    elif isinstance(value, list) and any(isinstance(item, dict) for item in value):
        for index, item in enumerate(as_list(value)):
            yield from _pairs(item, f"{key}.{index}", depth + 1)
    elif key:
        yield key, value


def _missing(value: Any) -> bool:
    """Null, or NaN (a dataframe's missing number)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def time_nanos(value: Any) -> int:
    """A time as Unix nanoseconds: a timestamp or ISO string, or a number read
    by its size (see the module); 0 when missing or not a time."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int | float):
        if not math.isfinite(value) or value <= 0:
            return 0
        for limit, scale in ((1e11, 10**9), (1e14, 10**6), (1e17, 10**3)):
            if value < limit:
                return int(value * scale)
        return int(value) if value < 2**63 else 0
    return unix_nanos(value)
