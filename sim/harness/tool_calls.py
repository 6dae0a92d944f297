"""A step's tool calls (step 9) and the no-progress detector (step 10).

Each call goes through the policy (does the tool exist, are the arguments
an object with the required ones, does it need approval), the time budgets
and the driver; transient errors are retried by the harness with backoff;
errors that need a new plan go back to the model as observations, and after
``tool_failure_limit`` consecutive failures of one tool the model is told to
do without it. The detector sees every call: a signal is answered with a
nudge, then with needs_human:no_progress.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from math import isfinite
from typing import Any, TypeGuard

from sim.harness import events as ev
from sim.harness.budgets import LimitExceeded
from sim.harness.classifier import (
    FATAL,
    TRANSIENT,
    actionable_tool_error,
    backoff_s,
    classify_tool_error,
    jitter_draw,
)
from sim.harness.detector import canonical_call, observation_hash
from sim.harness.effects import (
    ApprovalDecision,
    ApprovalRequest,
    Effect,
    Result,
    ToolError,
    ToolRequest,
    ToolResult,
)
from sim.harness.guards import Run, check_abort, check_ready, receive, stop, wait
from sim.harness.messages import (
    Block,
    Message,
    ToolResultBlock,
    ToolUseBlock,
    make_message,
    text_block,
)
from sim.harness.params import HarnessParams, SubagentParams, ToolSpec
from sim.harness.policy import ALLOW, APPROVE, REJECT, check_call
from sim.harness.protocol import MAX_SECONDS, MAX_TOKENS
from sim.harness.state import (
    CANCELLED,
    FAILED,
    NEEDS_HUMAN,
    RUNNING,
    WAITING_APPROVAL,
    HarnessState,
)
from sim.harness.subagents import spawn

NUDGE_PREFIX = "[harness] No progress detected"

_new = object.__new__
"""The fast paths build their per-step objects field by field (every field
set, as ``__init__`` sets them; see :func:`~sim.harness.model_calls.step_request`)."""


def run_tools(run: Run, calls: list[ToolUseBlock]) -> Generator[Effect, Result, None]:
    """Run the step's tool calls in order (9) and show each to the no-progress
    detector (10): a signal is answered with a nudge, or needs_human once the
    nudges are spent; the observations then go into the history (11)."""
    params, state = run.params, run.state
    blocks: list[Block] = []
    run.open_calls, run.blocks = calls, blocks  # answered by agent_loop if the run stops here
    detecting = params.detector.enabled  # off means off, for custom detectors too
    signal = None
    rules = params.subagents
    for call in calls:
        spec = run.tools.get(call.name)
        if rules is not None and call.name == rules.tool:  # a child run: sim.harness.subagents
            observation, metric = yield from _spawn(run, call, rules, blocks)
        elif spec is not None and check_call(params, call, spec)[0] == ALLOW:
            # the common call, its first try on a fast path (check_ready only when it can stop)
            if state.abort_requested or run.limits.timed:
                check_ready(run, spec.timeout_s)
            request = _new(ToolRequest)  # ToolRequest(call, spec.timeout_s, 0, state.turns)
            request.call, request.timeout_s = call, spec.timeout_s
            request.attempt, request.turn = 0, state.turns
            answer = yield request
            if _took_result(answer, run, request, blocks):
                observation, metric = answer.output, answer.metric
            else:
                observation, metric = yield from _tries(run, call, spec, blocks, request,
                                                        answer)
        else:
            observation, metric = yield from _run_tool(run, call, spec, blocks)
        if detecting:
            found = run.detector.observe(state.detector, canonical_call(call.name, call.input),
                                         observation if len(observation) <= 64
                                         else observation_hash(observation),
                                         spec is not None and spec.polling, metric)
            signal = signal or found
    if signal is not None:
        if state.nudges - state.detector.nudges_before >= params.detector.max_nudges:
            stop(NEEDS_HUMAN, "no_progress", signal=signal)
        state.nudges += 1
        blocks.append(text_block(_nudge_text(signal, calls[-1]), "nudge"))
        if run.emit:
            run.emit(ev.NUDGE, {"signal": signal, "tool": calls[-1].name})
    run.open_calls = run.blocks = None
    # the tokens of the observations (a step of one call has one block)
    tokens = blocks[0].tokens if len(blocks) == 1 else sum(b.tokens for b in blocks)
    # after the step's assistant message: state.append of make_message("user", blocks)
    message: Message = _new(Message)  # Message("user", blocks, tokens)
    message.role, message.content, message.tokens = "user", blocks, tokens
    state.messages.append(message)
    state.context_tokens += tokens


def _spawn(run: Run, call: ToolUseBlock, rules: SubagentParams, blocks: list[Block]
           ) -> Generator[Effect, Result, tuple[str, None]]:
    """Run the subagent call ``call`` (:func:`~sim.harness.subagents.spawn`)
    and append its observation: a tool result, or a tool error counted as
    :func:`_failure` counts any."""
    text, error, tokens = yield from spawn(run, call, rules)
    if error:
        return _failure(run.params, run.state, call, text, blocks, tokens)
    run.state.tool_failures.pop(call.name, None)
    blocks.append(ToolResultBlock(call.id, text, False, tokens))
    return text, None


def _took_result(answer: Result, run: Run, request: ToolRequest, blocks: list[Block]
                 ) -> TypeGuard[ToolResult]:
    """The common answer on a fast path: True when ``answer`` is a well-formed
    :class:`ToolResult` (within the tool's timeout when a time budget is set),
    which is then counted and observed as :func:`_tries` would; False, with
    nothing done, for anything else (:func:`_tries` takes it)."""
    if type(answer) is not ToolResult:
        return False
    duration, tokens, metric = answer.duration_s, answer.tokens, answer.metric
    if not ((type(duration) is float or type(duration) is int)  # well_formed_tool_result
            and 0.0 <= duration <= MAX_SECONDS and type(answer.output) is str
            and type(tokens) is int and 0 <= tokens < MAX_TOKENS
            and (metric is None or (type(metric) is float and isfinite(metric)))):
        return False
    if run.limits.timed and not (type(duration) is float and duration <= request.timeout_s):
        return False
    state = run.state
    state.active_s += duration
    if state.abort_requested:  # cancelled in flight: the driver aborted the call
        stop(CANCELLED, "external_signal")
    state.tool_calls += 1
    call = request.call
    if state.tool_failures:  # no failures to forget in the common case
        state.tool_failures.pop(call.name, None)
    if run.emit:
        _executed(run.emit, request, answer)
    block: ToolResultBlock = _new(ToolResultBlock)  # (call.id, output, False, tokens)
    block.tool_use_id, block.content, block.is_error = call.id, answer.output, False
    block.tokens, block.type = tokens, "tool_result"
    blocks.append(block)
    return True


def _run_tool(run: Run, call: ToolUseBlock, spec: ToolSpec | None, blocks: list[Block]
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
        denied = yield from _approval(run, call, spec)
        if denied is not None:
            return _failure(params, state, call, denied, blocks)
    check_ready(run, spec.timeout_s)
    request = ToolRequest(call, spec.timeout_s, 0, state.turns)
    return (yield from _tries(run, call, spec, blocks, request, (yield request)))


def _tries(run: Run, call: ToolUseBlock, spec: ToolSpec, blocks: list[Block],
           request: ToolRequest, answer: Result
           ) -> Generator[Effect, Result, tuple[str, float | None]]:
    """The rest of one call once ``answer`` came back for ``request``, its
    first try: the checks, the harness's retries of transient errors, and the
    observation (see :func:`_run_tool`)."""
    params, state = run.params, run.state
    attempt = 0
    while True:
        if run.limits.timed:  # a result after the tool's timeout is a timeout
            answer = _timed_out_tool(spec, call, answer)
        result = receive(request, answer)
        state.active_s += result.duration_s
        check_abort(state)  # cancelled in flight: the driver aborted the call
        state.tool_calls += 1
        if isinstance(result, ToolResult):
            state.tool_failures.pop(call.name, None)
            if run.emit:
                _executed(run.emit, request, result)
            blocks.append(ToolResultBlock(call.id, result.output, False, result.tokens))
            return result.output, result.metric
        if run.emit:
            _executed(run.emit, request, result)
        cls = classify_tool_error(result)
        if cls == FATAL:
            stop(FAILED, "tool_fatal", tool=call.name, error=result.message)
        if not (cls == TRANSIENT and _may_retry(run, attempt)):
            text = actionable_tool_error(call.name, result, attempt + 1)
            return _failure(params, state, call, text, blocks, result.tokens)
        attempt += 1
        retry = params.retry
        delay = backoff_s(retry, attempt, result.retry_after_s,
                          jitter_draw(call.id, attempt) if retry.jitter else 1.0)
        yield from wait(run, delay, call.name, result.kind)
        check_ready(run, spec.timeout_s)
        request = ToolRequest(call, spec.timeout_s, attempt, state.turns)
        answer = yield request


def _may_retry(run: Run, attempt: int) -> bool:
    """Whether the harness retries a transient tool error after ``attempt``
    retries: switched on, tries left, and the run's retry budget not spent."""
    params = run.params
    return (params.retry.retry_tool_errors and attempt < params.tool_retries
            and run.limits.may_retry(run.state))


def _executed(emit: Callable[[str, dict[str, Any]], None], request: ToolRequest,
              result: ToolResult | ToolError) -> None:
    """Tell the observers that a tool call ran (and how)."""
    data: dict[str, Any] = {"tool": request.call.name, "success": isinstance(result, ToolResult)}
    if isinstance(result, ToolError):
        data["kind"] = result.kind
    data["duration_s"] = result.duration_s
    data["attempts"] = request.attempt + 1
    emit(ev.TOOL_EXECUTED, data)


def _approval(run: Run, call: ToolUseBlock, spec: ToolSpec
              ) -> Generator[Effect, Result, str | None]:
    """Ask for approval of ``call``: None when approved, else the observation
    text of a denial; ends the run when nobody decides in time (or within the
    wall-time budget) or the run is cancelled meanwhile."""
    params, state = run.params, run.state
    state.status = WAITING_APPROVAL
    timeout = params.approval_timeout_s
    wall_left = run.limits.wall_left(state)
    if wall_left is not None:  # nobody may answer after the wall-time budget is spent
        timeout = min(timeout, wall_left)
    request = ApprovalRequest(call, spec.effect, timeout)
    answer = receive(request, (yield request))
    if wall_left is not None and answer.waited_s > timeout:  # past the wall budget: it stopped
        answer = ApprovalDecision(False, timeout, True, "no decision in time")
    state.status = RUNNING
    state.parked_s += answer.waited_s
    if run.emit:
        run.emit(ev.APPROVAL, {"tool": call.name, "approved": answer.approved,
                               "timed_out": answer.timed_out, "waited_s": answer.waited_s})
    check_abort(state)
    if answer.timed_out:
        if timeout < params.approval_timeout_s:
            raise LimitExceeded("wall_time", tool=call.name)
        stop(CANCELLED, "approval_timeout", tool=call.name)
    if answer.approved:
        return None
    why = f": {answer.reason}" if answer.reason else ""
    return f"denied{why}. Do not retry this action; choose another way or report."


def _timed_out_tool(spec: ToolSpec, call: ToolUseBlock, result: Result) -> Result:
    """``result``, or a timeout error in its place when it reports a duration
    past the tool's ``timeout_s`` (the harness gave up on the call then)."""
    duration = getattr(result, "duration_s", None)
    if (isinstance(result, ToolResult | ToolError) and isinstance(duration, int | float)
            and not isinstance(duration, bool) and spec.timeout_s < duration <= MAX_SECONDS):
        text = f"{call.name} timed out after {spec.timeout_s:g} s"
        return ToolError("timeout", text, text_block(text).tokens, spec.timeout_s)
    return result


def close_unanswered(state: HarnessState, calls: list[ToolUseBlock], blocks: list[Block]
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


def _nudge_text(signal: str, call: ToolUseBlock) -> str:
    what = {"repetition": f"you have called {call.name} with the same arguments several times",
            "cycle": "your recent tool calls repeat in a cycle",
            "no_new_information": "your recent tool calls returned nothing new",
            "no_objective_movement": "the objective has not improved for several steps",
            }.get(signal, signal)
    return (f"{NUDGE_PREFIX} ({signal}): {what}. "
            f"Change approach, or stop and report what blocks you.")
