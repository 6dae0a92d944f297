"""Live runs as OpenTelemetry GenAI spans, written as OTLP JSON.

:class:`SpanRecorder` holds an ``opentelemetry-sdk`` tracer provider (service
``sim-live``) whose spans stay in memory until :meth:`SpanRecorder.write`
encodes them with the OTLP JSON encoder and writes one
``ExportTraceServiceRequest`` document to a file, atomically. Each run is one
trace, named by the GenAI semantic conventions:

* ``invoke_agent <gen_ai.agent.name>``: the run, from start to terminal state
  (``gen_ai.operation.name`` ``invoke_agent``, ``gen_ai.agent.name`` (``sim``
  unless told), ``gen_ai.conversation.id`` the run id, ``sim.task_id``,
  ``sim.exit`` the harness's ``state:reason``, which is also its
  ``error.type``, with status ERROR, when the run did not succeed), with the
  run's **usage totals** (the same ``gen_ai.usage.*`` attributes as a chat
  span, summed over its calls);
* ``chat <model>``: each model call that was answered
  (``gen_ai.request.model``, ``gen_ai.request.max_tokens``,
  ``gen_ai.request.temperature`` (and ``top_p``) when sent (the Anthropic
  API takes no temperature),
  ``gen_ai.request.stream``, ``gen_ai.response.id``, ``gen_ai.response.model``,
  ``gen_ai.response.finish_reasons`` (the provider's own),
  ``gen_ai.response.time_to_first_chunk`` (seconds, streamed calls),
  ``server.address``/``server.port`` of the provider's endpoint,
  ``gen_ai.usage.input_tokens`` *including* the cache counts, as the
  convention says, ``gen_ai.usage.cache_read.input_tokens``,
  ``gen_ai.usage.cache_creation.input_tokens`` (not for OpenAI, which reports
  no cache writes), ``gen_ai.usage.output_tokens`` including
  ``gen_ai.usage.reasoning.output_tokens``, ``sim.purpose``). A call the
  harness retried is **one** span covering every attempt (those of the same
  turn and purpose, a switch to the fallback model included), as the
  conventions ask: each failed attempt (a 429, a 5xx, a timeout) is a ``gen_ai.call.error``
  event on it, with its ``error.type`` (the harness's error kind), HTTP status
  and duration, and ``sim.attempts`` counts the attempts. Failed attempts that
  no answer followed have no usage, so they are not a ``chat`` span (readers
  count a chat span as a call with usage): their events go on the run's span;
* ``execute_tool <name>``: each tool attempt (``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``, ``gen_ai.tool.type`` ``function``,
  ``gen_ai.tool.description`` from the tool's definition; ``error.type`` the
  tool error's kind).

Every span carries ``gen_ai.conversation.id`` and ``gen_ai.provider.name``.
With ``SpanRecorder(openinference=True)`` the spans also carry OpenInference's
attributes (``openinference.span.kind`` AGENT/LLM/TOOL, ``session.id`` the run
id, ``llm.token_count.*``, ``tool.name``...), for Arize Phoenix.
:func:`write_trace_spans` writes runs of a trace folder (what ``sim run
--otel`` simulated) as the same spans.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sim.atomic import StagedFile
from sim.bad_input import InputError
from sim.drivers.live.calls import Answer
from sim.harness.effects import ModelError, ModelRequest, ToolError, ToolRequest, ToolResult
from sim.harness.state import HarnessState

SERVICE = "sim-live"
AGENT_NAME = "sim"
TOOL_TYPE = "function"
_DEFAULT_PORTS = {"https": 443, "http": 80}


def server_of(client: Any) -> tuple[str, int] | None:
    """``(host, port)`` of a model client's endpoint (the SDK client's
    ``base_url``), or None when it has none."""
    from urllib.parse import urlsplit

    base = getattr(getattr(client, "_client", None), "base_url", None)
    if base is None:
        return None
    parts = urlsplit(str(base))
    if not parts.hostname:
        return None
    return parts.hostname, parts.port or _DEFAULT_PORTS.get(parts.scheme, 443)


def usage_attributes(counts: Sequence[int], provider: str) -> dict[str, int]:
    """The ``gen_ai.usage.*`` attributes of a call (or a run's totals) from
    ``(input, cache read, cache write, output, reasoning)`` in the harness's
    convention: the input attribute *includes* the cache counts and the output
    the reasoning tokens; no cache-write count for OpenAI, which never reports
    one."""
    input_tokens, cache_read, cache_write, output, reasoning = counts
    out = {"gen_ai.usage.input_tokens": input_tokens + cache_read + cache_write,
           "gen_ai.usage.cache_read.input_tokens": cache_read,
           "gen_ai.usage.output_tokens": output + reasoning,
           "gen_ai.usage.reasoning.output_tokens": reasoning}
    if provider != "openai":
        out["gen_ai.usage.cache_creation.input_tokens"] = cache_write
    return out


class SpanRecorder:
    """The tracer provider of a batch of live runs and its finished spans."""

    def __init__(self, *, openinference: bool = False, seed: str | None = None,
                 service: str = SERVICE) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self._exporter = InMemorySpanExporter()
        self._provider = TracerProvider(resource=Resource.create({"service.name": service}),
                                        id_generator=None if seed is None else _seeded(seed))
        self._provider.add_span_processor(SimpleSpanProcessor(self._exporter))
        self.tracer = self._provider.get_tracer("sim.drivers.live")
        self.openinference = openinference

    def run(self, run_id: str, task_id: str, provider: str, model: str, *,
            stream: bool = True, server: tuple[str, int] | None = None,
            agent_name: str = AGENT_NAME) -> RunSpans:
        """The spans of one run (its span started now); a live run's are
        written by a :class:`SpanObserver` of it."""
        return RunSpans(self, run_id, task_id, provider, model, stream=stream, server=server,
                        agent_name=agent_name)

    def document(self) -> dict[str, Any]:
        """The finished spans as one OTLP JSON ``ExportTraceServiceRequest``."""
        from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans

        spans = self._exporter.get_finished_spans()
        if not spans:
            return {"resourceSpans": []}
        return encode_spans(spans).to_dict()

    def write(self, path: str | os.PathLike) -> None:
        """Write :meth:`document` to ``path`` as one line of JSON, atomically
        (:class:`sim.atomic.StagedFile`: a temporary file, flushed and fsynced,
        then renamed). Never over a folder, a device or a FIFO (renaming would
        replace it): an InputError, the target untouched."""
        target = Path(path)
        if target.exists() and not target.is_file():
            raise InputError(f"{target} is not a regular file: the spans are not written "
                             f"over it")
        target.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(self.document(), separators=(",", ":")) + "\n"
        with StagedFile(target) as staged:
            staged.handle.write(data.encode("utf-8"))


class RunSpans:
    """Spans of one run: a live run's from its pump (:class:`SpanObserver`),
    a simulated run's from its trace (:func:`write_trace_spans`). Times given
    in seconds since the run's start are placed on the wall clock of its start."""

    def __init__(self, recorder: SpanRecorder, run_id: str, task_id: str, provider: str,
                 model: str, *, stream: bool = True, server: tuple[str, int] | None = None,
                 agent_name: str = AGENT_NAME, base_ns: int | None = None) -> None:
        from opentelemetry import trace

        self._trace = trace
        self._tracer = recorder.tracer
        self._base_ns = time.time_ns() if base_ns is None else base_ns
        self._provider = provider
        self._stream = stream
        self._server = server
        self._common = {"gen_ai.conversation.id": run_id, "gen_ai.provider.name": provider}
        self._root = self._tracer.start_span(
            f"invoke_agent {agent_name}", kind=trace.SpanKind.INTERNAL,
            start_time=self._base_ns,
            attributes={**self._common, "gen_ai.operation.name": "invoke_agent",
                        "gen_ai.agent.name": agent_name, "gen_ai.request.model": model,
                        "sim.task_id": task_id})
        self._context = trace.set_span_in_context(self._root)
        self._failed: list[tuple[float, float, dict[str, Any]]] = []  # attempts awaiting answer
        self._failed_for: list[tuple[int, str]] = []  # their (turn, purpose)
        self._totals = [0, 0, 0, 0, 0]  # input, cache read, cache write, output, reasoning
        self._descriptions: dict[str, str] = {}
        self._oi = recorder.openinference
        if self._oi:
            self._root.set_attributes({"openinference.span.kind": "AGENT", "session.id": run_id})

    def _ns(self, seconds: float) -> int:
        return self._base_ns + int(seconds * 1e9)

    def _span(self, name: str, start_s: float, end_s: float, kind: Any,
              attributes: dict[str, Any], error: tuple[str, str] | None,
              events: list[tuple[float, float, dict[str, Any]]] | None = None) -> None:
        span = self._tracer.start_span(name, context=self._context, kind=kind,
                                       start_time=self._ns(start_s),
                                       attributes={**self._common, **attributes})
        for _, at_s, event in events or ():
            span.add_event("gen_ai.call.error", event, timestamp=self._ns(at_s))
        if error is not None:
            span.set_attribute("error.type", error[0])
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, error[1]))
        span.end(end_time=self._ns(end_s))

    def chat(self, *, model: str, start_s: float, end_s: float, counts: tuple[int, ...],
             response_model: str, finish_reason: str | None, extra: dict[str, Any]) -> None:
        """One ``chat`` span covering ``start_s`` (or the first failed attempt
        before it) to ``end_s``; the pending failed attempts become its events.
        ``counts`` are (input, cache read, cache write, output, reasoning) in
        the harness's convention (input uncached, output without reasoning)."""
        failed, self._failed = self._failed, []
        first = min([start_s, *(f[0] for f in failed)])
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": model,
            "gen_ai.request.stream": self._stream, "gen_ai.response.model": response_model,
            "sim.attempts": len(failed) + 1, **extra,
            **usage_attributes(counts, self._provider)}
        if finish_reason is not None:
            attributes["gen_ai.response.finish_reasons"] = [finish_reason]
        if self._server is not None:
            attributes["server.address"], attributes["server.port"] = self._server
        for i, value in enumerate(counts):
            self._totals[i] += value
        if self._oi:
            attributes.update(_openinference_llm(counts, response_model, self._provider,
                                                 finish_reason))
        self._span(f"chat {model}", first, end_s, self._trace.SpanKind.CLIENT, attributes,
                   None, failed)

    def model_call(self, request: ModelRequest, answer: Answer, start_s: float,
                   end_s: float) -> None:
        """One ``chat`` span (covering the failed attempts before it), or a
        failed attempt kept until an answer follows."""
        for tool in request.tools:
            self._descriptions.setdefault(tool.name, tool.description)
        result = answer.result
        if isinstance(result, ModelError):
            event: dict[str, Any] = {
                "error.type": result.kind, "gen_ai.request.model": request.model,
                "sim.attempt": request.attempt, "sim.purpose": request.purpose,
                "sim.duration_s": end_s - start_s, "sim.message": result.message[:500]}
            if result.status is not None:
                event["http.response.status_code"] = result.status
            self._failed.append((start_s, end_s, event))
            self._failed_for.append((request.turn, request.purpose))
            return
        # failed attempts of another operation (a context overflow before a
        # compaction call) are not this call's: they go on the run's span
        mine = [(request.turn, request.purpose) == key for key in self._failed_for]
        for failed, same in zip(self._failed, mine, strict=True):
            if not same:
                self._root.add_event("gen_ai.call.error", failed[2],
                                     timestamp=self._ns(failed[1]))
        self._failed = [f for f, same in zip(self._failed, mine, strict=True) if same]
        self._failed_for = []
        extra: dict[str, Any] = {"gen_ai.request.max_tokens": request.max_output_tokens,
                                 "sim.purpose": request.purpose,
                                 "sim.attempt": request.attempt}
        if request.temperature is not None and self._provider != "anthropic":
            extra["gen_ai.request.temperature"] = request.temperature  # Anthropic takes none
        if request.top_p is not None:
            extra["gen_ai.request.top_p"] = request.top_p
        if answer.response_id:
            extra["gen_ai.response.id"] = answer.response_id
        if answer.first_event_s is not None:
            extra["gen_ai.response.time_to_first_chunk"] = answer.first_event_s
        u = result.usage
        self.chat(model=request.model, start_s=start_s, end_s=end_s,
                  counts=(u.input_tokens, u.cache_read_tokens, u.cache_write_tokens,
                          u.output_tokens, u.thinking_tokens),
                  response_model=result.model or request.model,
                  finish_reason=answer.finish_reason or result.stop_reason, extra=extra)

    def tool_call(self, request: ToolRequest, result: ToolResult | ToolError, start_s: float,
                  end_s: float) -> None:
        """One ``execute_tool`` span."""
        call = request.call
        error = (result.kind, result.message[:500]) if isinstance(result, ToolError) else None
        self.tool(call.name, call.id, start_s, end_s, error, {"sim.attempt": request.attempt})

    def tool(self, name: str, call_id: str | None, start_s: float, end_s: float,
             error: tuple[str, str] | None, extra: dict[str, Any]) -> None:
        """One ``execute_tool`` span."""
        attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool",
                                      "gen_ai.tool.name": name, "gen_ai.tool.type": TOOL_TYPE,
                                      **extra}
        if call_id is not None:
            attributes["gen_ai.tool.call.id"] = call_id
        description = self._descriptions.get(name)
        if description:
            attributes["gen_ai.tool.description"] = description
        if self._oi:
            attributes.update({"openinference.span.kind": "TOOL", "tool.name": name})
            if description:
                attributes["tool.description"] = description
            if call_id is not None:
                attributes["tool_call.id"] = call_id
        self._span(f"execute_tool {name}", start_s, end_s, self._trace.SpanKind.INTERNAL,
                   attributes, error)

    def end(self, label: str | None, succeeded: bool, end_s: float) -> None:
        """End the run's span: its exit label, usage totals, and the failed
        attempts no answer followed (as events)."""
        for _, at_s, event in self._failed:
            self._root.add_event("gen_ai.call.error", event, timestamp=self._ns(at_s))
        self._failed, self._failed_for = [], []
        self._root.set_attributes(usage_attributes(self._totals, self._provider))
        if label is not None:
            self._root.set_attribute("sim.exit", label)
        if label is not None and not succeeded:
            self._root.set_attribute("error.type", label)
            self._root.set_status(self._trace.Status(self._trace.StatusCode.ERROR, label))
        self._root.end(end_time=self._ns(end_s))


