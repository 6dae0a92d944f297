"""The inner agent loop, as a sans-IO generator (read this file top to bottom).

:func:`agent_loop` yields effects (:mod:`sim.harness.effects`) and is sent
their results; it keeps no clock and does no I/O. Its driver performs each
effect: the simulation engines against a stochastic world, or a real driver
against a provider SDK. It returns the final :class:`HarnessState`, which is
in exactly one terminal state with a reason from
:data:`~sim.harness.state.OUTCOMES`.

One iteration (seed 000's order, with seed 001's controls):

1. external abort flag                      -> cancelled:external_signal
2. turn limit                               -> budget_exhausted:steps
3. assemble context: compact the oldest history when over
   ``context.compact_at_tokens``
4. budgets against the worst case of the call -> budget_exhausted:<budget>
5. context overflow: emergency compaction to half the window plus an alert,
   or failed:context_overflow when that is switched off
6. call the model; transient errors are retried here with backoff, without a
   model step; a server error (or a malformed reply) is retried once, then
   failed:model_error; a reported usage past a budget ends the run at once
7. stop_reason max_tokens: compact the oldest 60% and ask to continue
8. no tool call: a final answer; the verifier checks it (succeeded:verified)
   or it is accepted unverified (succeeded:model_complete); a rejection goes
   back to the model as an observation. In a conversation (``end_marker``
   set) a reply without the marker goes to the task-giver instead, whose
   answer goes back to the model, or who ends the run (succeeded:user_stop)
9. each tool call: policy (exists? arguments an object? required ones
   there? approval?), time budgets, run, harness retries of transient
   errors; errors that need a new plan go to the model; after
   ``tool_failure_limit`` consecutive failures of one tool the model is told
   to do without it
10. no-progress detector: nudge, then needs_human:no_progress
11. append the results, checkpoint, go round again

**One exit.** Wherever a run must end, :func:`_stop` raises the private
:class:`_Stop`; :func:`agent_loop` catches it in one place, records the end
(checked against the outcomes table), emits the terminal event, answers the
tool calls of a step it interrupted and saves a checkpoint of a resumable
ending. No step re-checks whether the run has ended.

**Distrust.** Every result sent back is checked first
(:mod:`sim.harness.protocol`): a wrong type raises
:class:`~sim.harness.protocol.ProtocolError`; impossible values (negative or
non-finite usage or durations, fields of the wrong type) end the run as
failed:invalid_response with a diagnostic.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, overload

from sim.harness import events as ev
from sim.harness.budgets import overshot, refuse_duration, refuse_model_call, refuse_retry
from sim.harness.classifier import (
    FATAL,
    SERVER,
    TRANSIENT,
    actionable_tool_error,
    backoff_s,
    classify_model_error,
    classify_tool_error,
    jitter_draw,
)
from sim.harness.context import apply_compaction, normalize, plan_compaction
from sim.harness.detector import (
    Detector,
    NoProgressDetector,
    canonical_call,
    observation_hash,
)
from sim.harness.effects import (
    CHECKPOINTS,
    ApprovalDecision,
    ApprovalRequest,
    Checkpoint,
    Effect,
    ModelError,
    ModelRequest,
    ModelResponse,
    Result,
    ToolError,
    ToolRequest,
    ToolResult,
    UserReply,
    UserTurn,
    Verdict,
    VerifyRequest,
    Wait,
)
from sim.harness.messages import (
    Block,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    billed_message,
    make_message,
    text_block,
)
from sim.harness.params import HarnessParams, Prices, ToolSpec
from sim.harness.policy import APPROVE, REJECT, check_call
from sim.harness.protocol import (
    ANSWERS,
    MAX_SECONDS,
    ProtocolError,
    check_answer,
    clean_response,
    clean_tool_result,
    content_problem,
    result_problem,
)
from sim.harness.state import (
    BUDGET_EXHAUSTED,
    CANCELLED,
    FAILED,
    NEEDS_HUMAN,
    RESUMABLE,
    RUNNING,
    SUCCEEDED,
    WAITING_APPROVAL,
    HarnessState,
    end_run,
    request_abort,
)

Loop = Generator[Effect, Result, HarnessState]
"""The loop as its driver sees it: yields effects, is sent results, returns the state."""
Emit = Callable[[str, dict[str, Any]], None] | None

CONTINUATION = "Your previous response was truncated. Continue from where you left off."
NUDGE_PREFIX = "[harness] No progress detected"


class _Stop(Exception):
    """The stop signal: raised where a run must end, caught once in agent_loop."""

    def __init__(self, status: str, reason: str, detail: dict[str, Any]) -> None:
        # no message: it is never shown (caught in agent_loop), and cheap to raise
        self.status = status
        self.reason = reason
        self.detail = detail


def _stop(status: str, reason: str, **detail: Any) -> NoReturn:
    """End the run as ``status:reason`` (with ``detail``) from wherever it is."""
    raise _Stop(status, reason, detail)


@dataclass(slots=True, eq=False)
class _Run:
    """What every part of one run reads: parameters, state, detector, the
    event emitter (None without observers), the tools by name, and, while a
    step's tool calls run, those calls and their observations so far.
    ``timed`` says whether a time budget (active or wall) is set, so a check
    of durations that no budget limits is not called for; ``cache_ttl_s`` is
    the parameters' prompt-cache lifetime, looked up once."""

    params: HarnessParams
    state: HarnessState
    detector: Detector
    emit: Emit
    tools: dict[str, ToolSpec]
    timed: bool
    cache_ttl_s: float | None
    open_calls: list[ToolUseBlock] | None = None
    blocks: list[Block] | None = None


