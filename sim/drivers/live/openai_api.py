"""OpenAI Chat Completions through the official ``openai`` SDK, streamed or not.

:func:`chat_payload` builds the request from the effect alone: a ``system``
message, then ``normalize(messages, "openai")`` (tool calls
on the assistant message, each result a ``tool``-role message keyed by
``tool_call_id``), ``tools`` as functions with their JSON schemas, the tool
choice (``any`` is ``required``), ``max_completion_tokens`` and the sampling
parameters. Streamed calls ask for ``stream_options.include_usage``, so the
last chunk (with empty ``choices``) carries the usage.

:class:`OpenAIModel` assembles the answer from ``chat.completion.chunk``
deltas (content, and ``tool_calls`` pieces keyed by ``index``: the first has
the id and name, the others append to the arguments) or from one
``chat.completion``. Usage: ``prompt_tokens`` includes the cached tokens
(``prompt_tokens_details.cached_tokens``, moved to ``cache_read_tokens``) and
``completion_tokens`` includes the reasoning tokens
(``completion_tokens_details.reasoning_tokens``, moved to
``thinking_tokens``). Finish reasons: ``stop`` is ``end_turn`` (``tool_use``
when the reply calls tools), ``tool_calls`` is ``tool_use``, ``length`` is
``max_tokens``; others pass through.
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
    tool_use,
)
from sim.harness.context import normalize
from sim.harness.effects import ModelError, ModelRequest, ModelResponse
from sim.harness.messages import Block, Usage

FINISH_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use",
                  "length": "max_tokens"}


def tool_choice(choice: str) -> str | dict[str, Any]:
    """The harness's tool choice in OpenAI's form."""
    if choice.startswith("tool:"):
        return {"type": "function", "function": {"name": choice[5:]}}
    return "required" if choice == "any" else choice


def chat_payload(request: ModelRequest, *, stream: bool = True) -> dict[str, Any]:
    """The keyword arguments of ``client.chat.completions.create`` for
    ``request`` (with the streaming options when ``stream``). Pure."""
    messages = normalize(conversation(request), "openai")
    if request.system_prompt:
        messages.insert(0, {"role": "system", "content": request.system_prompt})
    payload: dict[str, Any] = {"model": request.model, "messages": messages,
                               "max_completion_tokens": request.max_output_tokens,
                               "temperature": request.temperature}
    if request.top_p is not None:
        payload["top_p"] = request.top_p
    if request.tools:
        payload["tools"] = [{"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": dict(t.input_schema)}}
            for t in request.tools]
        payload["tool_choice"] = tool_choice(request.tool_choice)
    if stream:
        payload["stream"] = True
        payload["stream_options"] = {"include_usage": True}
    return payload


class ChatAssembler:
    """Builds a response from chunks (or from one completion)."""

    def __init__(self) -> None:
        self.model = ""
        self.text: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.finish: str | None = None
        self.usage: Any = None
        self.response_id: str | None = None

    def add(self, chunk: Any) -> None:
        """Take one ``chat.completion.chunk``."""
        self.model = getattr(chunk, "model", "") or self.model
        self.response_id = getattr(chunk, "id", None) or self.response_id
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        for choice in getattr(chunk, "choices", None) or ():
            if getattr(choice, "index", 0) != 0:
                continue
            delta = choice.delta
            if delta is not None:
                if getattr(delta, "content", None):
                    self.text.append(delta.content)
                for piece in getattr(delta, "tool_calls", None) or ():
                    call = self.calls.setdefault(piece.index, {"id": "", "name": "",
                                                               "arguments": ""})
                    if piece.id:
                        call["id"] = piece.id
                    fn = piece.function
                    if fn is not None:
                        call["name"] += fn.name or ""
                        call["arguments"] += fn.arguments or ""
            if choice.finish_reason:
                self.finish = choice.finish_reason

    def add_whole(self, completion: Any) -> None:
        """Take a whole ``chat.completion``."""
        self.model = completion.model or ""
        self.response_id = getattr(completion, "id", None) or None
        self.usage = completion.usage
        if not completion.choices:
            return
        choice = completion.choices[0]
        self.finish = choice.finish_reason
        message = choice.message
        if message.content:
            self.text.append(message.content)
        for index, call in enumerate(message.tool_calls or ()):
            fn = getattr(call, "function", None)
            if fn is not None:
                self.calls[index] = {"id": call.id, "name": fn.name,
                                     "arguments": fn.arguments or ""}

    def answer(self, request: ModelRequest, latency_s: float, first_event_s: float | None
               ) -> Answer:
        """The assembled :class:`Answer`."""
        content: list[Block] = []
        joined = "".join(self.text)
        if joined:
            content.append(text(joined))
        truncated = self.finish == "length"
        for index in sorted(self.calls):
            c = self.calls[index]
            block = tool_use(c["id"], c["name"], c["arguments"])
            if block is None:
                if truncated:
                    continue
                return Answer(ModelError("malformed", None, None, f"tool call {c['name']!r} "
                                         "has arguments that are not a JSON object", latency_s))
            content.append(block)
        if self.finish is None:
            return Answer(ModelError("empty", None, None, "no finish reason in the response",
                                     latency_s))
        stop = FINISH_REASONS.get(self.finish, self.finish)
        if stop == "end_turn" and any(b.type == "tool_use" for b in content):
            stop = "tool_use"
        return Answer(ModelResponse(content, self._usage(request, content), stop, latency_s,
                                    self.model), self.finish, first_event_s, self.response_id)

    def _usage(self, request: ModelRequest, content: list[Block]) -> Usage:
        u = self.usage
        if u is None:
            return estimated_usage(request, content)
        prompt = non_negative(getattr(u, "prompt_tokens", 0))
        completion = non_negative(getattr(u, "completion_tokens", 0))
        details = getattr(u, "prompt_tokens_details", None)
        cached = non_negative(getattr(details, "cached_tokens", 0))
        out_details = getattr(u, "completion_tokens_details", None)
        reasoning = non_negative(getattr(out_details, "reasoning_tokens", 0))
        if not all(type(v) is int and v >= 0 for v in (prompt, completion, cached, reasoning)):
            # an impossible count, passed on as reported: the harness names it
            return Usage(input_tokens=prompt, output_tokens=completion, cache_read_tokens=cached,
                         thinking_tokens=reasoning)
        cached, reasoning = min(prompt, cached), min(completion, reasoning)
        return Usage(input_tokens=prompt - cached, output_tokens=completion - reasoning,
                     cache_read_tokens=cached, thinking_tokens=reasoning)


class OpenAIModel:
    """Calls Chat Completions with ``openai.AsyncOpenAI`` (no SDK retries;
    ``timeout_s`` per request); ``stream`` False asks for whole completions."""

    provider = "openai"

    def __init__(self, *, api_key: str | None = None, base_url: str | None = None,
                 timeout_s: float = 120.0, stream: bool = True) -> None:
        import openai

        self.stream = stream
        self._sdk = openai
        self._client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url, max_retries=0,
                                          timeout=timeout_s)

    async def call(self, request: ModelRequest) -> Answer:
        """One completion, streamed unless the client was made with ``stream`` False."""
        payload = chat_payload(request, stream=self.stream)
        return await perform(
            request, lambda: self._client.chat.completions.create(**payload),
            ChatAssembler(), stream=self.stream, sdk_error=self._sdk.OpenAIError,
            failure=self._failure, unreadable="unreadable chunk")

    def _failure(self, error: Exception) -> Failure:
        failure = sdk_failure(self._sdk, error, "message", "code")
        if failure is not None:
            return failure
        if isinstance(error, self._sdk.APIError):  # an error object inside a stream
            return Failure(error.message, None, getattr(error, "type", None),
                           getattr(error, "code", None))
        return Failure(str(error))

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.close()
