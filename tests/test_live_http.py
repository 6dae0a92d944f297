"""The live driver end to end: the real harness loop, each official SDK, HTTP to a
local server speaking the provider's wire protocol (tests/fake_providers.py).

No SDK is patched and the harness is not mocked: requests leave through
``anthropic.AsyncAnthropic`` / ``openai.AsyncOpenAI`` with ``base_url`` pointing
at 127.0.0.1, and what the server saw is checked alongside the run's outcome.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from fake_providers import Fail, FakeProvider, Reply, StreamFail

from sim.cost import input_tokens
from sim.drivers.live import (
    CommandCheck,
    LiveDriver,
    ShellTool,
    Toolbox,
    make_model,
)
from sim.harness import (
    ApprovalDecision,
    Budgets,
    ContextParams,
    HarnessParams,
    RetryPolicy,
    SQLiteStore,
    VerifierParams,
    new_state,
)
from sim.harness.messages import estimate_tokens
from sim.traces.simulated import RunRecorder

TASK = "Look up the answer, write it to out.txt, then say DONE."
SYSTEM = "You are a careful agent. Use the tools."
# (provider, streamed): Anthropic is always streamed; Chat Completions both ways
WIRES = [("anthropic", True), ("openai", True), ("openai", False)]
WIRE_IDS = ["anthropic-sse", "openai-sse", "openai-json"]


def lookup(key: str) -> str:
    """Look up a value by key."""
    return f"the value of {key} is 42"


def toolbox() -> Toolbox:
    box = Toolbox([ShellTool(timeout_s=10.0)])
    box.function(lookup)
    return box


def params_for(provider: str, box: Toolbox, **changes) -> HarnessParams:
    base = dict(model="claude-sonnet-4-20250514" if provider == "anthropic" else "gpt-4o",
                provider=provider, system_prompt=SYSTEM,
                system_prompt_tokens=estimate_tokens(SYSTEM), tools=box.specs(),
                max_output_tokens=1_000, context_window=50_000, model_timeout_s=20.0,
                retry=RetryPolicy(base_s=0.05, cap_s=0.2))
    base.update(changes)
    return HarnessParams(**base).validate()


def url(server: FakeProvider, provider: str) -> str:
    return server.base_url if provider == "anthropic" else server.openai_url


def drive(server: FakeProvider, provider: str, stream: bool, params: HarnessParams,
          box: Toolbox, workdir: Path, **options):
    """Run one task through a LiveDriver, recording its calls in the trace
    model; return (final state, driver, recorder)."""
    model = make_model(provider, api_key="test-key", base_url=url(server, provider),
                       stream=stream)
    driver = LiveDriver(model, box, workdir=workdir, **options)
    state = new_state(params.prefix_tokens, params.model, TASK)
    recorder = RunRecorder(state, time.monotonic)

    async def go():
        try:
            return await driver.run(params, state, "run-1", recorders=(recorder,))
        finally:
            await model.aclose()

    return asyncio.run(go()), driver, recorder


def three_steps() -> list[Reply]:
    return [
        Reply([("text", "Looking it up."), ("tool_use", "call_1", "lookup", {"key": "answer"})],
              "tool_use", input_tokens=300, output_tokens=20, cache_write=100),
        Reply([("tool_use", "call_2", "shell", {"command": "echo 42 > out.txt"})], "tool_use",
              input_tokens=50, output_tokens=15, cache_read=300, cache_write=30),
        Reply([("text", "DONE: the answer is 42.")], "end_turn", input_tokens=20,
              output_tokens=10, cache_read=380),
    ]


@pytest.mark.parametrize(("provider", "stream"), WIRES, ids=WIRE_IDS)
def test_a_scripted_multi_step_task_runs_end_to_end_through_the_sdk(provider, stream,
                                                                     tmp_path):
    """Three model calls over HTTP: a Python tool, a real shell command that
    writes a file, a final answer that the check verifies; usage and cost add
    up to what the server reported, and the tool results went back in the
    provider's own shape."""
    box = toolbox()
    params = params_for(provider, box, verifier=VerifierParams(enabled=True, name="command"))
    with FakeProvider(three_steps()) as server:
        state, _, recorder = drive(server, provider, stream, params, box, tmp_path,
                                   verifier=CommandCheck("grep -q 42 out.txt"))
    assert (state.status, state.reason, state.turns) == ("succeeded", "verified", 3)
    assert (tmp_path / "out.txt").read_text() == "42\n"
    assert len(server.requests) == 3
    cache_write = 130 if provider == "anthropic" else 0  # OpenAI reports no cache writes
    uncached = 370 + (0 if provider == "anthropic" else 130)
    assert (state.input_tokens, state.cache_read_tokens, state.cache_write_tokens,
            state.output_tokens) == (uncached, 680, cache_write, 45)
    assert state.money_usd == pytest.approx(sum(c.cost_usd for c in recorder.calls))
    second = server.requests[1].body
    if provider == "anthropic":
        assert second["system"][0]["text"] == SYSTEM
        results = second["messages"][-1]["content"]
        assert results[0]["type"] == "tool_result"
        assert results[0]["tool_use_id"] == "call_1"
        assert "42" in results[0]["content"]
        assert second["messages"][1]["content"][-1]["type"] == "tool_use"
        assert "temperature" not in second  # API 2026-10-21 takes no sampling parameters
    else:
        assert second["messages"][0] == {"role": "system", "content": SYSTEM}
        tool_message = second["messages"][-1]
        assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_1"
        assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "lookup"
        assert bool(second.get("stream")) is stream
        if stream:
            assert second["stream_options"] == {"include_usage": True}
    assert [t.name for c in recorder.calls for t in c.tool_calls] == ["lookup", "shell"]
    assert recorder.calls[1].tool_calls[0].error is False


