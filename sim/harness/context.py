"""Context builder: compaction of the history and provider normalisation.

The stable prefix (system prompt plus tool definitions) is counted by
:attr:`HarnessParams.prefix_tokens`; the history is ``HarnessState.messages``
whose token sizes are kept per message, so the prompt size is known before
every call without re-counting.

Compaction replaces the oldest part of the history by a summary. The first
message (the task statement) is always kept, and a cut never separates a
tool_use from its tool_result: the compacted span always ends with a user
message, so alternation survives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sim.harness.messages import Message, TextBlock, make_message


@dataclass(slots=True)
class CompactionPlan:
    """Messages ``[1, cut)`` of the history are to be summarised; their size in tokens."""

    cut: int
    tokens: int


def plan_compaction(messages: list[Message], drop_tokens: int) -> CompactionPlan | None:
    """The shortest span of oldest messages (after the task statement) holding
    at least ``drop_tokens`` tokens and ending with a user message; None when
    there is nothing that can be compacted."""
    if drop_tokens <= 0 or len(messages) < 3:
        return None
    total = 0
    best: CompactionPlan | None = None
    for i in range(1, len(messages) - 1):  # never compact the newest message
        total += messages[i].tokens
        if messages[i].role == "user":
            best = CompactionPlan(i + 1, total)
            if total >= drop_tokens:
                return best
    return best


def apply_compaction(messages: list[Message], plan: CompactionPlan, summary: TextBlock
                     ) -> list[Message]:
    """A new history: the task statement merged with ``summary``, then the
    messages after the compacted span."""
    first = messages[0]
    head = make_message("user", [*first.content, summary])
    return [head, *messages[plan.cut:]]


# ------------------------------------------------------------ normalisation
USER_TEXT_SEPARATOR = "\n\n"
"""Between the text blocks of one user turn when OpenAI's shape makes them one string."""


def normalize(messages: list[Any], provider: str) -> list[dict[str, Any]]:
    """Messages in the wire shape of ``provider`` (``"anthropic"`` or ``"openai"``).

    Accepts :class:`Message` objects or dicts in either provider's shape, so it
    also converts between providers. Pure and idempotent:
    ``normalize(normalize(m, p), p) == normalize(m, p)``.

    Anthropic: roles alternate user/assistant (consecutive messages of one role
    are merged), content is a list of blocks, tool results are user-role
    ``tool_result`` blocks placed first in their message. OpenAI: tool calls
    are ``tool_calls`` on the assistant message, each result is a ``tool``-role
    message right after it (its content a string, also when the Anthropic
    result was a list of text blocks), user text is a plain string (a user
    turn's text blocks as paragraphs, joined by :data:`USER_TEXT_SEPARATOR`). Thinking blocks and
    the ``is_error`` flag have no OpenAI form and are dropped there.
    """
    turns = _merge(_canonical(messages))
    if provider == "anthropic":
        return [_to_anthropic(role, blocks) for role, blocks in turns]
    if provider == "openai":
        out: list[dict[str, Any]] = []
        for role, blocks in turns:
            out.extend(_to_openai(role, blocks))
        return out
    raise ValueError(f"unknown provider {provider!r}: expected 'anthropic' or 'openai'")


def _canonical(messages: list[Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for m in messages:
        if isinstance(m, Message):
            turns.append((m.role, [_block_dict(b) for b in m.content]))
            continue
        role = m["role"]
        if role == "tool":
            turns.append(("user", [{"type": "tool_result", "tool_use_id": m["tool_call_id"],
                                    "content": _text_of(m.get("content")),
                                    "is_error": bool(m.get("is_error", False))}]))
            continue
        if role not in ("user", "assistant"):
            raise ValueError(f"unsupported message role {role!r}")
        blocks = _content_blocks(m.get("content"))
        for call in m.get("tool_calls") or ():
            fn = call["function"]
            args = fn["arguments"]
            blocks.append({"type": "tool_use", "id": call["id"], "name": fn["name"],
                           "input": json.loads(args) if isinstance(args, str) else dict(args)})
        turns.append((role, blocks))
    return turns


def _block_dict(block: Any) -> dict[str, Any]:
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "thinking":
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return {"type": "tool_result", "tool_use_id": block.tool_use_id, "content": block.content,
            "is_error": block.is_error}


def _content_blocks(content: Any) -> list[dict[str, Any]]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [dict(b) for b in content]


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content)


def _merge(turns: list[tuple[str, list[dict[str, Any]]]]) -> list[tuple[str, list[dict[str, Any]]]]:
    merged: list[tuple[str, list[dict[str, Any]]]] = []
    for role, blocks in turns:
        if merged and merged[-1][0] == role:
            merged[-1][1].extend(blocks)
        else:
            merged.append((role, list(blocks)))
    return merged


def _to_anthropic(role: str, blocks: list[dict[str, Any]]) -> dict[str, Any]:
    results = [b for b in blocks if b["type"] == "tool_result"]
    others = [b for b in blocks if b["type"] != "tool_result"]
    return {"role": role, "content": results + others}


def _to_openai(role: str, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    texts = [b["text"] for b in blocks if b["type"] == "text"]
    if role == "assistant":
        text = "".join(texts)  # fragments of one reply
        msg: dict[str, Any] = {"role": "assistant", "content": text or None}
        calls = [{"id": b["id"], "type": "function",
                  "function": {"name": b["name"],
                               "arguments": json.dumps(b["input"], sort_keys=True)}}
                 for b in blocks if b["type"] == "tool_use"]
        if calls:
            msg["tool_calls"] = calls
        return [msg]
    # a user turn's texts are separate notes (a nudge, a verifier's feedback): paragraphs
    text = USER_TEXT_SEPARATOR.join(t for t in texts if t)
    out: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": b["tool_use_id"], "content": _text_of(b["content"])}
        for b in blocks if b["type"] == "tool_result"]
    if text or not out:
        out.append({"role": "user", "content": text})
    return out
