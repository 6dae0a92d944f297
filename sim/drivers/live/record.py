"""What a live run did, call by call, in the shape of the trace model.

:class:`CallRecorder` is a :class:`~sim.drivers.live.driver.RunListener`: it
keeps one :class:`LiveCall` per model call that returned a response (a step, a
compaction summary), with the fields of a ``calls.parquet`` row: the five
token counts (uncached input, cache read, cache write, output without
reasoning, reasoning), the call's cost at the run's prices (the harness's own
arithmetic, so the calls add up to the run's spend), the provider's finish
reason verbatim, the start (seconds from the run's start) and latency, the
size of the response's text, and its tool calls. Each tool call gets what came
back, read from the history the harness built (so a call the policy refused,
or one that was not run because the run stopped, has its observation too):
the result's size in tokens, its SHA-256, the error flag, and the seconds the
tool ran over all its attempts. ``observation_tokens`` are the tokens of text
the harness added after the call (a nudge, a verifier's feedback, a request to
continue). Failed and cancelled calls have no row: they have no usage; the
run's ``retries`` count them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sim.drivers.live.calls import Answer
from sim.harness.effects import ModelRequest, ModelResponse, ToolError, ToolRequest, ToolResult
from sim.harness.messages import Message, Usage
from sim.harness.params import HarnessParams, Prices
from sim.harness.state import HarnessState


@dataclass(slots=True)
class LiveToolCall:
    """One tool call of a response and what came back (trace-model fields)."""

    name: str
    id: str | None = None
    arguments: str | None = None
    result_tokens: int | None = None
    result_sha256: str | None = None
    error: bool | None = None
    duration_s: float | None = None


@dataclass(slots=True)
class LiveCall:
    """One model call that returned a response (trace-model fields)."""

    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    output_tokens: int
    reasoning_tokens: int
    model: str | None
    cost_usd: float
    finish_reason: str | None
    started_s: float
    latency_s: float
    text_tokens: int
    tool_calls: list[LiveToolCall] = field(default_factory=list)
    observation_tokens: int | None = None
    purpose: str = "step"

    @property
    def prompt_tokens(self) -> int:
        """All prompt tokens of the call."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens


@dataclass(slots=True)
class LiveRun:
    """One live run (trace-model fields of a ``runs.parquet`` row, with its calls).
    ``exit`` is the harness's ``state:reason``; ``resolved`` is True for a
    verified success, False for a run with a check that ended otherwise, and
    None when nothing checked the work."""

    run_id: str
    task_id: str
    model: str
    started_at: datetime
    calls: list[LiveCall]
    duration_s: float
    exit: str
    resolved: bool | None
    cost_usd: float
    step_limit: int | None
    cost_limit_usd: float | None
    retries: int = 0


def call_cost(params: HarnessParams, model: str, usage: Usage) -> float:
    """USD of one call at the run's prices (the fallback model's after a
    switch), tiered by the call's prompt size: the harness's own arithmetic."""
    retry = params.retry
    prices: Prices = params.prices
    if retry.fallback_prices is not None and model == retry.fallback_model:
        prices = retry.fallback_prices
    if prices.tiers:
        prices = prices.at(usage.prompt_tokens)
    return prices.cost(usage.input_tokens, usage.output_tokens, usage.cache_read_tokens,
                       usage.cache_write_tokens, usage.thinking_tokens)


def sha256_text(text: str) -> str:
    """SHA-256 (hex) of ``text`` as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_json(value: object) -> str:
    """Sorted keys, no spaces, UTF-8 kept: two equal argument sets, one string."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class CallRecorder:
    """Collects the :class:`LiveCall` rows of one run (a run listener)."""

    def __init__(self, params: HarnessParams) -> None:
        self.params = params
        self.calls: list[LiveCall] = []
        self.failed_calls = 0
        self._open: LiveCall | None = None  # the last step, awaiting its observations
        self._durations: dict[str, float] = {}

    def model_call(self, request: ModelRequest, answer: Answer, start_s: float,
                   end_s: float) -> None:
        """Record a call that returned a response; settle the previous step."""
        if request.purpose == "step" and request.attempt == 0:
            self._settle(request.messages)
        result = answer.result
        if not isinstance(result, ModelResponse):
            self.failed_calls += 1
            return
        u = result.usage
        model = result.model or request.model
        tools = [LiveToolCall(b.name, b.id, canonical_json(b.input))
                 for b in result.content if b.type == "tool_use"]
        call = LiveCall(
            u.input_tokens, u.cache_read_tokens, u.cache_write_tokens, u.output_tokens,
            u.thinking_tokens, model, call_cost(self.params, model, u),
            answer.finish_reason, start_s, end_s - start_s,
            sum(b.tokens for b in result.content if b.type == "text"), tools,
            purpose=request.purpose)
        self.calls.append(call)
        if request.purpose == "step":
            self._open = call

    def tool_call(self, request: ToolRequest, result: ToolResult | ToolError, start_s: float,
                  end_s: float) -> None:
        """Add the attempt's duration to its call."""
        key = request.call.id
        self._durations[key] = self._durations.get(key, 0.0) + result.duration_s

    def run_end(self, state: HarnessState, end_s: float) -> None:
        """Settle the last step from the final history."""
        self._settle(state.messages)

    def _settle(self, messages: list[Message]) -> None:
        """Fill the open step's tool results and observation tokens from the
        messages after the last assistant turn of ``messages``."""
        call, self._open = self._open, None
        if call is None:
            return
        last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
        results = {}
        observed = 0
        for message in messages[last + 1:]:
            for block in message.content:
                if block.type == "tool_result":
                    results[block.tool_use_id] = block
                elif block.type == "text":
                    observed += block.tokens
        call.observation_tokens = observed
        for tool in call.tool_calls:
            block = results.get(tool.id or "")
            if block is not None:
                tool.result_tokens = block.tokens
                tool.result_sha256 = sha256_text(block.content)
                tool.error = block.is_error
            if tool.id in self._durations:
                tool.duration_s = self._durations[tool.id]

    def run(self, run_id: str, task_id: str, started_at: datetime, state: HarnessState,
            *, checked: bool) -> LiveRun:
        """The run's record once it has ended (``checked``: a verifier judged it)."""
        success = state.status == "succeeded"
        resolved = (success and state.reason == "verified") if checked else None
        return LiveRun(run_id, task_id, self.params.model, started_at.astimezone(UTC),
                       self.calls, state.wall_s, f"{state.status}:{state.reason}", resolved,
                       state.money_usd, self.params.budgets.steps, self.params.budgets.money_usd,
                       state.retries)