@pytest.mark.parametrize(("provider", "stream"), WIRES, ids=WIRE_IDS)
def test_the_token_budget_stops_the_run_at_the_call_the_closed_form_predicts(provider, stream,
                                                                             tmp_path):
    """Each step adds h = output + tool result tokens; with the provider
    reporting the prompts the harness counted, the budget B admits exactly
    the N calls with input(N) = N*P + h*N(N-1)/2 <= B, and the (N+1)th is
    refused before it is made."""
    box = Toolbox()
    box.function(lambda n: "x" * 40, name="probe", description="Probe n.")  # 10 tokens back
    params = params_for(provider, box)
    state0 = new_state(params.prefix_tokens, params.model, TASK)
    prefix, output = state0.context_tokens, 12
    per_step = output + 10
    steps = 7
    budget = input_tokens(steps, prefix, per_step) + per_step * steps // 2  # < input(N + 1)
    assert input_tokens(steps + 1, prefix, per_step) > budget
    params = replace(params, budgets=Budgets(tokens=budget))
    script = [Reply([("tool_use", f"call_{n}", "probe", {"n": str(n)})], "tool_use",
                    input_tokens=prefix + per_step * n, output_tokens=output) for n in range(20)]
    with FakeProvider(script) as server:
        state, _, _ = drive(server, provider, stream, params, box, tmp_path)
    assert (state.status, state.reason) == ("budget_exhausted", "tokens")
    assert state.turns == steps and len(server.requests) == steps
    assert state.prompt_tokens == input_tokens(steps, prefix, per_step) <= budget


@pytest.mark.parametrize(("provider", "stream"), WIRES, ids=WIRE_IDS)
def test_transient_errors_are_retried_by_the_harness_without_a_model_step(provider, stream,
                                                                          tmp_path):
    """A 429 with retry-after, a 500 and (Anthropic) a 529 and an overloaded
    error event mid-stream: the server sees every retry, the SDK made none
    of its own, the run's steps are the successful calls only, and the
    Retry-After wait was honoured."""
    box = toolbox()
    params = params_for(provider, box)
    steps = three_steps()
    errors = [Fail(429, "rate limited", headers={"retry-after": "1"}), Fail(500, "boom")]
    if provider == "anthropic":
        errors += [Fail(529, "Overloaded"), StreamFail("overloaded_error")]
    script = [steps[0], *errors, steps[1], steps[2]]
    with FakeProvider(script) as server:
        started = time.monotonic()
        state, _, _ = drive(server, provider, stream, params, box, tmp_path)
        elapsed = time.monotonic() - started
    assert (state.status, state.reason, state.turns) == ("succeeded", "model_complete", 3)
    assert len(server.requests) == 3 + len(errors)
    assert {r.headers.get("x-stainless-retry-count") for r in server.requests} <= {"0", None}
    assert elapsed >= 1.0  # retry-after: 1 second
    assert state.retries == len(errors) - 1  # the 500 is retried at once, without a wait


