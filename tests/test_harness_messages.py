"""Messages: a message is as many tokens as its blocks together, always, and
an assistant message is as long as the provider billed the reply; a model
request carries everything a provider call needs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from scripted import (
    FAST,
    READ,
    calls,
    final,
    make_params,
    run_script,
    summary_reply,
    thinking,
    tool_call,
    truncated,
    use,
)

from sim.harness import (
    ContextParams,
    ModelError,
    ModelRequest,
    TextBlock,
    ThinkingBlock,
    ToolDefinition,
    ToolResult,
    ToolSpec,
    ToolUseBlock,
    Verdict,
    VerifierParams,
)
from sim.harness.messages import CUT_OFF, ToolResultBlock, billed_message

_BLOCK = st.one_of(
    st.builds(TextBlock, st.text(max_size=5), st.integers(0, 400)),
    st.builds(ThinkingBlock, st.text(max_size=5), st.integers(0, 400)),
    st.builds(lambda i, n: ToolUseBlock(f"t{i}", "search", {"q": str(i)}, n),
              st.integers(0, 9), st.integers(0, 400)))


@FAST
@given(content=st.lists(_BLOCK, max_size=5), output=st.integers(0, 5_000),
       thinking_tokens=st.integers(0, 5_000))
def test_a_billed_message_is_its_blocks_and_its_bill(content, output, thinking_tokens) -> None:
    """billed_message gives a message of output + thinking tokens whose blocks
    add up to exactly that; blocks keep their kind and text, and are copied,
    never altered, when their size changes; when the driver's sizes do not add
    up to the bill and there are both kinds, thinking tokens go to the
    thinking blocks and output tokens to the others."""
    before = [(b.type, b.tokens) for b in content]
    message = billed_message(list(content), output, thinking_tokens)
    assert message.role == "assistant"
    assert message.tokens == output + thinking_tokens == sum(b.tokens for b in message.content)
    assert [(b.type, b.tokens) for b in content] == before
    if content:
        assert [b.type for b in message.content] == [b.type for b in content]
        thinks = [b.tokens for b in message.content if b.type == "thinking"]
        others = [b.tokens for b in message.content if b.type != "thinking"]
        if thinks and others and sum(n for _, n in before) != output + thinking_tokens:
            assert (sum(thinks), sum(others)) == (thinking_tokens, output)
    elif output + thinking_tokens:
        assert [(b.type, b.text, b.origin) for b in message.content] == [
            ("text", CUT_OFF, "cut_off")]


def test_a_message_whose_blocks_match_the_bill_keeps_them() -> None:
    """When the driver's block sizes already add up to the bill, the very
    content list and block objects are kept (no copy on the hot path)."""
    content = [ThinkingBlock("t", 30), ToolUseBlock("a", "search", {}, 50)]
    message = billed_message(content, 50, 30)
    assert message.content is content and message.tokens == 80


_ITEMS = st.lists(st.one_of(
    st.builds(lambda q, out, th: calls(thinking("hm", 7), use("search", q=str(q)),
                                       output_tokens=out, thinking_tokens=th),
              st.integers(0, 3), st.integers(1, 900), st.integers(0, 300)),
    st.builds(lambda out: final(output_tokens=out), st.integers(1, 900)),
    st.builds(lambda: truncated(use("write_file", path="x"))),
    st.builds(lambda: truncated(TextBlock("part", 3), use("search", q="y"))),
    st.just(ModelError("context_overflow", 400))), max_size=20)


@FAST
@given(items=_ITEMS, tools=st.lists(st.builds(ToolResult, st.just("r"), st.integers(1, 4_000)),
                                    max_size=20),
       window=st.sampled_from([8_000, 50_000]), verify=st.booleans())
def test_every_message_of_every_run_is_the_sum_of_its_blocks(items, tools, window, verify
                                                             ) -> None:
    """After any run (truncations, compactions, merges of user messages,
    verifier feedback, nudges), every message's tokens equal the sum of its
    blocks' tokens, and the context size is the prefix plus the history."""
    params = make_params(context_window=window, verifier=VerifierParams(enabled=verify),
                         context=ContextParams(summary_max_tokens=500))
    run = run_script(params, model=items, tools=tools, default_reply=final(),
                     verdicts=[Verdict(False, "no", 4)])
    s = run.state
    for message in s.messages:
        assert message.tokens == sum(b.tokens for b in message.content), message
    assert s.context_tokens == s.prefix_tokens + sum(m.tokens for m in s.messages)
    for request in run.step_requests:
        for message in request.messages:
            assert message.tokens == sum(b.tokens for b in message.content)


