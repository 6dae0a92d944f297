"""Context builder: provider normalisation (a pure, idempotent function) and
compaction that keeps the task and never splits a tool call from its result."""

from __future__ import annotations

import copy
import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scripted import FAST

from sim.harness import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    normalize,
)
from sim.harness.context import apply_compaction, plan_compaction

WORDS = st.text("abcdefgh xyz", min_size=1, max_size=12)
ARGS = st.dictionaries(st.sampled_from(["path", "q", "n", "flag"]),
                       st.one_of(st.integers(-5, 5), WORDS, st.booleans()), max_size=3)


# ------------------------------------------------------------ strategies
@st.composite
def histories(draw, split_users: bool = True) -> list[Message]:
    """Well-formed histories: task first, then assistant turns whose tool
    calls are answered in the following user turn (results and injected text
    in any order, sometimes split over two consecutive user messages)."""
    tokens = st.integers(1, 400)
    messages = [Message("user", [TextBlock(draw(WORDS), draw(tokens))], 0)]
    ids = 0
    for _ in range(draw(st.integers(0, 6))):
        blocks: list = []
        if draw(st.booleans()):
            blocks.append(ThinkingBlock(draw(WORDS), draw(tokens), "sig"))
        if draw(st.booleans()):
            blocks.append(TextBlock(draw(WORDS), draw(tokens)))
        uses = []
        for _ in range(draw(st.integers(0, 3))):
            uses.append(ToolUseBlock(f"toolu_{ids}", draw(st.sampled_from(["search", "read"])),
                                     draw(ARGS), draw(tokens)))
            ids += 1
        blocks.extend(uses)
        messages.append(Message("assistant", blocks, draw(tokens)))
        answer: list = [ToolResultBlock(u.id, draw(WORDS), draw(st.booleans()), draw(tokens))
                        for u in uses]
        answer += [TextBlock(draw(WORDS), draw(tokens), draw(st.sampled_from(["", "nudge"])))
                   for _ in range(draw(st.integers(0 if uses else 1, 2)))]
        answer = draw(st.permutations(answer))
        if split_users and len(answer) > 1 and draw(st.booleans()):
            k = draw(st.integers(1, len(answer) - 1))
            messages += [Message("user", answer[:k], 1), Message("user", answer[k:], 1)]
        else:
            messages.append(Message("user", answer, draw(tokens)))
    return messages


@st.composite
def anthropic_dicts(draw) -> list[dict]:
    """The same histories as Anthropic wire dicts, in the shapes the API allows:
    a lone text as a plain string, tool_result content as a string or a list of
    text blocks, is_error omitted when false."""
    out = []
    for m in draw(histories()):
        blocks = []
        for b in m.content:
            if b.type == "text":
                blocks.append({"type": "text", "text": b.text})
            elif b.type == "thinking":
                blocks.append({"type": "thinking", "thinking": b.thinking,
                               "signature": b.signature})
            elif b.type == "tool_use":
                blocks.append({"type": "tool_use", "id": b.id, "name": b.name,
                               "input": dict(b.input)})
            else:
                d = {"type": "tool_result", "tool_use_id": b.tool_use_id,
                     "content": ([{"type": "text", "text": b.content}] if draw(st.booleans())
                                 else b.content)}
                if b.is_error or draw(st.booleans()):
                    d["is_error"] = b.is_error
                blocks.append(d)
        if len(blocks) == 1 and blocks[0]["type"] == "text" and draw(st.booleans()):
            out.append({"role": m.role, "content": blocks[0]["text"]})
        else:
            out.append({"role": m.role, "content": blocks})
    return out


@st.composite
def openai_dicts(draw) -> list[dict]:
    """The same histories as OpenAI chat messages: tool_calls on the assistant
    (arguments as a JSON string), one tool-role message per result right after
    it, user text as a string."""
    out: list[dict] = []
    for m in draw(histories(split_users=False)):
        text = "".join(b.text for b in m.content if b.type == "text")
        if m.role == "assistant":
            msg: dict = {"role": "assistant", "content": text or draw(st.sampled_from([None, ""]))}
            tool_calls = [{"id": b.id, "type": "function",
                           "function": {"name": b.name, "arguments": json.dumps(b.input)}}
                          for b in m.content if b.type == "tool_use"]
            if tool_calls:
                msg["tool_calls"] = tool_calls
            out.append(msg)
            continue
        out += [{"role": "tool", "tool_call_id": b.tool_use_id, "content": b.content}
                for b in m.content if b.type == "tool_result"]
        if text:
            out.append({"role": "user", "content": text})
    return out


