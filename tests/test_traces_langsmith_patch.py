"""LangSmith PATCH bodies without an ``id`` (sim/traces/langsmith.py): the JS
SDK's ``updateRun(runId, run)`` sends ``PATCH /runs/{runId}`` with the id in
the URL only, and ``RunTree.patchRun`` fills the body with ``name``,
``run_type``, ``start_time``, ``end_time`` (``Date.now()``: epoch
milliseconds), ``outputs``, ``extra``, ``parent_run_id``, ``trace_id``,
``dotted_order``, ``tags``, ``session_name`` (langsmith-sdk js/src/client.ts
and js/src/run_trees.ts, version 0.9.0). Such a body is matched to its POST by
the run id its ``dotted_order`` ends with. The bodies below are shaped like
those, with hand-set times and ids."""

from __future__ import annotations

import json

import pytest

from sim.traces import import_traces, read_traces
from sim.traces.langsmith import Collector, step_id
from sim.traces.model import DERIVED

TRACE = "019a0000-0000-7000-8000-000000000001"
LLM = "019a0000-0000-7000-8000-000000000002"
TOOL = "019a0000-0000-7000-8000-000000000003"
STAMP = {TRACE: "20260301T120000000001Z", LLM: "20260301T120000100001Z",
         TOOL: "20260301T120002000001Z"}
START = {TRACE: "2026-03-01T12:00:00.000001Z", LLM: "2026-03-01T12:00:00.100001Z",
         TOOL: "2026-03-01T12:00:02.000001Z"}
END_MS = {LLM: 1772366401600, TOOL: 1772366402500, TRACE: 1772366403000}  # 12:00:01.6, 02.5, 03
DOTTED = {TRACE: STAMP[TRACE] + TRACE,
          LLM: f"{STAMP[TRACE]}{TRACE}.{STAMP[LLM]}{LLM}",
          TOOL: f"{STAMP[TRACE]}{TRACE}.{STAMP[TOOL]}{TOOL}"}
KIND = {TRACE: "chain", LLM: "llm", TOOL: "tool"}
NAME = {TRACE: "agent", LLM: "ChatOpenAI", TOOL: "search"}

COMPLETION = {
    "model": "gpt-4.1", "choices": [{"index": 0, "finish_reason": "tool_calls",
                                     "message": {"role": "assistant", "content": "searching"}}],
    "usage": {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050,
              "prompt_tokens_details": {"cached_tokens": 600},
              "completion_tokens_details": {"reasoning_tokens": 20}}}
OUTPUTS = {TRACE: {"answer": "done"}, LLM: COMPLETION, TOOL: {"output": "3 results"}}


def post(run: str) -> dict:
    """``RunTree.postRun``'s body (``_convertToCreate``): it carries the id."""
    body = {"id": run, "name": NAME[run], "run_type": KIND[run], "start_time": START[run],
            "inputs": {"q": "find it"}, "extra": {"metadata": {}}, "serialized": {},
            "trace_id": TRACE, "dotted_order": DOTTED[run], "tags": [],
            "session_name": "default"}
    if run != TRACE:
        body["parent_run_id"] = TRACE
    return body


def patch(run: str) -> dict:
    """``RunTree.patchRun``'s body, sent to ``PATCH /runs/{id}``: no id."""
    body = {"name": NAME[run], "run_type": KIND[run], "start_time": START[run],
            "end_time": END_MS[run], "outputs": OUTPUTS[run], "extra": {"metadata": {}},
            "events": [], "dotted_order": DOTTED[run], "trace_id": TRACE, "tags": [],
            "session_name": "default"}
    if run != TRACE:
        body["parent_run_id"] = TRACE
    return body


def check_call(calls) -> None:
    """The one call, its usage from the patch (prompt 1,000 with 600 cached,
    completion 50 with 20 reasoning) and its latency from the patch's epoch
    milliseconds (12:00:00.100001 to 12:00:01.6); the tool step its tool call."""
    [call] = list(calls.itertuples())
    assert (call.input_tokens, call.cache_read_tokens, call.output_tokens,
            call.reasoning_tokens) == (400, 600, 30, 20)
    assert call.latency_s == pytest.approx(1.499999)
    assert call.finish_reason == "tool_calls"
    [tool] = call.tool_calls
    assert tool["name"] == "search" and tool["duration_s"] == pytest.approx(0.499999)


def test_captured_js_patch_bodies_update_the_runs_they_end_with(tmp_path):
    """A capture of the JS SDK's requests, one body per line (three posts,
    then three id-less patches): one run, the patches merged into their posts."""
    path = tmp_path / "requests.jsonl"
    bodies = [post(TRACE), post(LLM), post(TOOL), patch(TOOL), patch(LLM), patch(TRACE)]
    path.write_text("\n".join(json.dumps(b) for b in bodies) + "\n")
    report = import_traces([path], tmp_path / "out")
    assert report.runs_by_source == {"langsmith": 1} and report.skips == []
    runs, calls = read_traces(tmp_path / "out")
    assert runs["run_id"].tolist() == [TRACE]
    assert runs["duration_s"].iloc[0] == pytest.approx(2.999999)
    check_call(calls)


def test_id_less_patch_entries_of_a_batch_are_matched_by_dotted_order(tmp_path):
    """``{"post": [...], "patch": [...]}`` whose patch entries have no id: the
    same run; the input derived (prompt minus cache), the output derived
    (completion minus reasoning)."""
    batch = {"post": [post(TRACE), post(LLM), post(TOOL)],
             "patch": [patch(TOOL), patch(LLM), patch(TRACE)]}
    collector = Collector()
    collector.add([batch], "batch.json")
    [record] = list(collector.runs())
    [call] = record.calls
    assert call.provenance == {"input_tokens": DERIVED, "output_tokens": DERIVED}
    path = tmp_path / "batch.json"
    path.write_text(json.dumps(batch))
    import_traces([path], tmp_path / "out")
    check_call(read_traces(tmp_path / "out")[1])


def test_a_patch_with_neither_id_nor_dotted_order_is_skipped_not_merged(tmp_path):
    """Two id-less patches with no dotted_order cannot be placed: counted as
    one skip of the file (2 steps), never merged into one another or a run."""
    stray = {"run_type": "llm", "end_time": END_MS[LLM], "outputs": {"x": 1}}
    batch = {"post": [post(TRACE), post(LLM), patch(LLM)], "patch": [stray, dict(stray)]}
    path = tmp_path / "batch.json"
    path.write_text(json.dumps(batch))
    report = import_traces([path], tmp_path / "out")
    assert report.runs == 1
    [skip] = report.skips
    assert (skip.reason, skip.detail) == (
        "no per-call trajectory", "2 steps without id or dotted_order: not matched to any run")


def test_a_steps_id_is_its_own_else_the_end_of_its_dotted_order():
    assert step_id({"id": "x", "dotted_order": DOTTED[LLM]}) == "x"
    assert step_id({"dotted_order": DOTTED[LLM]}) == LLM
    assert step_id({"dotted_order": DOTTED[TRACE]}) == TRACE
    assert step_id({"dotted_order": "not-an-order"}) is None
    assert step_id({}) is None
