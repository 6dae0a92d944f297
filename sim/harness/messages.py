"""Conversation content: content blocks, messages and token usage.

The history is kept in one canonical shape (Anthropic's): messages alternate
``user`` / ``assistant``; tool results are ``user`` content blocks keyed by
``tool_use_id``. :func:`sim.harness.context.normalize` converts it to a
provider's wire shape. Every block carries its size in tokens, measured once
when the block is created, so the context builder never re-counts history.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

Role = Literal["user", "assistant"]


@dataclass(slots=True)
class TextBlock:
    """Plain text. ``tokens`` is its size in tokens. ``origin`` marks text the
    harness injected (``"nudge"``, ``"tool_disabled"``, ``"verifier"``,
    ``"continuation"``, ``"summary"``, ``"cut_off"``) and is empty for text
    written by the model or the user."""

    text: str
    tokens: int = 0
    origin: str = ""
    type: Literal["text"] = "text"

    def sized(self, tokens: int) -> TextBlock:
        """A copy of this block that is ``tokens`` tokens long."""
        return TextBlock(self.text, tokens, self.origin)


@dataclass(slots=True)
class ThinkingBlock:
    """Extended-thinking output. Kept in the history unchanged (seed 000: stripping
    it would change the cached prefix); ``tokens`` is its size in tokens."""

    thinking: str
    tokens: int = 0
    signature: str = ""
    type: Literal["thinking"] = "thinking"

    def sized(self, tokens: int) -> ThinkingBlock:
        """A copy of this block that is ``tokens`` tokens long."""
        return ThinkingBlock(self.thinking, tokens, self.signature)


@dataclass(slots=True)
class ToolUseBlock:
    """A tool call proposed by the model: ``id`` (unique per run), ``name`` and
    ``input`` (the arguments, JSON-compatible)."""

    id: str
    name: str
    input: dict[str, Any]
    tokens: int = 0
    type: Literal["tool_use"] = "tool_use"

    def sized(self, tokens: int) -> ToolUseBlock:
        """A copy of this block that is ``tokens`` tokens long (the same arguments)."""
        return ToolUseBlock(self.id, self.name, self.input, tokens)


@dataclass(slots=True)
class ToolResultBlock:
    """The observation for one tool call, keyed by ``tool_use_id``. ``is_error``
    marks an error the model should read and act on."""

    tool_use_id: str
    content: str
    is_error: bool = False
    tokens: int = 0
    type: Literal["tool_result"] = "tool_result"

    def sized(self, tokens: int) -> ToolResultBlock:
        """A copy of this block that is ``tokens`` tokens long."""
        return ToolResultBlock(self.tool_use_id, self.content, self.is_error, tokens)


Block = TextBlock | ThinkingBlock | ToolUseBlock | ToolResultBlock


@dataclass(slots=True)
class Message:
    """One message of the history. ``tokens`` is the sum of its blocks' tokens."""

    role: Role
    content: list[Block]
    tokens: int = 0


class PromptCounts(Protocol):
    """Anything that counts prompt tokens the way a provider bills them: a
    call's :class:`Usage`, a run's totals (tokens)."""

    @property
    def input_tokens(self) -> int: ...
    @property
    def cache_read_tokens(self) -> int: ...
    @property
    def cache_write_tokens(self) -> int: ...


def prompt_tokens_of(counts: PromptCounts) -> int:
    """All prompt tokens of ``counts``, cached or not (tokens): the uncached
    input plus the cache reads plus the cache writes. The one definition of a
    prompt's size; :class:`Usage`, the harness state, the world's call log
    and task records use it."""
    return counts.input_tokens + counts.cache_read_tokens + counts.cache_write_tokens


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
        return prompt_tokens_of(self)


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


CUT_OFF = "[output cut off at the output token limit]"


def billed_message(content: list[Block], output_tokens: int, thinking_tokens: int) -> Message:
    """The assistant message of a reply billed ``output_tokens`` plus
    ``thinking_tokens``: the message is that many tokens long, and so are its
    blocks together (``Message.tokens`` is always the sum of its blocks').

    The provider bills the reply as a whole; the blocks' own ``tokens`` are
    the driver's estimates. When they do not add up to the bill, the bill is
    shared out: thinking tokens over the thinking blocks, output tokens over
    the other blocks, each in proportion to the blocks' estimates (equally
    when those are all 0), the rounding remainder to the last block; a kind
    with no block of its own goes to the other kind. Blocks are copied when
    their size changes, never altered. An empty ``content`` billed for tokens
    (a reply whose only block, a cut-off tool call, was dropped) becomes one
    text block of origin ``"cut_off"`` that carries them.
    """
    total = output_tokens + thinking_tokens
    counted = 0
    for block in content:
        counted += block.tokens
    if counted == total:
        return Message("assistant", content, total)
    if not content:
        return Message("assistant", [TextBlock(CUT_OFF, total, "cut_off")], total)
    thinks = [i for i, block in enumerate(content) if block.type == "thinking"]
    others = [i for i, block in enumerate(content) if block.type != "thinking"]
    if not thinks or not others:
        shares = [(thinks or others, total)]
    else:
        shares = [(thinks, thinking_tokens), (others, output_tokens)]
    sized = list(content)
    for indices, tokens in shares:
        weights = [content[i].tokens for i in indices]
        weight = sum(weights)
        if weight == 0:
            weights, weight = [1] * len(indices), len(indices)
        given = 0
        for k, i in enumerate(indices):
            size = tokens - given if k == len(indices) - 1 else tokens * weights[k] // weight
            given += size
            if size != content[i].tokens:
                sized[i] = content[i].sized(size)
    return Message("assistant", sized, total)
