"""Arize Phoenix's OTLP spans list (sim/traces/phoenix.py, read by
sim/traces/otel.py's OTLP JSON reading): ``GET /v1/projects/{project}/spans/otlpv1``.

What the server writes (arize-phoenix 20.26.1, server/api/routers/v1/spans.py
``span_search_otlpv1``, and a live server's page the bug hunter saved):
``{"data": [span, ...], "next_cursor"}``, newest span first, each span
snake_case OTLP JSON with every field present and null when unset --
``trace_id``, ``span_id``, ``parent_span_id``, ``name``, ``kind``
(``SPAN_KIND_INTERNAL``), ``start_time_unix_nano`` and ``end_time_unix_nano``
(``int(datetime.timestamp() * 1e9)``, off Phoenix's microsecond times by a
few hundred ns), ``status: {"code": 0|1|2, "message"}`` and ``attributes``,
a list of ``{"key", "value": {"array_value", "bool_value", "bytes_value",
"double_value", "int_value", "kvlist_value", "string_value"}}`` where one
kind is non-null (``_to_any_value``), the attributes flattened with
``recurse_on_sequence=True`` and ``openinference.span.kind`` among them.

The fixture is the REST tests' (tests/test_traces_phoenix.py ``rows``): its
import must give the same runs, calls, tokens, cache, reasoning, tool calls
and latencies as the REST list of the same spans."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pandas as pd
from hypothesis import HealthCheck, given, settings

from sim.traces import import_traces, phoenix, read_traces
from tests.fuzz_helpers import MUTATIONS, outcome_of_sample
from tests.test_traces_phoenix import check_imported, rest_page, rows

KINDS = ("array_value", "bool_value", "bytes_value", "double_value", "int_value",
         "kvlist_value", "string_value")


def any_value(value: Any) -> dict:
    """Phoenix's ``_to_any_value``, serialized with every kind present."""
    out: dict[str, Any] = dict.fromkeys(KINDS)
    if isinstance(value, bool):
        out["bool_value"] = value
    elif isinstance(value, int):
        out["int_value"] = value
    elif isinstance(value, float):
        out["double_value"] = str(value) if not math.isfinite(value) else value
    elif isinstance(value, str):
        out["string_value"] = value
    elif isinstance(value, bytes):
        out["bytes_value"] = value.hex()
    elif isinstance(value, list | tuple):
        items = [str(v) if isinstance(v, list | tuple) else v for v in value]
        if items and not all(isinstance(v, type(items[0])) for v in items):
            items = [str(v) for v in items]
        out["array_value"] = {"values": [any_value(v) for v in items]}
    return out  # None and dicts: no kind


def phoenix_flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Phoenix's ``flatten(attributes, recurse_on_sequence=True)``."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from phoenix_flatten(item, f"{prefix}.{key}" if prefix else key)
    elif isinstance(value, list) and any(isinstance(v, dict) for v in value):
        for index, item in enumerate(value):
            if isinstance(item, dict):
                yield from phoenix_flatten(item, f"{prefix}.{index}")
    elif value is not None and not (isinstance(value, float) and math.isnan(value)):
        yield prefix, value


STATUS = {"UNSET": 0, "OK": 1, "ERROR": 2}


def otlp_span(row: dict) -> dict:
    attributes = {k[len("attributes."):]: v for k, v in row.items()
                  if k.startswith("attributes.")}
    return {
        "attributes": [{"key": k, "value": any_value(v)} for k, v in phoenix_flatten(attributes)],
        "dropped_attributes_count": None, "dropped_events_count": None,
        "dropped_links_count": None,
        "end_time_unix_nano": int(row["end_time"].timestamp() * 1_000_000_000),
        "events": None, "flags": None, "kind": "SPAN_KIND_INTERNAL", "links": None,
        "name": row["name"], "parent_span_id": row["parent_id"],
        "span_id": row["context.span_id"],
        "start_time_unix_nano": int(row["start_time"].timestamp() * 1_000_000_000),
        "status": {"code": STATUS[row["status_code"]],
                   "message": row.get("status_message") or None},
        "trace_id": row["context.trace_id"], "trace_state": None}


def otlp_page(items: list[dict], cursor: str | None) -> dict:
    return {"data": [otlp_span(row) for row in items], "next_cursor": cursor}


