"""Arize Phoenix span exports (sim/traces/phoenix.py): the spans dataframe of
``get_spans_dataframe()`` saved with pandas (``to_parquet``, ``to_json(orient=
"records", lines=True)``) and the REST list ``GET /v1/projects/{id}/spans``.

Phoenix itself is not installed: the dataframe is built here with the columns
and cell shapes Phoenix's ``get_spans_dataframe`` gives (src/phoenix/trace/dsl/
query.py: the span columns, ``context.*``, and ``attributes.*`` un-flattened
below the semantic-convention names, so ``attributes.llm.output_messages`` is a
list of ``{"message.role", "message.content", "message.tool_calls"}`` objects),
newest span first as Phoenix orders them; pandas writes the files."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings

from benchmarks.fuzz_traces import mutate
from sim.traces import import_traces, phoenix, read_traces, spantree
from sim.traces.model import DERIVED, TOKEN_COLUMNS, UNKNOWN, canonical_json, sha256_text
from sim.traces.openinference import DIALECT
from tests.fuzz_helpers import MUTATIONS, outcome_of_sample, outcome_of_text

T0 = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def output(finish: str) -> str:
    """An OpenAI response as output.value (JSON text), for its finish reason."""
    return json.dumps({"id": "chatcmpl-1", "choices": [{"index": 0,
                                                        "finish_reason": finish}]})


def rows() -> list[dict]:
    """Two traces. t1 (session s1): an agent, an LLM call that requests a
    search (1200 prompt incl. 1000 cached, 40 completion), the search tool,
    an LLM call (1500 incl. 1100 cached, 60 incl. 10 reasoning). t2: one LLM
    call without token counts that failed."""
    session = {"attributes.session.id": "s1"}
    return [
        {"name": "ChatCompletion", "span_kind": "LLM", "parent_id": "a1",
         "start_time": at(3.0), "end_time": at(4.5), "status_code": "OK",
         "context.span_id": "l2", "context.trace_id": "t1", **session,
         "attributes.openinference.span.kind": "LLM", "attributes.llm.model_name": "gpt-4o",
         "attributes.llm.token_count.prompt": 1500,
         "attributes.llm.token_count.prompt_details.cache_read": 1100,
         "attributes.llm.token_count.completion": 60,
         "attributes.llm.token_count.completion_details.reasoning": 10,
         "attributes.llm.output_messages": [{"message.role": "assistant",
                                             "message.content": "done"}],
         "attributes.output.value": output("stop")},
        {"name": "search", "span_kind": "TOOL", "parent_id": "a1",
         "start_time": at(2.0), "end_time": at(2.5), "status_code": "OK",
         "context.span_id": "tool1", "context.trace_id": "t1", **session,
         "attributes.openinference.span.kind": "TOOL", "attributes.tool.name": "search",
         "attributes.tool.parameters": {"q": {"type": "string"}},
         "attributes.input.value": '{"q": "x"}', "attributes.output.value": "found x"},
        {"name": "ChatCompletion", "span_kind": "LLM", "parent_id": "a1",
         "start_time": at(0.5), "end_time": at(1.5), "status_code": "OK",
         "context.span_id": "l1", "context.trace_id": "t1", **session,
         "attributes.openinference.span.kind": "LLM", "attributes.llm.model_name": "gpt-4o",
         "attributes.llm.token_count.prompt": 1200,
         "attributes.llm.token_count.prompt_details.cache_read": 1000,
         "attributes.llm.token_count.completion": 40,
         "attributes.llm.output_messages": [{
             "message.role": "assistant", "message.content": "Let me look.",
             "message.tool_calls": [{"tool_call.id": "call_1",
                                     "tool_call.function.name": "search",
                                     "tool_call.function.arguments": '{"q": "x"}'}]}],
         "attributes.output.value": output("tool_calls")},
        {"name": "agent", "span_kind": "AGENT", "parent_id": None,
         "start_time": at(0.0), "end_time": at(5.0), "status_code": "OK",
         "context.span_id": "a1", "context.trace_id": "t1", **session,
         "attributes.openinference.span.kind": "AGENT", "attributes.input.value": "go"},
        {"name": "ChatCompletion", "span_kind": "LLM", "parent_id": None,
         "start_time": at(10.0), "end_time": at(10.25), "status_code": "ERROR",
         "status_message": "rate limited", "context.span_id": "l3", "context.trace_id": "t2",
         "attributes.openinference.span.kind": "LLM", "attributes.llm.model_name": "gpt-4o"},
    ]


def dataframe() -> pd.DataFrame:
    """The rows as get_spans_dataframe returns them: every column in every row
    (missing ones null/NaN), indexed by context.span_id with the column kept."""
    df = pd.DataFrame.from_records(rows())
    df["events"] = [[] for _ in range(len(df))]
    return df.set_index("context.span_id", drop=False)


def check_imported(tmp_path: Path, *paths: Path) -> None:
    """What every export of the fixture imports as: runs s1 (2 calls) and t2
    (1 call), source openinference, no skip; the cache and reasoning
    subtracted; the tool call answered; finish reasons; the failed trace's exit."""
    report = import_traces(list(paths), tmp_path / "out")
    assert report.runs_by_source == {"openinference": 2}, report.lines()
    assert report.skips == []
    runs, calls = read_traces(tmp_path / "out")
    assert runs["run_id"].tolist() == ["s1", "t2"] and runs["steps"].tolist() == [2, 1]
    mine = calls[calls["run_id"] == "s1"]
    assert [(r.input_tokens, r.cache_read_tokens, r.output_tokens, r.reasoning_tokens)
            for r in mine.itertuples()] == [(200, 1000, 40, 0), (400, 1100, 50, 10)]
    assert mine["finish_reason"].tolist() == ["tool_calls", "stop"]
    assert mine["started_s"].tolist() == [0.5, 3.0] and mine["latency_s"].tolist() == [1.0,
                                                                                         1.5]
    assert mine["text_sha256"].tolist() == [sha256_text("Let me look."), sha256_text("done")]
    (tool,) = mine["tool_calls"].iloc[0]
    assert (tool["name"], tool["id"], tool["arguments"]) == ("search", "call_1",
                                                             canonical_json({"q": "x"}))
    assert tool["result_sha256"] == sha256_text("found x") and tool["duration_s"] == 0.5
    assert runs["duration_s"].tolist() == [5.0, 0.25]
    assert runs["exit"].tolist()[1] == "error" and pd.isna(runs["exit"].tolist()[0])
    assert runs["started_at"].iloc[0] == pd.Timestamp(T0)


