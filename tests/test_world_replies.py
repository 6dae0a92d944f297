"""The world's answers built field by field equal the constructors' (every
field set: an unset slot would raise on reading it)."""

from __future__ import annotations

import dataclasses

from sim.harness.effects import ModelResponse, ToolResult
from sim.harness.messages import Block, TextBlock, ToolUseBlock, Usage
from sim.world.replies import model_reply, tool_result


def _same(a: object, b: object) -> None:
    assert type(a) is type(b)
    for f in dataclasses.fields(a):  # type: ignore[arg-type]
        assert getattr(a, f.name) == getattr(b, f.name), f.name
    assert a == b


def test_model_reply_is_the_constructed_reply() -> None:
    replies: list[tuple[list[Block], int, str]] = [
        ([TextBlock("done", 7)], 0, "end_turn"),
        ([ToolUseBlock("t1", "read", {"a": 1}, 9)], 5, "tool_use")]
    for content, thinking, stop in replies:
        built = model_reply(content, 1234, 600, thinking, stop, 2.5, "m")
        _same(built, ModelResponse(content, Usage(1234, 600, 0, 0, thinking), stop, 2.5, "m"))
        _same(built.usage, Usage(1234, 600, 0, 0, thinking))
        assert built.content is content


def test_tool_result_is_the_constructed_result() -> None:
    _same(tool_result("read /x: ok", 900, 0.25), ToolResult("read /x: ok", 900, 0.25))
