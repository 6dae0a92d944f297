"""The OpenInference importer (sim/traces/openinference.py) on spans the real
``openinference-instrumentation-openai`` writes for OpenAI SDK calls to the
local fake OpenAI server, with agent and tool spans from OpenInference's own
tracer (``OITracer``), captured with the OpenTelemetry SDK's JSON file exporter."""

from __future__ import annotations

import json

import pytest
from fake_providers import FakeProvider, Reply
from roundtrip import imported, round_trip

pytest.importorskip("openinference.instrumentation.openai",
                    reason="needs the 'test' extra (openinference-instrumentation-openai)")
import openai
from openinference.instrumentation import OITracer, TraceConfig
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from sim.traces import read_traces, spantree
from sim.traces.model import DERIVED, TOKEN_COLUMNS, UNKNOWN, canonical_json, sha256_text
from sim.traces.openinference import DIALECT
from sim.traces.sources import read_json

TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}}}}]
SCRIPT = [
    Reply([("text", "Let me look."), ("tool_use", "call_1", "search", {"q": "x"})],
          stop_reason="tool_use", input_tokens=30, cache_read=400, output_tokens=12,
          reasoning_tokens=4),
    Reply([("text", "sub answer")], input_tokens=70, output_tokens=9),  # the subagent's
    Reply([("text", "done")], input_tokens=10, cache_read=500, output_tokens=5),
]
STREAMED = {2}


