"""Bad input to the importers of issue 22 (Claude Code, Langfuse, LangSmith,
OpenInference, older OpenLLMetry names): documents in each format with one
value replaced by arbitrary JSON (hypothesis) import or fail with an
InputError naming the file: never a traceback, never a hang."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.bad_input import InputError
from sim.traces import import_traces

T0 = "2026-03-01T12:00:00Z"


def _otlp(attributes_per_span: list[dict[str, Any]]) -> dict:
    def value(v: Any) -> dict:
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        return {"stringValue": str(v)}

    spans = [{"traceId": "a" * 32, "spanId": f"{i + 1:016x}",
              "parentSpanId": "" if i == 0 else f"{1:016x}", "name": f"s{i}",
              "startTimeUnixNano": str(1_700_000_000_000_000_000 + i * 10**9),
              "endTimeUnixNano": str(1_700_000_000_500_000_000 + i * 10**9),
              "attributes": [{"key": k, "value": value(v)} for k, v in attrs.items()]}
             for i, attrs in enumerate(attributes_per_span)]
    return {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}


SEEDS: dict[str, list[Any]] = {
    "claude-code": [
        {"type": "user", "sessionId": "s1", "uuid": "u1", "timestamp": T0, "isSidechain": False,
         "message": {"role": "user", "content": "hi"}},
        {"type": "assistant", "sessionId": "s1", "uuid": "u2", "timestamp": T0,
         "isSidechain": False, "message": {
             "id": "m1", "model": "claude", "role": "assistant", "stop_reason": "tool_use",
             "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"c": 1}}],
             "usage": {"input_tokens": 5, "cache_read_input_tokens": 10,
                       "cache_creation_input_tokens": 2, "output_tokens": 3}}},
        {"type": "user", "sessionId": "s1", "uuid": "u3", "timestamp": T0, "isSidechain": False,
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                  "content": "ok"}]}}],
    "langfuse": [{"data": [
        {"id": "o0", "traceId": "t", "type": "AGENT", "startTime": T0},
        {"id": "o1", "traceId": "t", "type": "GENERATION", "startTime": T0,
         "parentObservationId": "o0", "usageDetails": {"input": 3, "output": 2},
         "costDetails": {"total": 0.1}},
        {"id": "o2", "traceId": "t", "type": "TOOL", "name": "search", "startTime": T0,
         "parentObservationId": "o0",
         "input": {"q": 1}, "output": "x"}]}],
    "langsmith": [{"post": [
        {"id": "r0", "trace_id": "r0", "run_type": "chain", "name": "a", "start_time": T0},
        {"id": "r1", "trace_id": "r0", "parent_run_id": "r0", "run_type": "llm", "name": "m",
         "start_time": T0, "outputs": {"usage_metadata": {
             "input_tokens": 9, "output_tokens": 2, "input_token_details": {"cache_read": 4}}}},
        {"id": "r2", "trace_id": "r0", "parent_run_id": "r0", "run_type": "tool", "name": "t",
         "start_time": T0, "inputs": {"a": 1}, "outputs": {"output": "y"}}]}],
    "openinference": [_otlp([
        {"openinference.span.kind": "AGENT"},
        {"openinference.span.kind": "LLM", "llm.token_count.prompt": 30,
         "llm.token_count.completion": 4, "llm.token_count.prompt_details.cache_read": 10,
         "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "f"},
        {"openinference.span.kind": "TOOL", "tool.name": "f", "output.value": "z"}])],
    "otel-legacy": [_otlp([
        {"traceloop.span.kind": "agent"},
        {"llm.request.type": "chat", "gen_ai.usage.prompt_tokens": 30,
         "gen_ai.usage.completion_tokens": 4, "gen_ai.usage.cache_read_input_tokens": 10}])],
    "langfuse-otel": [_otlp([
        {"langfuse.observation.type": "agent"},
        {"langfuse.observation.type": "generation",
         "langfuse.observation.usage_details": json.dumps({"input": 3, "output": 1})}])],
}

JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 2**60) | st.floats()
                    | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*prefix, index))
    return out


def _replace(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    copy = json.loads(json.dumps(value))
    node = copy
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = new
    return copy


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(sorted(SEEDS)), choice=st.integers(0, 10**6), new=JSON)
def test_a_mutated_document_imports_or_fails_cleanly(fmt, choice, new):
    """One value anywhere in a valid document replaced by arbitrary JSON: the
    import succeeds or raises InputError (exit 2 on the command line)."""
    values = SEEDS[fmt]
    paths = _paths(values)[1:]
    path = paths[choice % len(paths)]
    mutated = _replace(values, path, new)
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "input.jsonl"
        source.write_text("".join(json.dumps(v, allow_nan=True) + "\n" for v in mutated))
        try:
            import_traces([source], Path(tmp) / "out")
        except InputError as error:
            assert str(source) in str(error)


def test_every_seed_imports_as_its_format(tmp_path):
    """The unmutated seeds are valid: one run each, of the expected source."""
    expected = {"claude-code": "claude-code", "langfuse": "langfuse", "langsmith": "langsmith",
                "openinference": "openinference", "otel-legacy": "otel-genai",
                "langfuse-otel": "langfuse"}
    for fmt, values in SEEDS.items():
        source = tmp_path / f"{fmt}.jsonl"
        source.write_text("".join(json.dumps(v) + "\n" for v in values))
        report = import_traces([source], tmp_path / f"out-{fmt}")
        assert report.runs_by_source == {expected[fmt]: 1}, (fmt, report.lines())
