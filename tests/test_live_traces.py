"""Live runs come out as traces: a trace folder in the trace model and, on
request, OpenTelemetry GenAI spans as OTLP JSON; both import back with
``sim traces import`` and the summary matches the runs."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from fake_providers import Fail, FakeProvider, Reply

from sim.drivers.live import LiveBatch, make_model
from sim.drivers.live.batch import write_traces
from sim.drivers.live.otel import SpanRecorder
from sim.drivers.live.tasks import LiveTask, TasksFile
from sim.harness import Budgets, HarnessParams, RetryPolicy
from sim.traces import import_traces, read_traces
from sim.traces.summary import summarize

MODELS = {"anthropic": "claude-sonnet-4-20250514", "openai": "gpt-4o"}


def tasks(workdir) -> TasksFile:
    return TasksFile(system_prompt="Be careful.", tasks=[
        LiveTask(id="write", instruction="Write 42 to out.txt, then say DONE.",
                 tools=[{"name": "shell"}, {"name": "read_file"}], workdir=str(workdir),
                 check="grep -q 42 out.txt"),
        LiveTask(id="wander", instruction="Look around.", tools=[{"name": "list_files"}],
                 workdir=str(workdir))])


def script() -> list:
    return [
        Fail(429, "slow down", headers={"retry-after-ms": "50"}),
        Reply([("text", "Writing."), ("tool_use", "c1", "shell", {"command": "echo 42 > out.txt"})],
              "tool_use", input_tokens=40, output_tokens=20, cache_write=200),
        Reply([("tool_use", "c2", "read_file", {"path": "out.txt"})], "tool_use",
              input_tokens=30, output_tokens=10, cache_read=200, cache_write=40),
        Reply([("text", "DONE")], input_tokens=20, output_tokens=5, cache_read=240),
        # the second task wanders until its step budget ends it
        *[Reply([("tool_use", f"w{n}", "list_files", {"path": "." if n % 2 else "./"})],
                "tool_use", input_tokens=150 + 30 * n, output_tokens=12) for n in range(3)]]


def run_batch(provider, tmp_path, spans=None):
    base = HarnessParams(budgets=Budgets(steps=3), retry=RetryPolicy(base_s=0.05))
    with FakeProvider(script()) as server:
        url = server.base_url if provider == "anthropic" else server.openai_url
        batch = LiveBatch(tasks(tmp_path), base, make_model(provider, api_key="k", base_url=url),
                          model_id=MODELS[provider], spans=spans, file="tasks.yaml",
                          approver=lambda request: True)
        return batch.run()


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_the_trace_folder_holds_every_run_and_call_as_the_harness_counted_them(provider,
                                                                                tmp_path):
    """One runs.parquet row per run and one calls.parquet row per answered
    call: token sums and cost equal the harness's counters, the exit is the
    harness's state:reason, resolved is what the check said."""
    result = run_batch(provider, tmp_path)
    folder = tmp_path / "traces"
    write_traces(folder, result.runs)
    runs, calls = read_traces(folder)
    assert list(runs["task_id"]) == ["write", "wander"]
    assert list(runs["exit"]) == ["succeeded:verified", "budget_exhausted:steps"]
    assert [None if pd.isna(v) else bool(v) for v in runs["resolved"]] == [True, None]
    for row, state in zip(runs.itertuples(), result.states, strict=True):
        assert row.steps == state.turns
        assert (row.input_tokens, row.cache_read_tokens, row.cache_write_tokens,
                row.output_tokens) == (state.input_tokens, state.cache_read_tokens,
                                       state.cache_write_tokens, state.output_tokens)
        assert row.cost_usd == pytest.approx(state.money_usd)
        mine = calls[calls["run_id"] == row.run_id]
        assert mine["cost_usd"].sum() == pytest.approx(state.money_usd)
    first = calls[calls["run_id"] == runs["run_id"][0]].sort_values("call")
    assert [t["name"] for t in first["tool_calls"].iloc[0]] == ["shell"]
    assert first["tool_calls"].iloc[0][0]["error"] is False
    assert json.loads(first["tool_calls"].iloc[1][0]["arguments"]) == {"path": "out.txt"}


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_the_trace_imports_and_its_summary_matches_the_runs(provider, tmp_path):
    """`sim traces import` reads the folder back unchanged; the summary's
    runs, calls, steps, prompt tokens, cache shares and exit mix are the
    runs' own."""
    result = run_batch(provider, tmp_path)
    write_traces(tmp_path / "traces", result.runs)
    report = import_traces([tmp_path / "traces"], tmp_path / "imported")
    assert report.runs == 2
    summary = summarize(tmp_path / "imported")
    steps = [s.turns for s in result.states]
    assert (summary["runs"], summary["calls"]) == (2, sum(steps))
    assert summary["steps"]["max"] == max(steps)
    assert summary["cache"]["prompt_tokens"] == sum(s.prompt_tokens for s in result.states)
    assert summary["cache"]["read_share"] == pytest.approx(
        sum(s.cache_read_tokens for s in result.states) / summary["cache"]["prompt_tokens"])
    assert summary["exit"] == {"succeeded:verified": 0.5, "budget_exhausted:steps": 0.5}


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_otel_spans_follow_the_genai_conventions_and_import_back(provider, tmp_path):
    """An invoke_agent span per run, a chat span per answered call (input
    tokens including the cache counts), an execute_tool span per tool
    attempt, the 429 as an error event; the OTLP JSON file imports as the
    same runs, with the same calls and tokens."""
    spans = SpanRecorder()
    result = run_batch(provider, tmp_path, spans=spans)
    path = tmp_path / "spans.json"
    spans.write(path)
    document = json.loads(path.read_text())
    raw = [s for r in document["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]

    def attrs(span):
        return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}

    by_operation: dict[str, list] = {}
    for span in raw:
        by_operation.setdefault(attrs(span)["gen_ai.operation.name"], []).append(span)
    assert len(by_operation["invoke_agent"]) == 2
    assert len(by_operation["chat"]) == sum(s.turns for s in result.states)
    assert len(by_operation["execute_tool"]) == sum(s.tool_calls for s in result.states)
    first_chat = attrs(min(by_operation["chat"], key=lambda s: int(s["startTimeUnixNano"])))
    if provider == "anthropic":
        assert (int(first_chat["gen_ai.usage.input_tokens"]),
                int(first_chat["gen_ai.usage.cache_creation.input_tokens"])) == (240, 200)
    else:  # OpenAI has no cache writes: they arrive as uncached prompt tokens
        assert int(first_chat["gen_ai.usage.input_tokens"]) == 240
    assert first_chat["gen_ai.provider.name"] == provider
    assert first_chat["gen_ai.request.model"] == MODELS[provider]
    root_attrs = [attrs(s) for s in by_operation["invoke_agent"]]
    assert sorted(a.get("error.type", "") for a in root_attrs) == ["", "budget_exhausted:steps"]
    events = [e for s in raw for e in s.get("events", [])]  # on the retried call's chat span
    assert [attrs(e)["error.type"] for e in events] == ["rate_limit"]
    report = import_traces([path], tmp_path / "from-otel")
    assert report.runs == 2
    runs, _ = read_traces(tmp_path / "from-otel")
    by_id = {r.run_id: r for r in result.runs}
    for row in runs.itertuples():
        live = by_id[row.run_id]
        assert row.steps == len(live.calls)
        assert row.input_tokens == sum(c.usage.input_tokens for c in live.calls)
        assert row.cache_read_tokens == sum(c.usage.cache_read_tokens for c in live.calls)
        assert row.output_tokens == sum(c.usage.output_tokens for c in live.calls)


@pytest.mark.parametrize("wire", [("anthropic", True), ("anthropic", False),
                                  ("openai", True), ("openai", False)])
def test_a_usage_too_large_to_add_ends_the_run_and_is_not_recorded(wire, tmp_path):
    """A provider reporting 1e300 prompt tokens and 10**400 cache reads (the
    sum cannot be a float): the harness ends the run as
    failed:invalid_response and the recorder leaves the call out, without
    adding the counts (it raised OverflowError when it did: found by the
    campaign's provider surface)."""
    from test_live_http import drive, params_for, toolbox

    provider, stream = wire
    box = toolbox()
    params = params_for(provider, box, budgets=Budgets(active_s=30.0, steps=6))
    usage = {"input_tokens": 1e300, "cache_read_input_tokens": 10**400}
    with FakeProvider([Reply([("text", "DONE")], "end_turn", usage=usage),
                       Reply([("text", "DONE")])], lifetime_s=20) as server:
        state, _, recorder = drive(server, provider, stream, params, box, tmp_path)
    assert (state.status, state.reason) == ("failed", "invalid_response")
    assert recorder.calls == []