def agent_loop(params: HarnessParams, state: HarnessState, *, detector: Detector | None = None,
               observers: Sequence[ev.Observer] = ()) -> Loop:
    """Run the loop until a terminal state; return the final state.

    ``state`` is a fresh state (:func:`~sim.harness.state.new_state`) or one
    restored from a checkpoint and made runnable with
    :func:`~sim.harness.state.resume`. A state that has already ended (a
    checkpoint of a finished run) is returned unchanged, without any effect.
    ``params`` are valid by construction. ``detector`` replaces the default
    :class:`~sim.harness.detector.NoProgressDetector`; ``params.detector.enabled``
    False switches any detector off.
    """
    if state.terminal:
        return state
    budgets = params.budgets
    run = _Run(params, state,
               detector if detector is not None else NoProgressDetector(params.detector),
               _emitter(state, observers), {spec.name: spec for spec in params.tools},
               budgets.active_s is not None or budgets.wall_s is not None, params.cache_ttl_s)
    compact_at = params.context.compact_at_tokens
    max_steps = budgets.steps
    checkpoints = CHECKPOINTS
    state.status = RUNNING
    if not state.model:
        state.model = params.model
    try:
        while True:
            if state.abort_requested:                                            # 1
                _stop(CANCELLED, "external_signal")
            if max_steps is not None and state.turns >= max_steps:
                _stop(BUDGET_EXHAUSTED, "steps")                                 # 2
            if compact_at is not None and state.context_tokens > compact_at:     # 3
                history = state.context_tokens - state.prefix_tokens
                yield from _compact(run, int(history * params.context.compact_fraction),
                                    "context_budget")
            _check_budgets(run, state.context_tokens, params.max_output_tokens)  # 4
            if state.context_tokens > params.context_window:                     # 5
                yield from _overflow(run)
                continue
            response = yield from _call_model(run, state.messages, state.context_tokens,
                                              params.max_output_tokens, "step")  # 6
            if isinstance(response, ModelError):  # the provider says the prompt is too long
                yield from _overflow(run)
                continue
            calls = _take_reply(run, response)
            if response.stop_reason == "max_tokens":                             # 7
                yield from _continue_truncated(run)
            elif not calls:                                                      # 8
                if params.end_marker is not None and not _has_marker(response.content,
                                                                     params.end_marker):
                    yield from _user_turn(run, response.content)
                else:
                    yield from _verify(run, response.content)
            else:                                                                # 9-10
                yield from _run_tools(run, calls)
            turn = state.turns                                                   # 11
            checkpoint = checkpoints[turn] if turn < len(checkpoints) else Checkpoint(turn)
            if (answer := (yield checkpoint)) is not None:
                raise ProtocolError(checkpoint, answer)
    except _Stop as stop:
        yield from _finish(run, stop)
    return state


