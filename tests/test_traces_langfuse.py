"""The Langfuse importer (sim/traces/langfuse.py) on files the real ``langfuse``
package writes in the test: the SDK's OpenTelemetry spans (its own
observations, and its OpenAI integration calling the local fake OpenAI server),
exported with the OpenTelemetry SDK's JSON file exporter, and the public API's
JSON built with the package's own API models (``ObservationsV2Response``)."""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid

import pytest
from fake_providers import FakeProvider, Reply
from roundtrip import imported, round_trip

pytest.importorskip("langfuse", reason="needs the 'test' extra (langfuse)")
from langfuse import Langfuse
from langfuse.api import ObservationsV2Meta, ObservationsV2Response, ObservationV2
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider

from sim.traces import read_traces

# per generation: usage_details (Langfuse's disjoint keys), cost_details, agent level
GENERATIONS = [
    ({"input": 100, "input_cached_tokens": 900, "output": 40}, {"input": 0.001, "output": 0.002,
                                                                "total": 0.003}, 0),
    ({"input": 50, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 200,
      "output": 30, "output_reasoning_tokens": 12}, {"total": 0.004}, 1),
    ({"input": 20, "output": 10}, {"total": 0.0005}, 1),
    ({"input": 60, "input_cached_tokens": 1100, "output": 8}, {"total": 0.002}, 0),
]
EXPECTED = [(100, 900, 0, 40, 0), (50, 1000, 200, 30, 12), (20, 0, 0, 10, 0),
            (60, 1100, 0, 8, 0)]


def client(path) -> Langfuse:
    """A Langfuse client whose spans go to ``path`` (OTLP JSON Lines), not to a
    server (a key of its own: the SDK keeps one client per public key)."""
    return Langfuse(public_key=f"pk-lf-{uuid.uuid4().hex}", secret_key="sk-lf-test",
                    base_url="http://127.0.0.1:9", span_exporter=FileSpanExporter(path),
                    tracer_provider=TracerProvider())


def sdk_spans(path):
    """One trace: an agent with two generations, a tool between them, and a
    nested agent (a subagent) with two generations of its own."""
    lf = client(path)
    gen = iter(GENERATIONS)

    def generation(n: int) -> None:
        usage, cost, _ = next(gen)
        with lf.start_as_current_observation(
                as_type="generation", name=f"llm {n}", model="gpt-4o", usage_details=usage,
                cost_details=cost, output={"role": "assistant", "content": f"step {n}"}):
            pass

    with lf.start_as_current_observation(as_type="agent", name="planner", input="plan"):
        generation(0)
        with lf.start_as_current_observation(as_type="tool", name="search", input={"q": "x"},
                                             output="found x"):
            pass
        with lf.start_as_current_observation(as_type="agent", name="researcher"):
            generation(1)
            generation(2)
        generation(3)
    lf.flush()
    lf.shutdown()
    return path


def test_sdk_spans_import_with_langfuse_usage_cost_and_subagents(tmp_path):
    """One trace, one run: four calls with Langfuse's disjoint usage keys read
    into the model's convention, the recorded costs kept, the tool call on
    the call before it, the nested agent's two calls marked."""
    path = sdk_spans(tmp_path / "spans.jsonl")
    imported([path], tmp_path / "traces", source="langfuse", runs=1)
    runs, calls = read_traces(tmp_path / "traces")
    got = [(r.input_tokens, r.cache_read_tokens, r.cache_write_tokens, r.output_tokens,
            r.reasoning_tokens) for r in calls.itertuples()]
    assert got == EXPECTED
    assert [c for c in calls["cost_usd"]] == [g[1]["total"] for g in GENERATIONS]
    assert math.isclose(runs["cost_usd"].iloc[0], sum(g[1]["total"] for g in GENERATIONS))
    marked = calls["agent"].notna().tolist()
    assert marked == [bool(g[2]) for g in GENERATIONS]
    assert calls["agent"].iloc[1] == calls["agent"].iloc[2]
    (tool,) = calls["tool_calls"].iloc[0]
    assert tool["name"] == "search" and tool["arguments"] == '{"q":"x"}'
    assert calls["model"].tolist() == ["gpt-4o"] * 4


def test_sdk_spans_round_trip(tmp_path, capsys):
    """Import, summary, replay identity on the SDK's spans."""
    path = sdk_spans(tmp_path / "spans.jsonl")
    imported([path], tmp_path / "traces", source="langfuse", runs=1)
    round_trip(tmp_path / "traces", tmp_path, capsys)


