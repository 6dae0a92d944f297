"""Provider requests are built from the effect alone, and a provider's own
parameter rules are checked before a run starts."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.drivers.live.anthropic_api import messages_payload
from sim.drivers.live.calls import SPAN_OPENING, SUMMARY_INSTRUCTION, check_provider
from sim.drivers.live.openai_api import chat_payload
from sim.harness import (
    HarnessParams,
    Message,
    ModelRequest,
    ParameterError,
    TextBlock,
    ThinkingBlock,
    ThinkingConfig,
    ToolResultBlock,
    ToolUseBlock,
)
from sim.harness.params import ToolDefinition

TOOL = ToolDefinition("lookup", "Look a key up.", {"type": "object", "properties": {
    "key": {"type": "string"}}, "required": ["key"]})


def history() -> list[Message]:
    return [Message("user", [TextBlock("Find the answer.", 4)], 4),
            Message("assistant", [ThinkingBlock("hmm", 1, "sig"),
                                  ToolUseBlock("call_1", "lookup", {"key": "a"}, 5)], 6),
            Message("user", [ToolResultBlock("call_1", "42", False, 1),
                             TextBlock("[harness] note", 3, "nudge")], 4)]


def request(provider: str = "anthropic", **changes) -> ModelRequest:
    base = dict(model="m", messages=history(), prompt_tokens=100, max_output_tokens=500,
                system_prompt="Be careful.", tools=(TOOL,), provider=provider)
    base.update(changes)
    return ModelRequest(**base)


def test_anthropic_payload_is_the_normalized_history_with_system_and_tools():
    """Messages alternate, tool results lead their user turn, thinking blocks
    keep their signature; the system prompt and tools are the request's."""
    payload = messages_payload(request())
    assert payload["model"] == "m" and payload["max_tokens"] == 500
    assert [m["role"] for m in payload["messages"]] == ["user", "assistant", "user"]
    assert payload["messages"][2]["content"][0] == {
        "type": "tool_result", "tool_use_id": "call_1", "content": "42", "is_error": False}
    assert payload["messages"][1]["content"][0]["signature"] == "sig"
    assert payload["system"] == [{"type": "text", "text": "Be careful."}]
    assert payload["tools"][0]["input_schema"] == TOOL.input_schema
    assert payload["tool_choice"] == {"type": "auto"}
    assert "cache_control" not in json.dumps(payload)
    assert not {"temperature", "top_p", "top_k", "thinking", "stream"} & set(payload)


@pytest.mark.parametrize(("ttl", "label"), [(300.0, "5m"), (3600.0, "1h")])
def test_anthropic_cache_breakpoints_mark_the_prefix_and_the_end_of_the_prompt(ttl, label):
    """Three breakpoints: the last tool definition, the system prompt and
    the last block of the prompt, with the lifetime the harness asked for."""
    payload = messages_payload(request(cache_ttl_s=ttl))
    mark = {"type": "ephemeral", "ttl": label}
    assert payload["tools"][-1]["cache_control"] == mark
    assert payload["system"][0]["cache_control"] == mark
    assert payload["messages"][-1]["content"][-1]["cache_control"] == mark
    assert json.dumps(payload).count("cache_control") == 3


