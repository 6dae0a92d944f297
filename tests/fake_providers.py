"""A local stand-in for the Anthropic and OpenAI HTTP APIs, for the live driver's tests.

:class:`FakeProvider` is an HTTP server on 127.0.0.1 (a port of its own, in a
thread of the test process) that speaks each provider's wire protocol well
enough for the official SDKs, which reach it through their ``base_url``:

* ``POST /v1/messages``: the Anthropic Messages API, answered as a server-sent
  event stream (``message_start``, ``content_block_start`` / ``_delta`` /
  ``_stop`` with ``text_delta``, ``input_json_delta``, ``thinking_delta`` and
  ``signature_delta``, ``message_delta`` with the stop reason and usage,
  ``message_stop``, and ``ping``) when the request says ``"stream": true``, as
  one JSON message otherwise;
* ``POST /v1/chat/completions``: OpenAI Chat Completions, as
  ``chat.completion.chunk`` events ending with a usage chunk (when
  ``stream_options.include_usage`` is set) and ``data: [DONE]``, or as one
  ``chat.completion`` object.

It answers requests in order from a script of :class:`Reply` (a model turn in
a provider-neutral form), :class:`Fail` (an HTTP error with the provider's
error body and headers) and :class:`StreamFail` (an ``error`` event in the
middle of a stream). Every request is recorded (path, headers, JSON body), and
a stream the client closed before its end is noted in ``closed_early``;
``answers`` holds what each request was answered with, in the same order.
Message ids are unique per request. A query string on the path is ignored
(Claude Code posts to ``/v1/messages?beta=true``) and ``HEAD`` requests get an
empty 200.

Bounded by construction: a stream sends at most ``Reply.max_events`` events,
the server stops itself after ``lifetime_s`` seconds, and :meth:`close` (or
leaving the ``with`` block) stops it and joins its thread.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANTHROPIC_ERRORS = {400: "invalid_request_error", 401: "authentication_error",
                    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                    500: "api_error", 529: "overloaded_error"}
OPENAI_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length",
                 "stop_sequence": "stop"}


@dataclass
class Reply:
    """One model turn. ``content`` holds ``("text", str)``,
    ``("tool_use", id, name, input)`` and ``("thinking", text, signature)``
    items; ``stop_reason`` is Anthropic's (mapped for OpenAI). Usage follows
    the harness's convention: ``input_tokens`` uncached, ``cache_read`` and
    ``cache_write`` apart, ``output_tokens`` including ``reasoning_tokens``
    (as both providers count it). ``chunk_delay_s`` is slept before each
    event (a slow stream); ``max_events`` bounds a stream padded with text
    deltas of ``pad_text`` up to that many events (0: no padding).

    Misbehaviour (a provider that sends what it should not): ``usage`` puts
    its values into the wire usage as they are (``1e300``, ``10**30``,
    ``float("nan")``, ``-5``: the JSON carries them verbatim, NaN as
    ``NaN``), overriding the counts above; a tool input given as
    :class:`RawJSON` is sent as that text (JSON nested 100,000 deep, which
    ``json.dumps`` could not write); ``cut_after`` ends a stream after that
    many events, without its end, and closes the connection (a truncated
    stream)."""

    content: list[tuple[Any, ...]]
    stop_reason: str = "end_turn"
    input_tokens: int = 10
    output_tokens: int = 5
    cache_read: int = 0
    cache_write: int = 0
    reasoning_tokens: int = 0
    chunk_delay_s: float = 0.0
    max_events: int = 0
    pad_text: str = "."
    usage: dict[str, Any] | None = None
    cut_after: int | None = None
    service_tier: str | None = None  # OpenAI's response field ("flex", "priority")


@dataclass(frozen=True)
class RawJSON:
    """A tool input sent as this JSON text, verbatim."""

    text: str

    @classmethod
    def nested(cls, depth: int) -> RawJSON:
        """An object nested ``depth`` deep: ``{"a": {"a": ... {} ...}}``."""
        return cls('{"a": ' * depth + "{}" + "}" * depth)


def _dumps(value: Any) -> str:
    """JSON text of ``value``; a :class:`RawJSON` as its own text."""
    return value.text if isinstance(value, RawJSON) else json.dumps(value)


@dataclass
class Fail:
    """An HTTP error: ``status``, the provider's error ``kind`` (defaults by
    status: Anthropic's error type, OpenAI's ``code``), ``message`` and extra
    response ``headers`` (``retry-after``...)."""

    status: int
    message: str = "error"
    kind: str = ""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class StreamFail:
    """A stream that starts (HTTP 200, ``message_start``) and then sends an
    ``error`` event of ``kind`` (Anthropic only)."""

    kind: str = "overloaded_error"
    message: str = "Overloaded"


@dataclass
class Seen:
    """A request the server received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float


