"""The Langfuse importer on the documents the web app and the API download
(issue 36): the trace view's download ``{"trace", "observations"}``, the
download route's ``{"observations", "scores"}`` and a tRPC response; agent
wrappers read as the run itself; every ``usageDetails`` key convention; calls
without usage kept as unknown; cost provenance; success scores.

Observations and scores are built with the ``langfuse`` package's own API
models (``ObservationV2``, ``Score_Boolean``, ``Score_Numeric``) and wrapped
in each document as Langfuse's web app writes it (``buildTraceExport``,
``downloadLegacyTraceAsJson``, tRPC with superjson), shaped like the
framework downloads in langfuse/langfuse's seeder."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pandas as pd
import pytest

pytest.importorskip("langfuse", reason="needs the 'test' extra (langfuse)")
from langfuse import Langfuse
from langfuse.api import ObservationV2, Score_Boolean, Score_Numeric
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider

from sim.traces import import_traces, langfuse, read_traces, spantree
from sim.traces.langfuse import cost, counts
from sim.traces.model import DERIVED, EXACT, UNKNOWN
from sim.traces.repairs import PROMPT_WITHOUT_CACHE
from sim.traces.sources import read_json

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
TRACE = "fee618f96dc31e0ca38b2f7b26eb8b29"
ALL_UNKNOWN = dict.fromkeys(("input_tokens", "cache_read_tokens", "cache_write_tokens",
                             "output_tokens", "reasoning_tokens"), UNKNOWN)


def obs(i: int, kind: str, parent: str | None = None, trace: str = TRACE, **fields) -> dict:
    """An observation as the API models serialise it (camelCase)."""
    made = ObservationV2(id=f"o{i}", trace_id=trace, project_id="p", type=kind,
                         start_time=T0 + dt.timedelta(seconds=i),
                         end_time=T0 + dt.timedelta(seconds=i, milliseconds=250),
                         parent_observation_id=parent, **fields)
    return json.loads(made.json())


def score(kind, name: str, value: float, observation: str | None = None, **fields) -> dict:
    if kind is Score_Boolean:
        fields.setdefault("string_value", "True" if value else "False")
    made = kind(id=f"s-{name}-{value}", trace_id=TRACE, name=name, source="EVAL", value=value,
                observation_id=observation, timestamp=T0, created_at=T0, updated_at=T0,
                environment="default", **fields)
    return json.loads(made.json())


def agents_trace() -> list[dict]:
    """The OpenAI Agents SDK's shape: a root AGENT ``Agent workflow`` whose
    only child is the AGENT that runs; under it three generations (one
    without usage, as Langfuse lists it: empty details, zero totals), a tool
    and a nested AGENT (a subagent) with one generation."""
    return [
        obs(0, "AGENT", name="Agent workflow"),
        obs(1, "AGENT", "o0", name="Assistant"),
        obs(2, "GENERATION", "o1", name="response", model="gpt-4.1-mini",
            usage_details={"output": 15, "input": 55, "total": 70,
                           "prompt_details.cache_read": 0, "completion_details.reasoning": 0},
            cost_details={"output": 0.00012, "input": 0.00011, "total": 0.00023},
            output={"role": "assistant", "content": "calling the tool"}),
        obs(3, "TOOL", "o1", name="get_weather", input={"city": "Oslo"}, output="rain"),
        obs(4, "GENERATION", "o1", name="response", model="gpt-4.1", usage_details={},
            cost_details={}, total_cost=0.0),
        obs(5, "AGENT", "o1", name="Researcher"),
        obs(6, "GENERATION", "o5", name="response", model="gpt-4o-mini",
            usage_details={"input": 20, "output": 4}, cost_details={"total": 0.00001}),
        obs(7, "GENERATION", "o1", name="response", model="gpt-4.1",
            usage_details={"input": 85, "output": 29, "total": 114,
                           "input_cached_tokens": 1000},
            cost_details={"input": 0.0002, "output": 0.0003}),
    ]


EXPECTED_CALLS = [(55, 0, 0, 15, 0), (None,) * 5, (20, 0, 0, 4, 0), (85, 1000, 0, 29, 0)]
"""The calls' five token counts; the second generation records no usage: null
in calls.parquet."""


def read_counts(values: list) -> list:
    """Token counts as read back, a null (pandas' NA) as None."""
    return [None if pd.isna(v) else int(v) for v in values]


def scores() -> list[dict]:
    return [score(Score_Boolean, "resolved", 1.0),
            score(Score_Numeric, "toxicity", 0.8)]


def trace_object(observations: list[dict] | None = None) -> dict:
    """The trace as the web app loads it (``traces.byIdWithObservationsAndScores``)."""
    trace = {"id": TRACE, "projectId": "p", "name": "Agent workflow",
             "timestamp": T0.isoformat(), "environment": "default", "tags": [],
             "bookmarked": False, "public": False, "input": None, "output": None,
             "metadata": "{}", "latency": 7.25, "scores": scores()}
    if observations is not None:
        trace["observations"] = observations
    return trace


def without_output(observations: list[dict]) -> list[dict]:
    """Observations as tRPC returns them: input and output left out."""
    return [{k: v for k, v in o.items() if k not in ("input", "output")} for o in observations]


def trace_view_download() -> dict:
    """``downloadLegacyTraceAsJson``: ``{trace, observations}``, the
    observations with their input and output; the trace object as the web
    app loaded it, holding the tRPC copies (without them) too."""
    full = agents_trace()
    return {"trace": trace_object(without_output(full)), "observations": full}


def download_route() -> dict:
    """``/api/traces/{id}/download`` (``buildTraceExport``)."""
    return {"observations": agents_trace(), "scores": scores()}


def trpc_response() -> list:
    """A tRPC batch response of ``traces.byIdWithObservationsAndScores``
    (superjson: the data under ``json``, types under ``meta``)."""
    data = {**trace_object(without_output(agents_trace()))}
    return [{"result": {"data": {"json": data,
                                 "meta": {"values": {"timestamp": ["Date"]}}}}}]


SHAPES = {"trace view download": trace_view_download, "download route": download_route,
          "tRPC response": trpc_response}


def write(tmp_path, name: str, doc) -> str:
    path = tmp_path / f"{name.replace(' ', '-')}.json"
    path.write_text(json.dumps(doc, indent=2))
    return str(path)


def runs_of(doc) -> list:
    collector = langfuse.Collector()
    collector.add([doc], "file.json")
    return list(collector.runs())


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_download_shape_imports_as_one_run_with_each_observation_once(shape, tmp_path):
    """Item 1: the trace view's download, the download route's document and a
    tRPC response each import as one Langfuse run of four calls (the
    observations listed twice counted once), nothing skipped."""
    path = write(tmp_path, shape, SHAPES[shape]())
    report = import_traces([path], tmp_path / "traces")
    assert report.runs_by_source == {"langfuse": 1}
    assert report.calls == 4 and report.skips == []
    runs, calls = read_traces(tmp_path / "traces")
    assert runs["run_id"].tolist() == [TRACE]
    assert [tuple(read_counts([r.input_tokens, r.cache_read_tokens, r.cache_write_tokens,
                          r.output_tokens, r.reasoning_tokens])) for r in calls.itertuples()
            ] == EXPECTED_CALLS
    (tool,) = calls["tool_calls"].iloc[0]
    assert tool["name"] == "get_weather"
    assert tool["arguments"] == (None if shape == "tRPC response" else '{"city":"Oslo"}')


def test_a_copy_without_output_is_filled_from_the_other_copy():
    """Item 1: an observation listed twice, first without its output (a tRPC
    copy) then with it, is one call whose text is the output's; tRPC alone
    has no text."""
    full = agents_trace()
    (run,) = runs_of({"trace": trace_object(full), "observations": without_output(full)})
    assert len(run.calls) == 4
    assert run.calls[0].text_tokens == 4  # "calling the tool": 16 characters
    assert run.calls[0].tool_calls[0].arguments == '{"city":"Oslo"}'
    assert runs_of(trpc_response())[0].calls[0].text_tokens is None


def test_documents_that_are_not_langfuse_traces_are_not_claimed():
    """Item 1: a document with ``observations`` that are not observations, or
    none at all without a trace id, is not Langfuse's."""
    assert not langfuse.detect([{"observations": [], "scores": []}])
    assert not langfuse.detect([{"observations": [{"id": "x", "name": "y"}]}])
    assert not langfuse.detect([{"result": {"data": {"json": {"observations": [1]}}}}])
    assert langfuse.detect([download_route()])


def test_a_root_agent_wrapper_and_its_only_child_agent_are_the_run_itself():
    """Item 2: under ``Agent workflow`` -> ``Assistant`` the three calls are the
    run's own (agent null), the nested ``Researcher``'s call is a subagent's;
    the run's model is the most common of its own calls (gpt-4.1, twice),
    not the first (gpt-4.1-mini)."""
    (run,) = runs_of(download_route())
    assert [c.agent for c in run.calls] == [None, None, "o5", None]
    assert run.model == "gpt-4.1"


def test_an_agent_that_is_the_only_child_of_a_root_span_is_the_run_itself(tmp_path):
    """Item 2: Google ADK's shape (a CHAIN ``invocation`` whose only child is
    the AGENT) and Koog's (an AGENT over its ``run`` AGENT, through spans):
    calls have agent null; a root with two agent children keeps both as
    the run's own (no agent above them)."""
    adk = [obs(0, "CHAIN", name="invocation [hello_app]", trace="adk"),
           obs(1, "AGENT", "o0", name="agent_run [hello_agent]", trace="adk"),
           obs(2, "GENERATION", "o1", name="call_llm", model="gemini-2.0-flash", trace="adk",
               usage_details={"input": 28, "output": 3, "total": 31}),
           obs(3, "GENERATION", "o1", name="call_llm", model="gemini-2.0-flash", trace="adk",
               usage_details={"input": 39, "output": 6, "total": 45})]
    koog = [obs(10, "AGENT", name="agent.f9f7", trace="koog"),
            obs(11, "AGENT", "o10", name="run.6f8d", trace="koog"),
            obs(12, "SPAN", "o11", name="node.nodeCallLLM", trace="koog"),
            obs(13, "GENERATION", "o12", name="llm.chat", model="gpt-4o", trace="koog",
                usage_details={"input": 47, "output": 106, "total": 153}),
            obs(14, "SPAN", "o11", name="node.nodeSendToolResult", trace="koog"),
            obs(15, "GENERATION", "o14", name="llm.chat", model="gpt-4o", trace="koog",
                usage_details={"input": 168, "output": 19, "total": 187})]
    two = [obs(20, "SPAN", name="main", trace="two"),
           obs(21, "AGENT", "o20", name="planner", trace="two"),
           obs(22, "GENERATION", "o21", model="gpt-4o", trace="two",
               usage_details={"input": 5, "output": 1}),
           obs(23, "AGENT", "o20", name="writer", trace="two"),
           obs(24, "GENERATION", "o23", model="gpt-4o", trace="two",
               usage_details={"input": 6, "output": 2})]
    path = tmp_path / "observations.json"  # GET /api/public/v2/observations
    path.write_text(json.dumps({"data": adk + koog + two, "meta": {"cursor": None}}))
    collector = langfuse.Collector()
    collector.add([json.loads(path.read_text())], str(path))
    runs = {r.run_id: r for r in collector.runs()}
    assert [c.agent for c in runs["adk"].calls] == [None, None]
    assert [c.agent for c in runs["koog"].calls] == [None, None]
    assert [c.agent for c in runs["two"].calls] == [None, None]
    assert (runs["adk"].model, runs["koog"].model) == ("gemini-2.0-flash", "gpt-4o")


# ---------------------------------------------------------------- usage keys
USAGE_CASES = {
    # OpenInference keys stored raw by a server before v3.175.0 / v4.7.0 (the
    # seeder's LlamaIndex and Gemini downloads): inside input and output
    "openinference raw": (
        {"input": 1000, "output": 300, "total": 1300, "prompt_details.cache_read": 600,
         "prompt_details.cache_write": 100, "prompt_details.audio": 50,
         "completion_details.reasoning": 120, "completion_details.audio": 30},
        (300, 600, 100, 180, 120), {"input_tokens": DERIVED, "output_tokens": DERIVED}),
    # the LangChain handler: input_token_details / output_token_details split off
    "langchain": (
        {"input": 40, "output": 20, "total": 633, "input_cache_read": 500,
         "input_cache_creation": 60, "input_audio": 5, "output_reasoning": 8,
         "output_audio": 0},
        (45, 500, 60, 20, 8), {"input_tokens": DERIVED}),
    # the server's OTel ingestion today (AI SDK Anthropic: cache creation tiers)
    "otel ingestion": (
        {"input": 30, "output": 12, "input_cached_tokens": 400, "input_cache_creation": 20,
         "input_cache_creation_5m": 7, "input_cache_creation_1h": 3,
         "output_reasoning_tokens": 9, "output_audio_tokens": 2},
        (30, 400, 30, 14, 9), {"cache_write_tokens": DERIVED, "output_tokens": DERIVED}),
    # the server's OpenAI conversion: input_<key> / output_<key> of the details
    "openai converted": (
        {"input": 100, "output": 50, "total": 1094, "input_cached_tokens": 900,
         "input_audio_tokens": 10, "output_reasoning_tokens": 30,
         "output_accepted_prediction_tokens": 4},
        (110, 900, 0, 54, 30), {"input_tokens": DERIVED, "output_tokens": DERIVED}),
    # Anthropic's usage passed as is (input without the cache); a tier is a
    # part of cache_creation_input_tokens, not more
    "anthropic raw": (
        {"input_tokens": 12, "output_tokens": 30, "cache_read_input_tokens": 800,
         "cache_creation_input_tokens": 90, "cache_creation_ephemeral_5m_input_tokens": 90},
        (12, 800, 90, 30, 0), {}),
    # OpenAI's Responses API usage as the SDK's integration records it
    "responses raw": (
        {"input_tokens": 1000, "output_tokens": 200, "total_tokens": 1200,
         "input_tokens_details": {"cached_tokens": 700},
         "output_tokens_details": {"reasoning_tokens": 50}},
        (300, 700, 0, 150, 50), {"input_tokens": DERIVED, "output_tokens": DERIVED}),
    # Chat Completions usage as the SDK's integration records it
    "openai raw": (
        {"prompt_tokens": 500, "completion_tokens": 60, "total_tokens": 560,
         "prompt_tokens_details": {"cached_tokens": 0},
         "completion_tokens_details": {"reasoning_tokens": 0}},
        (500, 0, 0, 60, 0), {}),
    # Vertex through LangChain: modalities split off, the cache by modality
    "vertex modalities": (
        {"input": 0, "output": 0, "total": 1070, "input_modality_TEXT": 600,
         "cached_modality_TEXT": 400, "output_modality_TEXT": 50, "thoughts_token_count": 20},
        (600, 400, 0, 50, 20), {"input_tokens": DERIVED, "output_tokens": DERIVED}),
    # the LangChain handler on langchain-anthropic 1.x: writes by lifetime,
    # cache_creation 0; each subtracted from input (5 uncached, 3,565 in all)
    "langchain anthropic lifetimes": (
        {"input": 5, "output": 60, "total": 3565, "input_cache_read": 500,
         "input_cache_creation": 0, "input_ephemeral_5m_input_tokens": 2000,
         "input_ephemeral_1h_input_tokens": 1000},
        (5, 500, 3000, 60, 0), {"cache_write_tokens": DERIVED}),
    # ... on langchain-anthropic 0.x: cache_creation and the lifetimes both;
    # the handler took both from input and stopped at 0: read from the total
    "langchain anthropic writes twice": (
        {"input": 0, "output": 60, "total": 3565, "input_cache_read": 500,
         "input_cache_creation": 3000, "input_ephemeral_5m_input_tokens": 2000,
         "input_ephemeral_1h_input_tokens": 1000},
        (5, 500, 3000, 60, 0), {"input_tokens": DERIVED, "cache_write_tokens": DERIVED}),
    "langchain anthropic writes twice, no total": (
        {"input": 100, "output": 60, "input_cache_read": 500, "input_cache_creation": 30,
         "input_ephemeral_5m_input_tokens": 30},
        (130, 500, 30, 60, 0), {"input_tokens": DERIVED, "cache_write_tokens": DERIVED}),
    # the handler on langchain-openai's flex tier (2,000 prompt with 1,500
    # cached, 400 output with 300 reasoning): flex keys taken from input/output
    "langchain openai flex": (
        {"input": 0, "output": 0, "total": 2400, "input_flex_cache_read": 1500,
         "input_flex": 500, "output_flex_reasoning": 300, "output_flex": 100},
        (500, 1500, 0, 100, 300), {}),
    # ... and its priority tier, which the handler does not take from them
    "langchain openai priority": (
        {"input": 2000, "output": 400, "total": 2400, "input_priority_cache_read": 1500,
         "input_priority": 500, "output_priority_reasoning": 300, "output_priority": 100},
        (500, 1500, 0, 100, 300), {}),
    # BeeAI's start event: input only
    "input only": ({"input": 1195, "total": 1195}, (1195, 0, 0, 0, 0),
                   {"output_tokens": UNKNOWN, "reasoning_tokens": UNKNOWN}),
}


@pytest.mark.parametrize("case", sorted(USAGE_CASES))
def test_usage_details_keys_in_each_convention(case):
    """Item 3: each integration's keys read into uncached input, cache read,
    cache write, output and reasoning (computed by hand), with the columns
    computed from recorded figures derived and missing ones unknown."""
    usage, expected, provenance = USAGE_CASES[case]
    read = counts(usage, "observation o1")
    u = read.usage
    assert (u.input_tokens, u.cache_read_tokens, u.cache_write_tokens, u.output_tokens,
            u.thinking_tokens) == expected
    assert read.provenance == provenance


def test_counts_inside_a_total_say_how_they_were_read_and_are_kept_when_above_it():
    """Item 3: subtracting OpenInference's cache and reasoning is a
    convention the run records; a cache above the input it should be inside
    is read as apart from it, the repair noted."""
    read = counts({"input": 1000, "output": 300, "prompt_details.cache_read": 600,
                   "completion_details.reasoning": 120}, "o")
    assert set(read.conventions) == {"input_tokens", "output_tokens"}
    assert "prompt_details.cache_read" in read.conventions["input_tokens"]
    notes: list = []
    apart = counts({"input": 10, "output": 5, "prompt_details.cache_read": 50}, "o", notes)
    assert (apart.usage.input_tokens, apart.usage.cache_read_tokens) == (10, 50)
    assert notes == [("calls.input_tokens", PROMPT_WITHOUT_CACHE)]
    assert apart.provenance == {} and apart.conventions == {}


def test_a_run_read_with_counts_inside_totals_records_the_convention(tmp_path):
    """Item 3, on a file: a download from an older server (Gemini's
    ``completion_details.reasoning`` inside ``output``, as in the seeder's
    Gemini trace: total 2061 = 6 + 2055) reads reasoning 1104, output 951."""
    doc = {"observations": [obs(0, "GENERATION", model="gemini-2.5-flash",
                                usage_details={"total": 2061, "input": 6, "output": 2055,
                                               "completion_details.reasoning": 1104},
                                cost_details={"input": 1.8e-06, "output": 0.0051375,
                                              "total": 0.0051393})],
           "scores": []}
    import_traces([write(tmp_path, "gemini", doc)], tmp_path / "traces")
    _, calls = read_traces(tmp_path / "traces")
    assert calls[["input_tokens", "output_tokens", "reasoning_tokens"]].values.tolist() == [
        [6, 951, 1104]]
    (run,) = runs_of(doc)
    assert run.calls[0].provenance == {"output_tokens": DERIVED, "cost_usd": EXACT}
    assert list(run.conventions) == ["output_tokens"]


# ----------------------------------------------------- calls without usage
def test_a_trace_with_three_of_five_generations_with_usage_is_kept(tmp_path):
    """Item 4: five generations, two without usage (no usageDetails, and an
    empty one): the run is kept with five calls, the two marked unknown in
    every token column (0 in the usage); the run's tokens are the known sum."""
    usages = [{"input": 10, "output": 2}, None, {"input": 30, "output": 4}, {},
              {"input": 50, "output": 6}]
    observations = [obs(0, "SPAN", name="root")] + [
        obs(i + 1, "GENERATION", "o0", model="gpt-4o", usage_details=u)
        for i, u in enumerate(usages)]
    path = write(tmp_path, "five", {"observations": observations, "scores": []})
    report = import_traces([path], tmp_path / "traces")
    assert (report.runs, report.calls, report.skips) == (1, 5, [])
    runs, calls = read_traces(tmp_path / "traces")
    assert read_counts(calls["input_tokens"].tolist()) == [10, None, 30, None, 50]
    assert runs["input_tokens"].tolist() == [90]
    (run,) = runs_of({"observations": observations, "scores": []})
    unknown = [c.provenance == {**ALL_UNKNOWN, "cost_usd": UNKNOWN} for c in run.calls]
    assert unknown == [False, True, False, True, False]


def test_sdk_spans_keep_a_trace_whose_generation_lacks_usage(tmp_path):
    """Item 4, the SDK's OpenTelemetry spans: a generation without
    usage_details no longer drops its trace; its call is unknown (tokens and
    cost), the other's cost exact."""
    path = tmp_path / "spans.jsonl"
    lf = Langfuse(public_key=f"pk-lf-{uuid.uuid4().hex}", secret_key="sk-lf-test",
                  base_url="http://127.0.0.1:9", span_exporter=FileSpanExporter(str(path)),
                  tracer_provider=TracerProvider())
    with lf.start_as_current_observation(as_type="agent", name="agent"):
        with lf.start_as_current_observation(as_type="generation", name="a", model="gpt-4o",
                                             usage_details={"input": 7, "output": 3},
                                             cost_details={"total": 0.001}):
            pass
        with lf.start_as_current_observation(as_type="generation", name="b", model="gpt-4o"):
            pass
    lf.flush()
    lf.shutdown()
    report = import_traces([path], tmp_path / "traces")
    assert (report.runs, report.calls, report.skips) == (1, 2, [])
    _, calls = read_traces(tmp_path / "traces")
    assert read_counts(calls["input_tokens"].tolist()) == [7, None]
    assert calls["cost_usd"].tolist()[0] == 0.001 and calls["cost_usd"].isna().tolist() == [
        False, True]
    gatherer = spantree.Gatherer(langfuse.DIALECT)
    for value in read_json(path):
        gatherer.add(value, str(path))
    (run,) = gatherer.runs()
    assert [c.provenance for c in run.calls] == [{"cost_usd": EXACT},
                                                 {**ALL_UNKNOWN, "cost_usd": UNKNOWN}]


# ------------------------------------------------------------ cost, scores
def test_cost_provenance():
    """Cost: costDetails.total exact, its parts summed derived, totalCost
    exact, none unknown, and a 0 totalCost beside empty costDetails (no cost
    recorded, as Langfuse lists it) unknown."""
    assert cost({"input": 1.0, "output": 2.0, "total": 3.0}) == (3.0, EXACT)
    assert cost({"input": 1.0, "output": 2.5}) == (3.5, DERIVED)
    assert cost(None, 0.25) == (0.25, EXACT)
    assert cost(None) == (None, UNKNOWN)
    assert cost({}, 0.0) == (None, UNKNOWN)
    assert cost({}, 0.5) == (0.5, EXACT)


def test_a_boolean_resolved_score_is_the_runs_resolved_and_others_are_not_read():
    """Scores: a trace-level BOOLEAN ``resolved`` of 1 makes the run resolved
    (the toxicity score is not read); scores that disagree, a score on an
    observation, or a NUMERIC not 0 or 1 leave it null."""
    (run,) = runs_of(download_route())
    assert run.resolved is True and set(run.conventions) == {"resolved"}
    cases = [[score(Score_Boolean, "resolved", 1.0), score(Score_Numeric, "success", 0.0)],
             [score(Score_Boolean, "resolved", 1.0, observation="o2")],
             [score(Score_Numeric, "correct", 0.7)]]
    for listed in cases:
        (run,) = runs_of({"observations": agents_trace(), "scores": listed})
        assert run.resolved is None
    (run,) = runs_of({"observations": agents_trace(),
                      "scores": [score(Score_Numeric, "Success", 0.0)]})
    assert run.resolved is False


@pytest.mark.parametrize(("model", "usage", "reasoning"), [
    ("gemini-2.5-flash", {"input": 5, "output": 845, "total": 2023}, 1173),
    ("models/Gemini-2.5-pro", {"input": 10, "input_cache_read": 90, "output": 5,
                               "total": 125}, 20),
    ("gemini-2.5-flash", {"input": 5, "output": 10, "output_reasoning": 7, "total": 30}, 7),
    ("gemini-2.5-flash", {"input": 5, "output": 10, "output_reasoning_tokens": 0,
                          "total": 30}, 0),
    ("gemini-2.5-flash", {"input": 5, "output": 10, "total": 15}, 0),
    ("gemini-2.5-flash", {"input": 5, "output": 10, "total": "lots"}, 0),
    ("gemini-2.5-flash", {"input": 5, "total": 30}, 0),
    ("gpt-4o", {"input": 5, "output": 10, "total": 30}, 0),
    (None, {"input": 5, "output": 10, "total": 30}, 0),
])
def test_gemini_total_beyond_its_keys_is_thoughts(model: str | None, usage: dict,
                                                  reasoning: int) -> None:
    """A Gemini generation's ``total`` above its counted keys (input, cache,
    output) is its thoughts, read as reasoning (derived) when no reasoning key
    is recorded: 2023 - 5 - 845 = 1173; 125 - 10 - 90 - 5 = 20. A recorded
    reasoning key wins (7, not 30 - 22 = 8; a recorded 0, not 15); a total equal to the keys, not a
    count, with no output, or of a model not named Gemini (or unnamed) adds
    nothing."""
    read = counts(usage, "observation o", model=model)
    assert read.usage.thinking_tokens == reasoning
    assert (read.provenance.get("reasoning_tokens") == "derived") == (
        reasoning > 0 and "output_reasoning" not in usage)


# ----------------------------------------------- event spans typed as generations
@pytest.mark.parametrize(("fields", "event"), [
    ({"input": None, "output": None}, True),
    ({"input": "None", "output": "None"}, True),
    ({"input": "", "output": "null", "usageDetails": {}, "costDetails": {},
      "totalCost": 0.0}, True),
    ({}, False),                                   # input and output left out (tRPC copy)
    ({"input": None}, False),                      # output left out
    ({"input": None, "output": "None", "usageDetails": {"input": 3}}, False),
    ({"input": None, "output": None, "costDetails": {"total": 0.001}}, False),
    ({"input": "None", "output": None, "totalCost": 0.002}, False),
    ({"input": [{"role": "user", "content": "hi"}], "output": None}, False),
    ({"input": None, "output": "No"}, False),
])
def test_a_generation_that_records_nothing_of_a_call_is_an_event(fields: dict,
                                                                 event: bool) -> None:
    """A GENERATION with no usage, no cost, and input and output both present
    and empty (null, empty text, or a null's text ``None``/``null``) is an
    event, not a call; any usage, cost, input or output, or input or output
    left out of the copy, keeps it a call."""
    base = {"id": "g", "traceId": "t", "type": "GENERATION", "model": "gpt-4o-mini",
            "startTime": T0.isoformat()}
    assert langfuse.is_event({**base, **fields}) is event


def test_a_trace_whose_generations_are_all_events_is_skipped_as_without_calls(tmp_path):
    """A trace whose only generations are events (input and output null, no
    usage, no cost) has no call: skipped with its reason, not a run of
    zero-usage calls (the import, with no run, says so); with one of them
    holding its request it is one run of one call."""
    events = [obs(0, "SPAN", name="root"),
              obs(1, "GENERATION", "o0", model="gpt-4o-mini", name="chat.success"),
              obs(2, "GENERATION", "o0", model="gpt-4o-mini", name="chat.finish")]
    for event in events[1:]:
        event.update(input=None, output="None")
    from sim.bad_input import InputError

    with pytest.raises(InputError, match=r"no runs imported .*1 no model calls"):
        import_traces([write(tmp_path, "events", {"observations": events, "scores": []})],
                      tmp_path / "a")
    events[1]["input"] = [{"role": "user", "content": "hi"}]
    report = import_traces([write(tmp_path, "one", {"observations": events, "scores": []})],
                           tmp_path / "b")
    assert (report.runs, report.calls) == (1, 1)