def cancel(params: HarnessParams, state: HarnessState, *,
           observers: Sequence[ev.Observer] = ()) -> HarnessState:
    """End a run whose loop is not being driven (queued before its start, or
    resumed and waiting for capacity) as ``cancelled:external_signal``: the
    abort flag is set and the loop run once, so the end is recorded and
    observers see the terminal event like any other. A run that has already
    ended stays as it ended. (To cancel a run being driven, use
    :func:`~sim.harness.state.request_abort`.)"""
    if state.terminal:
        return state
    request_abort(state)
    loop = agent_loop(params, state, observers=observers)
    try:
        effect = next(loop)
    except StopIteration as stop:
        final: HarnessState = stop.value
        return final
    loop.close()
    raise RuntimeError(f"the loop asked for {effect!r} after an abort")  # pragma: no cover


def _finish(run: _Run, stop: _Stop) -> Generator[Effect, Result, None]:
    """Record the end, tell the observers, and leave a valid, resumable history."""
    state = run.state
    end_run(state, stop.status, stop.reason, stop.detail)
    if run.emit:
        run.emit(ev.TERMINAL, {"status": stop.status, "reason": stop.reason, **stop.detail})
    if run.open_calls is not None and run.blocks is not None:
        # stopped mid-step: answer the calls that did not run
        _close_unanswered(state, run.open_calls, run.blocks)
        if state.status in RESUMABLE:  # resumable from this step
            checkpoint = Checkpoint(state.turns)
            check_answer(checkpoint, (yield checkpoint))


# ------------------------------------------------------------------ checks
@overload
def _receive(effect: ModelRequest, result: Result) -> ModelResponse | ModelError: ...
@overload
def _receive(effect: ToolRequest, result: Result) -> ToolResult | ToolError: ...
@overload
def _receive(effect: ApprovalRequest, result: Result) -> ApprovalDecision: ...
@overload
def _receive(effect: VerifyRequest, result: Result) -> Verdict: ...
@overload
def _receive(effect: UserTurn, result: Result) -> UserReply: ...
@overload
def _receive(effect: Wait, result: Result) -> float | None: ...
@overload
def _receive(effect: Checkpoint, result: Result) -> None: ...
def _receive(effect: Effect, result: Result) -> Result:
    """``result`` if it may answer ``effect`` (else ProtocolError) and holds
    nothing impossible (else the run fails as failed:invalid_response)."""
    if not isinstance(result, ANSWERS[type(effect)]):
        raise ProtocolError(effect, result)
    if result is None:
        return None
    problem = result_problem(result)
    if problem is not None:
        _stop(FAILED, "invalid_response",
              diagnostic={"effect": type(effect).__name__, **problem})
    return result


def _check_abort(state: HarnessState) -> None:
    if state.abort_requested:
        _stop(CANCELLED, "external_signal")


def _check_budgets(run: _Run, prompt_tokens: int, max_output_tokens: int) -> None:
    """End the run if a model call of this size could overshoot a budget."""
    params = run.params
    prices = (params.prices if params.budgets.money_usd is None  # prices only bound money
              else _prices(params, run.state.model))
    reason = refuse_model_call(params, run.state, prompt_tokens, max_output_tokens, prices)
    if reason is not None:
        _stop(BUDGET_EXHAUSTED, reason)


