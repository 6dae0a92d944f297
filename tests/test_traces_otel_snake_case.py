"""OTLP JSON with the proto field names (sim/traces/otel.py): protobuf's JSON
parsers accept ``resource_spans``, ``start_time_unix_nano``, ``string_value``
as well as the lowerCamelCase names, and Phoenix's ``/spans/otlpv1`` writes
them so, every field present (null when unset). The same GenAI conversation
written both ways imports the same."""

from __future__ import annotations

import json
import re
from typing import Any

import pandas as pd

from sim.traces import import_traces, read_traces
from sim.traces.otel import Collector, detect

T0 = 1_748_779_200_000_000_000


def attr(key: str, value: Any) -> dict:
    kind = "intValue" if isinstance(value, int) else "stringValue"
    return {"key": key, "value": {kind: value}}


def span(span_id: str, parent: str, start: float, end: float, attributes: dict,
         code: int = 0) -> dict:
    return {"traceId": "t1", "spanId": span_id, "parentSpanId": parent, "name": span_id,
            "startTimeUnixNano": str(T0 + int(start * 1e9)),
            "endTimeUnixNano": str(T0 + int(end * 1e9)), "status": {"code": code},
            "attributes": [attr(k, v) for k, v in attributes.items()]}


def camel() -> dict:
    """A conversation: invoke_agent; a chat (1200 input incl. 1000 cache
    read, 40 output incl. 10 reasoning, 0.5-1.5 s); a failed tool call
    (status code 2, 2.0-2.25 s); a chat (300 input, 20 output)."""
    conv = {"gen_ai.conversation.id": "c1"}
    return {"resourceSpans": [{"scopeSpans": [{"spans": [
        span("a", "", 0, 5, {"gen_ai.operation.name": "invoke_agent", **conv}),
        span("c1", "a", 0.5, 1.5, {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 40,
            "gen_ai.usage.cache_read.input_tokens": 1000,
            "gen_ai.usage.reasoning.output_tokens": 10, **conv}),
        span("t", "a", 2.0, 2.25, {"gen_ai.operation.name": "execute_tool",
                                   "gen_ai.tool.name": "search", **conv}, code=2),
        span("c2", "a", 3.0, 4.0, {"gen_ai.operation.name": "chat",
                                   "gen_ai.usage.input_tokens": 300,
                                   "gen_ai.usage.output_tokens": 20, **conv}),
    ]}]}]}


def snake(value: Any) -> Any:
    """Keys as proto field names, each AnyValue with every kind (null but one)."""
    if isinstance(value, list):
        return [snake(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {re.sub("[A-Z]", lambda m: "_" + m.group().lower(), k): snake(v)
           for k, v in value.items()}
    if "string_value" in out or "int_value" in out:
        out = {**dict.fromkeys(("string_value", "int_value", "double_value", "bool_value",
                                "bytes_value", "array_value", "kvlist_value")), **out}
    return out


def test_snake_case_otlp_json_imports_as_camel_case_does(tmp_path):
    """One run c1: calls (200 in + 1000 cache, 30 out + 10 reasoning, 1.0 s)
    and (300, 20, 1.0 s); the tool call an error; 5.0 s long."""
    doc = snake(camel())
    assert "resource_spans" in doc and detect(doc)
    for name, written in (("camel", camel()), ("snake", doc)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "trace.json").write_text(json.dumps(written))
        import_traces([tmp_path / name], tmp_path / name / "out")
    (runs, calls), (camel_runs, camel_calls) = (read_traces(tmp_path / "snake" / "out"),
                                                read_traces(tmp_path / "camel" / "out"))
    assert runs["run_id"].tolist() == ["c1"] and runs["duration_s"].tolist() == [5.0]
    assert [(c.input_tokens, c.cache_read_tokens, c.output_tokens, c.reasoning_tokens,
             c.latency_s) for c in calls.itertuples()] == [(200, 1000, 30, 10, 1.0),
                                                           (300, 0, 20, 0, 1.0)]
    (tool,) = calls["tool_calls"].iloc[0]
    assert tool["name"] == "search" and tool["error"]
    pd.testing.assert_frame_equal(runs.drop(columns="file"), camel_runs.drop(columns="file"))
    pd.testing.assert_frame_equal(calls.drop(columns="file", errors="ignore"),
                                  camel_calls.drop(columns="file", errors="ignore"))


def test_null_fields_are_unset():
    """A null parent id reads as "" (a root), a null name as "", a value
    with every kind null as None."""
    collector = Collector()
    raw = snake(camel())["resource_spans"][0]["scope_spans"][0]["spans"][0]
    raw = {**raw, "parent_span_id": None, "name": None,
           "attributes": [*raw["attributes"], {"key": "x", "value": {"string_value": None}}]}
    collector.add({"resource_spans": [{"scope_spans": [{"spans": [raw]}]}]}, "f")
    (read,) = collector.spans
    assert (read.parent, read.name, read.attributes["x"]) == ("", "", None)