ANY_HISTORY = st.one_of(histories(), anthropic_dicts(), openai_dicts())
PROVIDERS = st.sampled_from(["anthropic", "openai"])


# ----------------------------------------------------------- normalize
@FAST
@given(history=ANY_HISTORY, provider=PROVIDERS)
def test_normalize_is_idempotent(history, provider: str) -> None:
    """normalize(normalize(m, p), p) == normalize(m, p) for Message histories
    and for Anthropic- and OpenAI-shaped dict histories."""
    once = normalize(history, provider)
    assert normalize(once, provider) == once


@FAST
@given(history=ANY_HISTORY, provider=PROVIDERS)
def test_normalize_is_pure(history, provider: str) -> None:
    """normalize does not modify its input."""
    before = copy.deepcopy(history)
    normalize(history, provider)
    assert history == before


def test_a_user_turns_notes_reach_openai_as_paragraphs() -> None:
    """An observation, a nudge and a verifier's feedback in one user turn are
    separate text blocks for Anthropic and paragraphs of one string for
    OpenAI, never run together; an assistant's text fragments are joined as is."""
    from sim.harness.messages import Message, TextBlock

    turn = Message("user", [TextBlock("You have repeated this call.", 7),
                            TextBlock("Verification failed.", 5)], 12)
    reply = Message("assistant", [TextBlock("Part one, ", 3), TextBlock("part two.", 3)], 6)
    assert normalize([turn, reply], "openai") == [
        {"role": "user", "content": "You have repeated this call.\n\nVerification failed."},
        {"role": "assistant", "content": "Part one, part two."}]
    assert [b["text"] for b in normalize([turn], "anthropic")[0]["content"]] == [
        "You have repeated this call.", "Verification failed."]


@FAST
@given(history=ANY_HISTORY)
def test_anthropic_output_alternates_and_puts_tool_results_first(history) -> None:
    """Anthropic shape: roles alternate user/assistant; in a user message all
    tool_result blocks come before any other block, and each answers a
    tool_use of the assistant message just before it."""
    wire = normalize(history, "anthropic")
    roles = [m["role"] for m in wire]
    assert all(a != b for a, b in itertools.pairwise(roles))
    for i, m in enumerate(wire):
        types = [b["type"] for b in m["content"]]
        if m["role"] == "user":
            k = types.count("tool_result")
            assert types[:k] == ["tool_result"] * k
            if k:
                asked = {b["id"] for b in wire[i - 1]["content"] if b["type"] == "tool_use"}
                assert {b["tool_use_id"] for b in m["content"][:k]} <= asked
        else:
            assert "tool_result" not in types


@FAST
@given(history=ANY_HISTORY)
def test_openai_tool_messages_follow_their_assistant_call(history) -> None:
    """OpenAI shape: every tool message comes right after the assistant
    message that made the call with its id, or after another tool message of
    that same run of results."""
    wire = normalize(history, "openai")
    for i, m in enumerate(wire):
        if m["role"] != "tool":
            continue
        j = i - 1
        while j >= 0 and wire[j]["role"] == "tool":
            j -= 1
        assert j >= 0 and wire[j]["role"] == "assistant"
        ids = [c["id"] for c in wire[j].get("tool_calls", [])]
        assert m["tool_call_id"] in ids
    assert all(m["role"] in ("user", "assistant", "tool") for m in wire)


@FAST
@given(history=ANY_HISTORY)
def test_openai_to_anthropic_to_openai_is_stable(history) -> None:
    """Converting OpenAI output to Anthropic and back gives it back unchanged."""
    openai = normalize(history, "openai")
    assert normalize(normalize(openai, "anthropic"), "openai") == openai


@FAST
@given(history=histories())
def test_anthropic_normalisation_keeps_every_call_and_result(history) -> None:
    """Normalising a Message history to Anthropic loses no tool call, no tool
    result and no thinking block (only merges and reorders)."""
    wire = normalize(history, "anthropic")

    def ids(kind: str, key: str) -> list[str]:
        return sorted(b[key] for m in wire for b in m["content"] if b["type"] == kind)

    assert ids("tool_use", "id") == sorted(b.id for m in history for b in m.content
                                           if b.type == "tool_use")
    assert ids("tool_result", "tool_use_id") == sorted(
        b.tool_use_id for m in history for b in m.content if b.type == "tool_result")
    assert sum(b["type"] == "thinking" for m in wire for b in m["content"]) == sum(
        b.type == "thinking" for m in history for b in m.content)


