"""The world's commonest answers, built field by field.

CPython 3.11 calls a dataclass's ``__init__`` through a slow path (the type's
call, then ``__init__`` in a frame of its own); the answers a world gives at
every step are built here instead with ``object.__new__`` and one store per
field, every field set as ``__init__`` sets it (``tests/test_world_replies.py``
checks them against the constructors).
"""

from __future__ import annotations

from sim.harness.effects import ModelResponse, ToolResult
from sim.harness.messages import Block, Usage

_new = object.__new__


def model_reply(content: list[Block], prompt_tokens: int, output: int, thinking: int,
                stop: str, latency: float, model: str) -> ModelResponse:
    """``ModelResponse(content, Usage(prompt_tokens, output, 0, 0, thinking),
    stop, latency, model)``: a reply whose prompt is all uncached input
    (tokens; latency in seconds)."""
    usage: Usage = _new(Usage)
    usage.input_tokens, usage.output_tokens, usage.thinking_tokens = prompt_tokens, output, thinking
    usage.cache_read_tokens = usage.cache_write_tokens = 0
    reply: ModelResponse = _new(ModelResponse)
    reply.content, reply.usage, reply.stop_reason = content, usage, stop
    reply.latency_s, reply.model = latency, model
    return reply


def tool_result(output: str, tokens: int, duration: float) -> ToolResult:
    """``ToolResult(output, tokens, duration)`` (no metric; seconds)."""
    result: ToolResult = _new(ToolResult)
    result.output, result.tokens, result.duration_s = output, tokens, duration
    result.metric = None
    return result
