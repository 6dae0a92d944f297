"""Recording simulated runs in the trace model (``python -m sim run ... --traces``).

:class:`RunRecorder` sits between an engine and the harness loop: it wraps the
loop generator (:meth:`RunRecorder.wrap`), passes every effect and result
through unchanged, and builds one :class:`~sim.traces.model.CallRecord` per
model call the harness accounted for, so a simulated run can be imported,
summarised and calibrated like a real one. Engines use it only when traces are
asked for; without it the loop runs unwrapped.

What a simulated call records:

- ``purpose``: ``step`` (a loop step), ``compaction`` (a summary call) or
  ``verifier`` (a model grader's check, priced like a call); every one of them
  is a row, so a run's token sums equal its ``results.parquet`` row (``steps``
  counts these calls, not the loop's turns);
- usage (``thinking_tokens`` as ``reasoning_tokens``), the model that answered,
  ``stop_reason`` as ``finish_reason``, the cost the harness charged (the
  change of the run's spend), ``started_s`` on the engine's clock from the
  run's start and the response's ``latency_s``; a model error is no call;
- ``text_tokens``: the response's text blocks' sizes; ``text_sha256``: the
  hash of their texts concatenated in order;
- its tool calls (canonical JSON arguments), and for each what the model was
  shown back: the ``tool_result`` block's size, text hash and error flag (a
  call refused by policy is an error result too) and the time the tool ran
  (summed over harness retries);
- ``observation_tokens``: the other text the harness put in the history before
  the next model call (a nudge, a verifier's feedback, a continuation note, a
  simulated user's reply); ``observation_sha256``: the hash of those texts
  joined in order (:func:`~sim.traces.model.joined_sha256`; null when none).
"""

from __future__ import annotations

from collections.abc import Callable

from sim.harness.effects import (
    ModelRequest,
    ModelResponse,
    ToolRequest,
    Verdict,
    VerifyRequest,
)
from sim.harness.loop import Loop
from sim.harness.messages import Message
from sim.harness.state import HarnessState
from sim.traces.model import (
    CallRecord,
    RunRecord,
    ToolCallRecord,
    canonical_json,
    joined_sha256,
    sha256_text,
)

SOURCE = "sim"