@pytest.mark.parametrize(("provider", "stream"), WIRES, ids=WIRE_IDS)
def test_a_second_server_error_in_a_row_fails_the_run_with_a_diagnostic(provider, stream,
                                                                        tmp_path):
    """Seed 000: a model error is retried once immediately, then the run
    fails as failed:model_error with the raw errors in its diagnostic."""
    box = toolbox()
    with FakeProvider([Fail(500, "boom"), Fail(503, "down")]) as server:
        state, _, _ = drive(server, provider, stream, params_for(provider, box), box, tmp_path)
    assert (state.status, state.reason) == ("failed", "model_error")
    assert len(server.requests) == 2
    assert len(state.detail["diagnostic"]["errors"]) == 2


@pytest.mark.parametrize(("provider", "stream"), WIRES, ids=WIRE_IDS)
def test_a_reply_cut_at_max_tokens_is_compacted_and_continued(provider, stream, tmp_path):
    """stop_reason max_tokens (OpenAI: finish_reason length): the cut-off
    tool call is dropped, the oldest history is summarised by a compaction
    call (which asks for a summary and may call no tool), and the model is
    asked to continue."""
    box = toolbox()
    steps = three_steps()
    script = [steps[0], steps[1],
              Reply([("text", "I will now"), ("tool_use", "call_x", "shell", {"command": "e"})],
                    "max_tokens", output_tokens=1_000),
              Reply([("text", "Looked up 42 and wrote out.txt.")], input_tokens=100),
              Reply([("text", "DONE")], input_tokens=200)]
    with FakeProvider(script) as server:
        state, _, recorder = drive(server, provider, stream, params_for(provider, box), box,
                                   tmp_path)
    assert (state.status, state.reason, state.turns) == ("succeeded", "model_complete", 4)
    assert state.compactions == 1
    summary_request = server.requests[3].body
    last = summary_request["messages"][-1]
    text = last["content"] if provider == "openai" else last["content"][-1]["text"]
    assert text.strip().startswith("Summarise the work above")
    if provider == "anthropic":
        assert summary_request["tool_choice"] == {"type": "none"}
        assert summary_request["messages"][0]["role"] == "user"
    else:
        assert summary_request["tool_choice"] == "none"
    final_prompt = server.requests[4].body["messages"]
    flat = str(final_prompt)
    assert "Summary of earlier work: Looked up 42" in flat
    assert "Continue from where you left off" in flat
    assert [c.purpose for c in recorder.calls] == ["step", "step", "step", "compaction", "step"]


@pytest.mark.parametrize(("provider", "stream"), WIRES, ids=WIRE_IDS)
def test_a_context_length_error_triggers_emergency_compaction(provider, stream, tmp_path):
    """The provider says the prompt is too long (Anthropic: 400 "prompt is
    too long"; OpenAI: code context_length_exceeded): the harness raises an
    alert, compacts and goes on; with emergency compaction off it fails as
    failed:context_overflow. (A window of 300 tokens, so that half of it is
    below what the history holds after two steps.)"""
    box = toolbox()
    steps = three_steps()
    small = dict(context_window=300, max_output_tokens=100)
    overflow = (Fail(400, "prompt is too long: 250000 tokens > 200000 maximum")
                if provider == "anthropic" else
                Fail(400, "This model's maximum context length is 128000 tokens.",
                     kind="context_length_exceeded"))
    script = [steps[0], steps[1], overflow, Reply([("text", "summary")]), steps[2]]
    with FakeProvider(script) as server:
        state, _, _ = drive(server, provider, stream,
                            params_for(provider, box, context=ContextParams(
                                summary_max_tokens=20), **small), box, tmp_path)
    assert (state.status, state.reason, state.alerts, state.compactions) == (
        "succeeded", "model_complete", 1, 1)
    assert len(server.requests) == 5
    strict = params_for(provider, box, context=ContextParams(emergency_compaction=False),
                        **small)
    with FakeProvider([steps[0], overflow]) as server:
        state, _, _ = drive(server, provider, stream, strict, box, tmp_path)
    assert (state.status, state.reason) == ("failed", "context_overflow")


