"""What every part of one run shares, its one exit, and the checks it repeats.

:class:`Run` is what the loop's parts read (parameters, state, detector,
the event emitter, the tools by name). :func:`stop` is the one way a run
ends: it raises :class:`Stop`, which :func:`sim.harness.loop.agent_loop`
catches in one place. The checks every step makes are written here once:
an answer's type and values (:func:`receive`), the abort flag
(:func:`check_abort`), the budgets before a model call
(:func:`check_budgets`) and before a wait (:func:`check_duration`), the
counting of time (:func:`spend`) and of a call's usage and price
(:func:`account`), and the backoff before a retry (:func:`wait`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, overload

from sim.harness import effects as fx
from sim.harness import events as ev
from sim.harness.budgets import overshot, refuse_duration, refuse_model_call
from sim.harness.detector import Detector
from sim.harness.messages import Block, ToolUseBlock, Usage
from sim.harness.params import HarnessParams, Prices, ToolSpec
from sim.harness.protocol import ANSWERS, WELL_FORMED, ProtocolError, result_problem
from sim.harness.state import BUDGET_EXHAUSTED, CANCELLED, FAILED, HarnessState

Emit = Callable[[str, dict[str, Any]], None] | None
"""Tells the observers of an event (kind, data); None when nobody observes."""


class Stop(Exception):
    """The stop signal: raised where a run must end, caught once in agent_loop."""

    def __init__(self, status: str, reason: str, detail: dict[str, Any]) -> None:
        # no message: it is never shown (caught in agent_loop), and cheap to raise
        self.status = status
        self.reason = reason
        self.detail = detail


def stop(status: str, reason: str, **detail: Any) -> NoReturn:
    """End the run as ``status:reason`` (with ``detail``) from wherever it is."""
    raise Stop(status, reason, detail)


@dataclass(slots=True, eq=False)
class Run:
    """What every part of one run reads: parameters, state, detector, the
    event emitter (None without observers), the tools by name, and, while a
    step's tool calls run, those calls and their observations so far.
    ``timed`` says whether a time budget (active or wall) is set, so a check
    of durations that no budget limits is not called for; ``cache_ttl_s`` is
    the parameters' prompt-cache lifetime and ``thinking`` a step's thinking
    budget in tokens (0: off), looked up once. ``token_cap`` is set
    (:func:`token_cap`) when the prompt-token budget is the only budget a
    call or a usage can overshoot, ``flat_prices`` when every call is priced
    at one untiered price list (:func:`flat_prices`): the checks then take a
    short way to the same answers."""

    params: HarnessParams
    state: HarnessState
    detector: Detector
    emit: Emit
    tools: dict[str, ToolSpec]
    timed: bool
    cache_ttl_s: float | None
    thinking: int = 0
    token_cap: float | None = None
    flat_prices: Prices | None = None
    open_calls: list[ToolUseBlock] | None = None
    blocks: list[Block] | None = None


def token_cap(params: HarnessParams) -> float | None:
    """The prompt-token budget (math.inf when unset) when no other budget can
    refuse a model call or be overshot by its usage (output tokens, money,
    time, tool errors), else None."""
    b = params.budgets
    if (b.output_tokens is None and b.money_usd is None and b.active_s is None
            and b.wall_s is None and b.tool_errors is None):
        return math.inf if b.tokens is None else b.tokens
    return None


def flat_prices(params: HarnessParams) -> Prices | None:
    """The prices of every call of a run, when they are one untiered price
    list (no fallback or other models' prices), else None."""
    if params.retry.fallback_prices is None and not params.model_prices \
            and not params.prices.tiers:
        return params.prices
    return None


def emitter(state: HarnessState, observers: Sequence[ev.Observer]) -> Emit:
    """The function that tells ``observers`` of an event (at the state's
    current turn), or None when there are none."""
    if not observers:
        return None

    def emit(kind: str, data: dict[str, Any]) -> None:
        event = ev.Event(kind, state.turns, data)
        for observer in observers:
            observer(event)

    return emit


# ------------------------------------------------------------------ answers
@overload
def receive(effect: fx.ModelRequest, result: fx.Result) -> fx.ModelResponse | fx.ModelError: ...
@overload
def receive(effect: fx.ToolRequest, result: fx.Result) -> fx.ToolResult | fx.ToolError: ...
@overload
def receive(effect: fx.ApprovalRequest, result: fx.Result) -> fx.ApprovalDecision: ...
@overload
def receive(effect: fx.VerifyRequest, result: fx.Result) -> fx.Verdict: ...
@overload
def receive(effect: fx.UserTurn, result: fx.Result) -> fx.UserReply: ...
@overload
def receive(effect: fx.Wait, result: fx.Result) -> float | None: ...
@overload
def receive(effect: fx.Checkpoint, result: fx.Result) -> None: ...
def receive(effect: fx.Effect, result: fx.Result) -> fx.Result:
    """``result`` if it may answer ``effect`` (else ProtocolError) and holds
    nothing impossible (else the run fails as failed:invalid_response)."""
    if not isinstance(result, ANSWERS[type(effect)]):
        raise ProtocolError(effect, result)
    quick = WELL_FORMED.get(type(result))  # result_problem's quick test, called directly
    if quick is not None and quick(result):
        return result
    problem = result_problem(result)
    if problem is not None:
        stop(FAILED, "invalid_response", diagnostic={"effect": type(effect).__name__, **problem})
    return result


# ------------------------------------------------------------------- checks
def check_abort(state: HarnessState) -> None:
    """End the run as cancelled:external_signal if an abort was requested."""
    if state.abort_requested:
        stop(CANCELLED, "external_signal")


def check_budgets(run: Run, prompt_tokens: int, max_output_tokens: int) -> None:
    """End the run if a model call of this size could overshoot a budget."""
    cap = run.token_cap
    if cap is not None:  # refuse_model_call's answer when only this budget can refuse
        s = run.state
        if s.input_tokens + s.cache_read_tokens + s.cache_write_tokens + prompt_tokens > cap:
            stop(BUDGET_EXHAUSTED, "tokens")
        return
    params = run.params
    prices = (params.prices if params.budgets.money_usd is None  # prices only bound money
              else prices_of(params, run.state.model))
    reason = refuse_model_call(params, run.state, prompt_tokens, max_output_tokens, prices)
    if reason is not None:
        stop(BUDGET_EXHAUSTED, reason)


def check_ready(run: Run, seconds: float) -> None:
    """End the run if it was cancelled, or if an effect that may take
    ``seconds`` could overshoot a time budget (before each tool call)."""
    state = run.state
    if state.abort_requested:
        stop(CANCELLED, "external_signal")
    if run.timed:
        reason = refuse_duration(run.params, state, seconds)
        if reason is not None:
            stop(BUDGET_EXHAUSTED, reason)


def check_duration(run: Run, seconds: float) -> None:
    """End the run if waiting ``seconds`` more could overshoot a time budget."""
    if not run.timed:  # no time budget to overshoot
        return
    reason = refuse_duration(run.params, run.state, seconds)
    if reason is not None:
        stop(BUDGET_EXHAUSTED, reason)


# ------------------------------------------------------------- accounting
def spend(run: Run, seconds: float) -> None:
    """Count ``seconds`` of active time that an effect took (a check, a
    task-giver's reply); past a time budget, the harness stopped waiting when
    the budget ran out: only the time left is counted and the run ends."""
    state = run.state
    if run.timed:
        reason = refuse_duration(run.params, state, seconds)
        if reason is not None:
            b = run.params.budgets
            left = min(math.inf if b.active_s is None else b.active_s - state.active_s,
                       math.inf if b.wall_s is None else b.wall_s - state.wall_s)
            state.active_s += max(0.0, left)
            stop(BUDGET_EXHAUSTED, reason)
    state.active_s += seconds


def account(run: Run, model: str, usage: Usage) -> None:
    """Add a call's usage and its price to the counters; a usage that took the
    run past a budget (the provider reported more than the harness allowed
    for) ends it at once."""
    state = run.state
    uncached = usage.input_tokens  # one name at a time: a 5-tuple unpacking builds a tuple
    output = usage.output_tokens
    read = usage.cache_read_tokens
    write = usage.cache_write_tokens
    thinking = usage.thinking_tokens
    state.input_tokens += uncached
    state.output_tokens += output
    more = read or write or thinking  # most calls have neither cache nor thinking tokens
    if more:
        state.cache_read_tokens += read
        state.cache_write_tokens += write
        state.thinking_tokens += thinking
    params = run.params
    prices = run.flat_prices
    if prices is not None and not more:  # prices.cost(...) of a call with only these two:
        # its other terms are 0 tokens times a finite price, sums that add exactly 0.0
        state.money_usd += (uncached * prices.input + output * prices.output) / 1e6
    elif prices is not None:  # prices.cost(...), written out
        think = prices.output if prices.thinking is None else prices.thinking
        state.money_usd += (uncached * prices.input + output * prices.output
                            + read * prices.cache_read + write * prices.cache_write
                            + thinking * think) / 1e6
    else:
        prices = (params.prices if params.retry.fallback_prices is None
                  and not params.model_prices else prices_of(params, model))
        if prices.tiers:
            prices = prices.at(uncached + read + write)
        state.money_usd += prices.cost(uncached, output, read, write, thinking)
    cap = run.token_cap
    if cap is not None:  # overshot's answer when only this budget can be overshot
        if state.input_tokens + state.cache_read_tokens + state.cache_write_tokens > cap:
            stop(BUDGET_EXHAUSTED, "tokens")
        return
    reason = overshot(params, state)
    if reason is not None:
        stop(BUDGET_EXHAUSTED, reason)


def prices_of(params: HarnessParams, model: str) -> Prices:
    """The prices of ``model``: the fallback's after a switch, those listed in
    ``model_prices``, else the run's."""
    retry = params.retry
    if retry.fallback_prices is not None and model == retry.fallback_model:
        return retry.fallback_prices
    if params.model_prices and model != params.model:
        for name, prices in params.model_prices:
            if name == model:
                return prices
    return params.prices


def wait(run: Run, delay: float, target: str, kind: str
         ) -> Generator[fx.Effect, fx.Result, None]:
    """Back off for ``delay`` seconds before a retry, if the time budgets allow it."""
    state = run.state
    check_duration(run, delay)
    state.retries += 1
    if run.emit:
        run.emit(ev.RETRY, {"target": target, "kind": kind, "delay_s": delay})
    effect = fx.Wait(delay)
    waited = receive(effect, (yield effect))
    state.active_s += delay if waited is None else min(waited, delay)  # cut short
    check_abort(state)
