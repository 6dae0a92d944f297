"""What every part of one run shares, and the checks it repeats.

:class:`Run` is what the loop's parts read (parameters, state, limits,
detector, the event emitter, the tools by name). :func:`stop` (from
:mod:`sim.harness.state`) is the one way a run ends: it raises
:class:`Stop`, which :func:`sim.harness.loop.agent_loop` catches in one
place. The checks every step makes are called from here: an answer's type
and values (:func:`receive`), the abort flag (:func:`check_abort`), the
abort flag and time budgets before a tool call (:func:`check_ready`), the
counting of time (:func:`spend`) and of a call's usage and price
(:func:`account`), and the backoff before a retry (:func:`wait`). The
budget rules themselves live in :mod:`sim.harness.budgets`, the price
rules in :mod:`sim.harness.prices`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from sim.harness import effects as fx
from sim.harness import events as ev
from sim.harness.budgets import LimitExceeded, Limits
from sim.harness.detector import Detector
from sim.harness.messages import Block, ToolUseBlock, Usage
from sim.harness.params import HarnessParams, ToolSpec
from sim.harness.protocol import ANSWERS, WELL_FORMED, ProtocolError, result_problem
from sim.harness.retry_budget import RetryBudget
from sim.harness.state import CANCELLED, FAILED, HarnessState, Stop, stop

__all__ = ["Emit", "Run", "Stop", "account", "check_abort", "check_ready", "emitter",
           "receive", "spend", "stop", "wait"]

Emit = Callable[[str, dict[str, Any]], None] | None
"""Tells the observers of an event (kind, data); None when nobody observes."""


@dataclass(slots=True, eq=False)
class Run:
    """What every part of one run reads: parameters, state, detector, the
    event emitter (None without observers), the tools by name, the run's
    :class:`~sim.harness.budgets.Limits` (its budgets, read once), and,
    while a step's tool calls run, those calls and their observations so
    far. ``retry_budget`` is the retry bucket shared with the client's other
    runs (None: none) and ``retry_key`` the run's key for jitter draws
    (``retry.jitter_scope: run``). ``cache_ttl_s`` is the parameters'
    prompt-cache lifetime and ``thinking`` a step's thinking budget in tokens
    (0: off), looked up once."""

    params: HarnessParams
    state: HarnessState
    detector: Detector
    emit: Emit
    tools: dict[str, ToolSpec]
    limits: Limits
    cache_ttl_s: float | None
    thinking: int = 0
    open_calls: list[ToolUseBlock] | None = None
    blocks: list[Block] | None = None
    retry_budget: RetryBudget | None = None
    retry_key: str = ""


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
@overload
def receive(effect: fx.SpawnRequest, result: fx.Result) -> fx.ChildResults: ...
@overload
def receive(effect: fx.CollectChildren, result: fx.Result) -> fx.ChildResults: ...
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


def check_ready(run: Run, seconds: float) -> None:
    """End the run if it was cancelled, or if an effect that may take
    ``seconds`` could overshoot a time budget (before each tool call)."""
    if run.state.abort_requested:
        stop(CANCELLED, "external_signal")
    limits = run.limits
    if limits.timed:
        limits.check_duration(run.state, seconds)


# ------------------------------------------------------------- accounting
def spend(run: Run, seconds: float) -> None:
    """Count ``seconds`` of active time that an effect took (a check, a
    task-giver's reply); past a time budget, the harness stopped waiting when
    the budget ran out: only the time left is counted and the run ends."""
    state, limits = run.state, run.limits
    if limits.timed:
        try:
            limits.check_duration(state, seconds)
        except LimitExceeded:
            state.active_s += max(0.0, limits.time_left(state))
            raise
    state.active_s += seconds


def account(run: Run, model: str, usage: Usage) -> None:
    """Add a call's usage and its price (at ``model``'s prices) to the run's
    usage; a usage that took the run past a budget (the provider reported
    more than the harness allowed for) ends it at once."""
    state, limits = run.state, run.limits
    if limits.ledgers:  # shared budgets: charge them what the call cost
        before = state.money_usd
        state.add_usage(usage, run.params.prices_for(model))
        alerts = limits.charge(state, usage, state.money_usd - before)
        if alerts:
            state.alerts += alerts
            if run.emit:
                run.emit(ev.ALERT, {"kind": "shared_budget", "alerts": alerts})
    else:
        state.add_usage(usage, run.params.prices_for(model))
    limits.check_usage(state)


def wait(run: Run, delay: float, target: str, kind: str
         ) -> Generator[fx.Effect, fx.Result, None]:
    """Back off for ``delay`` seconds before a retry, if the time budgets allow it."""
    state, limits = run.state, run.limits
    if limits.timed:
        limits.check_duration(state, delay)
    state.retries += 1
    if run.emit:
        run.emit(ev.RETRY, {"target": target, "kind": kind, "delay_s": delay})
    effect = fx.Wait(delay)
    waited = receive(effect, (yield effect))
    state.active_s += delay if waited is None else min(waited, delay)  # cut short
    check_abort(state)