class SpanObserver:
    """The spans of one live run (``spans``) written as an observer of the
    pump that drives it (:class:`sim.harness.pump.Observer`). A model call
    and a tool call last from their effect to their result on ``clock()``
    (seconds since the run started: the live driver's ``elapsed_s``); a model
    call is written with the provider's answer to it, ``answer_to(request)``
    (the live driver's :meth:`~sim.drivers.live.driver.LiveDriver.answer_to`:
    response id, finish reason, time to first event; the pump's result alone
    when it gives None). The run's span ends with the final state."""

    __slots__ = ("spans", "clock", "answer_to", "began")

    def __init__(self, spans: RunSpans, clock: Callable[[], float],
                 answer_to: Callable[[ModelRequest], Answer | None]) -> None:
        self.spans = spans
        self.clock = clock
        self.answer_to = answer_to
        self.began = 0.0  # when the model or tool call in flight began (the clock's reading)

    def effect(self, effect: Any) -> None:
        """A model or tool call begins: its start is read on the clock."""
        if type(effect) in (ModelRequest, ToolRequest):
            self.began = self.clock()

    def result(self, effect: Any, result: Any) -> None:
        """A model call's ``chat`` span (or its failed attempt, kept until an
        answer follows), a tool call's ``execute_tool`` span."""
        kind = type(effect)
        if kind is ModelRequest:
            answer = self.answer_to(effect)
            self.spans.model_call(effect, Answer(result) if answer is None else answer,
                                  self.began, self.clock())
        elif kind is ToolRequest:
            self.spans.tool_call(effect, result, self.began, self.clock())

    def end(self, state: HarnessState) -> None:
        """The run's span ends, labelled with the harness's ``state:reason``."""
        self.spans.end(f"{state.status}:{state.reason}", state.status == "succeeded",
                       self.clock())