@pytest.mark.parametrize(("provider", "stream"), WIRES, ids=WIRE_IDS)
def test_cancelling_during_a_slow_stream_ends_the_run_within_a_second_and_closes_it(
        provider, stream, tmp_path):
    """A response that trickles for many seconds: cancel() from another
    thread ends the run as cancelled:external_signal in under a second, and
    the server sees the client close the stream before its end."""
    box = toolbox()
    slow = Reply([("text", "thinking slowly")], chunk_delay_s=0.05, max_events=400)
    with FakeProvider([slow]) as server:
        holder: dict = {}

        def cancel_when_streaming():
            server.stream_started.wait(10)
            time.sleep(0.3)
            holder["at"] = time.monotonic()
            holder["driver"].cancel()

        box_params = params_for(provider, box)
        model = make_model(provider, api_key="k", base_url=url(server, provider),
                           stream=stream)
        driver = LiveDriver(model, box, workdir=tmp_path)
        holder["driver"] = driver
        canceller = threading.Thread(target=cancel_when_streaming, daemon=True)
        canceller.start()
        state = new_state(box_params.prefix_tokens, box_params.model, TASK)

        async def go():
            try:
                return await driver.run(box_params, state, "run-slow")
            finally:
                await model.aclose()

        final = asyncio.run(go())
        ended = time.monotonic()
        canceller.join(5)
        deadline = time.monotonic() + 2
        while stream and not server.closed_early and time.monotonic() < deadline:
            time.sleep(0.02)
    assert (final.status, final.reason) == ("cancelled", "external_signal")
    assert ended - holder["at"] < 1.0
    if stream:  # a JSON answer is one write; the streamed one is cut short
        assert server.closed_early and server.closed_early[0] - holder["at"] < 1.0


def test_cancelling_during_a_shell_command_kills_it(tmp_path):
    """The run is cancelled while a tool runs `sleep`: the run ends as
    cancelled at once and the command's process group is killed (its
    marker file is never written)."""
    box = toolbox()
    params = params_for("anthropic", box)
    script = [Reply([("tool_use", "call_1", "shell",
                      {"command": "sleep 5 && touch late.txt"})], "tool_use")]
    with FakeProvider(script) as server:
        model = make_model("anthropic", api_key="k", base_url=server.base_url)
        driver = LiveDriver(model, box, workdir=tmp_path)
        timer = threading.Timer(0.8, driver.cancel)
        timer.start()
        state = new_state(params.prefix_tokens, params.model, TASK)

        async def go():
            try:
                return await driver.run(params, state, "run-shell")
            finally:
                await model.aclose()

        started = time.monotonic()
        final = asyncio.run(go())
        elapsed = time.monotonic() - started
    assert (final.status, final.reason) == ("cancelled", "external_signal")
    assert elapsed < 3.0
    time.sleep(0.3)
    assert not (tmp_path / "late.txt").exists()


def test_every_step_is_checkpointed_in_sqlite_and_the_last_checkpoint_is_the_final_state(
        tmp_path):
    """Checkpoints go to the SQLite store after each step; loading the
    latest gives the history the run ended with."""
    box = toolbox()
    params = params_for("anthropic", box)
    store = SQLiteStore(str(tmp_path / "checkpoints.sqlite"))
    with FakeProvider(three_steps()) as server:
        state, _, _ = drive(server, "anthropic", True, params, box, tmp_path, store=store)
    saved = [store.load("run-1", turn) for turn in (1, 2)]
    assert all(s is not None for s in saved)
    assert saved[1].turns == 2 and len(saved[1].messages) == len(state.messages) - 1
    store.close()


