"""The LangSmith importer (sim/traces/langsmith.py) on the batch posts the real
``langsmith`` SDK sends, captured by a local 127.0.0.1 endpoint in the test:
``traceable`` steps and ``wrap_openai`` calls to the local fake OpenAI server,
a tool, and a tool that runs an agent of its own (a subagent). Also runs as
exported (``langsmith.schemas.Run`` serialised by the package)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fake_providers import FakeProvider, Reply
from roundtrip import imported, round_trip

pytest.importorskip("langsmith", reason="needs the 'test' extra (langsmith)")
import langsmith
import openai
from langsmith import Client, traceable
from langsmith.wrappers import wrap_openai

from sim.traces import read_traces
from sim.traces.model import sha256_text

# the endpoint tells the SDK to post JSON batches (POST /runs/batch), not multipart
INFO = {"version": "0.10.0", "batch_ingest_config": {
    "use_multipart_endpoint": False, "scale_up_qsize_trigger": 1000,
    "scale_up_nthreads_limit": 16, "scale_down_nempty_trigger": 4, "size_limit": 100,
    "size_limit_bytes": 20_971_520}}


class Capture:
    """A LangSmith stand-in on 127.0.0.1 that keeps every JSON batch posted."""

    def __init__(self) -> None:
        self.batches: list[dict[str, Any]] = []
        capture = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return

            def _answer(self, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer(INFO if self.path.startswith("/info") else {})

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path.startswith("/runs/batch"):
                    capture.batches.append(json.loads(body))
                self._answer({})

            do_PATCH = do_POST

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Capture:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


SCRIPT = [
    Reply([("text", "Let me search."), ("tool_use", "call_1", "search", {"q": "x"})],
          stop_reason="tool_use", input_tokens=40, cache_read=600, output_tokens=15,
          reasoning_tokens=3),
    Reply([("text", "sub result")], input_tokens=80, output_tokens=9),  # the subagent's
    Reply([("text", "done")], input_tokens=12, cache_read=700, output_tokens=6),
]


def capture(path, monkeypatch) -> list:
    """Run the agent with tracing to the capture endpoint; write its batches as
    JSON Lines to ``path``; return the fake server's answers."""
    monkeypatch.setenv("LANGSMITH_TRACING", "true")
    # tracing on here whatever the SDK cached of the environment before
    with Capture() as endpoint, FakeProvider(list(SCRIPT)) as server, \
            langsmith.tracing_context(enabled=True):
        client = Client(api_url=endpoint.url, api_key="lsv2-test")
        chat = wrap_openai(openai.OpenAI(base_url=server.openai_url, api_key="sk-test",
                                         max_retries=0), tracing_extra={"client": client})

        def ask(prompt: str) -> None:
            chat.chat.completions.create(model="gpt-4o",
                                         messages=[{"role": "user", "content": prompt}])

        @traceable(run_type="tool", name="search", client=client)
        def search(q: str) -> str:
            return f"found {q}"

        @traceable(run_type="tool", name="delegate", client=client)
        def delegate(task: str) -> str:
            ask(task)  # an agent the tool runs: a subagent
            return "sub result"

        @traceable(run_type="chain", name="agent", client=client)
        def agent(question: str) -> None:
            ask(question)
            search("x")
            delegate("look deeper")
            ask("finish")

        agent("what is x?")
        client.flush()
        answers = list(server.answers)
        batches = list(endpoint.batches)
    assert batches, "the SDK posted no batch"
    path.write_text("".join(json.dumps(b) + "\n" for b in batches))
    return answers


def test_the_sdks_batch_posts_import_with_the_servers_tokens_tools_and_subagent(
        tmp_path, monkeypatch):
    """One trace, one run: three calls with the server's counts (usage_metadata's
    input includes the cached tokens and its output the reasoning ones), the
    two tool steps on the first call, the call the delegate tool made marked
    as a subagent's."""
    answers = capture(tmp_path / "posts.jsonl", monkeypatch)
    assert len(answers) == len(SCRIPT)
    imported([tmp_path / "posts.jsonl"], tmp_path / "traces", source="langsmith", runs=1)
    _, calls = read_traces(tmp_path / "traces")
    assert [(r.input_tokens, r.cache_read_tokens, r.cache_write_tokens, r.output_tokens,
             r.reasoning_tokens) for r in calls.itertuples()] == [
        (a.input_tokens, a.cache_read, 0, a.output_tokens - a.reasoning_tokens,
         a.reasoning_tokens) for a in answers]
    assert calls["agent"].notna().tolist() == [False, True, False]
    assert calls["model"].tolist() == ["gpt-4o"] * 3
    tools = calls["tool_calls"].iloc[0]
    assert [t["name"] for t in tools] == ["search", "delegate"]
    assert tools[0]["result_sha256"] == sha256_text("found x")
    assert json.loads(tools[0]["arguments"]) == {"q": "x"}
    assert calls["text_sha256"].iloc[2] == sha256_text("done")


def test_batch_posts_round_trip(tmp_path, monkeypatch, capsys):
    """Import, summary, replay identity."""
    capture(tmp_path / "posts.jsonl", monkeypatch)
    imported([tmp_path / "posts.jsonl"], tmp_path / "traces", source="langsmith", runs=1)
    round_trip(tmp_path / "traces", tmp_path, capsys)


