"""One provider call, provider-neutral: what goes on the wire, what comes
back, and how it fails.

Every provider call is built from its :class:`~sim.harness.effects.ModelRequest`
alone (model, provider, system prompt, tool definitions, tool choice, output
cap, sampling parameters, thinking budget, cache lifetime, history) by the
provider's module (:mod:`~sim.drivers.live.anthropic_api`,
:mod:`~sim.drivers.live.openai_api`), which answers with what this module
defines.

**What goes out.** :func:`check_provider` adds the provider's own rules to the
harness's validation before a run starts (seed 000: fail fast on incompatible
settings): the Anthropic Messages API (version 2026-10-21, sent by SDK 2.x)
takes no sampling parameters, so a temperature above 0 or a ``top_p`` is
refused rather than silently dropped (0, the harness default, is simply not
sent); its extended thinking needs a budget of at least 1,024 tokens strictly
below ``max_tokens``; a thinking budget has no OpenAI Chat Completions form.
:func:`conversation` is the history as it goes on the wire, before
:func:`~sim.harness.context.normalize`: empty assistant turns (a truncated
reply whose cut-off tool call the loop dropped) are left out, and a
compaction request gets the instruction to summarise.

**What comes back.** A :class:`ModelClient` performs the request and returns
an :class:`Answer`: the harness's result (a response or an error) plus what
the trace and the spans keep and the harness has no field for (the
provider's finish reason verbatim, time to first event, response id). Usage
follows :class:`~sim.harness.messages.Usage`: uncached input, cache reads and
writes apart, output without thinking. A provider that reports no usage (an
OpenAI-compatible server ignoring ``include_usage``) gets the harness's own
counts instead, so budgets never see a free call: ``prompt_tokens`` is the
prompt the harness counted and the output is estimated from the content.

**How it fails.** Each provider module turns its SDK's exception into a
:class:`Failure` (HTTP status, the provider's error type or code, message,
response headers, and whether it was a timeout or a lost connection);
:func:`model_error` then maps it, one table for both providers (and
:func:`perform` runs a call and catches what it raises):

=====================================================  ====================
failure                                                kind
=====================================================  ====================
timeout (client deadline, HTTP 408, 504)               ``timeout``
no connection, connection lost mid-stream               ``connection``
429, or error type ``rate_limit_error``                 ``rate_limit``
529, or error type ``overloaded_error``                 ``overloaded``
prompt over the context window (Anthropic "prompt is
too long", ``request_too_large``; OpenAI
``context_length_exceeded``)                            ``context_overflow``
a spend cap or exhausted quota (a 429 that waiting
does not fix)                                           ``invalid_request``
other 5xx, or error type ``api_error``                  ``server``
401, 403                                                ``auth``
other 4xx                                               ``invalid_request``
=====================================================  ====================

An error event in the middle of an Anthropic stream arrives with the
stream's HTTP status (200): its error type decides, and ``status`` is None.
``retry_after_s`` comes from ``retry-after-ms`` or ``retry-after`` (seconds or
an HTTP date); a number too large for a float (``1e400``, 400 digits) reads
as the largest float, which the live driver clamps like any Retry-After
beyond its cap. The SDKs' own retries are off (``max_retries=0``): the harness
retries, at one layer (seed 001).
"""

from __future__ import annotations

import email.utils
import importlib
import json
import math
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from sim.harness.effects import ModelError, ModelRequest, ModelResponse
from sim.harness.messages import (
    Block,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
    estimate_tokens,
)
from sim.harness.params import HarnessParams, ParameterError
from sim.harness.policy import MAX_ARGUMENT_DEPTH, argument_depth_ok

# ------------------------------------------------------------ what goes out
PROVIDERS: tuple[str, ...] = ("anthropic", "openai")
MIN_THINKING_BUDGET = 1_024
SUMMARY_INSTRUCTION = (
    "Summarise the work above for your own later use: what was tried, what was found "
    "(names, paths, values, errors) and what remains to do. Answer with the summary only.")
SPAN_OPENING = "(The earlier part of an agent's work on a task follows.)"


def check_provider(params: HarnessParams) -> HarnessParams:
    """``params`` (valid for the harness) checked against its provider's
    rules; raises :class:`ParameterError` listing every problem (dotted paths)."""
    problems = list(_provider_problems(params))
    if problems:
        raise ParameterError(problems)
    return params