# --------------------------------------------------------------- the reply
def _take_reply(run: _Run, response: ModelResponse) -> list[ToolUseBlock]:
    """Count the step, append the assistant message (sized as billed) and
    return the tool calls to run (none from a reply cut off at max_tokens)."""
    state = run.state
    state.turns += 1
    content = response.content
    if response.stop_reason == "max_tokens":  # a cut-off tool call cannot be run
        content = [b for b in content if not isinstance(b, ToolUseBlock)]
    usage = response.usage
    billed = usage.output_tokens + usage.thinking_tokens
    if len(content) == 1 and content[0].tokens == billed:  # the common case, kept as is
        message = Message("assistant", content, billed)
    else:
        message = billed_message(content, usage.output_tokens, usage.thinking_tokens)
    state.append(message)
    blocks = message.content
    if len(blocks) == 1:  # the common reply: one block
        only = blocks[0]
        calls = [only] if only.type == "tool_use" else []
    else:
        calls = [b for b in blocks if b.type == "tool_use"]
    if run.emit:
        run.emit(ev.MODEL_RESPONSE, {"stop_reason": response.stop_reason,
                                     "input_tokens": usage.prompt_tokens,
                                     "output_tokens": usage.output_tokens,
                                     "tool_calls": len(calls)})
    return calls


def _continue_truncated(run: _Run) -> Generator[Effect, Result, None]:
    """Output cut off at max_tokens: compact the oldest history, ask to continue."""
    state = run.state
    history = state.context_tokens - state.prefix_tokens
    yield from _compact(run, int(history * run.params.context.compact_fraction), "max_tokens")
    state.append(make_message("user", [text_block(CONTINUATION, "continuation")]))


# ------------------------------------------------------------- verification
def _verify(run: _Run, content: list[Block]) -> Generator[Effect, Result, None]:
    """Check a claimed success; a pass ends the run, a rejection goes back to
    the model as an observation. A paid check (a model grader) is first held
    against the budgets with its stated worst case."""
    params, state = run.params, run.state
    check = params.verifier
    if not check.enabled:
        _stop(SUCCEEDED, "model_complete")
    if check.max_prompt_tokens or check.max_output_tokens:
        _check_budgets(run, check.max_prompt_tokens, check.max_output_tokens)
    if check.max_duration_s:
        _check_duration(run, check.max_duration_s)
    answer = "".join(b.text for b in content if isinstance(b, TextBlock))
    request = VerifyRequest(answer, state.turns)
    verdict = _receive(request, (yield request))
    _spend(run, verdict.duration_s)
    _check_abort(state)  # cancelled while the check ran
    if verdict.usage is not None:
        _account(run, state.model, verdict.usage)
    if run.emit:
        run.emit(ev.VERIFIER, {"passed": verdict.passed})
    if verdict.passed:
        _stop(SUCCEEDED, "verified")
    state.verifier_rejections += 1
    feedback = verdict.feedback or "Verification failed: the task is not done yet."
    state.append(make_message("user", [TextBlock(
        feedback, verdict.feedback_tokens or text_block(feedback).tokens, "verifier")]))


# ------------------------------------------------------------- conversation
def _has_marker(content: list[Block], marker: str) -> bool:
    return any(isinstance(b, TextBlock) and marker in b.text for b in content)


def _user_turn(run: _Run, content: list[Block]) -> Generator[Effect, Result, None]:
    """Hand the model's message to the task-giver; append the answer, or end
    the run when the task-giver ends it (or the run is cancelled meanwhile)."""
    state = run.state
    message = "".join(b.text for b in content if isinstance(b, TextBlock))
    turn = UserTurn(message, state.turns)
    reply = _receive(turn, (yield turn))
    _spend(run, reply.duration_s)
    _check_abort(state)
    if reply.ended:
        _stop(SUCCEEDED, "user_stop")
    state.append(make_message("user", [TextBlock(reply.text, reply.tokens
                                                 or text_block(reply.text).tokens)]))