def test_exported_runs_keep_their_recorded_cost(tmp_path):
    """Runs as exported (the package's Run schema, serialised by it), with
    prompt_tokens/completion_tokens, their details and total_cost: counts
    split, cost kept as recorded; a trace whose llm step has no usage is
    kept, that call's counts unknown."""
    import datetime as dt

    from langsmith.schemas import Run

    from sim.traces import import_traces

    t0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)

    def step(i, trace, kind, parent=None, **fields):
        return Run(id=f"00000000-0000-0000-0000-00000000000{i}", name=f"s{i}", run_type=kind,
                   trace_id=trace, parent_run_id=parent, inputs={"i": i},
                   start_time=t0 + dt.timedelta(seconds=i),
                   end_time=t0 + dt.timedelta(seconds=i, milliseconds=250), **fields)

    t1, t2 = "00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000009"
    runs = [step(0, t1, "chain"),
            step(1, t1, "llm", t1, prompt_tokens=500, completion_tokens=30,
                 prompt_token_details={"cache_read": 300, "cache_creation": 100},
                 total_cost=0.0042, outputs={"content": "hi", "stop_reason": "end_turn"},
                 extra={"metadata": {"ls_model_name": "claude-sonnet-4-5"}}),
            step(2, t1, "tool", t1, outputs={"output": "ok"}),
            step(3, t1, "llm", t1, prompt_tokens=600, completion_tokens=10, total_cost=0.001),
            step(9, t2, "llm")]
    path = tmp_path / "runs.json"
    path.write_text("[" + ",".join(r.model_dump_json() for r in runs) + "]")
    report = import_traces([path], tmp_path / "traces")
    assert report.runs_by_source == {"langsmith": 2} and report.skips == []
    traces_runs, calls = read_traces(tmp_path / "traces")
    traces_runs = traces_runs[traces_runs["run_id"] == t1]
    calls = calls[calls["run_id"] == t1]
    assert [(r.input_tokens, r.cache_read_tokens, r.cache_write_tokens, r.output_tokens)
            for r in calls.itertuples()] == [(100, 300, 100, 30), (600, 0, 0, 10)]
    assert calls["cost_usd"].tolist() == [0.0042, 0.001]
    assert traces_runs["cost_usd"].iloc[0] == pytest.approx(0.0052)
    assert calls["finish_reason"].iloc[0] == "end_turn"
    assert [t["name"] for t in calls["tool_calls"].iloc[0]] == ["s2"]


def test_service_tier_and_cache_lifetime_details_are_read_as_cache_and_reasoning(
        tmp_path, monkeypatch):
    """The SDK's own wrappers spell details two more ways: under an OpenAI
    service tier ``flex_cache_read``/``priority_reasoning`` (with the bare
    ``flex`` key the tier's uncached rest), and for Anthropic the cache
    writes by lifetime (``ephemeral_5m_input_tokens``...) instead of
    ``cache_creation``, added into ``input_tokens``. Both were read as
    uncached input (and reasoning as output); each call now imports with the
    provider's counts."""
    import anthropic
    from langsmith.wrappers import wrap_anthropic

    openai_script = [
        Reply([("text", "a")], input_tokens=500, cache_read=1500, output_tokens=400,
              reasoning_tokens=300, service_tier="flex"),
        Reply([("text", "b")], input_tokens=300, cache_read=500, output_tokens=60,
              reasoning_tokens=10, service_tier="priority"),
        Reply([("text", "c")], input_tokens=40, cache_read=60, output_tokens=7)]
    lifetimes = {"ephemeral_5m_input_tokens": 2000, "ephemeral_1h_input_tokens": 1000}
    anthropic_script = [
        Reply([("text", "d")], input_tokens=5, cache_write=3000, output_tokens=60,
              usage={"cache_creation": lifetimes}),
        Reply([("text", "e")], input_tokens=20, cache_read=3000, cache_write=700,
              output_tokens=80)]
    monkeypatch.setenv("LANGSMITH_TRACING", "true")
    with Capture() as endpoint, FakeProvider(openai_script + anthropic_script) as server, \
            langsmith.tracing_context(enabled=True):
        client = Client(api_url=endpoint.url, api_key="lsv2-test")
        chat = wrap_openai(openai.OpenAI(base_url=server.openai_url, api_key="sk-test",
                                         max_retries=0), tracing_extra={"client": client})
        claude = wrap_anthropic(anthropic.Anthropic(base_url=server.base_url, api_key="sk-test",
                                                    max_retries=0),
                                tracing_extra={"client": client})

        @traceable(run_type="chain", name="agent", client=client)
        def agent() -> None:
            for _ in openai_script:
                chat.chat.completions.create(model="o3", messages=[
                    {"role": "user", "content": "go"}])
            for _ in anthropic_script:
                claude.messages.create(model="claude-sonnet-4-5", max_tokens=100, messages=[
                    {"role": "user", "content": "go"}])

        agent()
        client.flush()
        batches = list(endpoint.batches)
    (tmp_path / "posts.jsonl").write_text("".join(json.dumps(b) + "\n" for b in batches))
    imported([tmp_path / "posts.jsonl"], tmp_path / "traces", source="langsmith", runs=1)
    _, calls = read_traces(tmp_path / "traces")
    assert [(r.input_tokens, r.cache_read_tokens, r.cache_write_tokens, r.output_tokens,
             r.reasoning_tokens) for r in calls.itertuples()] == [
        (a.input_tokens, a.cache_read, a.cache_write, a.output_tokens - a.reasoning_tokens,
         a.reasoning_tokens) for a in openai_script + anthropic_script]