OPENAI_CHILD = """
import sys
from langfuse import Langfuse
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider

url, path, key = sys.argv[1:4]
lf = Langfuse(public_key=key, secret_key="sk-lf-openai", base_url="http://127.0.0.1:9",
              span_exporter=FileSpanExporter(path), tracer_provider=TracerProvider())
from langfuse.openai import OpenAI  # patches the openai package: kept to this process

client = OpenAI(base_url=url, api_key="sk-test", max_retries=0)
with lf.start_as_current_observation(as_type="agent", name="chat-agent"):
    for prompt in ("hi", "again"):
        client.chat.completions.create(model="gpt-4o", langfuse_public_key=key,
                                       messages=[{"role": "user", "content": prompt}])
lf.flush()
lf.shutdown()
"""


def test_the_openai_integration_against_the_fake_server(tmp_path):
    """langfuse.openai (in a process of its own, since it patches the openai
    package) records each completion's usage as OpenAI reports it (prompt
    tokens including cached ones): read with the cache subtracted."""
    import subprocess
    import sys

    path = tmp_path / "spans.jsonl"
    script = [Reply([("text", "hello")], input_tokens=30, cache_read=400, output_tokens=12,
                    reasoning_tokens=4),
              Reply([("text", "again")], input_tokens=10, cache_read=500, output_tokens=5)]
    with FakeProvider(list(script)) as server:
        done = subprocess.run([sys.executable, "-c", OPENAI_CHILD, server.openai_url, str(path),
                               f"pk-lf-{uuid.uuid4().hex}"], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert len(server.requests) == len(script)
    imported([path], tmp_path / "traces", source="langfuse", runs=1)
    _, calls = read_traces(tmp_path / "traces")
    got = [(r.input_tokens, r.cache_read_tokens, r.output_tokens, r.reasoning_tokens)
           for r in calls.itertuples()]
    assert got == [(s.input_tokens, s.cache_read, s.output_tokens - s.reasoning_tokens,
                    s.reasoning_tokens) for s in script]


def api_json(path):
    """``GET /api/public/observations`` (v2) as the API models serialise it:
    two traces, the second's generation without usage."""
    t0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)

    def obs(i, trace, kind, parent=None, **fields):
        return ObservationV2(id=f"o{i}", trace_id=trace, project_id="p", type=kind,
                             start_time=t0 + dt.timedelta(seconds=i),
                             end_time=t0 + dt.timedelta(seconds=i, milliseconds=500),
                             parent_observation_id=parent, **fields)

    data = [obs(0, "t1", "AGENT", name="agent"),
            obs(1, "t1", "GENERATION", "o0", model="claude-sonnet-4-5",
                usage_details={"input": 10, "cache_read_input_tokens": 300,
                               "cache_creation_input_tokens": 50, "output": 20},
                cost_details={"input": 0.0001, "output": 0.0003}),
            obs(2, "t1", "TOOL", "o0", name="read_file", input={"path": "a.py"},
                output="print(1)"),
            obs(3, "t1", "GENERATION", "o0", model="claude-sonnet-4-5",
                usage_details={"input": 12, "cache_read_input_tokens": 350, "output": 7},
                total_cost=0.0002),
            obs(4, "t2", "GENERATION", None, model="gpt-4o")]
    response = ObservationsV2Response(data=data, meta=ObservationsV2Meta(cursor=None))
    path.write_text(response.json())
    return path


def test_api_json_imports_with_usage_cost_and_tools_and_keeps_a_trace_without_usage(tmp_path):
    """Trace t1: two calls (cost from costDetails' parts, then totalCost), the
    tool on the first; trace t2's only generation has no usage: the run is
    kept, its call's token columns unknown (0 in the usage), nothing skipped."""
    from sim.traces import import_traces, langfuse

    path = api_json(tmp_path / "observations.json")
    report = import_traces([path], tmp_path / "traces")
    assert report.runs_by_source == {"langfuse": 2}
    assert report.skips == []
    _, calls = read_traces(tmp_path / "traces")
    assert [(r.input_tokens, r.cache_read_tokens, r.cache_write_tokens, r.output_tokens)
            for r in calls.itertuples()][:2] == [(10, 300, 50, 20), (12, 350, 0, 7)]
    assert math.isclose(calls["cost_usd"].iloc[0], 0.0004)
    assert calls["cost_usd"].iloc[1] == 0.0002
    (tool,) = calls["tool_calls"].iloc[0]
    assert tool["name"] == "read_file" and json.loads(tool["arguments"]) == {"path": "a.py"}
    assert calls["started_s"].tolist()[:2] == [1.0, 3.0]
    assert calls["latency_s"].tolist()[:2] == [0.5, 0.5]
    collector = langfuse.Collector()
    collector.add([json.loads(path.read_text())], str(path))
    t1, t2 = collector.runs()
    assert [c.provenance for c in t1.calls] == [{"cost_usd": "derived"},
                                                {"cost_usd": "exact"}]
    assert t2.calls[0].provenance == {
        "input_tokens": "unknown", "cache_read_tokens": "unknown",
        "cache_write_tokens": "unknown", "output_tokens": "unknown",
        "reasoning_tokens": "unknown", "cost_usd": "unknown"}
    assert t2.calls[0].usage.prompt_tokens == 0 and t2.calls[0].usage.output_tokens == 0