class FakeProvider:
    """The server (see the module docstring). Use as a context manager;
    ``base_url`` is ``http://127.0.0.1:PORT``; ``openai_url`` adds ``/v1``."""

    def __init__(self, script: list[Reply | Fail | StreamFail], *, lifetime_s: float = 30.0,
                 default: Reply | None = None) -> None:
        self.script = list(script)
        self.default = default
        self.requests: list[Seen] = []
        self.answers: list[Reply | Fail | StreamFail] = []
        self.closed_early: list[float] = []
        self.stream_started = threading.Event()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._timer = threading.Timer(lifetime_s, self.close)
        self._timer.daemon = True

    @property
    def base_url(self) -> str:
        """The Anthropic SDK's base URL."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_url(self) -> str:
        """The OpenAI SDK's base URL."""
        return f"{self.base_url}/v1"

    def __enter__(self) -> FakeProvider:
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving (idempotent) and join the server thread."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)

    @property
    def stopping(self) -> bool:
        """True once :meth:`close` was called."""
        return self._stopping.is_set()

    def next_step(self, seen: Seen) -> Reply | Fail | StreamFail:
        """Record ``seen`` and pop the next scripted answer."""
        with self._lock:
            self.requests.append(seen)
            step: Reply | Fail | StreamFail = (
                self.script.pop(0) if self.script
                else Fail(500, "script exhausted") if self.default is None else self.default)
            self.answers.append(step)
        return step

    def message_id(self, openai: bool) -> str:
        """The id of the message answering the latest request: unique per
        request (``msg_fake_N`` / ``chatcmpl-fake-N``, N counting from 1), as
        a provider's are."""
        return f"{'chatcmpl-fake-' if openai else 'msg_fake_'}{len(self.requests)}"

    def bodies(self, purpose: str | None = None) -> list[dict[str, Any]]:
        """The JSON bodies received, in order."""
        return [r.body for r in self.requests]