# --------------------------------------------------------------- model calls
def _call_model(run: _Run, messages: list[Message], prompt_tokens: int, max_output: int,
                purpose: str) -> Generator[Effect, Result, ModelResponse | ModelError]:
    """Call the model, retrying here what the harness can fix itself.

    Returns the :class:`ModelResponse`, or a context-overflow
    :class:`ModelError` for the caller to handle; ends the run on spent
    retries, a fatal or repeated server error, or a budget that refuses the
    next try. A reply whose content is unusable counts as a server error.
    """
    params, state = run.params, run.state
    policy = params.retry
    step = purpose == "step"
    cache_ttl = run.cache_ttl_s if step else None  # one-off summaries are not cached
    thinking = params.thinking.budget_tokens if step and params.thinking.enabled else 0
    tool_choice = params.tool_choice if step else "none"  # a summary is text
    attempt = 0
    server_errors = 0
    rate_limits = 0
    errors: list[str] = []
    while True:
        # every retry is a model call too: check it against the budgets, at the
        # prices of the model it goes to (it may follow a slow error or a switch
        # to the fallback model); the first try was checked by the caller
        if attempt or server_errors:
            _check_budgets(run, prompt_tokens, max_output)
        request = ModelRequest(state.model, messages, prompt_tokens, max_output, purpose,
                               state.turns, attempt, cache_ttl, thinking, params.system_prompt,
                               params.tool_definitions, tool_choice, params.temperature,
                               params.top_p, params.provider)
        answer = yield request
        if run.timed:  # a reply after the model timeout is a timeout: no budget overshot
            answer = _timed_out_reply(params, answer)
        if clean_response(answer):  # the common reply: every check passed in one pass
            state.active_s += answer.latency_s
            if state.abort_requested:  # cancelled in flight: the driver aborted the call
                _stop(CANCELLED, "external_signal")
            _account(run, answer.model or state.model, answer.usage)
            return answer
        result = _receive(request, answer)  # the thorough checks
        state.active_s += result.latency_s
        if state.abort_requested:  # cancelled in flight: the driver aborted the call
            _stop(CANCELLED, "external_signal")
        if isinstance(result, ModelResponse):
            _account(run, result.model or state.model, result.usage)
            problem = content_problem(result.content)
            if problem is None:
                return result
            result = ModelError(problem[0], message=problem[1], latency_s=result.latency_s)
        if len(errors) < MAX_DIAGNOSTIC_ERRORS:
            errors.append(f"{result.kind} {result.status}: {result.message}"[:500])
        cls = classify_model_error(result)
        if cls == SERVER:  # seed 000: retry once immediately, then fail with a diagnostic
            server_errors += 1
            if server_errors > policy.model_error_retries:
                _stop(FAILED, "model_error", diagnostic=_diagnostic(messages, errors))
            attempt += 1
            if run.emit:
                run.emit(ev.RETRY, {"target": "model", "kind": result.kind, "delay_s": 0.0})
            continue
        if cls != TRANSIENT:
            if result.kind == "context_overflow":
                return result
            _stop(FAILED, "model_error", diagnostic=_diagnostic(messages, errors))
        if result.kind == "rate_limit" or result.status == 429:
            rate_limits += 1
            state.rate_limit_retries += 1
            if (rate_limits >= policy.fallback_after and policy.fallback_model
                    and state.model != policy.fallback_model):
                state.model = policy.fallback_model  # seed 000: degraded mode
                attempt = 0
                if run.emit:
                    run.emit(ev.ALERT, {"alert": "fallback_model", "model": state.model})
        if attempt >= policy.max_attempts:
            _stop(FAILED, "retries_exhausted", diagnostic=_diagnostic(messages, errors))
        if refuse_retry(params, state) is not None:  # the run's retry budget
            _stop(BUDGET_EXHAUSTED, "retries")
        attempt += 1
        delay = backoff_s(policy, attempt, result.retry_after_s,
                          jitter_draw(f"model{state.turns}", attempt) if policy.jitter else 1.0)
        yield from _wait(run, delay, "model", result.kind)


MAX_DIAGNOSTIC_ERRORS = 20
"""The most errors a failed run's diagnostic lists (the first ones, each cut
to 500 characters): a run retried a thousand times keeps a small record."""


