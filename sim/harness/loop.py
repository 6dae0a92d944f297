"""The inner agent loop, as a sans-IO generator (read this file top to bottom).

:func:`agent_loop` yields effects (:mod:`sim.harness.effects`) and is sent
their results; it keeps no clock and does no I/O. Its driver performs each
effect: the simulation engines against a stochastic world, or a real driver
against a provider SDK. It returns the final :class:`HarnessState`, which is
in exactly one terminal state with a reason.

One iteration (seed 000's order, with seed 001's controls):

1. external abort flag                      -> cancelled:external_signal
2. turn limit                               -> budget_exhausted:steps
3. assemble context: compact the oldest history when over
   ``context.compact_at_tokens``
4. budgets against the worst case of the call -> budget_exhausted:<budget>
5. context overflow: emergency compaction to half the window plus an alert,
   or failed:context_overflow when that is switched off
6. call the model; transient errors are retried here with backoff, without a
   model step; a server error is retried once, then failed:model_error
7. stop_reason max_tokens: compact the oldest 60% and ask to continue
8. no tool call: a final answer; the verifier checks it (succeeded:verified)
   or it is accepted unverified (succeeded:model_complete); a rejection goes
   back to the model as an observation
9. each tool call: policy (exists? arguments? approval?), time budgets, run,
   harness retries of transient errors; errors that need a new plan go to the
   model; after ``tool_failure_limit`` consecutive failures of one tool the
   model is told to do without it
10. no-progress detector: nudge, then needs_human:no_progress
11. append the results, checkpoint, go round again
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Generator, Sequence

from sim.harness import events as ev
from sim.harness.budgets import refuse_duration, refuse_model_call, refuse_retry
from sim.harness.context import apply_compaction, normalize, plan_compaction
from sim.harness.detector import (
    Detector,
    NoProgressDetector,
    canonical_call,
    observation_hash,
)
from sim.harness.effects import (
    ApprovalDecision,
    ApprovalRequest,
    Checkpoint,
    Effect,
    ModelError,
    ModelRequest,
    ModelResponse,
    Result,
    ToolRequest,
    ToolResult,
    VerifyRequest,
    Wait,
)
from sim.harness.errors import (
    FATAL,
    SERVER,
    TRANSIENT,
    actionable_tool_error,
    backoff_s,
    classify_model_error,
    classify_tool_error,
    jitter_draw,
)
from sim.harness.messages import (
    Block,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    make_message,
    text_block,
)
from sim.harness.params import HarnessParams, Prices, ToolSpec
from sim.harness.policy import APPROVE, REJECT, check_call
from sim.harness.state import (
    BUDGET_EXHAUSTED,
    CANCELLED,
    FAILED,
    NEEDS_HUMAN,
    RUNNING,
    SUCCEEDED,
    WAITING_APPROVAL,
    HarnessState,
)

Loop = Generator[Effect, Result, HarnessState]
Emit = Callable[[str, dict], None] | None

CONTINUATION = "Your previous response was truncated. Continue from where you left off."
NUDGE_PREFIX = "[harness] No progress detected"


def agent_loop(params: HarnessParams, state: HarnessState, *, detector: Detector | None = None,
               observers: Sequence[ev.Observer] = ()) -> Loop:
    """Run the loop until a terminal state; return the final state.

    ``state`` is a fresh state (:func:`~sim.harness.state.new_state`) or one
    restored from a checkpoint and made runnable with
    :func:`~sim.harness.state.resume`. A state that has already ended (a
    checkpoint of a finished run) is returned unchanged, without any effect.
    ``params`` must be valid (:meth:`HarnessParams.validate` is called here,
    before the first call).
    """
    _validate_once(params)
    if state.terminal:
        return state
    detector = detector if detector is not None else NoProgressDetector(params.detector)
    emit = _emitter(state, observers)
    budgets = params.budgets
    compact_at = params.context.compact_at_tokens
    tools = {spec.name: spec for spec in params.tools}
    detecting = params.detector.enabled  # off means off, for custom detectors too
    state.status = RUNNING
    if not state.model:
        state.model = params.model

    while True:
        # 1-2. abort flag and turn limit
        if state.abort_requested:
            return _end(state, CANCELLED, "external_signal", emit)
        if budgets.steps is not None and state.turns >= budgets.steps:
            return _end(state, BUDGET_EXHAUSTED, "steps", emit)

        # 3. assemble context: proactive compaction over the context budget
        if compact_at is not None and state.context_tokens > compact_at:
            history = state.context_tokens - state.prefix_tokens
            yield from _compact(params, state, int(history * params.context.compact_fraction),
                                "context_budget", emit)
            if state.terminal:
                return state

        # 4. budgets, against the worst case of this call
        reason = refuse_model_call(params, state, state.context_tokens, params.max_output_tokens,
                                   _prices(params, state.model))
        if reason is not None:
            return _end(state, BUDGET_EXHAUSTED, reason, emit)

        # 5. context overflow
        if state.context_tokens > params.context_window:
            yield from _overflow(params, state, emit)
            if state.terminal:
                return state
            continue

        # 6. call the model
        response = yield from _call_model(params, state, state.messages, state.context_tokens,
                                          params.max_output_tokens, "step", emit)
        if state.terminal:
            return state
        if isinstance(response, ModelError):  # the provider says the prompt is too long
            yield from _overflow(params, state, emit)
            if state.terminal:
                return state
            continue
        state.turns += 1
        truncated = response.stop_reason == "max_tokens"
        content = response.content
        if truncated:  # a cut-off tool call cannot be run
            content = [b for b in content if b.type != "tool_use"]
        usage = response.usage
        state.append(Message("assistant", content, usage.output_tokens + usage.thinking_tokens))
        calls = [b for b in content if b.type == "tool_use"]
        if emit:
            emit(ev.MODEL_RESPONSE, {"stop_reason": response.stop_reason,
                                     "input_tokens": usage.prompt_tokens,
                                     "output_tokens": usage.output_tokens,
                                     "tool_calls": len(calls)})

        # 7. truncated output: compact the oldest history, ask to continue
        if truncated:
            history = state.context_tokens - state.prefix_tokens
            yield from _compact(params, state, int(history * params.context.compact_fraction),
                                "max_tokens", emit)
            if state.terminal:
                return state
            state.append(make_message("user", [text_block(CONTINUATION, "continuation")]))
            yield Checkpoint(state.turns)
            continue

        # 8. a final answer: verify the claim
        if not calls:
            if not params.verifier.enabled:
                return _end(state, SUCCEEDED, "model_complete", emit)
            passed = yield from _verify(params, state, content, emit)
            if state.terminal:
                return state
            if passed:
                return _end(state, SUCCEEDED, "verified", emit)
            yield Checkpoint(state.turns)
            continue

        # 9. run the tool calls
        blocks: list[Block] = []
        signal = None
        for done, call in enumerate(calls):
            spec = tools.get(call.name)
            observed = yield from _run_tool(params, state, call, spec, blocks, emit)
            if state.terminal:  # stopped mid-step: answer the calls that did not run
                _close_unanswered(state, calls[done:], blocks)
                if state.status == BUDGET_EXHAUSTED:
                    yield Checkpoint(state.turns)  # resumable from this step
                return state
            # 10. no-progress detector, on the call and what it returned
            if not detecting:
                continue
            found = detector.observe(state.detector, canonical_call(call.name, call.input),
                                     observation_hash(observed[0]),
                                     spec is not None and spec.polling, observed[1])
            signal = signal or found
        if signal is not None:
            if state.detector.nudges >= params.detector.nudges:
                state.append(make_message("user", blocks))
                _end(state, NEEDS_HUMAN, "no_progress", emit, signal=signal)
                yield Checkpoint(state.turns)  # resumable from this step
                return state
            state.detector.nudges += 1
            state.nudges += 1
            blocks.append(text_block(_nudge_text(signal, calls[-1]), "nudge"))
            if emit:
                emit(ev.NUDGE, {"signal": signal, "tool": calls[-1].name})

        # 11. append the observations and checkpoint
        state.append(make_message("user", blocks))
        yield Checkpoint(state.turns)


# ------------------------------------------------------------- verification
def _verify(params: HarnessParams, state: HarnessState, content: list[Block], emit: Emit):
    """Check a claimed success; True if it passed. A rejection goes back to the
    model as an observation. A paid check (a model grader) is first held
    against the budgets with its stated worst case; if refused, or cancelled
    meanwhile, the run ends (and None is returned)."""
    check = params.verifier
    reason = None
    if check.max_prompt_tokens or check.max_output_tokens:
        reason = refuse_model_call(params, state, check.max_prompt_tokens,
                                   check.max_output_tokens, _prices(params, state.model))
    if reason is None and check.max_duration_s:
        reason = refuse_duration(params, state, check.max_duration_s)
    if reason is not None:  # the check itself could overshoot a budget
        _end(state, BUDGET_EXHAUSTED, reason, emit)
        return None
    answer = "".join(b.text for b in content if b.type == "text")
    verdict = yield VerifyRequest(answer, state.turns)
    state.active_s += verdict.duration_s
    if state.abort_requested:  # cancelled while the check ran
        _end(state, CANCELLED, "external_signal", emit)
        return None
    if verdict.usage is not None:
        _account(params, state, state.model, verdict.usage)
    if emit:
        emit(ev.VERIFIER, {"passed": verdict.passed})
    if verdict.passed:
        return True
    state.verifier_rejections += 1
    feedback = verdict.feedback or "Verification failed: the task is not done yet."
    state.append(make_message("user", [TextBlock(
        feedback, verdict.feedback_tokens or text_block(feedback).tokens, "verifier")]))
    return False


# --------------------------------------------------------------- model calls
def _call_model(params: HarnessParams, state: HarnessState, messages: list[Message],
                prompt_tokens: int, max_output: int, purpose: str, emit: Emit):
    """Call the model, retrying here what the harness can fix itself.

    Returns the :class:`ModelResponse`, a context-overflow :class:`ModelError`
    for the caller to handle, or None after ending the run (retries exhausted,
    fatal or repeated server error, or a budget that refuses the next try).
    """
    policy = params.retry
    step = purpose == "step"
    cache_ttl = params.cache_ttl_s if step else None  # one-off summaries are not cached
    thinking = params.thinking.budget_tokens if step and params.thinking.enabled else 0
    attempt = 0
    server_errors = 0
    rate_limits = 0
    errors: list[str] = []
    while True:
        # every retry is a model call too: check it against the budgets, at the
        # prices of the model it goes to (it may follow a slow error or a switch
        # to the fallback model); the first try was checked by the caller
        if attempt or server_errors:
            reason = refuse_model_call(params, state, prompt_tokens, max_output,
                                       _prices(params, state.model))
            if reason is not None:
                _end(state, BUDGET_EXHAUSTED, reason, emit)
                return None
        result = yield ModelRequest(state.model, messages, prompt_tokens, max_output, purpose,
                                    state.turns, attempt, cache_ttl, thinking)
        state.active_s += result.latency_s
        if state.abort_requested:  # cancelled in flight: the driver aborted the call
            _end(state, CANCELLED, "external_signal", emit)
            return None
        if isinstance(result, ModelResponse):
            _account(params, state, result.model or state.model, result.usage)
            return result
        errors.append(f"{result.kind} {result.status}: {result.message}")
        cls = classify_model_error(result)
        if cls == SERVER:  # seed 000: retry once immediately, then fail with a diagnostic
            server_errors += 1
            if server_errors > policy.model_error_retries:
                _end(state, FAILED, "model_error", emit, diagnostic=_diagnostic(messages, errors))
                return None
            attempt += 1
            if emit:
                emit(ev.RETRY, {"target": "model", "kind": result.kind, "delay_s": 0.0})
            continue
        if cls != TRANSIENT:
            if result.kind == "context_overflow":
                return result
            _end(state, FAILED, "model_error", emit, diagnostic=_diagnostic(messages, errors))
            return None
        if result.kind == "rate_limit" or result.status == 429:
            rate_limits += 1
            state.rate_limit_retries += 1
            if (rate_limits >= policy.fallback_after and policy.fallback_model
                    and state.model != policy.fallback_model):
                state.model = policy.fallback_model  # seed 000: degraded mode
                attempt = 0
                if emit:
                    emit(ev.ALERT, {"alert": "fallback_model", "model": state.model})
        if attempt >= policy.max_attempts:
            _end(state, FAILED, "retries_exhausted", emit,
                 diagnostic=_diagnostic(messages, errors))
            return None
        if refuse_retry(params, state) is not None:  # the run's retry budget
            _end(state, BUDGET_EXHAUSTED, "retries", emit)
            return None
        attempt += 1
        delay = backoff_s(policy, attempt, result.retry_after_s,
                          jitter_draw(f"model{state.turns}", attempt) if policy.jitter else 1.0)
        if not (yield from _wait(params, state, delay, "model", result.kind, emit)):
            return None


def _wait(params: HarnessParams, state: HarnessState, delay: float, target: str, kind: str,
          emit: Emit):
    """Back off for ``delay`` seconds before a retry; False if a time budget
    forbids it (the run has then ended)."""
    reason = refuse_duration(params, state, delay)
    if reason is not None:
        _end(state, BUDGET_EXHAUSTED, reason, emit)
        return False
    state.retries += 1
    if emit:
        emit(ev.RETRY, {"target": target, "kind": kind, "delay_s": delay})
    waited = yield Wait(delay)
    state.active_s += delay if waited is None else waited  # cut short by a cancellation
    if state.abort_requested:
        _end(state, CANCELLED, "external_signal", emit)
        return False
    return True


def _account(params: HarnessParams, state: HarnessState, model: str, usage: Usage) -> None:
    state.input_tokens += usage.input_tokens
    state.output_tokens += usage.output_tokens
    state.cache_read_tokens += usage.cache_read_tokens
    state.cache_write_tokens += usage.cache_write_tokens
    state.thinking_tokens += usage.thinking_tokens
    prices = _prices(params, model)
    if prices.tiers:
        prices = prices.at(usage.prompt_tokens)
    state.money_usd += prices.cost(usage.input_tokens, usage.output_tokens,
                                   usage.cache_read_tokens, usage.cache_write_tokens,
                                   usage.thinking_tokens)


def _prices(params: HarnessParams, model: str) -> Prices:
    """The prices of ``model``: the fallback's after a switch, else the run's."""
    retry = params.retry
    if retry.fallback_prices is not None and model == retry.fallback_model:
        return retry.fallback_prices
    return params.prices


_validated: list[HarnessParams] = []  # the last few parameter objects validated


def _validate_once(params: HarnessParams) -> None:
    """``params.validate()``, skipped when this very (immutable) object was
    validated recently: a sweep runs thousands of tasks per cell, and a resumed
    run alternates between a few budget sets."""
    for seen in _validated:
        if seen is params:
            return
    params.validate()
    _validated.append(params)
    del _validated[:-8]


# ---------------------------------------------------------------- tool calls
def _run_tool(params: HarnessParams, state: HarnessState, call: ToolUseBlock,
              spec: ToolSpec | None, blocks: list[Block], emit: Emit):
    """Run one call through policy, budgets and the executor; append its
    observation (and any injected message) to ``blocks`` and return
    ``(observation text, objective metric or None)``. Ends the run (and
    returns None) on a fatal error, an approval timeout or a spent time budget."""
    decision, message = check_call(params, call, spec)
    if decision == REJECT:
        return _failure(params, state, call, message, blocks)
    if decision == APPROVE:
        state.status = WAITING_APPROVAL
        timeout = params.approval_timeout_s
        wall = params.budgets.wall_s
        if wall is not None:  # nobody may answer after the wall-time budget is spent
            timeout = min(timeout, max(0.0, wall - state.wall_s))
        answer: ApprovalDecision = yield ApprovalRequest(call, spec.effect, timeout)
        state.status = RUNNING
        state.parked_s += answer.waited_s
        if emit:
            emit(ev.APPROVAL, {"tool": call.name, "approved": answer.approved,
                               "timed_out": answer.timed_out, "waited_s": answer.waited_s})
        if state.abort_requested:
            _end(state, CANCELLED, "external_signal", emit)
            return None
        if answer.timed_out:
            if timeout < params.approval_timeout_s:
                _end(state, BUDGET_EXHAUSTED, "wall_time", emit, tool=call.name)
            else:
                _end(state, CANCELLED, "approval_timeout", emit, tool=call.name)
            return None
        if not answer.approved:
            why = f": {answer.reason}" if answer.reason else ""
            return _failure(params, state, call, f"denied{why}. Do not retry this action; "
                            f"choose another way or report.", blocks)
    attempt = 0
    while True:
        if state.abort_requested:
            _end(state, CANCELLED, "external_signal", emit)
            return None
        reason = refuse_duration(params, state, spec.timeout_s)
        if reason is not None:
            _end(state, BUDGET_EXHAUSTED, reason, emit)
            return None
        result = yield ToolRequest(call, spec.timeout_s, attempt, state.turns)
        state.active_s += result.duration_s
        if state.abort_requested:  # cancelled in flight: the driver aborted the call
            _end(state, CANCELLED, "external_signal", emit)
            return None
        if isinstance(result, ToolResult):
            state.tool_calls += 1
            state.tool_failures.pop(call.name, None)
            if emit:
                emit(ev.TOOL_EXECUTED, {"tool": call.name, "success": True,
                                        "duration_s": result.duration_s, "attempts": attempt + 1})
            blocks.append(ToolResultBlock(call.id, result.output, False, result.tokens))
            return result.output, result.metric
        state.tool_calls += 1
        cls = classify_tool_error(result)
        if emit:
            emit(ev.TOOL_EXECUTED, {"tool": call.name, "success": False, "kind": result.kind,
                                    "duration_s": result.duration_s, "attempts": attempt + 1})
        if cls == FATAL:
            _end(state, FAILED, "tool_fatal", emit, tool=call.name, error=result.message)
            return None
        retry = params.retry
        if (cls == TRANSIENT and retry.retry_tool_errors and attempt < params.tool_retries
                and refuse_retry(params, state) is None):
            attempt += 1
            delay = backoff_s(retry, attempt, result.retry_after_s,
                              jitter_draw(call.id, attempt) if retry.jitter else 1.0)
            if not (yield from _wait(params, state, delay, call.name, result.kind, emit)):
                return None
            continue
        text = actionable_tool_error(call.name, result, attempt + 1)
        return _failure(params, state, call, text, blocks, result.tokens)


def _close_unanswered(state: HarnessState, calls: list[ToolUseBlock], blocks: list[Block]
                      ) -> None:
    """Append the step's observations, answering every call that has none with
    a 'not run' result, so the history stays valid (each tool_use has its
    tool_result) for a checkpoint and a later resume."""
    answered = {b.tool_use_id for b in blocks if b.type == "tool_result"}
    for call in calls:
        if call.id not in answered:
            text = f"Not run: the run stopped ({state.status}:{state.reason}) before {call.name}."
            blocks.append(ToolResultBlock(call.id, text, True, text_block(text).tokens))
    state.append(make_message("user", blocks))


def _failure(params: HarnessParams, state: HarnessState, call: ToolUseBlock, text: str,
             blocks: list[Block], tokens: int | None = None) -> tuple[str, None]:
    """Append an error observation for ``call``; after ``tool_failure_limit``
    consecutive failures of the tool, also tell the model to do without it."""
    block = ToolResultBlock(call.id, text, True, text_block(text).tokens if tokens is None
                            else tokens)
    blocks.append(block)
    count = state.tool_failures.get(call.name, 0) + 1
    state.tool_failures[call.name] = count
    if count == params.tool_failure_limit:
        blocks.append(text_block(
            f"Tool {call.name} has failed {count} consecutive times. Proceed without it or "
            f"use an alternative approach.", "tool_disabled"))
    return text, None


# ----------------------------------------------------------------- recovery
def _compact(params: HarnessParams, state: HarnessState, drop_tokens: int, why: str, emit: Emit):
    """Summarise the oldest history (at least ``drop_tokens`` tokens) with a
    model call and replace it by the summary; False if nothing was compacted."""
    plan = plan_compaction(state.messages, drop_tokens)
    if plan is None:
        return False
    span = state.messages[1:plan.cut]
    prompt = state.prefix_tokens + plan.tokens
    max_out = params.context.summary_max_tokens
    reason = refuse_model_call(params, state, prompt, max_out, _prices(params, state.model))
    if reason is not None:
        _end(state, BUDGET_EXHAUSTED, reason, emit)
        return False
    response = yield from _call_model(params, state, span, prompt, max_out, "compaction", emit)
    if response is None or isinstance(response, ModelError):
        return False
    text = "".join(b.text for b in response.content if b.type == "text")
    summary = TextBlock(f"Summary of earlier work: {text}", response.usage.output_tokens,
                        "summary")
    before = state.context_tokens
    state.messages = apply_compaction(state.messages, plan, summary)
    state.recount()
    state.compactions += 1
    if emit:
        emit(ev.COMPACTION, {"why": why, "before": before, "after": state.context_tokens})
    return True


def _overflow(params: HarnessParams, state: HarnessState, emit: Emit):
    """Context overflow: the token accounting let the prompt outgrow the window.
    Alert, compact to ``emergency_target`` of the window and continue, or fail."""
    if not params.context.emergency_compaction:
        _end(state, FAILED, "context_overflow", emit, context_tokens=state.context_tokens)
        return
    state.alerts += 1
    if emit:
        emit(ev.ALERT, {"alert": "context_overflow", "context_tokens": state.context_tokens})
    target = int(params.context_window * params.context.emergency_target)
    before = state.context_tokens
    # drop room for the summary too, so that the context with it fits the target
    done = yield from _compact(params, state,
                               before - target + params.context.summary_max_tokens,
                               "overflow", emit)
    if state.terminal:
        return
    if not done or state.context_tokens >= before or state.context_tokens > params.context_window:
        _end(state, FAILED, "context_overflow", emit, context_tokens=state.context_tokens)


# -------------------------------------------------------------------- ending
def _end(state: HarnessState, status: str, reason: str, emit: Emit, **detail) -> HarnessState:
    """Put the run in its terminal state (exactly once) and return it."""
    if state.terminal:
        raise RuntimeError(f"run already ended as {state.status}:{state.reason}")
    state.status, state.reason = status, reason
    state.detail = detail
    if emit:
        emit(ev.TERMINAL, {"status": status, "reason": reason, **detail})
    return state


def _emitter(state: HarnessState, observers: Sequence[ev.Observer]) -> Emit:
    if not observers:
        return None

    def emit(kind: str, data: dict) -> None:
        event = ev.Event(kind, state.turns, data)
        for observer in observers:
            observer(event)

    return emit


def _nudge_text(signal: str, call: ToolUseBlock) -> str:
    what = {"repetition": f"you have called {call.name} with the same arguments several times",
            "cycle": "your recent tool calls repeat in a cycle",
            "no_new_information": "your recent tool calls returned nothing new",
            "no_objective_movement": "the objective has not improved for several steps",
            }.get(signal, signal)
    return (f"{NUDGE_PREFIX} ({signal}): {what}. "
            f"Change approach, or stop and report what blocks you.")


def _diagnostic(messages: list[Message], errors: list[str]) -> dict:
    """The failing request with each message's content replaced by its SHA-256
    hash (privacy), plus the raw errors."""
    wire = normalize(messages, "anthropic")
    hashes = [{"role": m["role"], "sha256": hashlib.sha256(
        json.dumps(m["content"], sort_keys=True, default=str).encode()).hexdigest()}
        for m in wire]
    return {"request": hashes, "errors": errors}