def test_a_parquet_spans_dataframe_imports_as_openinference_runs(tmp_path):
    path = tmp_path / "spans.parquet"
    dataframe().reset_index(drop=True).to_parquet(path)
    check_imported(tmp_path, path)


def test_a_parquet_dataframe_saved_with_its_index_imports_alike(tmp_path):
    """df.to_parquet(path) with the span-id index kept as well."""
    path = tmp_path / "spans.parquet"
    df = dataframe()
    df.index.name = "span_id"
    df.to_parquet(path)
    check_imported(tmp_path, path)


def test_a_json_lines_dataframe_with_epoch_millisecond_times_imports_alike(tmp_path):
    """pandas' to_json writes times as Unix milliseconds by default."""
    path = tmp_path / "spans.jsonl"
    dataframe().to_json(path, orient="records", lines=True)
    assert '"start_time":1748779203000' in path.read_text()
    check_imported(tmp_path, path)


def test_a_json_lines_dataframe_with_iso_times_imports_alike(tmp_path):
    path = tmp_path / "spans.jsonl"
    dataframe().to_json(path, orient="records", lines=True, date_format="iso",
                        date_unit="us")
    check_imported(tmp_path, path)


def rest_page(items: list[dict], cursor: str | None) -> dict:
    """Rows as the REST endpoint gives them: flattened attributes, the kind
    moved out of them into span_kind, ISO times."""
    data = []
    for row in items:
        attributes = phoenix.flatten({k[len("attributes."):]: v for k, v in row.items()
                                    if k.startswith("attributes.")})
        kind = attributes.pop("openinference.span.kind", "UNKNOWN")
        data.append({"id": "U3BhbjoxMA==", "name": row["name"],
                     "context": {"trace_id": row["context.trace_id"],
                                 "span_id": row["context.span_id"]},
                     "span_kind": kind, "parent_id": row["parent_id"],
                     "start_time": row["start_time"].isoformat(),
                     "end_time": row["end_time"].isoformat(),
                     "status_code": row["status_code"],
                     "status_message": row.get("status_message", ""),
                     "attributes": attributes, "events": []})
    return {"data": data, "next_cursor": cursor}


def test_rest_pages_import_alike_across_files(tmp_path):
    """Two pages of GET /v1/projects/{id}/spans in two files are one import."""
    first, second = tmp_path / "page1.json", tmp_path / "page2.json"
    first.write_text(json.dumps(rest_page(rows()[:2], "U3BhbjoxMQ==")))
    second.write_text(json.dumps(rest_page(rows()[2:], None)))
    page = json.loads(first.read_text())["data"][0]
    assert "llm.output_messages.0.message.content" in page["attributes"]
    assert "openinference.span.kind" not in page["attributes"]
    check_imported(tmp_path, first, second)