def test_an_otlpv1_page_imports_as_its_rest_page_does(tmp_path):
    """The whole fixture on one otlpv1 page: runs s1 (2 calls: 200+1000 cached
    in / 40 out, 400+1100 cached in / 50+10 reasoning out; latencies 1.0 and
    1.5 s; the search tool call, 0.5 s) and t2 (1 call, status code 2: exit
    error), the very tables the REST page of the same spans gives."""
    page = tmp_path / "otlp" / "page.json"
    page.parent.mkdir()
    page.write_text(json.dumps(otlp_page(rows(), None)))
    assert '"int_value": 1500' in page.read_text()
    check_imported(tmp_path / "otlp", page)
    rest = tmp_path / "rest" / "page.json"
    rest.parent.mkdir()
    rest.write_text(json.dumps(rest_page(rows(), None)))
    import_traces([rest], tmp_path / "rest" / "out")
    (runs, calls), (rest_runs, rest_calls) = (read_traces(tmp_path / "otlp" / "out"),
                                              read_traces(tmp_path / "rest" / "out"))
    pd.testing.assert_frame_equal(runs.drop(columns="file"), rest_runs.drop(columns="file"))
    pd.testing.assert_frame_equal(calls.drop(columns="file", errors="ignore"),
                                  rest_calls.drop(columns="file", errors="ignore"))
    assert calls["tool_calls"].map(len).tolist() == [1, 0, 0]


def test_times_are_read_to_phoenixs_microsecond():
    """The hunter's page: an agent span the REST list gives as 02:32:22.995160
    to 02:32:23.181949 is written 1796610742995160064 to 1796610743181948928
    (float products): read as ...995160000 and ...181949000 ns."""
    span = {**otlp_span(rows()[3]), "start_time_unix_nano": 1796610742995160064,
            "end_time_unix_nano": 1796610743181948928}
    (read,) = phoenix.spans([{"data": [span], "next_cursor": None}], "page.json")
    assert (read.start, read.end) == (1796610742995160000, 1796610743181949000)


def test_every_value_kind_phoenix_writes_is_read():
    """A string, an int (and an int64 as a decimal string), a double (and a
    non-finite one as Phoenix's "inf"), a bool, bytes as hex, an array
    (``{"values": [...]}``), a value with no kind or NaN (absent, as in the
    REST list);
    the kind UNKNOWN is dropped as the REST list drops it."""
    def kv(key: str, **kind: Any) -> dict:
        return {"key": key, "value": {**dict.fromkeys(KINDS), **kind}}

    span = {**otlp_span(rows()[0]), "attributes": [
        kv("openinference.span.kind", string_value="UNKNOWN"), kv("s", string_value="x"),
        kv("i", int_value=7), kv("big", int_value="9007199254740993"),
        kv("d", double_value=0.5), kv("inf", double_value="inf"),
        kv("b", bool_value=False), kv("raw", bytes_value="00ff"),
        kv("tags", array_value={"values": [any_value("a"), any_value("b")]}),
        kv("gone"), {"key": "none", "value": None}, kv("nan", double_value="nan")]}
    (read,) = phoenix.spans([{"data": [span], "next_cursor": None}], "page.json")
    assert read.attributes == {"s": "x", "i": 7, "big": 9007199254740993, "d": 0.5,
                               "inf": math.inf, "b": False, "raw": "00ff", "tags": ["a", "b"]}


def test_pages_in_files_and_in_json_lines_are_one_project(tmp_path):
    """Three pages (newest first, 2 spans each: s1's trace split across all
    three) saved one per file, and the same pages as JSON Lines with the
    first page saved twice and an empty page last: each imports as the whole
    fixture (s1 one run of 2 calls, the numbers of check_imported)."""
    items = rows()
    pages = [otlp_page(items[i:i + 2], f"c{i}" if i + 2 < len(items) else None)
             for i in range(0, len(items), 2)]
    folder = tmp_path / "pages"
    folder.mkdir()
    for number, page in enumerate(pages):
        (folder / f"page{number}.json").write_text(json.dumps(page))
    check_imported(tmp_path / "files", folder)
    lines = tmp_path / "lines" / "pages.jsonl"
    lines.parent.mkdir()
    lines.write_text("\n".join(json.dumps(p) for p in
                               [pages[0], *pages, {"data": [], "next_cursor": None}]))
    check_imported(tmp_path / "lines", lines)


def test_a_json_list_of_otlp_spans_imports_alike(tmp_path):
    """The page's ``data`` saved alone."""
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(otlp_page(rows(), None)["data"]))
    check_imported(tmp_path, path)


def test_a_span_without_ids_is_left_out():
    spans = [otlp_span(row) for row in rows()]
    spans[0]["span_id"] = None
    spans[1]["trace_id"] = ""
    read = phoenix.spans([{"data": spans, "next_cursor": None}], "page.json")
    assert len(read) == len(spans) - 2


@settings(max_examples=16, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(picks=MUTATIONS)
def test_mutated_otlpv1_pages_exit_0_or_2_and_what_is_written_reads_back(picks):
    """The generator of tests/test_traces_fuzz.py on an otlpv1 page: every
    case is imported or refused, never a traceback."""
    outcome, detail = outcome_of_sample("phoenix", otlp_page(rows(), "next"), picks)
    assert outcome in ("ok", "refused"), f"{outcome}: {detail}"