@pytest.mark.parametrize("approve", [True, False])
def test_approvals_go_through_the_callback(approve, tmp_path):
    """A tool whose effect class needs approval is run only if the callback
    approves; a refusal reaches the model as an error observation."""
    box = toolbox()
    params = params_for("anthropic", box, approval_required=frozenset({"reversible_write"}))
    asked = []

    def approver(request):
        asked.append(request.call.name)
        return ApprovalDecision(approve, reason="" if approve else "not today")

    with FakeProvider(three_steps()) as server:
        state, _, recorder = drive(server, "anthropic", True, params, box, tmp_path,
                                   approver=approver)
    assert asked == ["shell"]
    assert (tmp_path / "out.txt").exists() is approve
    assert recorder.calls[1].tool_calls[0].error is (not approve)
    assert state.status == "succeeded"


def test_an_approval_nobody_answers_times_out(tmp_path):
    """The approver never returns: after the approval timeout the run is
    cancelled:approval_timeout, and the wait counts as parked time."""
    box = toolbox()
    params = params_for("anthropic", box, approval_required=frozenset({"reversible_write"}),
                        approval_timeout_s=0.3)
    never = threading.Event()
    with FakeProvider(three_steps()) as server:
        state, _, _ = drive(server, "anthropic", True, params, box, tmp_path,
                            approver=lambda request: never.wait(30))
    never.set()
    assert (state.status, state.reason) == ("cancelled", "approval_timeout")
    assert state.parked_s >= 0.3


def test_anthropic_requests_carry_cache_breakpoints_and_thinking(tmp_path):
    """With prompt caching the prefix (last tool, system) and the end of the
    prompt carry cache_control with the requested lifetime; with thinking the
    budget is sent and thinking blocks go back with their signatures."""
    box = toolbox()
    params = params_for("anthropic", box, prompt_cache="1h", max_output_tokens=4_000,
                        thinking=replace(HarnessParams().thinking, enabled=True,
                                         budget_tokens=2_000))
    script = [Reply([("thinking", "I should look it up", "sig-1"),
                     ("tool_use", "call_1", "lookup", {"key": "answer"})], "tool_use",
                    output_tokens=30),
              Reply([("text", "DONE")])]
    with FakeProvider(script) as server:
        state, _, _ = drive(server, "anthropic", True, params, box, tmp_path)
    assert state.status == "succeeded"
    assert 0 < state.thinking_tokens < 30 and state.output_tokens + state.thinking_tokens == 35
    second = server.requests[1].body
    ttl = {"type": "ephemeral", "ttl": "1h"}
    assert second["tools"][-1]["cache_control"] == ttl
    assert second["system"][0]["cache_control"] == ttl
    assert second["messages"][-1]["content"][-1]["cache_control"] == ttl
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 2_000}
    assert second["messages"][1]["content"][0] == {
        "type": "thinking", "thinking": "I should look it up", "signature": "sig-1"}


@pytest.mark.parametrize("kind", ["command", "function"])
def test_a_rejected_claim_goes_back_to_the_model_until_the_check_passes(kind, tmp_path):
    """The model says DONE before the work is done: the check (a command, or
    a plain Python function) fails, its feedback is the next observation, and
    the run succeeds only once the check passes."""
    box = toolbox()
    params = params_for("anthropic", box, verifier=VerifierParams(enabled=True, name=kind))
    verifier = (CommandCheck("test -f out.txt") if kind == "command" else
                (lambda request, context: (context.workdir / "out.txt").exists()))
    script = [Reply([("text", "DONE")]),
              Reply([("tool_use", "c1", "shell", {"command": "echo 42 > out.txt"})],
                    "tool_use"),
              Reply([("text", "DONE, really.")])]
    with FakeProvider(script) as server:
        state, _, _ = drive(server, "anthropic", True, params, box, tmp_path, verifier=verifier)
    assert (state.status, state.reason, state.verifier_rejections) == ("succeeded", "verified", 1)
    feedback = server.requests[1].body["messages"][-1]["content"][-1]["text"]
    assert "Verification failed" in feedback or "not done" in feedback
