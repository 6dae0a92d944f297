"""The OpenTelemetry SDK's ConsoleSpanExporter output (sim/traces/otel.py):
pretty-printed spans one after another, written here by the real exporter
(``ConsoleSpanExporter(out=file)``) with GenAI-convention attributes, plus a
hand-made file where each span is printed at its start and again at its end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings

from benchmarks.fuzz_traces import mutate
from tests.fuzz_helpers import MUTATIONS, outcome_of_text

pytest.importorskip("opentelemetry.sdk.trace", reason="needs the 'otel' extra")
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

from sim.traces import import_traces, read_traces
from sim.traces.model import DERIVED, sha256_text

# per call: (input incl. cache, cache read, output incl. reasoning, reasoning)
CALLS = [(1200, 1000, 40, 0), (1500, 1100, 60, 10), (1800, 0, 20, 0)]


def printed(path: Path, *, openinference: bool = False) -> Path:
    """One agent run printed by the real console exporter: an invoke_agent
    span, a chat span per call (finish reasons as a JSON string on the first,
    as a list on the others), an execute_tool span (an error) after the first.
    With ``openinference`` the calls carry OpenInference names instead."""
    with open(path, "w") as out:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=out)))
        tracer = provider.get_tracer("agent")
        with tracer.start_as_current_span("invoke_agent helper", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "conv-1",
                "gen_ai.request.model": "gpt-4o"}):
            for i, (inp, read, out_tokens, think) in enumerate(CALLS):
                if openinference:
                    attributes = {"openinference.span.kind": "LLM",
                                  "llm.model_name": "gpt-4o",
                                  "llm.token_count.prompt": inp,
                                  "llm.token_count.prompt_details.cache_read": read,
                                  "llm.token_count.completion": out_tokens,
                                  "llm.token_count.completion_details.reasoning": think,
                                  "session.id": "sess-1"}
                else:
                    attributes = {
                        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                        "gen_ai.usage.input_tokens": inp, "gen_ai.usage.output_tokens": out_tokens,
                        "gen_ai.usage.cache_read.input_tokens": read,
                        "gen_ai.usage.reasoning.output_tokens": think,
                        "gen_ai.response.finish_reasons":
                            '["tool_calls"]' if i == 0 else ("stop",),
                        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                            {"type": "text", "content": f"reply {i}"}]}])}
                with tracer.start_as_current_span("chat gpt-4o", attributes=attributes):
                    pass
                if i == 0:
                    with tracer.start_as_current_span("execute_tool search", attributes={
                            "gen_ai.operation.name": "execute_tool",
                            "gen_ai.tool.name": "search", "gen_ai.tool.call.id": "call_1",
                            "gen_ai.tool.call.arguments": '{"q": "x"}'}) as tool:
                        tool.set_status(Status(StatusCode.ERROR, "boom"))
        provider.shutdown()
    return path


def imported(tmp_path: Path, *paths: Path):
    report = import_traces(list(paths), tmp_path / "out")
    return report, *read_traces(tmp_path / "out")


def test_the_file_is_pretty_printed_objects_one_after_another(tmp_path):
    """What the exporter writes is not JSON Lines nor a list: the fixture is
    the real format."""
    text = printed(tmp_path / "console.txt").read_text()
    assert text.startswith("{\n    \"name\": \"chat gpt-4o\"") and "\n}\n{\n" in text
    assert text.count('"kind": "SpanKind.INTERNAL"') == 5


def test_printed_genai_spans_import_as_otel_genai_runs(tmp_path):
    """One conversation, three calls with the cache and reasoning subtracted,
    the JSON-text finish reason read as the plain reason, the tool span (an
    error status) attached to the first call, times from the ISO strings."""
    report, runs, calls = imported(tmp_path, printed(tmp_path / "console.txt"))
    assert report.runs_by_source == {"otel-genai": 1} and report.skips == []
    assert runs["run_id"].tolist() == ["conv-1"] and runs["steps"].tolist() == [3]
    assert runs["model"].tolist() == ["gpt-4o"]
    assert [(r.input_tokens, r.cache_read_tokens, r.output_tokens, r.reasoning_tokens)
            for r in calls.itertuples()] == [(200, 1000, 40, 0), (400, 1100, 50, 10),
                                             (1800, 0, 20, 0)]
    assert calls["finish_reason"].tolist() == ["tool_calls", "stop", "stop"]
    assert calls["text_sha256"].tolist() == [sha256_text(f"reply {i}") for i in range(3)]
    (tool,) = calls["tool_calls"].iloc[0]
    assert (tool["name"], tool["id"], tool["arguments"], tool["error"]) == (
        "search", "call_1", '{"q":"x"}', True)
    assert [len(t) for t in calls["tool_calls"]] == [1, 0, 0]
    assert (calls["started_s"].diff().dropna() > 0).all() and (calls["latency_s"] >= 0).all()
    assert runs["duration_s"].iloc[0] > 0
    assert runs["started_at"].iloc[0].year >= 2025


def test_printed_openinference_spans_import_as_openinference(tmp_path):
    """Console-printed spans with OpenInference names go to the OpenInference
    reading (one run per session.id), as their OTLP JSON would."""
    report, runs, calls = imported(tmp_path, printed(tmp_path / "console.txt",
                                                     openinference=True))
    assert report.runs_by_source == {"openinference": 1}
    assert runs["run_id"].tolist() == ["sess-1"]
    assert calls["input_tokens"].tolist() == [200, 400, 1800]
    assert calls["output_tokens"].tolist() == [40, 50, 20]


def span_text(name: str, span_id: str, parent: str | None, start: str, end: str | None,
              attributes: dict) -> str:
    """One span as ReadableSpan.to_json() prints it (indent 4)."""
    return json.dumps({
        "name": name,
        "context": {"trace_id": "0x" + "ab" * 16, "span_id": "0x" + span_id,
                    "trace_state": "[]"},
        "kind": "SpanKind.CLIENT", "parent_id": None if parent is None else "0x" + parent,
        "start_time": start, "end_time": end, "status": {"status_code": "UNSET"},
        "attributes": attributes, "events": [], "links": [],
        "resource": {"attributes": {"service.name": "agent"}, "schema_url": ""}}, indent=4)


def test_a_span_printed_at_its_start_and_at_its_end_is_kept_once_ended(tmp_path):
    """Each span printed twice (end_time null, then set, as an on-start printer
    makes it) counts once, with its end: two calls, not four, and their
    lengths from the ended prints (1.5 s and 0.25 s)."""
    usage = {"gen_ai.operation.name": "chat", "gen_ai.conversation.id": "c",
             "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 10}
    first = dict(usage, **{"gen_ai.response.finish_reasons": ["stop"]})
    texts = [span_text("chat", "01" * 8, None, "2025-03-01T10:00:00.000000Z", None, usage),
             span_text("chat", "01" * 8, None, "2025-03-01T10:00:00.000000Z",
                       "2025-03-01T10:00:01.500000Z", first),
             span_text("chat", "02" * 8, None, "2025-03-01T10:00:02.000000Z", None, usage),
             span_text("chat", "02" * 8, None, "2025-03-01T10:00:02.000000Z",
                       "2025-03-01T10:00:02.250000Z", usage)]
    path = tmp_path / "spans.log"
    path.write_text("\n".join(texts) + "\n")
    _, runs, calls = imported(tmp_path, path)
    assert runs["steps"].tolist() == [2] and len(calls) == 2
    assert calls["latency_s"].tolist() == [1.5, 0.25]
    assert calls["started_s"].tolist() == [0.0, 2.0]
    assert calls["finish_reason"].iloc[0] == "stop" and calls["finish_reason"].isna().tolist() \
        == [False, True]
    assert runs["duration_s"].tolist() == [2.25]


def test_a_span_printed_only_at_its_start_is_kept_with_zero_length(tmp_path):
    texts = [span_text("chat", "03" * 8, None, "2025-03-01T10:00:00.000000Z", None,
                       {"gen_ai.operation.name": "chat", "gen_ai.conversation.id": "c",
                        "gen_ai.usage.input_tokens": 5, "gen_ai.usage.output_tokens": 1})]
    path = tmp_path / "spans.log"
    path.write_text(texts[0])
    _, runs, calls = imported(tmp_path, path)
    assert calls["latency_s"].tolist() == [0.0] and runs["steps"].tolist() == [1]


def test_provenance_of_printed_calls_is_the_genai_readings(tmp_path):
    """The same spans read as OTLP JSON or printed give the same provenance:
    the first two calls' inputs had cache subtracted, the second's output
    reasoning; the third is exact."""
    from sim.traces.otel import Collector, printed_spans
    from sim.traces.sources import read_json

    path = printed(tmp_path / "console.txt")
    collector = Collector()
    collector.spans.extend(printed_spans(read_json(path), str(path)))
    (run,) = collector.runs()
    assert [c.provenance for c in run.calls] == [
        {"input_tokens": DERIVED}, {"input_tokens": DERIVED, "output_tokens": DERIVED}, {}]


def test_a_truncated_print_is_a_clear_skip_not_a_traceback(tmp_path):
    """A file cut in the middle of a span is invalid JSON, named with its line:
    the import says so (nothing imported: exit 2 from the CLI)."""
    from sim.cli import main

    text = printed(tmp_path / "console.txt").read_text()
    cut = tmp_path / "cut.txt"
    cut.write_text(text[: len(text) // 2])
    assert main(["traces", "import", str(cut), "--out", str(tmp_path / "out")]) == 2


def test_a_printed_value_that_is_not_a_span_makes_the_file_unknown(tmp_path):
    """A console file with something else among the spans is not read in part."""
    text = printed(tmp_path / "console.txt").read_text()
    mixed = tmp_path / "mixed.txt"
    mixed.write_text(text + '{"hello": 1}\n')
    report = import_traces([mixed, printed(tmp_path / "ok.txt")], tmp_path / "out")
    assert report.runs == 1
    assert [(s.file, s.reason) for s in report.skips] == [(str(mixed), "unknown format")]


@pytest.fixture(scope="module")
def printed_values(tmp_path_factory):
    from sim.traces.sources import read_json

    return read_json(printed(tmp_path_factory.mktemp("console") / "console.txt"))


def test_mutated_prints_exit_0_or_2_and_what_is_written_reads_back(printed_values):
    """The generator of tests/test_traces_fuzz.py on the printed spans (values
    replaced by deep nesting, huge or non-finite numbers, wrong types;
    swapped; deleted), written back as the exporter prints them: every case
    is imported or refused, never a traceback."""

    @settings(max_examples=16, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(picks=MUTATIONS)
    def check(picks):
        values = mutate(printed_values, picks)
        try:
            text = "\n".join(json.dumps(v, indent=4, allow_nan=True) for v in values)
        except (RecursionError, ValueError):
            assume(False)
        outcome, detail = outcome_of_text("console.txt", text)
        assert outcome in ("ok", "refused"), f"{outcome}: {detail}"

    check()