def _handler(provider: FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def do_HEAD(self) -> None:  # a client's reachability check (Claude Code sends one)
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"_raw": raw.decode("utf-8", "replace")}
            seen = Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body,
                        time.monotonic())
            route = self.path.split("?", 1)[0].rstrip("/")  # Claude Code adds ?beta=true
            openai = route.endswith("/chat/completions")
            if not (openai or route.endswith("/v1/messages")):
                self._json(404, {"error": {"message": f"no route {self.path}"}})
                return
            step = provider.next_step(seen)
            if isinstance(step, Fail):
                self._fail(step, openai)
            elif isinstance(step, StreamFail):
                self._stream_fail(step, body)
            elif body.get("stream"):
                events = (_openai_chunks(step, body, provider.message_id(openai)) if openai
                          else _anthropic_events(step, body, provider.message_id(openai)))
                self._stream(events, step, openai)
            else:
                if step.chunk_delay_s:  # a slow answer: it takes as long as its stream would
                    provider.stream_started.set()
                    until = time.monotonic() + step.chunk_delay_s * max(1, step.max_events)
                    while time.monotonic() < until and not provider.stopping:
                        time.sleep(0.02)
                try:
                    ident = provider.message_id(openai)
                    self._json(200, _openai_completion(step, body, ident) if openai
                               else _anthropic_message(step, body, ident))
                except (BrokenPipeError, ConnectionResetError):
                    provider.closed_early.append(time.monotonic())

        # -------------------------------------------------------------- replies
        def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("request-id", f"req_{len(provider.requests)}")
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _fail(self, step: Fail, openai: bool) -> None:
            if openai:
                code = step.kind or {429: "rate_limit_exceeded"}.get(step.status)
                kind = ("invalid_request_error" if step.status == 400 else
                        "requests" if step.status == 429 else "server_error")
                body: dict[str, Any] = {"error": {"message": step.message, "type": kind,
                                                  "param": None, "code": code}}
            else:
                kind = step.kind or ANTHROPIC_ERRORS.get(step.status, "api_error")
                body = {"type": "error", "error": {"type": kind, "message": step.message},
                        "request_id": f"req_{len(provider.requests)}"}
            self._json(step.status, body, step.headers)

        def _start_stream(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("request-id", f"req_{len(provider.requests)}")
            self.send_header("connection", "close")
            self.end_headers()
            self.close_connection = True

        def _stream(self, events: list[tuple[str | None, Any]], step: Reply, openai: bool
                    ) -> None:
            self._start_stream()
            try:
                for number, (name, data) in enumerate(events):
                    if provider.stopping:
                        return
                    if step.cut_after is not None and number >= step.cut_after:
                        return  # a truncated stream: the connection closes mid-message
                    if step.chunk_delay_s:
                        time.sleep(step.chunk_delay_s)
                    text = data if isinstance(data, str) else json.dumps(data)
                    frame = (f"event: {name}\n" if name else "") + f"data: {text}\n\n"
                    self.wfile.write(frame.encode())
                    self.wfile.flush()
                    if number == 0:
                        provider.stream_started.set()
            except (BrokenPipeError, ConnectionResetError):
                provider.closed_early.append(time.monotonic())

        def _stream_fail(self, step: StreamFail, body: dict[str, Any]) -> None:
            self._start_stream()
            start = _anthropic_events(Reply([("text", "")]), body)[0]
            error = {"type": "error", "error": {"type": step.kind, "message": step.message}}
            for name, data in (start, ("error", error)):
                self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

    return Handler


# ------------------------------------------------------------ Anthropic shapes
def _anthropic_usage(step: Reply) -> dict[str, Any]:
    usage = {"input_tokens": step.input_tokens, "output_tokens": step.output_tokens,
             "cache_read_input_tokens": step.cache_read,
             "cache_creation_input_tokens": step.cache_write}
    return {**usage, **(step.usage or {})}


def _anthropic_block(item: tuple[Any, ...]) -> dict[str, Any]:
    if item[0] == "text":
        return {"type": "text", "text": item[1]}
    if item[0] == "thinking":
        return {"type": "thinking", "thinking": item[1], "signature": item[2]}
    value = json.loads(item[3].text) if isinstance(item[3], RawJSON) else item[3]
    return {"type": "tool_use", "id": item[1], "name": item[2], "input": value}


def _anthropic_message(step: Reply, body: dict[str, Any], ident: str = "msg_fake"
                       ) -> dict[str, Any]:
    return {"id": ident, "type": "message", "role": "assistant",
            "model": body.get("model", ""), "content": [_anthropic_block(c) for c in step.content],
            "stop_reason": step.stop_reason, "stop_sequence": None,
            "usage": _anthropic_usage(step)}


def _halves(text: str) -> list[str]:
    cut = len(text) // 2
    return [part for part in (text[:cut], text[cut:]) if part] or [""]


def _anthropic_events(step: Reply, body: dict[str, Any], ident: str = "msg_fake"
                      ) -> list[tuple[str | None, Any]]:
    """The SSE events of ``step`` (each as ``(event name, data)``)."""
    start_usage = dict(_anthropic_usage(step), output_tokens=1)
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": {
            "id": ident, "type": "message", "role": "assistant",
            "model": body.get("model", ""), "content": [], "stop_reason": None,
            "stop_sequence": None, "usage": start_usage}}),
        ("ping", {"type": "ping"})]
    for index, item in enumerate(step.content):
        kind = item[0]
        if kind == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": t} for t in _halves(item[1])]
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": t} for t in _halves(item[1])]
            deltas.append({"type": "signature_delta", "signature": item[2]})
        else:
            start = {"type": "tool_use", "id": item[1], "name": item[2], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": t}
                      for t in _halves(_dumps(item[3]))]
        events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                               "content_block": start}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": index,
                                            "delta": d}) for d in deltas]
        if step.max_events and index == len(step.content) - 1:
            pad = {"type": "content_block_delta", "index": index,
                   "delta": {"type": "text_delta", "text": step.pad_text}}
            events += [("content_block_delta", pad)] * max(0, step.max_events - len(events))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {"type": "message_delta", "delta": {
        "stop_reason": step.stop_reason, "stop_sequence": None},
        "usage": _anthropic_usage(step)}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


