"""Subagents in OpenTelemetry GenAI spans (sim/traces/otel.py): a call under an
``invoke_agent`` span other than the run's own agent is marked with that
span's id in ``calls.agent`` (an agent run as a tool, a handoff's target), as
the vendor span dialects mark theirs (sim/traces/assemble.py AgentTree).

The spans are shaped as ``opentelemetry-instrumentation-openai-agents-v2``
0.1.0 writes them for an OpenAI Agents SDK (0.24.0) run: a workflow
``invoke_agent`` span at the root, each agent's ``invoke_agent`` span under
it, the agent's turns as spans of operation ``unknown``, ``chat`` spans in the
turns, an agent run as a tool under its ``execute_tool`` span, and a handoff's
target agent beside the agent that handed off. The last test runs that
writer itself (skipped where it is not installed)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from roundtrip import imported

from sim.traces import read_traces

TRACE = "5daacaec042dd570a79ba7a49808e1ef"


def _span(span: str, parent: str | None, name: str, operation: str, start: int,
          **attributes: object) -> dict:
    attrs = [{"key": "gen_ai.operation.name", "value": {"stringValue": operation}}]
    for key, value in attributes.items():
        dotted = key.replace("__", ".")
        attrs.append({"key": dotted, "value": {"intValue": str(value)} if isinstance(value, int)
                      else {"stringValue": str(value)}})
    return {"traceId": TRACE, "spanId": span, "parentSpanId": parent or "", "name": name,
            "kind": 1, "startTimeUnixNano": str(1_700_000_000_000_000_000 + start * 10**8),
            "endTimeUnixNano": str(1_700_000_000_000_000_000 + start * 10**8 + 5 * 10**7),
            "attributes": attrs, "status": {"code": 1}}


def _chat(span: str, parent: str, start: int, tokens: int) -> dict:
    return _span(span, parent, "chat gpt-4o", "chat", start,
                 gen_ai__request__model="gpt-4o", gen_ai__usage__input_tokens=tokens,
                 gen_ai__usage__output_tokens=5)


def write_spans(path: Path) -> Path:
    """A planner that calls a tool, a researcher agent as a tool, then hands
    off to a specialist who answers (five chat spans, in that order)."""
    spans = [
        _span("w", None, "Agent workflow", "invoke_agent", 0),
        _span("b", "w", "unknown", "unknown", 0),
        _span("planner", "b", "invoke_agent planner", "invoke_agent", 0,
              gen_ai__agent__name="planner"),
        _span("turn1", "planner", "unknown", "unknown", 1),
        _chat("c1", "turn1", 1, 30),
        _span("t1", "turn1", "execute_tool search", "execute_tool", 2,
              gen_ai__tool__name="search"),
        _span("turn2", "planner", "unknown", "unknown", 3),
        _chat("c2", "turn2", 3, 40),
        _span("t2", "turn2", "execute_tool researcher", "execute_tool", 4,
              gen_ai__tool__name="researcher"),
        _span("u", "t2", "unknown", "unknown", 4),
        _span("researcher", "u", "invoke_agent researcher", "invoke_agent", 4,
              gen_ai__agent__name="researcher"),
        _span("rturn", "researcher", "unknown", "unknown", 5),
        _chat("c3", "rturn", 5, 70),
        _span("turn3", "planner", "unknown", "unknown", 6),
        _chat("c4", "turn3", 6, 50),
        _span("h", "turn3", "agent_handoff", "agent_handoff", 7),
        _span("specialist", "b", "invoke_agent specialist", "invoke_agent", 8,
              gen_ai__agent__name="specialist"),
        _span("sturn", "specialist", "unknown", "unknown", 8),
        _chat("c5", "sturn", 8, 10),
    ]
    doc = {"resourceSpans": [{"resource": {"attributes": []},
                              "scopeSpans": [{"scope": {"name": "openai-agents"},
                                              "spans": spans}]}]}
    path.write_text(json.dumps(doc) + "\n")
    return path


def agents_of(calls: pd.DataFrame) -> list[str | None]:
    return [None if pd.isna(a) else str(a) for a in calls["agent"]]


def test_an_agent_run_as_a_tool_and_a_handoffs_target_are_subagents(tmp_path):
    """The planner's three calls are the run's own (the workflow span above it
    is no subagent boundary); the researcher's call carries the researcher's
    invoke_agent span id, the specialist's call the specialist's."""
    imported([write_spans(tmp_path / "s.json")], tmp_path / "traces", source="otel-genai",
             runs=1)
    _, calls = read_traces(tmp_path / "traces")
    assert calls["input_tokens"].tolist() == [30, 40, 70, 50, 10]
    assert agents_of(calls) == [None, None, "researcher", None, "specialist"]


def test_one_agent_alone_has_no_subagents(tmp_path):
    """An invoke_agent span with two chat spans under it: both the run's own."""
    spans = [_span("a", None, "invoke_agent solo", "invoke_agent", 0),
             _chat("c1", "a", 1, 30), _chat("c2", "a", 2, 40)]
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    imported([path], tmp_path / "traces", source="otel-genai", runs=1)
    _, calls = read_traces(tmp_path / "traces")
    assert agents_of(calls) == [None, None]


