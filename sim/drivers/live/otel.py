"""Live runs as OpenTelemetry GenAI spans, written as OTLP JSON.

:class:`SpanRecorder` holds an ``opentelemetry-sdk`` tracer provider (service
``sim-live``) whose spans stay in memory until :meth:`SpanRecorder.write`
encodes them with the OTLP JSON encoder and writes one
``ExportTraceServiceRequest`` document to a file, atomically. Each run is one
trace, named by the GenAI semantic conventions:

* ``invoke_agent <task>``: the run, from start to terminal state
  (``gen_ai.operation.name`` ``invoke_agent``, ``gen_ai.conversation.id`` the
  run id, ``sim.exit`` the harness's ``state:reason``, which is also its
  ``error.type``, with status ERROR, when the run did not succeed);
* ``chat <model>``: each model call that was answered
  (``gen_ai.request.model``, ``gen_ai.request.max_tokens``,
  ``gen_ai.response.model``, ``gen_ai.response.finish_reasons`` (the
  provider's own), ``gen_ai.usage.input_tokens`` *including* the cache counts,
  as the convention says, ``gen_ai.usage.cache_read.input_tokens``,
  ``gen_ai.usage.cache_creation.input_tokens``, ``gen_ai.usage.output_tokens``
  including ``gen_ai.usage.reasoning.output_tokens``, ``sim.purpose``). A
  failed attempt (a 429, a 5xx, a timeout; the harness retries it) has no
  usage, so it is not a ``chat`` span, which readers count as a call with
  usage, but a ``gen_ai.call.error`` event on the run's span, with its
  ``error.type`` (the harness's error kind), HTTP status and duration;
* ``execute_tool <name>``: each tool attempt (``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``; ``error.type`` the tool error's kind).

Every span carries ``gen_ai.conversation.id`` and ``gen_ai.provider.name``.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from sim.drivers.live.calls import Answer
from sim.harness.effects import ModelError, ModelRequest, ToolError, ToolRequest, ToolResult
from sim.harness.state import HarnessState

SERVICE = "sim-live"


class SpanRecorder:
    """The tracer provider of a batch of live runs and its finished spans."""

    def __init__(self) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self._exporter = InMemorySpanExporter()
        self._provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
        self._provider.add_span_processor(SimpleSpanProcessor(self._exporter))
        self.tracer = self._provider.get_tracer("sim.drivers.live")

    def run(self, run_id: str, task_id: str, provider: str, model: str) -> RunSpans:
        """A listener that turns one run into spans (started now)."""
        return RunSpans(self, run_id, task_id, provider, model)

    def document(self) -> dict[str, Any]:
        """The finished spans as one OTLP JSON ``ExportTraceServiceRequest``."""
        from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans

        spans = self._exporter.get_finished_spans()
        if not spans:
            return {"resourceSpans": []}
        return encode_spans(spans).to_dict()

    def write(self, path: str | os.PathLike) -> None:
        """Write :meth:`document` to ``path`` (temporary file, then renamed)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(self.document(), separators=(",", ":")) + "\n"
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(data)
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


class RunSpans:
    """Spans of one run (a run listener). Times given in seconds since the
    run's start are placed on the wall clock of its start."""

    def __init__(self, recorder: SpanRecorder, run_id: str, task_id: str, provider: str,
                 model: str) -> None:
        from opentelemetry import trace

        self._trace = trace
        self._tracer = recorder.tracer
        self._base_ns = time.time_ns()
        self._common = {"gen_ai.conversation.id": run_id, "gen_ai.provider.name": provider}
        self._root = self._tracer.start_span(
            f"invoke_agent {task_id}", kind=trace.SpanKind.INTERNAL, start_time=self._base_ns,
            attributes={**self._common, "gen_ai.operation.name": "invoke_agent",
                        "gen_ai.agent.name": "sim", "gen_ai.request.model": model,
                        "sim.task_id": task_id})
        self._context = trace.set_span_in_context(self._root)

    def _ns(self, seconds: float) -> int:
        return self._base_ns + int(seconds * 1e9)

    def _span(self, name: str, start_s: float, end_s: float, kind: Any,
              attributes: dict[str, Any], error: tuple[str, str] | None) -> None:
        span = self._tracer.start_span(name, context=self._context, kind=kind,
                                       start_time=self._ns(start_s),
                                       attributes={**self._common, **attributes})
        if error is not None:
            span.set_attribute("error.type", error[0])
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, error[1]))
        span.end(end_time=self._ns(end_s))

    def model_call(self, request: ModelRequest, answer: Answer, start_s: float,
                   end_s: float) -> None:
        """One ``chat`` span, or an error event on the run's span."""
        attributes: dict[str, Any] = {"gen_ai.operation.name": "chat",
                                      "gen_ai.request.model": request.model,
                                      "gen_ai.request.max_tokens": request.max_output_tokens,
                                      "sim.purpose": request.purpose,
                                      "sim.attempt": request.attempt}
        result = answer.result
        if isinstance(result, ModelError):
            event: dict[str, Any] = {
                "error.type": result.kind, "gen_ai.request.model": request.model,
                "sim.attempt": request.attempt, "sim.purpose": request.purpose,
                "sim.duration_s": end_s - start_s, "sim.message": result.message[:500]}
            if result.status is not None:
                event["http.response.status_code"] = result.status
            self._root.add_event("gen_ai.call.error", event, timestamp=self._ns(end_s))
            return
        u = result.usage
        attributes.update({
            "gen_ai.response.model": result.model or request.model,
            "gen_ai.response.finish_reasons": [answer.finish_reason or result.stop_reason],
            "gen_ai.usage.input_tokens": u.prompt_tokens,
            "gen_ai.usage.cache_read.input_tokens": u.cache_read_tokens,
            "gen_ai.usage.cache_creation.input_tokens": u.cache_write_tokens,
            "gen_ai.usage.output_tokens": u.output_tokens + u.thinking_tokens,
            "gen_ai.usage.reasoning.output_tokens": u.thinking_tokens})
        self._span(f"chat {request.model}", start_s, end_s, self._trace.SpanKind.CLIENT,
                   attributes, None)

    def tool_call(self, request: ToolRequest, result: ToolResult | ToolError, start_s: float,
                  end_s: float) -> None:
        """One ``execute_tool`` span."""
        call = request.call
        error = (result.kind, result.message[:500]) if isinstance(result, ToolError) else None
        self._span(f"execute_tool {call.name}", start_s, end_s, self._trace.SpanKind.INTERNAL,
                   {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name,
                    "gen_ai.tool.call.id": call.id, "sim.attempt": request.attempt}, error)

    def run_end(self, state: HarnessState, end_s: float) -> None:
        """End the run's span."""
        label = f"{state.status}:{state.reason}"
        self._root.set_attribute("sim.exit", label)
        if state.status != "succeeded":
            self._root.set_attribute("error.type", label)
            self._root.set_status(self._trace.Status(self._trace.StatusCode.ERROR, label))
        self._root.end(end_time=self._ns(end_s))