def test_openai_shape_of_a_simple_exchange() -> None:
    """A concrete example: the task, a call, its result and a nudge."""
    history = [Message("user", [TextBlock("task", 1)]),
               Message("assistant", [TextBlock("looking", 1),
                                     ToolUseBlock("t1", "search", {"q": "x", "n": 2})]),
               Message("user", [TextBlock("nudge", 1, "nudge"),
                                ToolResultBlock("t1", "found", True)])]
    assert normalize(history, "openai") == [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "looking",
         "tool_calls": [{"id": "t1", "type": "function",
                         "function": {"name": "search", "arguments": '{"n": 2, "q": "x"}'}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "found"},
        {"role": "user", "content": "nudge"},
    ]
    anthropic = normalize(history, "anthropic")
    assert [b["type"] for b in anthropic[2]["content"]] == ["tool_result", "text"]


def test_unknown_provider_and_role_are_rejected() -> None:
    """An unknown provider or message role raises ValueError."""
    with pytest.raises(ValueError, match="provider"):
        normalize([], "acme")
    with pytest.raises(ValueError, match="role"):
        normalize([{"role": "system", "content": "x"}], "anthropic")


# ------------------------------------------------------------ compaction
@st.composite
def sized_histories(draw) -> list[Message]:
    """Alternating histories (merged user turns) with per-message token sizes."""
    messages = []
    for m in draw(histories(split_users=False)):
        messages.append(Message(m.role, m.content, draw(st.integers(1, 500))))
    return messages


@FAST
@given(messages=sized_histories(), drop=st.integers(-10, 3_000))
def test_plan_compaction_picks_the_shortest_old_span_ending_with_a_user_turn(
        messages: list[Message], drop: int) -> None:
    """A plan covers messages [1, cut): never the task, never the newest
    message, ending with a user message; it is the shortest such span with
    at least ``drop`` tokens, or all that can be compacted when none has."""
    plan = plan_compaction(messages, drop)
    if drop <= 0 or len(messages) < 3:
        assert plan is None
        return
    ends = [i + 1 for i in range(1, len(messages) - 1) if messages[i].role == "user"]
    if not ends:
        assert plan is None
        return
    assert plan is not None
    assert plan.cut in ends and 2 <= plan.cut <= len(messages) - 1
    assert plan.tokens == sum(m.tokens for m in messages[1:plan.cut])
    enough = [c for c in ends if sum(m.tokens for m in messages[1:c]) >= drop]
    assert plan.cut == (enough[0] if enough else ends[-1])


@FAST
@given(messages=sized_histories(), drop=st.integers(1, 3_000))
def test_apply_compaction_keeps_the_task_and_every_call_with_its_result(
        messages: list[Message], drop: int) -> None:
    """After compaction the first message is the task statement followed by
    the summary, the rest is the untouched newer history, roles still
    alternate, and no kept tool_result has lost its tool_use (nor the reverse,
    except for calls of the newest assistant message)."""
    plan = plan_compaction(messages, drop)
    if plan is None:
        return
    summary = TextBlock("Summary of earlier work: ...", 7, "summary")
    task = list(messages[0].content)
    out = apply_compaction(messages, plan, summary)
    assert out[0].role == "user" and out[0].content == [*task, summary]
    assert out[0].tokens == sum(b.tokens for b in task) + 7
    assert out[1:] == messages[plan.cut:]
    assert messages[0].content == task  # the input history is not modified
    roles = [m.role for m in out]
    assert all(a != b for a, b in itertools.pairwise(roles))
    for i, m in enumerate(out):
        results = {b.tool_use_id for b in m.content if b.type == "tool_result"}
        if results:
            asked = {b.id for b in out[i - 1].content if b.type == "tool_use"}
            assert results <= asked
        asked = {b.id for b in m.content if b.type == "tool_use"}
        if asked and i + 1 < len(out):
            answered = {b.tool_use_id for b in out[i + 1].content if b.type == "tool_result"}
            assert asked <= answered


def test_nothing_to_compact_gives_no_plan() -> None:
    """No plan without enough history, or with nothing to drop."""
    task = Message("user", [TextBlock("t", 1)], 1)
    reply = Message("assistant", [TextBlock("a", 1)], 1)
    assert plan_compaction([task, reply], 10) is None
    assert plan_compaction([task, reply, Message("user", [TextBlock("u", 1)], 1)], 0) is None
