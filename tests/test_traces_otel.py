"""The OpenTelemetry GenAI importer (sim/traces/otel.py) on spans that the real
opentelemetry-sdk writes in the test, as OTLP JSON Lines (the SDK's
FileSpanExporter, as the collector's file exporter writes them) and as one
OTLP JSON document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="needs the 'otel' extra")
from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import Status, StatusCode

from sim.traces import import_traces, read_traces
from sim.traces.model import (
    DERIVED,
    TOKEN_COLUMNS,
    UNKNOWN,
    RunRecord,
    Usage,
    approx_tokens,
    sha256_text,
)
from sim.traces.otel import Collector
from sim.traces.skips import Skip
from sim.traces.sources import read_json

# per conversation: calls of (input incl. cache, cache read, cache write, output, reasoning)
CONVERSATIONS = {
    "conv-a": [(1200, 1000, 0, 40, 0), (1500, 1100, 300, 60, 10), (1800, 1400, 0, 20, 0)],
    "conv-b": [(900, 0, 900, 30, 0), (1000, 880, 0, 25, 5)],
}


def emit(exporter, conversations=CONVERSATIONS, *, tag_children=True, error_on=(1,)) -> None:
    """Agent runs as GenAI spans: an invoke_agent span per conversation, a chat
    span per call, and an execute_tool span after each call but the last."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent")
    for conversation, calls in conversations.items():
        root = {"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": conversation,
                "gen_ai.agent.name": "helper", "gen_ai.request.model": "gpt-4o"}
        with tracer.start_as_current_span("invoke_agent helper", attributes=root):
            for i, (inp, read, write, out, think) in enumerate(calls):
                attributes = {
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                    "gen_ai.response.model": "gpt-4o-2024-08-06",
                    "gen_ai.usage.input_tokens": inp, "gen_ai.usage.output_tokens": out,
                    "gen_ai.usage.cache_read.input_tokens": read,
                    "gen_ai.usage.cache_creation.input_tokens": write,
                    "gen_ai.usage.reasoning.output_tokens": think,
                    "gen_ai.response.finish_reasons": ["tool_calls" if i + 1 < len(calls)
                                                       else "stop"],
                    "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                        {"type": "text", "content": "x" * (8 * (i + 1))}]}]),
                }
                if tag_children:
                    attributes["gen_ai.conversation.id"] = conversation
                with tracer.start_as_current_span("chat gpt-4o", attributes=attributes):
                    pass
                if i + 1 == len(calls):
                    continue
                tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                        "gen_ai.tool.call.id": f"{conversation}-{i}",
                        "gen_ai.tool.call.arguments": json.dumps({"q": i, "a": "b"}),
                        "gen_ai.tool.call.result": "found " * (i + 2)}
                with tracer.start_as_current_span("execute_tool search",
                                                  attributes=tool) as span:
                    if i in error_on:
                        span.set_attribute("error.type", "timeout")
                        span.set_status(Status(StatusCode.ERROR))
    provider.shutdown()


def jsonl(path: Path, **kwargs) -> Path:
    emit(FileSpanExporter(path), **kwargs)
    return path


def imported(tmp_path: Path, *paths: Path):
    report = import_traces(list(paths), tmp_path / "out")
    return report, *read_traces(tmp_path / "out")


def test_sdk_spans_import_as_one_run_per_conversation_with_their_usage(tmp_path):
    """input_tokens include the cache counts (subtracted), output_tokens the
    reasoning; times, finish reasons and models come from the spans."""
    report, runs, calls = imported(tmp_path, jsonl(tmp_path / "spans.jsonl"))
    assert runs["run_id"].tolist() == ["conv-a", "conv-b"]
    assert runs["source"].tolist() == ["otel-genai"] * 2
    assert runs["model"].tolist() == ["gpt-4o"] * 2
    assert runs["steps"].tolist() == [3, 2]
    for run_id, expected in CONVERSATIONS.items():
        mine = calls[calls["run_id"] == run_id]
        got = list(zip(mine["input_tokens"], mine["cache_read_tokens"],
                       mine["cache_write_tokens"], mine["output_tokens"],
                       mine["reasoning_tokens"], strict=True))
        assert got == [(i - r - w, r, w, o - t, t) for i, r, w, o, t in expected]
        assert mine["model"].tolist() == ["gpt-4o-2024-08-06"] * len(expected)
        assert mine["finish_reason"].tolist()[-1] == "stop"
        assert mine["text_tokens"].tolist() == [2 * (i + 1) for i in range(len(expected))]
        assert mine["text_sha256"].tolist() == [sha256_text("x" * (8 * (i + 1)))
                                                for i in range(len(expected))]
        assert mine["observation_sha256"].isna().all()  # spans do not say what is new
        assert (mine["started_s"].diff().dropna() > 0).all()
        assert (mine["latency_s"] >= 0).all()
    assert report.skips == []
    assert (runs["duration_s"] > 0).all() and runs["exit"].isna().all()