def _provider_problems(p: HarnessParams) -> Iterator[tuple[str, str]]:
    thinking = p.thinking
    if p.provider == "anthropic":
        if p.temperature > 0:
            yield "temperature", ("the Anthropic Messages API takes no temperature (API "
                                  f"version 2026-10-21): leave it at 0, got {p.temperature}")
        if p.top_p is not None:
            yield "top_p", "the Anthropic Messages API takes no top_p (API version 2026-10-21)"
    if not thinking.enabled:
        return
    if p.provider == "openai":
        yield "thinking.enabled", ("a thinking budget has no OpenAI Chat Completions form "
                                   "(reasoning models reason without one): disable thinking")
        return
    if thinking.budget_tokens < MIN_THINKING_BUDGET:
        yield "thinking.budget_tokens", (f"Anthropic needs at least {MIN_THINKING_BUDGET} "
                                         f"thinking tokens, got {thinking.budget_tokens}")
    if thinking.budget_tokens >= p.max_output_tokens:
        yield "thinking.budget_tokens", (f"must be below max_output_tokens "
                                         f"({p.max_output_tokens}) for Anthropic, got "
                                         f"{thinking.budget_tokens}")


def conversation(request: ModelRequest) -> list[Message | dict[str, Any]]:
    """The request's history ready for ``normalize``: without empty assistant
    turns; for a compaction (``purpose`` ``"compaction"``, the oldest span of
    the history) opened by a user note when the span starts with the
    assistant, and closed by :data:`SUMMARY_INSTRUCTION`."""
    turns: list[Message | dict[str, Any]] = [
        m for m in request.messages if m.content or m.role != "assistant"]
    if request.purpose != "compaction":
        return turns
    first = turns[0] if turns else None
    if isinstance(first, Message) and first.role == "assistant":
        turns.insert(0, {"role": "user", "content": SPAN_OPENING})
    turns.append({"role": "user", "content": SUMMARY_INSTRUCTION})
    return turns


# ---------------------------------------------------------- what comes back
@dataclass(slots=True)
class Answer:
    """The outcome of one call. ``finish_reason`` is the provider's own stop or
    finish reason (None for an error); ``first_event_s`` the seconds from the
    request to the first streamed event (None when not streamed or failed);
    ``response_id`` the provider's id of the response (None when unknown)."""

    result: ModelResponse | ModelError
    finish_reason: str | None = None
    first_event_s: float | None = None
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


# ------------------------------------------------------------- how it fails
_BY_TYPE = {"rate_limit_error": "rate_limit", "overloaded_error": "overloaded",
            "api_error": "server", "authentication_error": "auth",
            "permission_error": "auth", "timeout_error": "timeout"}
_CONTEXT_CODES = ("context_length_exceeded", "request_too_large", "string_above_max_length")
_CONTEXT_PHRASES = ("prompt is too long", "maximum context length", "context window",
                    "too many tokens", "context_length_exceeded")
_QUOTA_CODES = ("insufficient_quota", "enforced_spend_limit_reached", "billing_hard_limit")


@dataclass(slots=True)
class Failure:
    """A failed call, in provider-neutral terms. ``status`` is the HTTP status
    (None without a response); ``error_type`` the provider's error type
    (``error.type``) and ``code`` its code (OpenAI's ``error.code``,
    Anthropic's ``error.details.error_code``)."""

    message: str
    status: int | None = None
    error_type: str | None = None
    code: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: bool = False
    connection: bool = False


def sdk_failure(sdk: Any, error: Exception, message: str, code: str) -> Failure | None:
    """``error``, raised by a provider's SDK (``sdk``: the module; both SDKs
    name their errors alike), as a :class:`Failure`: a timeout, a lost
    connection, or an HTTP status with the provider's message (the error's
    attribute named ``message``, else its text), error type and code (the
    attribute named ``code``); None for any other error."""
    if isinstance(error, sdk.APITimeoutError):
        return Failure(str(error), timeout=True)
    if isinstance(error, sdk.APIConnectionError):
        return Failure(str(error), connection=True)
    if isinstance(error, sdk.APIStatusError):
        return Failure(getattr(error, message, None) or str(error), error.status_code,
                       getattr(error, "type", None), getattr(error, code, None),
                       dict(error.response.headers))
    return None


def transport_failure(error: BaseException) -> Failure | None:
    """A :class:`Failure` for an error of the SDKs' HTTP library (``httpx2``,
    or ``httpx`` for older SDKs) or of the socket, which a stream can raise
    unwrapped while it is read; None for any other error."""
    timeouts, transports = _transport_errors()
    if isinstance(error, (*timeouts, TimeoutError)):
        return Failure(f"timed out: {error}", timeout=True)
    if isinstance(error, (*transports, OSError)):
        return Failure(f"connection lost: {type(error).__name__}: {error}", connection=True)
    return None