def _timed_out_reply(params: HarnessParams, answer: Result) -> Result:
    """``answer``, or a timeout error in its place when it reports a latency
    past ``params.model_timeout_s``: the harness gave up on the call then, so
    it counts that many seconds (the worst case its time budgets allowed for).
    An impossible latency (beyond :data:`~sim.harness.protocol.MAX_SECONDS`,
    NaN) is left for the checks, which end the run as failed:invalid_response."""
    latency = getattr(answer, "latency_s", None)
    if (isinstance(answer, ModelResponse | ModelError) and isinstance(latency, int | float)
            and not isinstance(latency, bool)
            and params.model_timeout_s < latency <= MAX_SECONDS):
        return ModelError("timeout", None, None,
                          f"no reply within model_timeout_s ({params.model_timeout_s:g} s)",
                          params.model_timeout_s)
    return answer


def _timed_out_tool(spec: ToolSpec, call: ToolUseBlock, result: Result) -> Result:
    """``result``, or a timeout error in its place when it reports a duration
    past the tool's ``timeout_s`` (the harness gave up on the call then)."""
    duration = getattr(result, "duration_s", None)
    if (isinstance(result, ToolResult | ToolError) and isinstance(duration, int | float)
            and not isinstance(duration, bool) and spec.timeout_s < duration <= MAX_SECONDS):
        text = f"{call.name} timed out after {spec.timeout_s:g} s"
        return ToolError("timeout", text, text_block(text).tokens, spec.timeout_s)
    return result


def _wait(run: _Run, delay: float, target: str, kind: str) -> Generator[Effect, Result, None]:
    """Back off for ``delay`` seconds before a retry, if the time budgets allow it."""
    state = run.state
    _check_duration(run, delay)
    state.retries += 1
    if run.emit:
        run.emit(ev.RETRY, {"target": target, "kind": kind, "delay_s": delay})
    wait = Wait(delay)
    waited = _receive(wait, (yield wait))
    state.active_s += delay if waited is None else min(waited, delay)  # cut short
    _check_abort(state)


def _spend(run: _Run, seconds: float) -> None:
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
            _stop(BUDGET_EXHAUSTED, reason)
    state.active_s += seconds


def _check_duration(run: _Run, seconds: float) -> None:
    if not run.timed:  # no time budget to overshoot
        return
    reason = refuse_duration(run.params, run.state, seconds)
    if reason is not None:
        _stop(BUDGET_EXHAUSTED, reason)


def _account(run: _Run, model: str, usage: Usage) -> None:
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
    state.cache_read_tokens += read
    state.cache_write_tokens += write
    state.thinking_tokens += thinking
    params = run.params
    prices = (params.prices if params.retry.fallback_prices is None and not params.model_prices
              else _prices(params, model))  # one price list: nothing to look up
    if prices.tiers:
        prices = prices.at(uncached + read + write)
    state.money_usd += prices.cost(uncached, output, read, write, thinking)
    reason = overshot(params, state)
    if reason is not None:
        _stop(BUDGET_EXHAUSTED, reason)


def _prices(params: HarnessParams, model: str) -> Prices:
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


# ---------------------------------------------------------------- tool calls
def _run_tools(run: _Run, calls: list[ToolUseBlock]) -> Generator[Effect, Result, None]:
    """Run the step's tool calls in order (9) and show each to the no-progress
    detector (10): a signal is answered with a nudge, or needs_human once the
    nudges are spent; the observations then go into the history (11)."""
    params, state = run.params, run.state
    blocks: list[Block] = []
    run.open_calls, run.blocks = calls, blocks  # answered by _finish if the run stops here
    detecting = params.detector.enabled  # off means off, for custom detectors too
    signal = None
    for call in calls:
        spec = run.tools.get(call.name)
        observation, metric = yield from _run_tool(run, call, spec, blocks)
        if detecting:
            found = run.detector.observe(state.detector, canonical_call(call.name, call.input),
                                         observation_hash(observation),
                                         spec is not None and spec.polling, metric)
            signal = signal or found
    if signal is not None:
        if state.nudges - state.detector.nudges_before >= params.detector.max_nudges:
            _stop(NEEDS_HUMAN, "no_progress", signal=signal)
        state.nudges += 1
        blocks.append(text_block(_nudge_text(signal, calls[-1]), "nudge"))
        if run.emit:
            run.emit(ev.NUDGE, {"signal": signal, "tool": calls[-1].name})
    run.open_calls = run.blocks = None
    state.append(make_message("user", blocks))


