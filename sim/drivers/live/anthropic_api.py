"""Anthropic Messages API through the official ``anthropic`` SDK, streamed.

:func:`messages_payload` builds the request from the effect alone:
``normalize(messages, "anthropic")`` (alternating roles, tool_result blocks
first in their user turn, thinking blocks kept with their signatures), the
system prompt as a text block, the tool definitions with their input schemas
and the tool choice; no sampling parameters (API version 2026-10-21, which SDK
2.x sends, rejects ``temperature``, ``top_p`` and ``top_k``, and the SDK has no
such arguments: :func:`~sim.drivers.live.calls.check_provider` refuses a run
that sets them for Anthropic). With a cache lifetime
on the request, ``cache_control`` breakpoints (``ephemeral``, ``ttl`` ``5m`` or
``1h``) go on the last tool definition, the system prompt and the last block of
the prompt, so the stable prefix and the history so far are cached. With a
thinking budget, ``thinking`` is enabled with ``budget_tokens``.

:class:`AnthropicModel` streams the response (``stream=True``) and assembles
it from the events: ``message_start`` (model, prompt usage),
``content_block_start`` / ``content_block_delta`` (``text_delta``,
``input_json_delta``, ``thinking_delta``, ``signature_delta``) /
``content_block_stop``, ``message_delta`` (stop reason, final usage) and
``message_stop``; ``ping`` is ignored and an ``error`` event fails the call.
Anthropic counts thinking inside ``output_tokens``; the thinking share is
estimated from the thinking text (capped at the output) and moved to
``thinking_tokens``, so the total stays what the provider billed. A
``redacted_thinking`` block has no harness form and is left out.
"""

from __future__ import annotations

from typing import Any

from sim.drivers.live.calls import (
    Answer,
    Failure,
    conversation,
    estimated_usage,
    non_negative,
    perform,
    sdk_failure,
    text,
    thinking,
    tool_use,
)
from sim.harness.context import normalize
from sim.harness.effects import ModelError, ModelRequest, ModelResponse
from sim.harness.messages import Block, Usage

STOP_REASONS = {"model_context_window_exceeded": "max_tokens"}
"""Anthropic stop reasons the harness knows under another name."""


def cache_control(ttl_s: float) -> dict[str, str]:
    """A cache breakpoint for a lifetime of ``ttl_s`` seconds (5 minutes or 1 hour)."""
    return {"type": "ephemeral", "ttl": "1h" if ttl_s >= 3600 else "5m"}


def tool_choice(choice: str) -> dict[str, Any]:
    """The harness's tool choice in Anthropic's form."""
    if choice.startswith("tool:"):
        return {"type": "tool", "name": choice[5:]}
    return {"type": choice}


def messages_payload(request: ModelRequest) -> dict[str, Any]:
    """The keyword arguments of ``client.messages.create`` for ``request``
    (without ``stream``). Pure: the same request gives the same payload."""
    messages = normalize(conversation(request), "anthropic")
    payload: dict[str, Any] = {"model": request.model, "max_tokens": request.max_output_tokens,
                               "messages": messages}
    cache = cache_control(request.cache_ttl_s) if request.cache_ttl_s else None
    if request.system_prompt:
        system: dict[str, Any] = {"type": "text", "text": request.system_prompt}
        if cache:
            system["cache_control"] = cache
        payload["system"] = [system]
    if request.tools:  # sent on compactions too: the span holds tool blocks
        tools = [{"name": t.name, "description": t.description,
                  "input_schema": dict(t.input_schema)} for t in request.tools]
        if cache:
            tools[-1]["cache_control"] = cache
        payload["tools"] = tools
        payload["tool_choice"] = tool_choice(request.tool_choice)
    if cache and messages and messages[-1]["content"]:
        last = messages[-1]["content"][-1]
        if last.get("type") != "thinking":
            last["cache_control"] = cache
    if request.thinking_budget:
        payload["thinking"] = {"type": "enabled", "budget_tokens": request.thinking_budget}
    return payload