def spans(path):
    """An agent: a call that requests a tool, the tool, a nested agent with one
    call, and a streamed final call; returns the fake server's answers."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    tracer = OITracer(provider.get_tracer("agent"), config=TraceConfig())
    try:
        with FakeProvider(list(SCRIPT)) as server:
            client = openai.OpenAI(base_url=server.openai_url, api_key="sk-test",
                                   max_retries=0)

            def ask(n: int) -> None:
                messages = [{"role": "user", "content": f"turn {n}"}]
                if n in STREAMED:
                    for _ in client.chat.completions.create(
                            model="gpt-4o", messages=messages, stream=True,
                            stream_options={"include_usage": True}):
                        pass
                else:
                    client.chat.completions.create(model="gpt-4o", messages=messages,
                                                   tools=TOOLS)

            with tracer.start_as_current_span("planner", openinference_span_kind="agent"):
                ask(0)
                with tracer.start_as_current_span("search",
                                                  openinference_span_kind="tool") as tool:
                    tool.set_tool(name="search", description="web search",
                                  parameters={"q": "x"})
                    tool.set_input(json.dumps({"q": "x"}))
                    tool.set_output("found x")
                with tracer.start_as_current_span("researcher",
                                                  openinference_span_kind="agent"):
                    ask(1)
                ask(2)
            answers = list(server.answers)
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    return answers


def test_openai_calls_import_with_the_servers_tokens_tools_and_a_marked_subagent(tmp_path):
    """One trace, one run: per call the server's counts (the prompt includes
    the cached tokens and the completion the reasoning ones: both split out),
    the requested tool call answered by the tool span, the nested agent's call
    marked."""
    answers = spans(tmp_path / "spans.jsonl")
    assert len(answers) == len(SCRIPT)
    imported([tmp_path / "spans.jsonl"], tmp_path / "traces", source="openinference", runs=1)
    _, calls = read_traces(tmp_path / "traces")
    assert [(r.input_tokens, r.cache_read_tokens, r.cache_write_tokens, r.output_tokens,
             r.reasoning_tokens) for r in calls.itertuples()] == [
        (a.input_tokens, a.cache_read, 0, a.output_tokens - a.reasoning_tokens,
         a.reasoning_tokens) for a in answers]
    assert calls["agent"].notna().tolist() == [False, True, False]
    assert calls["finish_reason"].tolist() == ["tool_calls", "stop", "stop"]
    (tool,) = calls["tool_calls"].iloc[0]
    assert (tool["name"], tool["id"], tool["arguments"]) == ("search", "call_1",
                                                             canonical_json({"q": "x"}))
    assert tool["result_sha256"] == sha256_text("found x") and tool["error"] is False
    assert calls["text_sha256"].iloc[2] == sha256_text("done")


def test_openinference_spans_round_trip(tmp_path, capsys):
    """Import, summary, replay identity."""
    spans(tmp_path / "spans.jsonl")
    imported([tmp_path / "spans.jsonl"], tmp_path / "traces", source="openinference", runs=1)
    round_trip(tmp_path / "traces", tmp_path, capsys)


AGENT_SCRIPT = [
    Reply([("tool_use", "call_1", "search", {"q": "x"})], stop_reason="tool_use",
          input_tokens=30, cache_read=400, output_tokens=12, reasoning_tokens=4),
    Reply([("tool_use", "call_2", "researcher", {"input": "dig"})], stop_reason="tool_use",
          input_tokens=50, output_tokens=7),
    Reply([("text", "sub answer")], input_tokens=70, output_tokens=9),  # the researcher's
    Reply([("text", "done")], input_tokens=10, cache_read=500, output_tokens=5),
]


def run_agents_sdk(path, *, with_openai: bool = False) -> tuple[object, list]:
    """An OpenAI Agents SDK run (chat completions against the fake server)
    traced by openinference-instrumentation-openai-agents (``with_openai``:
    and by openinference-instrumentation-openai too) into ``path``: a planner
    that calls a function tool and a researcher agent as a tool. Returns the
    run's result and the server's answers."""
    pytest.importorskip("agents", reason="needs openai-agents")
    oi_agents = pytest.importorskip("openinference.instrumentation.openai_agents",
                                    reason="needs openinference-instrumentation-openai-agents")
    import agents
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
    agents.set_trace_processors([])  # no export to OpenAI's tracing backend
    instrumentors = [oi_agents.OpenAIAgentsInstrumentor()] + (
        [OpenAIInstrumentor()] if with_openai else [])
    for instrumentor in instrumentors:
        instrumentor.instrument(tracer_provider=provider)

    @function_tool
    def search(q: str) -> str:
        """Search the web."""
        return f"found {q}"

    try:
        with FakeProvider(list(AGENT_SCRIPT)) as server:
            client = openai.AsyncOpenAI(base_url=server.openai_url, api_key="sk-test",
                                        max_retries=0)
            model = OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client)
            researcher = Agent(name="researcher", instructions="Research.", model=model)
            planner = Agent(name="planner", instructions="Plan.", model=model, tools=[
                search, researcher.as_tool(tool_name="researcher",
                                           tool_description="a researcher")])
            result = Runner.run_sync(planner, "What is x?")
            answers = list(server.answers)
    finally:
        for instrumentor in instrumentors:
            instrumentor.uninstrument()
        provider.shutdown()
    assert result.final_output == "done" and len(answers) == len(AGENT_SCRIPT)
    return result, answers


def test_the_openai_agents_sdk_with_an_agent_as_tool(tmp_path):
    """openinference-instrumentation-openai-agents on an Agents SDK run: one
    run; per call the prompt and completion totals the server sent (this
    instrumentation does not carry the cache or reasoning split: they stay in
    input and output); the researcher's call marked as a subagent's, the
    framework's workflow span above the planner not taken for one; the tool
    calls answered."""
    _, answers = run_agents_sdk(tmp_path / "s.jsonl")
    imported([tmp_path / "s.jsonl"], tmp_path / "traces", source="openinference", runs=1)
    _, calls = read_traces(tmp_path / "traces")
    assert [(r.input_tokens + r.cache_read_tokens + r.cache_write_tokens,
             r.output_tokens + r.reasoning_tokens) for r in calls.itertuples()] == [
        (a.input_tokens + a.cache_read + a.cache_write, a.output_tokens) for a in answers]
    assert calls["agent"].notna().tolist() == [False, False, True, False]
    first, second = calls["tool_calls"].iloc[0], calls["tool_calls"].iloc[1]
    assert [(t["name"], t["id"]) for t in first] == [("search", "call_1")]
    assert first[0]["result_sha256"] == sha256_text("found x")
    assert [(t["name"], t["id"]) for t in second] == [("researcher", "call_2")]
    assert second[0]["result_sha256"] == sha256_text("sub answer")


def test_two_instrumentors_of_one_request_count_it_once(tmp_path):
    """With the openai instrumentor on as well (as Phoenix's auto-instrument
    does when both are installed), each request is an openai span inside the
    agents SDK's LLM span, both with its usage: every call was counted twice.
    Now each request is one call, read from the inner span (which splits the
    cache), the subagent and tools as before, and the run says so."""
    _, answers = run_agents_sdk(tmp_path / "s.jsonl", with_openai=True)
    report = imported([tmp_path / "s.jsonl"], tmp_path / "traces", source="openinference",
                      runs=1)
    _, calls = read_traces(tmp_path / "traces")
    assert [(r.input_tokens, r.cache_read_tokens, r.output_tokens, r.reasoning_tokens)
            for r in calls.itertuples()] == [
        (a.input_tokens, a.cache_read, a.output_tokens - a.reasoning_tokens,
         a.reasoning_tokens) for a in answers]
    assert calls["agent"].notna().tolist() == [False, False, True, False]
    assert [t["name"] for t in calls["tool_calls"].iloc[0]] == ["search"]
    assert [t["name"] for t in calls["tool_calls"].iloc[1]] == ["researcher"]
    assert list(report.conventions["openinference"]["calls"].values()) == [1]


def test_provenance_says_which_counts_were_derived(tmp_path):
    """The first call's prompt included 400 cached tokens and its completion
    4 reasoning ones (both subtracted: derived); the subagent's call had
    neither (exact, nothing listed); the last call's 500 cached were
    subtracted from its prompt (input derived)."""
    spans(tmp_path / "spans.jsonl")
    gatherer = spantree.Gatherer(DIALECT)
    for value in read_json(tmp_path / "spans.jsonl"):
        gatherer.add(value, "spans.jsonl")
    (run,) = gatherer.runs()
    assert [c.provenance for c in run.calls] == [
        {"input_tokens": DERIVED, "output_tokens": DERIVED}, {}, {"input_tokens": DERIVED}]


def test_an_llm_span_without_token_counts_is_kept_with_them_unknown():
    """An LLM span without llm.token_count.* is a call of unknown usage, not
    a reason to drop its trace; llm.finish_reason held as a JSON list is read
    as the plain reason."""
    attributes = [{"key": "openinference.span.kind", "value": {"stringValue": "LLM"}},
                  {"key": "llm.model_name", "value": {"stringValue": "gpt-4o"}},
                  {"key": "llm.finish_reason", "value": {"stringValue": '["tool_calls"]'}}]
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": "t1", "spanId": "s1", "name": "ChatCompletion",
        "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000",
        "attributes": attributes}]}]}]}
    gatherer = spantree.Gatherer(DIALECT)
    gatherer.add(doc, "x.json")
    (run,) = gatherer.runs()
    (call,) = run.calls
    assert call.provenance == dict.fromkeys(TOKEN_COLUMNS, UNKNOWN)
    assert call.usage.prompt_tokens == 0 and call.finish_reason == "tool_calls"