def test_the_openai_agents_instrumentation_marks_the_agent_tool_and_the_handoff(tmp_path):
    """The real writer (opentelemetry-instrumentation-openai-agents-v2) on an
    OpenAI Agents SDK run against the fake OpenAI server: five calls, the
    researcher's (agent as a tool) and the specialist's (handoff target)
    marked with their invoke_agent span ids, the planner's not."""
    pytest.importorskip("agents", reason="needs openai-agents")
    otel_agents = pytest.importorskip(
        "opentelemetry.instrumentation.openai_agents",
        reason="needs opentelemetry-instrumentation-openai-agents-v2")
    import agents
    import openai
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
    from fake_providers import FakeProvider, Reply
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    script = [
        Reply([("tool_use", "call_1", "search", {"q": "x"})], stop_reason="tool_use",
              input_tokens=30, output_tokens=5),
        Reply([("tool_use", "call_2", "researcher", {"input": "y"})], stop_reason="tool_use",
              input_tokens=40, output_tokens=6),
        Reply([("text", "sub answer")], input_tokens=70, output_tokens=9),
        Reply([("tool_use", "call_3", "transfer_to_specialist", {})], stop_reason="tool_use",
              input_tokens=50, output_tokens=5),
        Reply([("text", "done")], input_tokens=10, output_tokens=5)]

    @function_tool
    def search(q: str) -> str:
        """Search the web."""
        return f"found {q}"

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(tmp_path / "s.jsonl")))
    agents.set_trace_processors([])  # no export to OpenAI's tracing backend
    instrumentor = otel_agents.OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with FakeProvider(list(script)) as server:
            client = openai.AsyncOpenAI(base_url=server.openai_url, api_key="sk-test",
                                        max_retries=0)
            model = OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client)
            researcher = Agent(name="researcher", instructions="R.", model=model)
            specialist = Agent(name="specialist", instructions="S.", model=model)
            planner = Agent(name="planner", instructions="P.", model=model, tools=[
                search, researcher.as_tool(tool_name="researcher", tool_description="r")],
                handoffs=[specialist])
            result = Runner.run_sync(planner, "help")
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    assert result.final_output == "done"
    imported([tmp_path / "s.jsonl"], tmp_path / "traces", source="otel-genai", runs=1)
    _, calls = read_traces(tmp_path / "traces")
    names = {}
    for line in (tmp_path / "s.jsonl").read_text().splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    names[span["spanId"]] = span["name"]
    marked = [None if a is None else names[a] for a in agents_of(calls)]
    assert calls["input_tokens"].tolist() == [30, 40, 70, 50, 10]
    assert marked == [None, None, "invoke_agent researcher", None, "invoke_agent specialist"]
