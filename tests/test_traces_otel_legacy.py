"""Older OpenLLMetry/Traceloop GenAI names (sim/traces/otel_legacy.py), on spans
the real opentelemetry-sdk writes in the test (OTLP JSON Lines from its file
exporter): both naming sets, each with its cache counts, Traceloop's agent and
tool spans, and the response's requested tool calls."""

from __future__ import annotations

import json

import pytest
from roundtrip import imported, round_trip

pytest.importorskip("opentelemetry.sdk.trace", reason="needs the 'otel' extra")
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from sim.traces import read_traces, spantree
from sim.traces.model import DERIVED, sha256_text
from sim.traces.otel_legacy import DIALECT
from sim.traces.sources import read_json

# (naming set, prompt incl. cache, cache read, cache write, completion, reasoning, subagent)
CALLS = [("first", 1400, 1000, 200, 40, 0, False),
         ("second", 900, 800, 0, 25, 10, True),
         ("first", 1600, 1300, 0, 15, 0, False)]


def emit(path) -> None:
    """A Traceloop workflow: an agent whose calls carry one naming set or the
    other, a tool span after the first call, a nested agent for the second."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
    tracer = provider.get_tracer("opentelemetry.instrumentation.openai")

    def call(naming, prompt, read, write, completion, reasoning, n):
        names = (("gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens")
                 if naming == "first" else
                 ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"))
        attributes = {"llm.request.type": "chat", "gen_ai.system": "Anthropic",
                      "gen_ai.request.model": "claude-sonnet-4-5",
                      "gen_ai.response.model": "claude-sonnet-4-5-20250929",
                      names[0]: prompt, names[1]: completion,
                      "gen_ai.usage.cache_read_input_tokens": read,
                      "gen_ai.usage.cache_creation_input_tokens": write,
                      "llm.usage.total_tokens": prompt + completion,
                      "gen_ai.completion.0.role": "assistant",
                      "gen_ai.completion.0.content": f"reply {n}",
                      "gen_ai.completion.0.finish_reason": "end_turn"}
        if reasoning:
            attributes["gen_ai.usage.reasoning_tokens"] = reasoning
        if n == 0:
            attributes.update({"gen_ai.completion.0.finish_reason": "tool_use",
                               "gen_ai.completion.0.tool_calls.0.id": "toolu_1",
                               "gen_ai.completion.0.tool_calls.0.name": "grep",
                               "gen_ai.completion.0.tool_calls.0.arguments":
                                   json.dumps({"pattern": "def"})})
        with tracer.start_as_current_span("anthropic.chat", attributes=attributes):
            pass

    agent = {"traceloop.span.kind": "agent", "traceloop.entity.name": "coder"}
    with tracer.start_as_current_span("coder.agent", attributes=agent):
        call(*CALLS[0][:6], 0)
        tool = {"traceloop.span.kind": "tool", "traceloop.entity.name": "grep",
                "traceloop.entity.input": json.dumps({"pattern": "def"}),
                "traceloop.entity.output": "a.py:1: def f()"}
        with tracer.start_as_current_span("grep.tool", attributes=tool):
            pass
        sub = {"traceloop.span.kind": "agent", "traceloop.entity.name": "reviewer"}
        with tracer.start_as_current_span("reviewer.agent", attributes=sub):
            call(*CALLS[1][:6], 1)
        call(*CALLS[2][:6], 2)
    provider.shutdown()


def test_both_naming_sets_read_with_their_cache_counts(tmp_path):
    """Each call's prompt total includes its cache counts (subtracted) and its
    completion the reasoning (subtracted), whichever set names them; the tool
    span answers the requested call; the nested agent's call is marked."""
    emit(tmp_path / "spans.jsonl")
    imported([tmp_path / "spans.jsonl"], tmp_path / "traces", source="otel-genai", runs=1)
    _, calls = read_traces(tmp_path / "traces")
    assert [(r.input_tokens, r.cache_read_tokens, r.cache_write_tokens, r.output_tokens,
             r.reasoning_tokens) for r in calls.itertuples()] == [
        (p - r - w, r, w, c - z, z) for _, p, r, w, c, z, _ in CALLS]
    assert calls["agent"].notna().tolist() == [c[6] for c in CALLS]
    assert calls["model"].tolist() == ["claude-sonnet-4-5-20250929"] * 3
    assert calls["finish_reason"].tolist() == ["tool_use", "end_turn", "end_turn"]
    (tool,) = calls["tool_calls"].iloc[0]
    assert (tool["name"], tool["id"]) == ("grep", "toolu_1")
    assert tool["result_sha256"] == sha256_text("a.py:1: def f()")


def test_older_names_round_trip(tmp_path, capsys):
    """Import, summary, replay identity."""
    emit(tmp_path / "spans.jsonl")
    imported([tmp_path / "spans.jsonl"], tmp_path / "traces", source="otel-genai", runs=1)
    round_trip(tmp_path / "traces", tmp_path, capsys)


def test_provenance_says_which_counts_were_derived(tmp_path):
    """Every call's prompt included cache tokens (subtracted: input derived);
    only the second recorded reasoning (10 of 25, subtracted: output derived)."""
    emit(tmp_path / "spans.jsonl")
    gatherer = spantree.Gatherer(DIALECT)
    for value in read_json(tmp_path / "spans.jsonl"):
        gatherer.add(value, "spans.jsonl")
    (run,) = gatherer.runs()
    assert [c.provenance for c in run.calls] == [
        {"input_tokens": DERIVED}, {"input_tokens": DERIVED, "output_tokens": DERIVED},
        {"input_tokens": DERIVED}]
