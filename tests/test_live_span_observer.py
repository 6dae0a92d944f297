"""The live run's OpenTelemetry spans are an observer of the one pump
(:class:`sim.drivers.live.otel.SpanObserver`): a scripted run through
:func:`sim.harness.pump.drive` gives the hand-worked spans, and the same
spans, byte for byte, as the span writer's calls made the way the live
driver's listener made them before (each call with its provider answer and
its times)."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="needs the 'live' extra")

from sim.drivers.live.calls import Answer
from sim.drivers.live.otel import RunSpans, SpanObserver, SpanRecorder
from sim.harness.effects import (
    Checkpoint,
    ModelError,
    ModelRequest,
    ModelResponse,
    ToolRequest,
    ToolResult,
    Wait,
)
from sim.harness.loop import agent_loop
from sim.harness.messages import TextBlock, ToolUseBlock, Usage
from sim.harness.params import HarnessParams, RetryPolicy
from sim.harness.pump import drive
from sim.harness.state import new_state
from sim.harness.tool_spec import ToolSpec

BASE_NS = 1_700_000_000 * 10**9
"""The run's start on the wall clock (the spans' times are offsets from it)."""
SEARCH = ToolSpec("search", "read", timeout_s=5.0, description="Search the notes.")
PARAMS = HarnessParams(model="m", provider="anthropic", tools=(SEARCH,),
                       max_output_tokens=1_000, context_window=50_000, model_timeout_s=30.0,
                       retry=RetryPolicy(base_s=0.01, cap_s=0.05)).validate()
TOOL_USE = ModelResponse([ToolUseBlock("c1", "search", {"q": "x"}, 10)],
                         Usage(100, 20, cache_read_tokens=0, cache_write_tokens=50),
                         "tool_use", 1.0, "m-2025")
FINAL = ModelResponse([TextBlock("Done.", 5)], Usage(40, 10, cache_read_tokens=150),
                      "end_turn", 1.0, "m-2025")
SCRIPT: list[tuple[Any, float, Any]] = [
    # (the provider's answer or tool result, seconds it takes, the answer's facts)
    (ModelError("rate_limit", 429, None, "slow down", 0.5), 0.5, None),
    (TOOL_USE, 1.0, ("tool_use", 0.25, "msg_1")),
    (ToolResult("found it", 5, 0.75), 0.75, None),
    (FINAL, 1.0, ("end_turn", 0.125, "msg_2")),
]
"""A 429, a retried call that asks for a tool, the tool, a final answer;
a backoff wait takes 2 s, a checkpoint none."""


class Scripted:
    """Answers the loop's effects from :data:`SCRIPT` on a clock that moves
    only while an effect is answered; keeps each model call's provider answer
    for :meth:`answer_to`, as the live driver does; writes down each call's
    ``(request, answer or result, start, end)`` for the listener-style replay."""

    def __init__(self) -> None:
        self.now = 0.0
        self.script = list(SCRIPT)
        self.answered: tuple[ModelRequest, Answer] | None = None
        self.calls: list[tuple[Any, Any, float, float]] = []

    def clock(self) -> float:
        return self.now

    def answer(self, effect: Any) -> Any:
        if isinstance(effect, Wait):
            self.now += 2.0
            return None
        if isinstance(effect, Checkpoint):
            return None
        assert isinstance(effect, ModelRequest | ToolRequest), effect
        result, seconds, facts = self.script.pop(0)
        start = self.now
        self.now += seconds
        if isinstance(effect, ModelRequest):
            answer = Answer(result) if facts is None else Answer(
                result, facts[0], facts[1], response_id=facts[2])
            self.answered = (effect, answer)
            self.calls.append((effect, answer, start, self.now))
        else:
            self.calls.append((effect, result, start, self.now))
        return result

    def answer_to(self, request: ModelRequest) -> Answer | None:
        answered = self.answered
        return answered[1] if answered is not None and answered[0] is request else None


def spans_of(recorder: SpanRecorder) -> list[dict[str, Any]]:
    document = recorder.document()
    return [s for r in document["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]


def value(encoded: dict[str, Any]) -> Any:
    """An OTLP JSON attribute value (an array as a list of its values)."""
    (kind, inner), = encoded.items()
    return [value(v) for v in inner["values"]] if kind == "arrayValue" else inner


def attrs(item: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: value(a["value"]) for a in item.get("attributes", [])}


def observed_run(answer_to: Any = None) -> tuple[SpanRecorder, Scripted]:
    """The scripted run driven through the pump with a span observer (its
    facts from the script's ``answer_to`` unless another is given)."""
    script = Scripted()
    recorder = SpanRecorder(seed="scripted")
    spans = RunSpans(recorder, "r1", "t1", "anthropic", "m", server=("api.example", 443),
                     base_ns=BASE_NS)
    observer = SpanObserver(spans, script.clock,
                            script.answer_to if answer_to is None else answer_to)
    state = new_state(PARAMS.prefix_tokens, PARAMS.model, "Find x.")
    final = drive(agent_loop(PARAMS, state), script.answer, [observer])
    assert (final.status, final.reason) == ("succeeded", "model_complete")
    return recorder, script


def ns(seconds: float) -> int:
    return BASE_NS + int(seconds * 1e9)


def test_a_scripted_run_gives_the_hand_worked_spans():
    """429 at 0-0.5 s, wait 2 s, answer 2.5-3.5 s, tool 3.5-4.25 s, answer
    4.25-5.25 s: one chat span 0-3.5 s over both attempts (the 429 its event at
    0.5 s, sim.attempts 2, response id msg_1, first chunk 0.25 s, finish
    reason tool_use), the tool span 3.5-4.25 s with the tool's description,
    a chat span 4.25-5.25 s, and the run's span 0-5.25 s with the usage totals
    (input 150 + 190 = 340 including the cache counts, output 30) and its exit."""
    recorder, _ = observed_run()
    got = [(s["name"], int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"]), attrs(s),
            [(e["name"], int(e["timeUnixNano"]), attrs(e)) for e in s.get("events", [])])
           for s in spans_of(recorder)]
    common = {"gen_ai.conversation.id": "r1", "gen_ai.provider.name": "anthropic"}
    chat = {**common, "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
            "gen_ai.request.stream": True, "gen_ai.response.model": "m-2025",
            "gen_ai.request.max_tokens": "1000", "sim.purpose": "step",
            "server.address": "api.example", "server.port": "443",
            "gen_ai.usage.reasoning.output_tokens": "0"}
    assert got == [
        ("chat m", ns(0.0), ns(3.5), {
            **chat, "sim.attempts": "2", "sim.attempt": "1", "gen_ai.response.id": "msg_1",
            "gen_ai.response.time_to_first_chunk": 0.25,
            "gen_ai.response.finish_reasons": ["tool_use"],
            "gen_ai.usage.input_tokens": "150", "gen_ai.usage.cache_read.input_tokens": "0",
            "gen_ai.usage.cache_creation.input_tokens": "50",
            "gen_ai.usage.output_tokens": "20"},
         [("gen_ai.call.error", ns(0.5), {
             "error.type": "rate_limit", "gen_ai.request.model": "m", "sim.attempt": "0",
             "sim.purpose": "step", "sim.duration_s": 0.5, "sim.message": "slow down",
             "http.response.status_code": "429"})]),
        ("execute_tool search", ns(3.5), ns(4.25), {
            **common, "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
            "gen_ai.tool.type": "function", "sim.attempt": "0", "gen_ai.tool.call.id": "c1",
            "gen_ai.tool.description": "Search the notes."}, []),
        ("chat m", ns(4.25), ns(5.25), {
            **chat, "sim.attempts": "1", "sim.attempt": "0", "gen_ai.response.id": "msg_2",
            "gen_ai.response.time_to_first_chunk": 0.125,
            "gen_ai.response.finish_reasons": ["end_turn"],
            "gen_ai.usage.input_tokens": "190", "gen_ai.usage.cache_read.input_tokens": "150",
            "gen_ai.usage.cache_creation.input_tokens": "0",
            "gen_ai.usage.output_tokens": "10"}, []),
        ("invoke_agent sim", ns(0.0), ns(5.25), {
            **common, "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "sim",
            "gen_ai.request.model": "m", "sim.task_id": "t1",
            "gen_ai.usage.input_tokens": "340", "gen_ai.usage.cache_read.input_tokens": "150",
            "gen_ai.usage.cache_creation.input_tokens": "50",
            "gen_ai.usage.output_tokens": "30", "gen_ai.usage.reasoning.output_tokens": "0",
            "sim.exit": "succeeded:model_complete"}, []),
    ]


def test_the_observer_writes_the_bytes_the_listener_calls_wrote():
    """The same run written the way the live driver's listener wrote it
    (``model_call``/``tool_call`` as each call ended, with its provider
    answer and times, then the run's end) gives the same OTLP JSON, byte for
    byte (both recorders draw their ids from the same seed)."""
    observed, script = observed_run()
    listened = SpanRecorder(seed="scripted")
    spans = RunSpans(listened, "r1", "t1", "anthropic", "m", server=("api.example", 443),
                     base_ns=BASE_NS)
    for request, outcome, start, end in script.calls:
        if isinstance(request, ModelRequest):
            spans.model_call(request, outcome, start, end)
        else:
            spans.tool_call(request, outcome, start, end)
    spans.end("succeeded:model_complete", True, script.now)
    assert len(script.calls) == 4
    assert (json.dumps(observed.document(), sort_keys=True)
            == json.dumps(listened.document(), sort_keys=True))


def test_without_the_providers_answer_a_chat_span_has_the_harness_result_only():
    """An ``answer_to`` that knows no answer (another driver's, or a request
    that is not the last one performed): the chat spans carry no response id
    and no time to first chunk, and their finish reason is the harness's
    stop reason."""
    recorder, _ = observed_run(answer_to=lambda request: None)
    chats = [attrs(s) for s in spans_of(recorder) if s["name"] == "chat m"]
    assert len(chats) == 2
    assert not any("gen_ai.response.id" in c or "gen_ai.response.time_to_first_chunk" in c
                   for c in chats)
    assert [c["gen_ai.response.finish_reasons"] for c in chats] == [["tool_use"], ["end_turn"]]