def test_anthropic_thinking_budget_and_forced_tool_choice():
    """A thinking budget enables thinking with that budget; ``tool:<name>``
    is a forced tool choice."""
    payload = messages_payload(request(thinking_budget=2048, tool_choice="tool:lookup"))
    assert payload["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert payload["tool_choice"] == {"type": "tool", "name": "lookup"}


def test_a_compaction_request_asks_for_a_summary_and_no_tool_call():
    """The span starts with the assistant: a user note opens it, the
    summary instruction closes it, and the harness's "none" tool choice (a
    summary is text) goes out with the tools the span's blocks need."""
    span = history()[1:]
    for provider, build in (("anthropic", messages_payload), ("openai", chat_payload)):
        payload = build(request(provider, messages=span, purpose="compaction",
                                tool_choice="none"))
        assert payload["tools"]
        messages = payload["messages"]
        if provider == "anthropic":
            assert messages[0] == {"role": "user", "content": [
                {"type": "text", "text": SPAN_OPENING}]}
            assert messages[-1]["content"][-1]["text"].strip() == SUMMARY_INSTRUCTION
            assert payload["tool_choice"] == {"type": "none"}
        else:
            assert messages[1] == {"role": "user", "content": SPAN_OPENING}
            assert messages[-1]["role"] == "user"
            assert messages[-1]["content"].endswith("\n\n" + SUMMARY_INSTRUCTION)
            assert payload["tool_choice"] == "none"


def test_an_empty_assistant_turn_is_left_out_of_the_wire_history():
    """A truncated reply whose cut-off tool call was dropped has no content;
    the API rejects an empty assistant message, so it is left out and the
    user turns around it merge."""
    messages = [*history(), Message("assistant", [], 0),
                Message("user", [TextBlock("Continue.", 2)], 2)]
    payload = messages_payload(request(messages=messages))
    assert [m["role"] for m in payload["messages"]] == ["user", "assistant", "user"]
    assert payload["messages"][-1]["content"][-1]["text"] == "Continue."


def test_openai_payload_has_a_system_message_tool_messages_and_stream_options():
    """Tool calls ride on the assistant message, each result is a tool-role
    message; the output cap is max_completion_tokens; a streamed request asks
    for usage in its last chunk."""
    payload = chat_payload(request("openai", temperature=0.2, top_p=0.9))
    messages = payload["messages"]
    assert messages[0] == {"role": "system", "content": "Be careful."}
    assert messages[2]["tool_calls"][0]["function"] == {"name": "lookup",
                                                        "arguments": '{"key": "a"}'}
    assert messages[3] == {"role": "tool", "tool_call_id": "call_1", "content": "42"}
    assert messages[4] == {"role": "user", "content": "[harness] note"}
    assert payload["max_completion_tokens"] == 500
    assert (payload["temperature"], payload["top_p"]) == (0.2, 0.9)
    assert payload["tools"][0] == {"type": "function", "function": {
        "name": "lookup", "description": "Look a key up.", "parameters": TOOL.input_schema}}
    assert payload["stream"] is True and payload["stream_options"] == {"include_usage": True}
    unstreamed = chat_payload(request("openai"), stream=False)
    assert "stream" not in unstreamed and "stream_options" not in unstreamed


@pytest.mark.parametrize(("choice", "wire"), [("auto", "auto"), ("none", "none"),
                                              ("any", "required"),
                                              ("tool:lookup", {"type": "function",
                                                               "function": {"name": "lookup"}})])
def test_openai_tool_choice(choice, wire):
    """The harness's tool choices in Chat Completions' form."""
    assert chat_payload(request("openai", tool_choice=choice))["tool_choice"] == wire


@given(st.sampled_from(["anthropic", "openai"]), st.integers(0, 3), st.booleans())
def test_payloads_are_pure_and_json_serialisable(provider, cut, cached):
    """The same effect gives the same payload twice, the history is not
    changed by building it, and the payload is plain JSON."""
    messages = history()[:cut + 1] if cut < 3 else history()
    before = json.dumps([[b.type for b in m.content] for m in messages])
    build = messages_payload if provider == "anthropic" else chat_payload
    req = request(provider, messages=messages, cache_ttl_s=300.0 if cached else None)
    first, second = build(req), build(req)
    assert first == second
    assert json.loads(json.dumps(first)) == first
    assert json.dumps([[b.type for b in m.content] for m in messages]) == before


@pytest.mark.parametrize(("changes", "path"), [
    (dict(provider="anthropic", temperature=0.7), "temperature"),
    (dict(provider="anthropic", top_p=0.9), "top_p"),
    (dict(provider="anthropic", thinking=ThinkingConfig(True, 512)), "thinking.budget_tokens"),
    (dict(provider="anthropic", max_output_tokens=2048, thinking=ThinkingConfig(True, 2048)),
     "thinking.budget_tokens"),
    (dict(provider="openai", thinking=ThinkingConfig(True, 2048), max_output_tokens=4096),
     "thinking.enabled"),
    (dict(provider="anthropic", thinking=ThinkingConfig(True, 2048), max_output_tokens=4096,
          tool_choice="any"), "thinking.enabled"),
])
def test_provider_rules_refuse_incompatible_settings_before_the_run(changes, path):
    """Anthropic takes no sampling parameters and needs 1024 <= thinking
    budget < max_tokens; OpenAI has no thinking budget; forced tool use with
    thinking is the harness's own refusal. Each names its field."""
    with pytest.raises(ParameterError) as caught:
        check_provider(HarnessParams(**changes))  # the harness's own check, or the provider's
    assert path in [p for p, _ in caught.value.problems]


def test_provider_rules_accept_the_defaults_and_a_valid_thinking_budget():
    """The harness defaults pass for both providers; so does a thinking
    budget of 1024..max_tokens-1 for Anthropic."""
    for provider in ("anthropic", "openai"):
        check_provider(HarnessParams(provider=provider))
    check_provider(HarnessParams(thinking=ThinkingConfig(True, 1024), max_output_tokens=1025))
    check_provider(HarnessParams(provider="openai", temperature=1.0, top_p=0.5))