# --------------------------------------------------------------- OpenAI shapes
def _openai_usage(step: Reply) -> dict[str, Any]:
    prompt = step.input_tokens + step.cache_read + step.cache_write
    usage = {"prompt_tokens": prompt, "completion_tokens": step.output_tokens,
             "total_tokens": prompt + step.output_tokens,
             "prompt_tokens_details": {"cached_tokens": step.cache_read, "audio_tokens": 0},
             "completion_tokens_details": {"reasoning_tokens": step.reasoning_tokens,
                                           "audio_tokens": 0,
                                           "accepted_prediction_tokens": 0,
                                           "rejected_prediction_tokens": 0}}
    for key, value in (step.usage or {}).items():  # misbehaviour: by Anthropic's names too
        usage[{"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens"}.get(
            key, key)] = value
    return usage


def _openai_calls(step: Reply) -> list[dict[str, Any]]:
    return [{"id": c[1], "type": "function",
             "function": {"name": c[2], "arguments": _dumps(c[3])}}
            for c in step.content if c[0] == "tool_use"]


def _openai_completion(step: Reply, body: dict[str, Any], ident: str = "chatcmpl-fake"
                       ) -> dict[str, Any]:
    text = "".join(c[1] for c in step.content if c[0] == "text")
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
    calls = _openai_calls(step)
    if calls:
        message["tool_calls"] = calls
    return {"id": ident, "object": "chat.completion", "created": 1_700_000_000,
            "model": body.get("model", ""),
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": OPENAI_FINISH[step.stop_reason]}],
            "usage": _openai_usage(step),
            **({"service_tier": step.service_tier} if step.service_tier else {})}


def _openai_chunks(step: Reply, body: dict[str, Any], ident: str = "chatcmpl-fake"
                   ) -> list[tuple[str | None, Any]]:
    """The ``chat.completion.chunk`` events of ``step``, then ``[DONE]``."""
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    base = {"id": ident, "object": "chat.completion.chunk",
            "created": 1_700_000_000, "model": body.get("model", "")}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        out = dict(base, choices=[{"index": 0, "delta": delta, "logprobs": None,
                                   "finish_reason": finish}])
        if include_usage:
            out["usage"] = None
        return out

    chunks: list[tuple[str | None, Any]] = [(None, chunk({"role": "assistant",
                                                          "content": ""}))]
    calls = 0
    for item in step.content:
        if item[0] == "text":
            chunks += [(None, chunk({"content": t})) for t in _halves(item[1])]
        elif item[0] == "tool_use":
            args = _dumps(item[3])
            chunks.append((None, chunk({"tool_calls": [{
                "index": calls, "id": item[1], "type": "function",
                "function": {"name": item[2], "arguments": ""}}]})))
            chunks += [(None, chunk({"tool_calls": [{"index": calls, "function": {
                "arguments": t}}]})) for t in _halves(args)]
            calls += 1
    if step.max_events:
        pad = chunk({"content": step.pad_text})
        chunks += [(None, pad)] * max(0, step.max_events - len(chunks))
    chunks.append((None, chunk({}, OPENAI_FINISH[step.stop_reason])))
    if include_usage:
        chunks.append((None, dict(base, choices=[], usage=_openai_usage(step))))
    chunks.append((None, "[DONE]"))
    return chunks
