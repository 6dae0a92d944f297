"""Conversation content: content blocks, messages and token usage.

The history is kept in one canonical shape (Anthropic's): messages alternate
``user`` / ``assistant``; tool results are ``user`` content blocks keyed by
``tool_use_id``. :func:`sim.harness.context.normalize` converts it to a
provider's wire shape. Every block carries its size in tokens, measured once
when the block is created, so the context builder never re-counts history.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Role = Literal["user", "assistant"]


@dataclass(slots=True)
class TextBlock:
    """Plain text. ``tokens`` is its size in tokens. ``origin`` marks text the
    harness injected (``"nudge"``, ``"tool_disabled"``, ``"verifier"``,
    ``"continuation"``, ``"summary"``, ``"denied"``) and is empty for text
    written by the model or the user."""

    text: str
    tokens: int = 0
    origin: str = ""
    type: Literal["text"] = "text"


@dataclass(slots=True)
class ThinkingBlock:
    """Extended-thinking output. Kept in the history unchanged (seed 000: stripping
    it would change the cached prefix); ``tokens`` is its size in tokens."""

    thinking: str
    tokens: int = 0
    signature: str = ""
    type: Literal["thinking"] = "thinking"


@dataclass(slots=True)
class ToolUseBlock:
    """A tool call proposed by the model: ``id`` (unique per run), ``name`` and
    ``input`` (the arguments, JSON-compatible)."""

    id: str
    name: str
    input: dict[str, Any]
    tokens: int = 0
    type: Literal["tool_use"] = "tool_use"


@dataclass(slots=True)
class ToolResultBlock:
    """The observation for one tool call, keyed by ``tool_use_id``. ``is_error``
    marks an error the model should read and act on."""

    tool_use_id: str
    content: str
    is_error: bool = False
    tokens: int = 0
    type: Literal["tool_result"] = "tool_result"


Block = TextBlock | ThinkingBlock | ToolUseBlock | ToolResultBlock


@dataclass(slots=True)
class Message:
    """One message of the history. ``tokens`` is the sum of its blocks' tokens."""

    role: Role
    content: list[Block]
    tokens: int = 0


@dataclass(slots=True)
class Usage:
    """Token usage of one model call, as a provider reports it.

    ``input_tokens`` are the uncached prompt tokens, ``cache_read_tokens`` the
    prompt tokens read from the prompt cache and ``cache_write_tokens`` those
    written to it (Anthropic's convention: the prompt is the sum of the three).
    ``output_tokens`` excludes ``thinking_tokens``, which are counted apart so
    they can be priced apart.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    thinking_tokens: int = 0

    @property
    def prompt_tokens(self) -> int:
        """All prompt tokens of the call, cached or not."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens


def estimate_tokens(text: str) -> int:
    """Approximate token count of ``text``: one token per four characters, at
    least one for non-empty text. Used only where no tokenizer count is given."""
    return (len(text) + 3) // 4


def text_block(text: str, origin: str = "", tokens: int | None = None) -> TextBlock:
    """A text block whose size is ``tokens`` or, if not given, estimated."""
    return TextBlock(text, estimate_tokens(text) if tokens is None else tokens, origin)


def make_message(role: Role, content: list[Block]) -> Message:
    """A message whose token size is the sum of its blocks' sizes."""
    total = 0
    for block in content:
        total += block.tokens
    return Message(role, content, total)