def test_tool_spans_belong_to_the_call_before_them(tmp_path):
    _, _, calls = imported(tmp_path, jsonl(tmp_path / "spans.jsonl"))
    mine = calls[calls["run_id"] == "conv-a"]
    tools = mine["tool_calls"].tolist()
    assert [len(t) for t in tools] == [1, 1, 0]
    first, second = tools[0][0], tools[1][0]
    assert first["id"] == "conv-a-0" and first["name"] == "search"
    assert first["arguments"] == '{"a":"b","q":0}'
    assert first["result_tokens"] == approx_tokens("found " * 2)
    assert first["result_sha256"] == sha256_text("found " * 2)
    assert (first["error"], second["error"]) == (False, True)
    assert first["duration_s"] >= 0


def test_spans_without_a_conversation_id_take_their_parents(tmp_path):
    _, runs, calls = imported(tmp_path, jsonl(tmp_path / "spans.jsonl", tag_children=False))
    assert runs["run_id"].tolist() == ["conv-a", "conv-b"] and len(calls) == 5


def test_a_conversation_split_over_two_files_is_one_run(tmp_path):
    a = jsonl(tmp_path / "a.jsonl", conversations={"conv-a": CONVERSATIONS["conv-a"][:2]})
    b = jsonl(tmp_path / "b.jsonl", conversations={"conv-a": CONVERSATIONS["conv-a"][2:]})
    _, runs, calls = imported(tmp_path, a, b)
    assert runs["run_id"].tolist() == ["conv-a"] and runs["steps"].tolist() == [3]
    assert calls["input_tokens"].tolist() == [200, 100, 400]


def test_one_otlp_json_document_reads_like_json_lines(tmp_path):
    memory = InMemorySpanExporter()
    emit(memory)
    document = tmp_path / "export.json"
    document.write_text(json.dumps(encode_spans(memory.get_finished_spans()).to_dict(),
                                   indent=2))
    _, runs_doc, calls_doc = imported(tmp_path, document)
    _, runs_lines, calls_lines = imported(tmp_path / "lines", jsonl(tmp_path / "s.jsonl"))
    columns = ["input_tokens", "cache_read_tokens", "output_tokens", "reasoning_tokens"]
    assert runs_doc[["run_id", "steps", *columns]].equals(
        runs_lines[["run_id", "steps", *columns]])
    assert calls_doc["tool_calls"].map(len).tolist() == calls_lines["tool_calls"].map(
        len).tolist()


def test_the_imported_folder_round_trips_through_another_import(tmp_path):
    """A trace folder is itself an input: re-importing it gives the same tables."""
    _, runs, calls = imported(tmp_path, jsonl(tmp_path / "spans.jsonl"))
    import_traces([tmp_path / "out"], tmp_path / "again")
    runs2, calls2 = read_traces(tmp_path / "again")
    assert runs.equals(runs2)
    assert calls.drop(columns="tool_calls").equals(calls2.drop(columns="tool_calls"))
    assert calls["tool_calls"].tolist() == calls2["tool_calls"].tolist()


@pytest.mark.parametrize(("calls", "field", "reason", "counts"), [
    ([(100, 200, 0, 5, 0)], "calls.input_tokens",
     "cache above the prompt: the prompt taken as without the cache", (100, 200, 0, 5, 0)),
    ([(100, 0, 0, 5, 9)], "calls.reasoning_tokens",
     "reasoning above output: counted apart from the output", (100, 0, 0, 5, 9)),
])
def test_inconsistent_usage_is_read_as_counted_apart_and_counted(tmp_path, calls, field,
                                                                 reason, counts):
    """Cache above gen_ai.usage.input_tokens (an Anthropic instrumentation
    reporting the uncached input) and reasoning above the output (Gemini's
    thoughts apart): the conversation is kept, read with them apart, and the
    repair counted by field."""
    spans = jsonl(tmp_path / "s.jsonl", conversations={"bad": calls,
                                                       "good": CONVERSATIONS["conv-b"]})
    report, runs, all_calls = imported(tmp_path, spans)
    assert sorted(runs["run_id"].tolist()) == ["bad", "good"] and report.skips == []
    row = all_calls[all_calls["run_id"] == "bad"].iloc[0]
    assert tuple(int(row[c]) for c in ("input_tokens", "cache_read_tokens",
                                       "cache_write_tokens", "output_tokens",
                                       "reasoning_tokens")) == counts
    assert report.repairs_by_field() == {field: {reason: 1}}