class MessageAssembler:
    """Builds a response from the stream's events, in order."""

    def __init__(self) -> None:
        self.model = ""
        self.blocks: dict[int, dict[str, Any]] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.malformed: str | None = None
        self.response_id: str | None = None

    def add_whole(self, reply: Any) -> None:
        """Anthropic calls are always streamed, so a whole reply is a driver
        error, raised as such."""
        raise RuntimeError("an Anthropic call is always streamed: no whole reply to add")

    def add(self, event: Any) -> None:
        """Take one SDK stream event."""
        kind = getattr(event, "type", None)
        if kind == "message_start":
            message = event.message
            self.model = getattr(message, "model", "") or ""
            self.response_id = getattr(message, "id", None) or None
            self._take_usage(getattr(message, "usage", None))
        elif kind == "content_block_start":
            block = event.content_block
            self.blocks[event.index] = {"type": block.type, "text": getattr(block, "text", ""),
                                        "thinking": getattr(block, "thinking", ""),
                                        "signature": getattr(block, "signature", ""),
                                        "id": getattr(block, "id", ""),
                                        "name": getattr(block, "name", ""), "json": ""}
        elif kind == "content_block_delta":
            self._delta(event.index, event.delta)
        elif kind == "message_delta":
            self.stop_reason = getattr(event.delta, "stop_reason", None) or self.stop_reason
            self._take_usage(getattr(event, "usage", None))

    def _delta(self, index: int, delta: Any) -> None:
        block = self.blocks.get(index)
        if block is None:
            self.malformed = f"delta for unknown content block {index}"
            return
        kind = getattr(delta, "type", "")
        if kind == "text_delta":
            block["text"] += delta.text
        elif kind == "input_json_delta":
            block["json"] += delta.partial_json
        elif kind == "thinking_delta":
            block["thinking"] += delta.thinking
        elif kind == "signature_delta":
            block["signature"] += delta.signature

    def _take_usage(self, usage: Any) -> None:
        if usage is None:
            return
        for name in ("input_tokens", "output_tokens", "cache_read_input_tokens",
                     "cache_creation_input_tokens"):
            value = getattr(usage, name, None)
            if value is not None:  # message_delta repeats only what changed
                self.usage[name] = non_negative(value)

    def content(self) -> list[Block] | None:
        """The response's blocks in index order, or None if a complete tool
        call's arguments are not a JSON object."""
        out: list[Block] = []
        truncated = self.stop_reason in ("max_tokens", "model_context_window_exceeded")
        for index in sorted(self.blocks):
            b = self.blocks[index]
            if b["type"] == "text":
                if b["text"]:
                    out.append(text(b["text"]))
            elif b["type"] == "thinking":
                out.append(thinking(b["thinking"], b["signature"]))
            elif b["type"] == "tool_use":
                block = tool_use(b["id"], b["name"], b["json"])
                if block is None:
                    if truncated:  # cut off mid-arguments; the loop drops it anyway
                        continue
                    self.malformed = f"tool call {b['name']!r} has arguments that are not JSON"
                    return None
                out.append(block)
        return out

    def answer(self, request: ModelRequest, latency_s: float, first_event_s: float | None
               ) -> Answer:
        """The assembled :class:`Answer`."""
        content = self.content()
        if content is None or self.malformed:
            return Answer(ModelError("malformed", None, None, self.malformed or "", latency_s))
        if self.stop_reason is None:
            return Answer(ModelError("empty", None, None, "the stream ended without a stop "
                                                          "reason", latency_s))
        u = self.usage
        if "input_tokens" not in u and "output_tokens" not in u:
            usage = estimated_usage(request, content)
        else:
            total = u.get("output_tokens", 0)
            thought = sum(b.tokens for b in content if b.type == "thinking")
            thought = min(total, thought) if type(total) is int else 0  # a bad total: as sent
            usage = Usage(input_tokens=u.get("input_tokens", 0),
                          output_tokens=total - thought if thought else total,
                          cache_read_tokens=u.get("cache_read_input_tokens", 0),
                          cache_write_tokens=u.get("cache_creation_input_tokens", 0),
                          thinking_tokens=thought)
        stop = STOP_REASONS.get(self.stop_reason, self.stop_reason)
        return Answer(ModelResponse(content, usage, stop, latency_s, self.model),
                      self.stop_reason, first_event_s, self.response_id)


class AnthropicModel:
    """Calls the Messages API with ``anthropic.AsyncAnthropic`` (no SDK
    retries; ``timeout_s`` per request). ``api_key`` None reads the SDK's
    environment variable; ``base_url`` None is the SDK's default."""

    provider = "anthropic"

    def __init__(self, *, api_key: str | None = None, base_url: str | None = None,
                 timeout_s: float = 120.0) -> None:
        import anthropic

        self._sdk = anthropic
        self._client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url,
                                                max_retries=0, timeout=timeout_s)

    async def call(self, request: ModelRequest) -> Answer:
        """Stream one response (see the module docstring); an event whose data
        is not JSON is a malformed reply."""
        payload = messages_payload(request)
        return await perform(
            request, lambda: self._client.messages.create(**payload, stream=True),
            MessageAssembler(), stream=True, sdk_error=self._sdk.AnthropicError,
            failure=self._failure, unreadable="unreadable event")

    def _failure(self, error: Exception) -> Failure:
        return sdk_failure(self._sdk, error, "api_message", "error_code") or Failure(str(error))

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.close()