class RunRecorder:
    """Records the model calls of one run; ``clock()`` is the engine's time in
    seconds (the recorder's creation is the run's start)."""

    __slots__ = ("_assistant", "_durations", "_open", "_step", "calls", "clock", "state", "t0")

    def __init__(self, state: HarnessState, clock: Callable[[], float]) -> None:
        self.state = state
        self.clock = clock
        self.t0 = clock()
        self.calls: list[CallRecord] = []
        self._open: tuple[CallRecord, float, int] | None = None  # call, spend, tokens before
        self._step: CallRecord | None = None  # the last step call, awaiting what came back
        self._assistant: Message | None = None  # its message in the history
        self._durations: dict[str, float] = {}

    def wrap(self, loop: Loop) -> Loop:
        """``loop`` with every effect and result seen by the recorder."""
        result = None
        while True:
            try:
                effect = loop.send(result)
            except StopIteration as stop:
                self._settle()
                self._observe()
                return stop.value
            self._settle()
            if type(effect) is ModelRequest:
                self._observe()
                began, spent, tokens = self.clock(), self.state.money_usd, self._tokens()
                result = yield effect
                if type(result) is ModelResponse:
                    self._model_call(effect, result, began, spent, tokens)
            elif type(effect) is ToolRequest:
                result = yield effect
                duration = getattr(result, "duration_s", 0.0) or 0.0
                call_id = effect.call.id
                self._durations[call_id] = self._durations.get(call_id, 0.0) + duration
            elif type(effect) is VerifyRequest:
                began, spent, tokens = self.clock(), self.state.money_usd, self._tokens()
                result = yield effect
                if type(result) is Verdict and result.usage is not None:
                    usage = result.usage
                    call = CallRecord(usage, model=self.state.model,
                                      started_s=began - self.t0, latency_s=result.duration_s,
                                      purpose="verifier", observation_tokens=0)
                    self.calls.append(call)
                    self._open = (call, spent, tokens)
            else:
                result = yield effect

    def _tokens(self) -> int:
        s = self.state
        return (s.input_tokens + s.output_tokens + s.cache_read_tokens + s.cache_write_tokens
                + s.thinking_tokens)

    def _model_call(self, request: ModelRequest, response: ModelResponse, began: float,
                    spent: float, tokens: int) -> None:
        usage = response.usage
        text = 0
        texts = []
        tools = []
        for block in response.content:
            if block.type == "text":
                text += block.tokens
                texts.append(block.text)
            elif block.type == "tool_use":
                tools.append(ToolCallRecord(name=block.name, id=block.id,
                                            arguments=canonical_json(block.input)))
        call = CallRecord(usage, model=response.model or request.model,
                          finish_reason=response.stop_reason, started_s=began - self.t0,
                          latency_s=response.latency_s, text_tokens=text,
                          text_sha256=sha256_text("".join(texts)), tool_calls=tools,
                          observation_tokens=0, purpose=request.purpose)
        self.calls.append(call)
        self._open = (call, spent, tokens)
        if request.purpose == "step":
            self._step, self._assistant = call, None

    def _settle(self) -> None:
        """After the harness has taken the last result: the call's cost, or the
        call dropped when the harness did not account it (cancelled in flight)."""
        if self._open is None:
            return
        call, spent, tokens = self._open
        self._open = None
        usage = call.usage
        if self._tokens() == tokens and (usage.prompt_tokens or usage.output_tokens
                                         or usage.thinking_tokens):
            self.calls.remove(call)
            if self._step is call:
                self._step = None
            return
        call.cost_usd = self.state.money_usd - spent
        if call is self._step:
            messages = self.state.messages
            if messages and messages[-1].role == "assistant":
                self._assistant = messages[-1]

    def _observe(self) -> None:
        """What came back for the last step call: the tool results and other
        text in the history after its message (re-read until the next step)."""
        call, message = self._step, self._assistant
        if call is None or message is None:
            return
        messages = self.state.messages
        for position in range(len(messages) - 1, -1, -1):
            if messages[position] is message:
                break
        else:
            return  # compacted away: keep what was seen before
        tools = {t.id: t for t in call.tool_calls}
        observed = 0
        texts = []
        for later in messages[position + 1:]:
            for block in later.content:
                if block.type == "tool_result":
                    record = tools.get(block.tool_use_id)
                    if record is not None:
                        record.result_tokens = block.tokens
                        record.result_sha256 = sha256_text(block.content)
                        record.error = block.is_error
                        record.duration_s = self._durations.get(block.tool_use_id)
                elif block.type == "text":
                    observed += block.tokens
                    texts.append(block.text)
        call.observation_tokens = observed
        call.observation_sha256 = joined_sha256(texts)


def simulated_run(recorder: RunRecorder | None, *, run_id: str, file: str, task_id: str,
                  model: str | None, status: str, reason: str, cost_usd: float,
                  resolved: bool | None, duration_s: float, step_limit: int | None,
                  cost_limit_usd: float | None) -> RunRecord:
    """A simulated run as a :class:`RunRecord` with the calls ``recorder`` saw
    (none without a recorder: a task cancelled before it started); ``exit`` is
    the harness's ``status:reason``, ``resolved`` the task's hidden truth."""
    return RunRecord(run_id=run_id, source=SOURCE, file=file,
                     calls=[] if recorder is None else recorder.calls, task_id=task_id,
                     model=model, cost_usd=cost_usd, exit=f"{status}:{reason}",
                     resolved=resolved, duration_s=duration_s, step_limit=step_limit,
                     cost_limit_usd=cost_limit_usd)