def _openinference_llm(counts: Sequence[int], model: str, provider: str,
                       finish_reason: str | None) -> dict[str, Any]:
    """OpenInference's attributes of a chat span (``SpanRecorder(openinference=True)``):
    the prompt count includes the cache counts, the completion the reasoning."""
    input_tokens, cache_read, cache_write, output, reasoning = counts
    out: dict[str, Any] = {
        "openinference.span.kind": "LLM", "llm.model_name": model, "llm.provider": provider,
        "llm.token_count.prompt": input_tokens + cache_read + cache_write,
        "llm.token_count.prompt_details.cache_read": cache_read,
        "llm.token_count.prompt_details.cache_write": cache_write,
        "llm.token_count.completion": output + reasoning,
        "llm.token_count.completion_details.reasoning": reasoning,
        "llm.token_count.total": input_tokens + cache_read + cache_write + output + reasoning}
    if finish_reason is not None:
        out["llm.finish_reason"] = finish_reason
    return out


def _seeded(seed: str) -> Any:
    """An OpenTelemetry id generator whose ids follow from ``seed`` (SHA-256 of
    the seed and a counter), so the same runs give the same file."""
    import hashlib

    from opentelemetry.sdk.trace.id_generator import IdGenerator

    class Seeded(IdGenerator):
        def __init__(self) -> None:
            self.count = 0

        def _next(self, bits: int) -> int:
            while True:
                self.count += 1
                digest = hashlib.sha256(f"{seed}\0{self.count}".encode()).digest()
                value = int.from_bytes(digest[:bits // 8], "big")
                if value:
                    return value

        def generate_span_id(self) -> int:
            return self._next(64)

        def generate_trace_id(self) -> int:
            return self._next(128)

    return Seeded()


SIMULATED_EPOCH_NS = 946_684_800 * 10**9
"""Where a simulated run without a start time is placed (2000-01-01T00:00Z)."""


def write_trace_spans(folder: str | os.PathLike, path: str | os.PathLike, *,
                      provider: str = "sim", openinference: bool = False) -> int:
    """Write the runs of the trace folder ``folder`` (e.g. what ``sim run
    --traces`` simulated) to ``path`` as the spans a live run gives (one
    OTLP JSON document, atomically); returns the number of runs. Calls start
    at their recorded ``started_s`` (else when the previous call and its
    tools ended) and last ``latency_s``; a call's tools run one after another
    after it, each for its ``duration_s``; a run starts at its ``started_at``
    (else :data:`SIMULATED_EPOCH_NS`). Ids are drawn from a fixed seed, so
    the same runs give the same file. Simulated calls are not streamed."""
    from sim.traces import folder as trace_folder

    recorder = SpanRecorder(openinference=openinference, seed="sim run", service="sim")
    count = 0
    for run in trace_folder.runs(Path(folder)):
        count += 1
        base = SIMULATED_EPOCH_NS if run.started_at is None \
            else int(run.started_at.timestamp() * 1e9)
        spans = RunSpans(recorder, run.run_id, run.task_id or run.run_id, provider,
                         run.model or "", stream=False, base_ns=base)
        clock = 0.0
        for call in run.calls:
            start = call.started_s if call.started_s is not None else clock
            end = start + (call.latency_s or 0.0)
            extra: dict[str, Any] = {} if call.purpose is None else {"sim.purpose": call.purpose}
            spans.chat(model=call.model or run.model or "", start_s=start, end_s=end,
                       counts=(call.usage.input_tokens, call.usage.cache_read_tokens,
                               call.usage.cache_write_tokens, call.usage.output_tokens,
                               call.usage.thinking_tokens),
                       response_model=call.model or run.model or "",
                       finish_reason=call.finish_reason, extra=extra)
            clock = end
            for tool in call.tool_calls:
                done = clock + (tool.duration_s or 0.0)
                spans.tool(tool.name, tool.id, clock, done,
                           ("tool_error", "") if tool.error else None, {})
                clock = done
        finish = max(clock, run.duration_s or 0.0)
        spans.end(run.exit, (run.exit or "").startswith("succeeded"), finish)
    recorder.write(path)
    return count