def _run_tool(run: _Run, call: ToolUseBlock, spec: ToolSpec | None, blocks: list[Block]
              ) -> Generator[Effect, Result, tuple[str, float | None]]:
    """Run one call through policy, budgets and the executor; append its
    observation (and any injected message) to ``blocks`` and return
    ``(observation text, objective metric or None)``. Ends the run on a fatal
    error, an approval timeout or a spent time budget."""
    params, state = run.params, run.state
    decision, message = check_call(params, call, spec)
    if decision == REJECT or spec is None:
        return _failure(params, state, call, message, blocks)
    if decision == APPROVE:
        state.status = WAITING_APPROVAL
        timeout = params.approval_timeout_s
        wall = params.budgets.wall_s
        if wall is not None:  # nobody may answer after the wall-time budget is spent
            timeout = min(timeout, max(0.0, wall - state.wall_s))
        request = ApprovalRequest(call, spec.effect, timeout)
        answer = _receive(request, (yield request))
        if wall is not None and answer.waited_s > timeout:  # past the wall budget: it stopped
            answer = ApprovalDecision(False, timeout, True, "no decision in time")
        state.status = RUNNING
        state.parked_s += answer.waited_s
        if run.emit:
            run.emit(ev.APPROVAL, {"tool": call.name, "approved": answer.approved,
                                   "timed_out": answer.timed_out, "waited_s": answer.waited_s})
        _check_abort(state)
        if answer.timed_out:
            if timeout < params.approval_timeout_s:
                _stop(BUDGET_EXHAUSTED, "wall_time", tool=call.name)
            _stop(CANCELLED, "approval_timeout", tool=call.name)
        if not answer.approved:
            why = f": {answer.reason}" if answer.reason else ""
            return _failure(params, state, call, f"denied{why}. Do not retry this action; "
                            f"choose another way or report.", blocks)
    attempt = 0
    while True:
        if state.abort_requested:
            _stop(CANCELLED, "external_signal")
        if run.timed:
            reason = refuse_duration(params, state, spec.timeout_s)
            if reason is not None:
                _stop(BUDGET_EXHAUSTED, reason)
        tool_request = ToolRequest(call, spec.timeout_s, attempt, state.turns)
        got = yield tool_request
        if run.timed:  # a result after the tool's timeout is a timeout: no budget overshot
            got = _timed_out_tool(spec, call, got)
        # the common result checked in one pass, anything else thoroughly
        result = got if clean_tool_result(got) else _receive(tool_request, got)
        state.active_s += result.duration_s
        if state.abort_requested:  # cancelled in flight: the driver aborted the call
            _stop(CANCELLED, "external_signal")
        state.tool_calls += 1
        if isinstance(result, ToolResult):
            state.tool_failures.pop(call.name, None)
            if run.emit:
                run.emit(ev.TOOL_EXECUTED, {"tool": call.name, "success": True,
                                            "duration_s": result.duration_s,
                                            "attempts": attempt + 1})
            blocks.append(ToolResultBlock(call.id, result.output, False, result.tokens))
            return result.output, result.metric
        cls = classify_tool_error(result)
        if run.emit:
            run.emit(ev.TOOL_EXECUTED, {"tool": call.name, "success": False, "kind": result.kind,
                                        "duration_s": result.duration_s,
                                        "attempts": attempt + 1})
        if cls == FATAL:
            _stop(FAILED, "tool_fatal", tool=call.name, error=result.message)
        retry = params.retry
        if (cls == TRANSIENT and retry.retry_tool_errors and attempt < params.tool_retries
                and refuse_retry(params, state) is None):
            attempt += 1
            delay = backoff_s(retry, attempt, result.retry_after_s,
                              jitter_draw(call.id, attempt) if retry.jitter else 1.0)
            yield from _wait(run, delay, call.name, result.kind)
            continue
        text = actionable_tool_error(call.name, result, attempt + 1)
        return _failure(params, state, call, text, blocks, result.tokens)