def _transport_errors() -> tuple[tuple[type, ...], tuple[type, ...]]:
    timeouts: list[type] = []
    transports: list[type] = []
    for name in ("httpx2", "httpx"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        timeouts.append(module.TimeoutException)
        transports.append(module.TransportError)
    return tuple(timeouts), tuple(transports)


def model_error(failure: Failure, latency_s: float) -> ModelError:
    """The harness's view of ``failure`` (see the module table)."""
    status = failure.status if failure.status and failure.status >= 400 else None
    return ModelError(_kind(failure, status), status, retry_after_s(failure.headers),
                      failure.message, latency_s)


def _kind(f: Failure, status: int | None) -> str:
    if f.timeout or status in (408, 504):
        return "timeout"
    if f.connection:
        return "connection"
    text = f.message.lower()
    if f.code in _QUOTA_CODES:
        return "invalid_request"
    if (f.code in _CONTEXT_CODES or f.error_type in _CONTEXT_CODES or status == 413
            or (status in (400, None) and any(p in text for p in _CONTEXT_PHRASES))):
        return "context_overflow"
    if status == 429:
        return "rate_limit"
    if status == 529:
        return "overloaded"
    by_type = _BY_TYPE.get(f.error_type or "")
    if by_type is not None:
        return by_type
    if status is not None and status >= 500:
        return "server"
    if status in (401, 403):
        return "auth"
    if status is None:
        return "server"  # an error event of unknown type mid-stream
    return "invalid_request"


def retry_after_s(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asks to wait: ``retry-after-ms`` (milliseconds), else
    ``retry-after`` as seconds or as an HTTP date (finite: a number too large
    for a float is the largest float); None when absent, unreadable,
    negative or NaN."""
    lower = {k.lower(): v for k, v in headers.items()}
    raw = lower.get("retry-after-ms")
    if raw is not None:
        seconds = _number(raw)
        if seconds is not None:
            return seconds / 1000.0
    raw = lower.get("retry-after")
    if raw is None:
        return None
    seconds = _number(raw)
    if seconds is not None:
        return seconds
    try:
        moment = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if moment is None or moment.tzinfo is None:
        return None
    return max(0.0, moment.timestamp() - (time.time() if now is None else now))


def _number(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    if math.isnan(value) or value < 0:
        return None
    return min(value, sys.float_info.max)


class Assembler(Protocol):
    """Builds one response from what the provider sends: its stream's items
    one by one (:meth:`add`), or a whole reply (:meth:`add_whole`)."""

    def add(self, item: Any) -> None:
        """Take one streamed event or chunk."""

    def add_whole(self, reply: Any) -> None:
        """Take a whole (not streamed) reply."""

    def answer(self, request: ModelRequest, latency_s: float, first_event_s: float | None
               ) -> Answer:
        """The assembled :class:`Answer`."""
        ...


async def perform(request: ModelRequest, send: Callable[[], Awaitable[Any]],
                  assembler: Assembler, *, stream: bool, sdk_error: type[Exception],
                  failure: Callable[[Exception], Failure], unreadable: str) -> Answer:
    """One provider call: ``send()`` (the SDK's create call) gives a stream
    whose items go to ``assembler`` (``stream``) or a whole reply; the answer
    is the assembler's, timed from before ``send`` (``time.monotonic()``) with
    the seconds to the first streamed item, or the :class:`ModelError` the
    call ended with: the SDK's own error (read by ``failure``), data that is
    not JSON (``"<unreadable>: <error>"``, malformed) or a transport failure.
    Any other exception is a bug and is raised."""
    start = time.monotonic()
    first: float | None = None
    try:
        reply = await send()
        if not stream:
            assembler.add_whole(reply)
        else:
            async with reply:
                async for item in reply:
                    if first is None:
                        first = time.monotonic() - start
                    assembler.add(item)
    except sdk_error as error:
        return Answer(model_error(failure(error), time.monotonic() - start))
    except ValueError as error:
        return Answer(ModelError("malformed", None, None, f"{unreadable}: {error}",
                                 time.monotonic() - start))
    except Exception as error:
        lost = transport_failure(error)
        if lost is None:
            raise
        return Answer(model_error(lost, time.monotonic() - start))
    return assembler.answer(request, time.monotonic() - start, first)