def test_the_assistant_message_is_as_long_as_the_reply_was_billed() -> None:
    """A reply billed 50 output tokens for a 10-token tool_use block adds 50
    tokens to the context, in the block itself (sized as billed)."""
    run = run_script(model=[tool_call("search", q="x"), final()])
    assistant = run.state.messages[1]
    assert assistant.tokens == 50 and [b.tokens for b in assistant.content] == [50]


def test_a_reply_cut_off_in_its_only_tool_call_keeps_its_tokens_in_a_marker() -> None:
    """A truncated reply whose only block was the (dropped) tool call still
    takes the billed tokens in the context, carried by a cut_off text block."""
    run = run_script(model=[truncated(use("write_file", path="x")), final()])
    assistant = run.state.messages[1]
    assert [(b.type, b.origin, b.tokens) for b in assistant.content] == [("text", "cut_off", 50)]


# --------------------------------------------------- what a provider call needs
def test_a_model_request_carries_everything_a_provider_call_needs() -> None:
    """System prompt, tool definitions (name, description, input schema),
    temperature, top_p, tool choice, provider and model travel with every
    step request."""
    tools = (ToolSpec("search", description="Search the repository.",
                      input_schema='{"type": "object", "properties": {"q": {"type": "string"}}}'),
             READ)
    params = make_params(system_prompt="You fix bugs.", tools=tools, temperature=0.3,
                         top_p=0.9, tool_choice="auto", provider="openai")
    run = run_script(params, model=[final()])
    (request,) = run.step_requests
    assert (request.system_prompt, request.temperature, request.top_p, request.tool_choice,
            request.provider, request.model) == ("You fix bugs.", 0.3, 0.9, "auto", "openai",
                                                 params.model)
    assert request.tools == (
        ToolDefinition("search", "Search the repository.",
                       {"type": "object", "properties": {"q": {"type": "string"}}}),
        ToolDefinition("read_file", "", {"type": "object", "properties": {"path": {}},
                                         "required": ["path"]}))
    assert request.tools is params.tool_definitions  # built once, at construction


def test_a_compaction_request_asks_for_text_only() -> None:
    """A summary call carries the same system prompt and tools (its prompt is
    counted with the prefix) but tool_choice none, no thinking and no cache."""
    params = make_params(context_window=9_000, context=ContextParams(summary_max_tokens=500))
    run = run_script(params, model=[tool_call("search", q=str(i)) for i in range(6)],
                     tools=[ToolResult(f"r{i}", 1_500) for i in range(6)],
                     summaries=[summary_reply(tokens=100)], default_reply=final())
    (compaction,) = run.compaction_requests
    assert (compaction.tool_choice, compaction.thinking_budget, compaction.cache_ttl_s) == (
        "none", 0, None)
    assert compaction.tools == params.tool_definitions
    assert run.step_requests[0].tool_choice == "auto"


def test_model_request_fields_are_documented() -> None:
    """Every field of ModelRequest is named in its docstring (a live driver is
    built from it)."""
    doc = ModelRequest.__doc__ or ""
    for name in ModelRequest.__dataclass_fields__:
        assert f"``{name}``" in doc, name


def test_a_sized_copy_is_the_block_with_only_its_size_changed() -> None:
    """billed_message resizes blocks with ``sized``: a new block equal to the
    old one in every field but ``tokens``, the old one untouched."""
    from dataclasses import replace

    for block in (TextBlock("hi", 3, "nudge"), ThinkingBlock("hmm", 4, "sig"),
                  ToolUseBlock("t1", "read", {"path": "a"}, 5),
                  ToolResultBlock("t1", "ok", True, 6)):
        copy = block.sized(11)
        assert copy == replace(block, tokens=11) and copy is not block and block.tokens < 11