def _close_unanswered(state: HarnessState, calls: list[ToolUseBlock], blocks: list[Block]
                      ) -> None:
    """Append the step's observations, answering every call that has none with
    a 'not run' result, so the history stays valid (each tool_use has its
    tool_result) for a checkpoint and a later resume."""
    answered = {b.tool_use_id for b in blocks if isinstance(b, ToolResultBlock)}
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
    state.tool_errors += 1
    count = state.tool_failures.get(call.name, 0) + 1
    state.tool_failures[call.name] = count
    if count == params.tool_failure_limit:
        blocks.append(text_block(
            f"Tool {call.name} has failed {count} consecutive times. Proceed without it or "
            f"use an alternative approach.", "tool_disabled"))
    return text, None


# ----------------------------------------------------------------- recovery
def _compact(run: _Run, drop_tokens: int, why: str) -> Generator[Effect, Result, bool]:
    """Summarise the oldest history (at least ``drop_tokens`` tokens) with a
    model call and replace it by the summary; False if nothing was compacted
    (nothing old enough, or the provider found even the summary call too long)."""
    params, state = run.params, run.state
    plan = plan_compaction(state.messages, drop_tokens)
    if plan is None:
        return False
    span = state.messages[1:plan.cut]
    prompt = state.prefix_tokens + plan.tokens
    max_out = params.context.summary_max_tokens
    _check_budgets(run, prompt, max_out)
    response = yield from _call_model(run, span, prompt, max_out, "compaction")
    if isinstance(response, ModelError):
        return False
    text = "".join(b.text for b in response.content if isinstance(b, TextBlock))
    summary = TextBlock(f"Summary of earlier work: {text}", response.usage.output_tokens,
                        "summary")
    before = state.context_tokens
    state.messages = apply_compaction(state.messages, plan, summary)
    state.recount()
    state.compactions += 1
    if run.emit:
        run.emit(ev.COMPACTION, {"why": why, "before": before, "after": state.context_tokens})
    return True


def _overflow(run: _Run) -> Generator[Effect, Result, None]:
    """Context overflow: the token accounting let the prompt outgrow the window.
    Alert, compact to ``emergency_target`` of the window and continue, or fail."""
    params, state = run.params, run.state
    if not params.context.emergency_compaction:
        _stop(FAILED, "context_overflow", context_tokens=state.context_tokens)
    state.alerts += 1
    if run.emit:
        run.emit(ev.ALERT, {"alert": "context_overflow", "context_tokens": state.context_tokens})
    target = int(params.context_window * params.context.emergency_target)
    before = state.context_tokens
    # drop room for the summary too, so that the context with it fits the target
    done = yield from _compact(run, before - target + params.context.summary_max_tokens,
                               "overflow")
    if not done or state.context_tokens >= before or state.context_tokens > params.context_window:
        _stop(FAILED, "context_overflow", context_tokens=state.context_tokens)


# -------------------------------------------------------------------- helpers
def _emitter(state: HarnessState, observers: Sequence[ev.Observer]) -> Emit:
    if not observers:
        return None

    def emit(kind: str, data: dict[str, Any]) -> None:
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


def _diagnostic(messages: list[Message], errors: list[str]) -> dict[str, Any]:
    """The failing request with each message's content replaced by its SHA-256
    hash (privacy), plus the raw errors."""
    wire = normalize(messages, "anthropic")
    hashes = [{"role": m["role"], "sha256": hashlib.sha256(
        json.dumps(m["content"], sort_keys=True, default=str).encode()).hexdigest()}
        for m in wire]
    return {"request": hashes, "errors": errors}