def collected(path: Path) -> dict:
    """The runs of an OTLP JSON Lines file as RunRecords, by run id (skips by run id too)."""
    collector = Collector()
    for value in read_json(path):
        collector.add(value, str(path))
    return {r.run_id if isinstance(r, RunRecord) else r.run: r for r in collector.runs()}


def test_a_chat_span_without_usage_is_kept_with_its_counts_unknown(tmp_path):
    """A chat span without gen_ai.usage.* keeps its run: the call's five token
    columns are unknown (0 in its usage); a span with only the output count
    has its three prompt columns unknown and its output exact; an
    embeddings-only conversation is still no model calls."""
    provider = TracerProvider()
    path = tmp_path / "s.jsonl"
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
    tracer = provider.get_tracer("agent")
    for conversation, usage in (("c", {}), ("d", {"gen_ai.usage.input_tokens": 10,
                                                  "gen_ai.usage.output_tokens": 1}),
                                ("o", {"gen_ai.usage.output_tokens": 7})):
        with tracer.start_as_current_span("chat", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.conversation.id": conversation,
                **usage}):
            pass
    with tracer.start_as_current_span("embeddings", attributes={
            "gen_ai.operation.name": "embeddings", "gen_ai.conversation.id": "e"}):
        pass
    provider.shutdown()
    runs = collected(path)
    assert isinstance(runs["e"], Skip) and runs["e"].reason == "no model calls"
    (c,), (d,), (o,) = runs["c"].calls, runs["d"].calls, runs["o"].calls
    assert c.usage == Usage() and c.provenance == dict.fromkeys(TOKEN_COLUMNS, UNKNOWN)
    assert d.usage == Usage(input_tokens=10, output_tokens=1) and d.provenance == {}
    assert o.usage == Usage(output_tokens=7)
    assert o.provenance == dict.fromkeys(("input_tokens", "cache_read_tokens",
                                          "cache_write_tokens"), UNKNOWN)
    report, imported_runs, _ = imported(tmp_path, path)
    assert imported_runs["run_id"].tolist() == ["c", "d", "o"]
    assert [(s.run, s.reason) for s in report.skips] == [("e", "no model calls")]


def test_the_uncached_input_and_output_are_derived_where_something_was_subtracted(tmp_path):
    """conv-a's calls: (1200 in, 1000 cached), (1500, 1100 + 300, 10 of 60
    reasoning), (1800, 1400): every input is derived, the second call's output
    too; conv-b's first call (900 written of 900) is derived, its second (880
    read, 5 reasoning) derived in both. Nothing else is listed."""
    runs = collected(jsonl(tmp_path / "spans.jsonl"))
    assert [c.provenance for c in runs["conv-a"].calls] == [
        {"input_tokens": DERIVED}, {"input_tokens": DERIVED, "output_tokens": DERIVED},
        {"input_tokens": DERIVED}]
    assert [c.provenance for c in runs["conv-b"].calls] == [
        {"input_tokens": DERIVED}, {"input_tokens": DERIVED, "output_tokens": DERIVED}]


def test_a_call_without_cache_or_reasoning_is_exact(tmp_path):
    runs = collected(jsonl(tmp_path / "spans.jsonl",
                           conversations={"plain": [(500, 0, 0, 20, 0)]}))
    assert runs["plain"].calls[0].provenance == {}


@pytest.mark.parametrize(("recorded", "expected"), [
    ('["tool_calls"]', "tool_calls"), ('["stop", "length"]', "stop,length"),
    (["tool_calls"], "tool_calls"), ("stop", "stop"), ("[not json", "[not json"),
    ("[]", None), ([], None)])