def test_api_json_round_trips(tmp_path, capsys):
    """Import, summary, replay identity on the API's JSON (the usable trace)."""
    from sim.traces import import_traces

    import_traces([api_json(tmp_path / "observations.json")], tmp_path / "traces")
    round_trip(tmp_path / "traces", tmp_path, capsys)


def test_openinference_llm_spans_under_a_langfuse_observation_are_calls(tmp_path):
    """Langfuse's documented OpenAI Agents SDK setup: an OpenInference
    instrumentor on the Langfuse client's tracer provider, its spans under a
    Langfuse observation. The file went to the Langfuse reader, which took
    only its generations: OpenInference's LLM spans were lost (no calls, or
    only the Langfuse generation). Each span is now read in the dialect that
    claims it: two OpenInference calls and one generation, with their counts."""
    pytest.importorskip("openinference.instrumentation.openai",
                        reason="needs openinference-instrumentation-openai")
    import openai
    from openinference.instrumentation.openai import OpenAIInstrumentor

    path = tmp_path / "mixed.jsonl"
    provider = TracerProvider()
    lf = Langfuse(public_key=f"pk-lf-{uuid.uuid4().hex}", secret_key="sk-lf-test",
                  base_url="http://127.0.0.1:9", span_exporter=FileSpanExporter(path),
                  tracer_provider=provider)
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    script = [Reply([("text", "a")], input_tokens=200, cache_read=800, output_tokens=30,
                    reasoning_tokens=20),
              Reply([("text", "b")], input_tokens=300, cache_read=1200, output_tokens=30)]
    try:
        with FakeProvider(list(script)) as server, lf.start_as_current_observation(
                as_type="agent", name="OpenAI-Agent-Trace"):
            chat = openai.OpenAI(base_url=server.openai_url, api_key="sk-test", max_retries=0)
            for _ in script:
                chat.chat.completions.create(model="gpt-4.1", messages=[
                    {"role": "user", "content": "go"}])
            with lf.start_as_current_observation(
                    as_type="generation", name="judge", model="gpt-4o-mini",
                    usage_details={"input": 50, "output": 5}):
                pass
    finally:
        instrumentor.uninstrument()
        lf.flush()
        lf.shutdown()
    imported([path], tmp_path / "traces", source="langfuse", runs=1)
    _, calls = read_traces(tmp_path / "traces")
    assert [(r.model, r.input_tokens, r.cache_read_tokens, r.output_tokens, r.reasoning_tokens)
            for r in calls.itertuples()] == [
        ("gpt-4.1", 200, 800, 10, 20), ("gpt-4.1", 300, 1200, 30, 0),
        ("gpt-4o-mini", 50, 0, 5, 0)]


def test_genai_chat_spans_under_a_langfuse_observation_are_calls(tmp_path):
    """A framework instrumented with today's GenAI names (Pydantic AI, the
    openai-v2 instrumentor) on the Langfuse client's tracer provider: its
    chat spans under a Langfuse observation are the run's calls, with the
    cache and reasoning split, its execute_tool span the first call's tool."""
    path = tmp_path / "genai.jsonl"
    provider = TracerProvider()
    lf = Langfuse(public_key=f"pk-lf-{uuid.uuid4().hex}", secret_key="sk-lf-test",
                  base_url="http://127.0.0.1:9", span_exporter=FileSpanExporter(path),
                  tracer_provider=provider)
    tracer = provider.get_tracer("pydantic-ai")
    with lf.start_as_current_observation(as_type="agent", name="support-bot"):
        for i, (inp, read, out, think) in enumerate(((1200, 1000, 40, 10), (1500, 1100, 60, 0))):
            with tracer.start_as_current_span("chat gpt-4o", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                    "gen_ai.usage.input_tokens": inp, "gen_ai.usage.output_tokens": out,
                    "gen_ai.usage.cache_read.input_tokens": read,
                    "gen_ai.usage.reasoning.output_tokens": think}):
                pass
            if i == 0:
                with tracer.start_as_current_span("execute_tool lookup", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                        "gen_ai.tool.call.id": "t1", "gen_ai.tool.call.result": "ok"}):
                    pass
    lf.flush()
    lf.shutdown()
    imported([path], tmp_path / "traces", source="langfuse", runs=1)
    _, calls = read_traces(tmp_path / "traces")
    assert [(r.input_tokens, r.cache_read_tokens, r.output_tokens, r.reasoning_tokens)
            for r in calls.itertuples()] == [(200, 1000, 30, 10), (400, 1100, 60, 0)]
    assert [(t["name"], t["id"]) for t in calls["tool_calls"].iloc[0]] == [("lookup", "t1")]