def test_a_json_list_of_client_spans_imports_alike(tmp_path):
    """json.dump of the phoenix client's spans.get_spans(): the REST spans as a list."""
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(rest_page(rows(), None)["data"], indent=2))
    check_imported(tmp_path, path)


def nested(flat: dict) -> dict:
    """Dotted keys as nested objects (how a span's attributes may be stored)."""
    out: dict = {}
    for key, value in flat.items():
        *parts, last = key.split(".")
        node = out
        for part in parts:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def test_span_json_lines_with_nested_attributes_import_alike(tmp_path):
    """spans_to_jsonl's lines: the REST span shape, one per line, with the
    attributes nested objects (an index a key of its own: "0")."""
    path = tmp_path / "trace.jsonl"
    lines = []
    for span in rest_page(rows(), None)["data"]:
        span = dict(span, attributes=nested(span["attributes"]), conversation=None)
        del span["id"]
        lines.append(json.dumps(span))
    path.write_text("\n".join(lines))
    assert '"token_count": {"prompt": 1500' in lines[0]
    check_imported(tmp_path, path)


def test_provenance_and_the_call_without_token_counts(tmp_path):
    """s1's calls had cache (and the second reasoning) subtracted: derived; the
    t2 call records no token counts: all five columns unknown, its run kept."""
    gatherer = spantree.Gatherer(DIALECT)
    gatherer.spans.spans.extend(phoenix.spans(json.loads(dataframe().to_json(
        orient="records")), "spans.json"))
    s1, t2 = gatherer.runs()
    assert [c.provenance for c in s1.calls] == [
        {"input_tokens": DERIVED}, {"input_tokens": DERIVED, "output_tokens": DERIVED}]
    assert t2.calls[0].provenance == dict.fromkeys(TOKEN_COLUMNS, UNKNOWN)


def test_flattening_undoes_phoenixs_unflattening():
    """Lists of objects get indices, nested objects dots, JSON-string
    attributes Phoenix parsed stay whole, lists of plain values stay lists,
    null and NaN are absent."""
    assert phoenix.flatten({
        "llm.output_messages": [{"message.role": "assistant", "message.tool_calls": [
            {"tool_call.id": "c", "tool_call.function.name": "f"}]}],
        "tool.parameters": {"q": 1}, "metadata": {"a": {"b": 1}}, "tags": ["x", "y"],
        "custom": {"x": {"y": 2}}, "gone": None, "nan": float("nan")}) == {
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "f",
        "tool.parameters": {"q": 1}, "metadata": {"a": {"b": 1}}, "tags": ["x", "y"],
        "custom.x.y": 2}


@pytest.mark.parametrize(("value", "nanos"), [
    (1748779200, 1748779200 * 10**9), (1748779200000, 1748779200 * 10**9),
    (1748779200000000, 1748779200 * 10**9), (1748779200 * 10**9, 1748779200 * 10**9),
    ("2025-06-01T12:00:00Z", 1748779200 * 10**9), (None, 0), (float("nan"), 0), (-5, 0)])
def test_a_number_for_a_time_is_read_by_its_size(value, nanos):
    assert phoenix.time_nanos(value) == nanos


def test_another_parquet_file_is_still_refused_when_named(tmp_path):
    """A Parquet file without the dataframe's columns is not Phoenix's: named,
    it is an unknown format (exit 2 when it is all there is)."""
    from sim.cli import main

    path = tmp_path / "other.parquet"
    pd.DataFrame({"a": [1, 2]}).to_parquet(path)
    assert main(["traces", "import", str(path), "--out", str(tmp_path / "out")]) == 2


@settings(max_examples=16, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(picks=MUTATIONS)
def test_mutated_rest_pages_exit_0_or_2_and_what_is_written_reads_back(picks):
    """The generator of tests/test_traces_fuzz.py on a REST page: every case
    is imported or refused, never a traceback."""
    page = json.loads(json.dumps(rest_page(rows(), "next")))
    outcome, detail = outcome_of_sample("phoenix", page, picks)
    assert outcome in ("ok", "refused"), f"{outcome}: {detail}"


@settings(max_examples=16, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(picks=MUTATIONS)
def test_mutated_dataframe_lines_exit_0_or_2_and_what_is_written_reads_back(picks):
    """The same on the dataframe's JSON Lines (epoch-millisecond times)."""
    values = mutate(json.loads(dataframe().to_json(orient="records")), picks)
    try:
        text = "\n".join(json.dumps(v, allow_nan=True) for v in values)
    except (RecursionError, ValueError):
        assume(False)
    outcome, detail = outcome_of_text("spans.jsonl", text)
    assert outcome in ("ok", "refused"), f"{outcome}: {detail}"
