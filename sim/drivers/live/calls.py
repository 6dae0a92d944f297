"""One provider call as the driver sees it: the client interface and its answer.

A :class:`ModelClient` performs a :class:`~sim.harness.effects.ModelRequest`
(which carries everything the call needs) and returns an :class:`Answer`: the
harness's result (a response or an error) plus what the trace keeps and the
harness has no field for (the provider's finish reason verbatim, time to
first event).

Usage follows :class:`~sim.harness.messages.Usage`: uncached input, cache
reads and writes apart, output without thinking. A provider that reports no
usage (an OpenAI-compatible server ignoring ``include_usage``) gets the
harness's own counts instead, so budgets never see a free call:
``prompt_tokens`` is the prompt the harness counted and the output is estimated
from the content (``usage_estimated`` is then True).
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sim.drivers.live.provider_failures import Failure, model_error, transport_failure
from sim.harness.effects import ModelError, ModelRequest, ModelResponse
from sim.harness.messages import (
    Block,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
    estimate_tokens,
)
from sim.harness.policy import MAX_ARGUMENT_DEPTH, argument_depth_ok


@dataclass(slots=True)
class Answer:
    """The outcome of one call. ``finish_reason`` is the provider's own stop or
    finish reason (None for an error); ``first_event_s`` the seconds from the
    request to the first streamed event (None when not streamed or failed);
    ``response_id`` the provider's id of the response (None when unknown)."""

    result: ModelResponse | ModelError
    finish_reason: str | None = None
    first_event_s: float | None = None
    usage_estimated: bool = False
    response_id: str | None = None


class ModelClient(Protocol):
    """A provider's SDK client, wrapped: ``provider`` is ``anthropic`` or ``openai``."""

    provider: str

    async def call(self, request: ModelRequest) -> Answer:
        """Perform one model call; never raises for a provider failure (it is
        an :class:`~sim.harness.effects.ModelError` in the answer)."""
        ...

    async def aclose(self) -> None:
        """Close the underlying HTTP client."""
        ...


def text(value: str) -> TextBlock:
    """A text block of the response, sized with the harness's estimate."""
    return TextBlock(value, estimate_tokens(value))


def thinking(value: str, signature: str) -> ThinkingBlock:
    """A thinking block (kept with its signature, so it can be sent back)."""
    return ThinkingBlock(value, estimate_tokens(value), signature)


def tool_use(call_id: str, name: str, arguments: str | dict[str, Any]) -> ToolUseBlock | None:
    """A tool_use block from its id, name and arguments (JSON text as streamed,
    or already parsed); None when the arguments are not a JSON object."""
    if isinstance(arguments, str):
        if _opens_too_deep(arguments):  # refused before parsing: no recursion at all
            return None
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):
            return None
    if not isinstance(arguments, dict) or not argument_depth_ok(arguments):
        return None
    return ToolUseBlock(call_id, name, arguments, estimate_tokens(json.dumps(arguments)))


def _opens_too_deep(text: str) -> bool:
    """True when JSON ``text`` opens more than MAX_ARGUMENT_DEPTH objects or
    lists before closing them (brackets inside strings aside)."""
    if text.count("{") + text.count("[") <= MAX_ARGUMENT_DEPTH:
        return False
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
            if depth > MAX_ARGUMENT_DEPTH:
                return True
        elif char in "}]":
            depth -= 1
    return False


def estimated_usage(request: ModelRequest, content: list[Block]) -> Usage:
    """The harness's own counts for a call whose provider reported no usage."""
    out = 0
    thought = 0
    for block in content:
        if block.type == "thinking":
            thought += block.tokens
        else:
            out += block.tokens
    return Usage(input_tokens=request.prompt_tokens, output_tokens=out, thinking_tokens=thought)


def non_negative(value: Any) -> Any:
    """A reported token count: an int as it is, a float holding a whole
    number as that int; anything else (negative, NaN, infinite, fractional,
    a string) passed on unchanged, so the harness refuses it by name
    (failed:invalid_response) instead of a silent 0; missing (None) is 0."""
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer() and 0 <= value < 2.0**63:
        return int(value)
    return value


async def call_failure(fetch: Callable[[], Awaitable[None]], start: float,
                       sdk_error: type[Exception], failure: Callable[[Exception], Failure],
                       unreadable: str) -> ModelError | None:
    """Run ``fetch()`` (one provider call, filling an assembler) and return
    None, or the :class:`ModelError` it ended with, its latency counted from
    ``start`` (``time.monotonic()``): the SDK's own error (read by
    ``failure``), data that is not JSON (``"<unreadable>: <error>"``,
    malformed) or a transport failure. Any other exception is a bug and is
    raised."""
    try:
        await fetch()
    except sdk_error as error:
        return model_error(failure(error), time.monotonic() - start)
    except ValueError as error:
        return ModelError("malformed", None, None, f"{unreadable}: {error}",
                          time.monotonic() - start)
    except Exception as error:
        lost = transport_failure(error)
        if lost is None:
            raise
        return model_error(lost, time.monotonic() - start)
    return None
