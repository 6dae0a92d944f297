"""Arize Phoenix span exports: the spans dataframe, span JSON Lines, the REST spans list.

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
- **span JSON Lines** (``phoenix.trace.span_json_encoder.spans_to_jsonl``, the
  ``trace.jsonl`` a ``TraceDataset`` is read from): one span per line in the
  REST list's shape (``conversation`` instead of ``id``), its attributes
  possibly nested (``{"llm": {"token_count": {"prompt": 10}}}``);
- **a JSON list of such spans**, as ``json.dump`` writes what the
  ``arize-phoenix-client``'s ``spans.get_spans()`` returns (the REST list's
  ``data``).

Both are turned back into the flattened attributes OpenInference's OTLP
spans carry (a list of objects under ``key`` becomes ``key.0.…``, ``key.1.…``;
objects Phoenix parsed from JSON strings, ``metadata``, ``tool.parameters``,
``llm.prompt_template.variables``, stay whole; null and NaN values, and
values nested more than 64 levels deep, are absent), with
``openinference.span.kind`` from ``span_kind`` (unless it is ``UNKNOWN``),
as :class:`sim.traces.otel.Span` objects: the runs are then assembled
exactly as for OpenInference's OTLP JSON
(:mod:`sim.traces.openinference`, source ``openinference``: one run per trace
or ``session.id``). Spans without OpenInference attributes (GenAI spans sent
to Phoenix) go to the reading that claims them, as their OTLP JSON would.

A number given for a time is read by its size as Unix seconds, milliseconds,
microseconds or nanoseconds (a time between 1973 and 2286 has one reading).
A span id or trace id missing from a row leaves that row out.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sim.traces.model import as_dict, as_list
from sim.traces.openinference import KIND
from sim.traces.otel import Span, unix_nanos
from sim.traces.skips import TOO_LARGE, UNREADABLE, Unusable
from sim.traces.sources import MAX_FILE_BYTES

SPAN_ID = "context.span_id"
TRACE_ID = "context.trace_id"
PREFIX = "attributes."
WHOLE = ("metadata", "tool.parameters", "llm.prompt_template.variables")
"""Attributes Phoenix parses from JSON strings into objects (its
``JSON_STRING_ATTRIBUTES``), kept whole rather than flattened."""
_MAX_DEPTH = 64


def detect(values: list[Any]) -> bool:
    """Whether a JSON file's values are Phoenix spans: dataframe rows (objects
    with ``context.span_id`` and ``span_kind``), spans (objects with a
    ``context`` object and ``span_kind``) or REST pages (``data``, a non-empty
    list of spans, beside ``next_cursor``) or lists of spans."""
    return bool(values) and (all(_is_row(v) for v in values)
                             or all(_is_span(v) for v in values)
                             or all(_is_page(v) or _is_list(v) for v in values))


def _is_row(value: Any) -> bool:
    return isinstance(value, dict) and SPAN_ID in value and "span_kind" in value


def _is_span(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("context"), dict)
            and "span_kind" in value)


def _is_page(value: Any) -> bool:
    if not isinstance(value, dict) or "next_cursor" not in value:
        return False
    data = value.get("data")
    return _is_list(data)


def _is_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(_is_span(s) for s in value)


def spans(values: list[Any], file: str) -> list[Span]:
    """The spans of a JSON file's values (those :func:`detect` accepts)."""
    out: list[Span | None] = []
    for value in values:
        if _is_page(value) or _is_list(value):
            data = value["data"] if isinstance(value, dict) else value
            out.extend(_span_json(raw, file) for raw in data)
        elif _is_span(value):
            out.append(_span_json(value, file))
        elif _is_row(value):
            out.append(_row(value, file))
    return [s for s in out if s is not None]


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
