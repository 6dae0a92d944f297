"""Spans out follow the OpenTelemetry GenAI conventions on the six points of
issue 22, for ``sim live`` (against the local fake providers) and ``sim run
--otel`` (simulated runs); both read back with the OTel GenAI importer, and
with OpenInference's attributes on, with the OpenInference importer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_providers import Fail, FakeProvider, Reply

pytest.importorskip("opentelemetry.sdk.trace", reason="needs the 'live' extra")

from sim.cli import main
from sim.drivers.live import LiveBatch, make_model
from sim.drivers.live.otel import SpanRecorder
from sim.drivers.live.tasks import LiveTask, TasksFile
from sim.harness import Budgets, HarnessParams, RetryPolicy
from sim.traces import import_traces, read_traces

MODELS = {"anthropic": "claude-sonnet-4-20250514", "openai": "gpt-4o"}
SCENARIO = str(Path(__file__).resolve().parents[1] / "scenarios" / "bounded.yaml")


def script() -> list:
    return [
        Fail(429, "slow down", headers={"retry-after-ms": "50"}),
        Reply([("text", "Writing."), ("tool_use", "c1", "shell",
                                      {"command": "echo 42 > out.txt"})],
              "tool_use", input_tokens=40, output_tokens=20, cache_write=200, cache_read=0),
        Reply([("tool_use", "c2", "read_file", {"path": "out.txt"})], "tool_use",
              input_tokens=30, output_tokens=10, cache_read=200),
        Reply([("text", "DONE")], input_tokens=20, output_tokens=5, cache_read=240)]


def live(provider: str, tmp_path: Path, recorder: SpanRecorder):
    """One live task (a 429, then two tool calls and an answer); the spans
    written to spans.json; ``(result, spans by operation, server)``."""
    tasks = TasksFile(system_prompt="Be careful.", tasks=[
        LiveTask(id="write", instruction="Write 42 to out.txt, then say DONE.",
                 tools=[{"name": "shell"}, {"name": "read_file"}], workdir=str(tmp_path),
                 check="grep -q 42 out.txt")])
    base = HarnessParams(budgets=Budgets(steps=5), retry=RetryPolicy(base_s=0.05),
                         temperature=0.3 if provider == "openai" else 0.0)
    with FakeProvider(script()) as server:
        url = server.base_url if provider == "anthropic" else server.openai_url
        batch = LiveBatch(tasks, base, make_model(provider, api_key="k", base_url=url),
                          model_id=MODELS[provider], spans=recorder,
                          approver=lambda request: True)
        result = batch.run()
        port = int(server.base_url.rsplit(":", 1)[1])
    recorder.write(tmp_path / "spans.json")
    document = json.loads((tmp_path / "spans.json").read_text())
    spans: dict[str, list[dict]] = {}
    for span in (s for r in document["resourceSpans"] for sc in r["scopeSpans"]
                 for s in sc["spans"]):
        span["attrs"] = attrs(span)
        spans.setdefault(span["attrs"]["gen_ai.operation.name"], []).append(span)
    return result, spans, port


def attrs(item: dict) -> dict:
    return {a["key"]: next(iter(a["value"].values())) for a in item.get("attributes", [])}


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_live_spans_follow_the_six_points(provider, tmp_path):
    """1 the agent span is invoke_agent {gen_ai.agent.name}; 2 chat spans say
    gen_ai.request.stream; 3 they carry the response id the server sent,
    server.address/port, the temperature and the time to first chunk; 4 the
    retried call is one span covering both attempts, the failed one an event;
    5 tool spans carry gen_ai.tool.type and gen_ai.tool.description; 6 the
    agent span holds the usage totals, and OpenAI spans no cache-creation count."""
    result, spans, port = live(provider, tmp_path, SpanRecorder())
    (agent,) = spans["invoke_agent"]
    assert agent["name"] == f"invoke_agent {agent['attrs']['gen_ai.agent.name']}"
    chats = sorted(spans["chat"], key=lambda s: int(s["startTimeUnixNano"]))
    assert len(chats) == result.states[0].turns == 3
    prefix = "msg_fake_" if provider == "anthropic" else "chatcmpl-fake-"
    # the server's answers are requests 2, 3, 4 (request 1 was the 429)
    assert [c["attrs"]["gen_ai.response.id"] for c in chats] == [f"{prefix}{n}"
                                                                 for n in (2, 3, 4)]
    for chat in chats:
        a = chat["attrs"]
        assert a["gen_ai.request.stream"] is True
        assert (a["server.address"], int(a["server.port"])) == ("127.0.0.1", port)
        # the temperature sent (the Anthropic API takes none: not sent, not claimed)
        assert a.get("gen_ai.request.temperature") == (0.3 if provider == "openai" else None)
        assert 0 <= a["gen_ai.response.time_to_first_chunk"] <= (
            int(chat["endTimeUnixNano"]) - int(chat["startTimeUnixNano"])) / 1e9
        assert ("gen_ai.usage.cache_creation.input_tokens" in a) == (provider != "openai")
    first = chats[0]
    (event,) = first["events"]
    assert attrs(event)["error.type"] == "rate_limit" and int(first["attrs"]["sim.attempts"]) == 2
    failed_took = attrs(event)["sim.duration_s"]
    assert int(event["timeUnixNano"]) - int(first["startTimeUnixNano"]) >= failed_took * 1e9 - 1e6
    assert [int(c["attrs"]["sim.attempts"]) for c in chats[1:]] == [1, 1]
    assert "events" not in agent or not agent["events"]
    tools = spans["execute_tool"]
    assert len(tools) == 2
    for tool in tools:
        assert tool["attrs"]["gen_ai.tool.type"] == "function"
        assert tool["attrs"]["gen_ai.tool.description"]
    for key in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
                "gen_ai.usage.cache_read.input_tokens"):
        assert int(agent["attrs"][key]) == sum(int(c["attrs"][key]) for c in chats)
    state = result.states[0]
    assert int(agent["attrs"]["gen_ai.usage.input_tokens"]) == state.prompt_tokens
    assert ("gen_ai.usage.cache_creation.input_tokens" in agent["attrs"]) == (
        provider != "openai")


@pytest.mark.parametrize("openinference", [False, True])
def test_live_spans_read_back_with_the_otel_and_openinference_importers(openinference,
                                                                        tmp_path):
    """The same run, call count and token counts come back: through the OTel
    GenAI importer, or (OpenInference attributes on) the OpenInference one."""
    result, _, _ = live("anthropic", tmp_path, SpanRecorder(openinference=openinference))
    report = import_traces([tmp_path / "spans.json"], tmp_path / "back")
    assert report.runs_by_source == {"openinference" if openinference else "otel-genai": 1}
    runs, calls = read_traces(tmp_path / "back")
    (live_run,) = result.runs
    assert runs["run_id"].tolist() == [live_run.run_id]
    assert [(r.input_tokens, r.cache_read_tokens, r.cache_write_tokens, r.output_tokens)
            for r in calls.itertuples()] == [
        (u.input_tokens, u.cache_read_tokens, u.cache_write_tokens, u.output_tokens)
        for u in (c.usage for c in live_run.calls)]
    assert [len(t) for t in calls["tool_calls"]] == [len(c.tool_calls) for c in live_run.calls]


def test_sim_run_otel_writes_the_simulated_runs_as_spans_that_read_back(tmp_path):
    """``sim run --otel``: one invoke_agent span per simulated run (with its
    usage totals), one chat span per call; imported back, the runs, calls and
    token counts are those of the run's own trace folder; the same run writes
    the same bytes."""
    out, path = tmp_path / "out", tmp_path / "spans.json"
    args = ["run", SCENARIO, "--tasks", "12", "--workers", "1", "--quiet", "--out"]
    assert main([*args, str(out), "--otel", str(path)]) == 0
    report = import_traces([path], tmp_path / "back")
    assert report.runs_by_source == {"otel-genai": 12}
    sim_runs, sim_calls = read_traces(out)
    back_runs, back_calls = read_traces(tmp_path / "back")
    columns = ["input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
               "reasoning_tokens", "steps"]
    left = sim_runs.set_index("run_id")[columns].sort_index()
    right = back_runs.set_index("run_id")[columns].sort_index()
    assert left.equals(right)
    assert len(back_calls) == len(sim_calls)
    document = json.loads(path.read_text())
    agents = [s for r in document["resourceSpans"] for sc in r["scopeSpans"]
              for s in sc["spans"] if attrs(s)["gen_ai.operation.name"] == "invoke_agent"]
    assert len(agents) == 12
    assert all(s["name"] == "invoke_agent sim" for s in agents)
    again = tmp_path / "again.json"
    assert main([*args, str(tmp_path / "out2"), "--otel", str(again)]) == 0
    assert again.read_bytes() == path.read_bytes()


def test_failed_attempts_of_another_operation_go_on_the_run_span():
    """A context overflow on a step, then a compaction call answered: the
    compaction's span is one attempt; the step's failure is an event on the
    run's span. A 429 then an answer on the same turn and purpose: one span
    over both, the 429 its event."""
    from sim.drivers.live.calls import Answer
    from sim.harness.effects import ModelError, ModelRequest, ModelResponse
    from sim.harness.messages import TextBlock, Usage

    recorder = SpanRecorder()
    spans = recorder.run("r1", "t1", "anthropic", "m")

    def ask(turn, purpose, attempt=0):
        return ModelRequest("m", [], 100, 50, purpose, turn, attempt)

    ok = Answer(ModelResponse([TextBlock("x", 1)], Usage(10, 5), "end_turn", 0.1, "m"),
                "end_turn")
    spans.model_call(ask(3, "step"), Answer(ModelError("context_overflow", 400)), 0.0, 0.1)
    spans.model_call(ask(3, "compaction"), ok, 0.2, 0.5)
    spans.model_call(ask(4, "step"), Answer(ModelError("rate_limit", 429)), 0.6, 0.7)
    spans.model_call(ask(4, "step", 1), ok, 1.0, 1.4)
    spans.end("succeeded:done", True, 2.0)
    document = recorder.document()
    raw = [s for r in document["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]
    chats = sorted((s for s in raw if attrs(s)["gen_ai.operation.name"] == "chat"),
                   key=lambda s: int(s["startTimeUnixNano"]))
    (agent,) = [s for s in raw if attrs(s)["gen_ai.operation.name"] == "invoke_agent"]
    assert [attrs(e)["error.type"] for e in agent.get("events", [])] == ["context_overflow"]
    assert [int(attrs(c)["sim.attempts"]) for c in chats] == [1, 2]
    assert [attrs(e)["error.type"] for e in chats[1]["events"]] == ["rate_limit"]
    assert int(chats[1]["endTimeUnixNano"]) - int(chats[1]["startTimeUnixNano"]) == 800_000_000