def test_finish_reasons_stored_as_json_text_read_as_the_plain_reason(tmp_path, recorded,
                                                                     expected):
    """gen_ai.response.finish_reasons as a string attribute holding a JSON list
    (as some instrumentations store it) is read as its reasons joined by
    commas, like the list attribute; a string that is not a JSON list is kept
    as is; an empty list is no finish reason."""
    provider = TracerProvider()
    path = tmp_path / "s.jsonl"
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
    with provider.get_tracer("agent").start_as_current_span("chat", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.conversation.id": "c",
            "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 1,
            "gen_ai.response.finish_reasons": recorded}):
        pass
    provider.shutdown()
    assert collected(path)["c"].calls[0].finish_reason == expected


def test_text_hashes_come_from_captured_output_text_only(tmp_path):
    """The text parts of gen_ai.output.messages, concatenated in order, are
    hashed (other parts left out); two calls with the same text share the
    hash; a chat span without captured content has neither size nor hash."""
    exporter = FileSpanExporter(tmp_path / "spans.jsonl")
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent")
    parts = [{"type": "text", "content": "Let me look. "},
             {"type": "tool_call", "id": "t1", "name": "search", "arguments": {"q": 1}},
             {"type": "text", "content": "Searching now."}]
    outputs = [parts, None, parts[:1] + parts[2:]]
    for output in outputs:
        attributes = {"gen_ai.operation.name": "chat", "gen_ai.conversation.id": "c",
                      "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 100,
                      "gen_ai.usage.output_tokens": 10}
        if output is not None:
            attributes["gen_ai.output.messages"] = json.dumps(
                [{"role": "assistant", "parts": output}])
        with tracer.start_as_current_span("chat gpt-4o", attributes=attributes):
            pass
    provider.shutdown()
    _, _, calls = imported(tmp_path, tmp_path / "spans.jsonl")
    text = "Let me look. Searching now."
    assert calls["text_sha256"].isna().tolist() == [False, True, False]
    assert calls["text_sha256"].tolist()[::2] == [sha256_text(text)] * 2
    assert calls["text_tokens"].tolist()[::2] == [approx_tokens("Let me look. ")
                                                  + approx_tokens("Searching now.")] * 2
    assert calls["text_tokens"].isna().tolist() == [False, True, False]


def test_an_agent_that_failed_before_its_first_reply_is_a_run_of_zero_calls(tmp_path):
    """An invoke_agent span with error.type and no chat span: a run of zero
    calls whose exit is the error (a conversation of embeddings only is still
    no agent run)."""
    provider = TracerProvider()
    path = tmp_path / "s.jsonl"
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "f",
            "error.type": "RateLimitError"}):
        pass
    with tracer.start_as_current_span("chat", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.conversation.id": "d",
            "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 1}):
        pass
    provider.shutdown()
    report, runs, calls = imported(tmp_path, path)
    assert sorted(runs["run_id"]) == ["d", "f"] and report.skips == []
    failed = runs.set_index("run_id").loc["f"]
    assert (failed["steps"], failed["exit"]) == (0, "RateLimitError")
    assert set(calls["run_id"]) == {"d"}


def test_a_chat_span_inside_another_is_one_request_counted_once(tmp_path):
    """A framework's chat span around its client library's (both instrumented:
    Pydantic AI or LangChain with opentelemetry-instrumentation-openai-v2) is
    one request: counted once, from the inner span; an outer span whose inner
    one records no usage is the one kept. The run says so in its
    conventions; a conversation of plain calls says nothing."""
    provider = TracerProvider()
    path = tmp_path / "s.jsonl"
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
    tracer = provider.get_tracer("agent")

    def chat(conversation: str, inp: int | None, read: int = 0):
        usage = {} if inp is None else {"gen_ai.usage.input_tokens": inp,
                                         "gen_ai.usage.output_tokens": 5,
                                         "gen_ai.usage.cache_read.input_tokens": read}
        return tracer.start_as_current_span("chat gpt-4o", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.conversation.id": conversation, **usage})

    with tracer.start_as_current_span("invoke_agent a", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "twice"}):
        for inp, read in ((1000, 0), (1400, 900)):
            with chat("twice", inp), chat("twice", inp, read):
                pass
        with chat("twice", 2000, 0), chat("twice", None):  # only the outer has usage
            pass
    with chat("plain", 300):
        pass
    provider.shutdown()
    report, _, calls = imported(tmp_path, path)
    twice = calls[calls["run_id"] == "twice"]
    assert [(r.input_tokens, r.cache_read_tokens) for r in twice.itertuples()] == [
        (1000, 0), (500, 900), (2000, 0)]
    assert (calls["run_id"] == "plain").sum() == 1
    assert list(report.conventions["otel-genai"]["calls"].values()) == [1]
