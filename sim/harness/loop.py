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
   (with ``visibility.on_limit`` finalize or ask, a step, token or money
   limit makes one tool-free call for the final answer, verified as in 8:
   succeeded:finalized, or parks for a human who may extend the budgets
   once: needs_human:limit; :mod:`sim.harness.on_limit`)
3. assemble context: the results of children started without waiting
   that have ended (sim.harness.subagents), then compact the oldest
   history when over ``context.compact_at_tokens``; with
   ``visibility.show_budget`` a note of what the budgets leave
4. budgets against the worst case of the call -> budget_exhausted:<budget>
5. context overflow: emergency compaction to half the window plus an alert,
   or failed:context_overflow when that is switched off
6. call the model; transient errors are retried here with backoff, without a
   model step; a server error (or a malformed reply) is retried once, then
   failed:model_error; a reported usage past a budget ends the run at once
7. stop_reason max_tokens: compact the oldest 60% and ask to continue
8. no tool call: a final answer (taken once no child started without
   waiting still runs); the verifier checks it (succeeded:verified)
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

**One exit.** Wherever a run must end, :func:`~sim.harness.state.stop`
raises :class:`~sim.harness.state.Stop` (a spent budget its subclass
:class:`~sim.harness.budgets.LimitExceeded`); :func:`agent_loop` catches it in
one place, records the end
(checked against the outcomes table), emits the terminal event, answers the
tool calls of a step it interrupted and saves a checkpoint of a resumable
ending. No step re-checks whether the run has ended.

**Distrust.** Every result sent back is checked first, on one path
(:func:`~sim.harness.guards.receive`, :mod:`sim.harness.protocol`): a wrong type raises
:class:`~sim.harness.protocol.ProtocolError`; impossible values (negative or
non-finite usage or durations, fields of the wrong type) end the run as
failed:invalid_response with a diagnostic.

The steps' parts live beside this file: :mod:`sim.harness.budgets` (every
budget rule, 2 and 4), :mod:`sim.harness.guards` (what a run shares, the
checks each step repeats),
:mod:`sim.harness.model_calls` (6), :mod:`sim.harness.recovery` (3, 5, 7)
and :mod:`sim.harness.tool_calls` (9, 10).
"""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence

from sim.harness import events as ev
from sim.harness.budgets import FINALIZABLE, LimitExceeded, Limits
from sim.harness.detector import Detector, NoProgressDetector
from sim.harness.effects import (
    CHECKPOINTS,
    Checkpoint,
    Effect,
    ModelError,
    ModelResponse,
    Result,
    UserTurn,
    VerifyRequest,
)
from sim.harness.guards import (
    Run,
    Stop,
    account,
    check_abort,
    emitter,
    receive,
    spend,
    stop,
)
from sim.harness.messages import (
    Block,
    Message,
    TextBlock,
    ToolUseBlock,
    billed_message,
    make_message,
    text_block,
)
from sim.harness.model_calls import answered, step_request, took_reply
from sim.harness.on_limit import ask, finalize_call
from sim.harness.params import HarnessParams
from sim.harness.protocol import ProtocolError, check_answer
from sim.harness.recovery import CONTINUATION, compact_history, continue_truncated, overflow
from sim.harness.retry_budget import RetryBudget
from sim.harness.scopes import Ledger
from sim.harness.state import (
    CANCELLED,
    RESUMABLE,
    RUNNING,
    SUCCEEDED,
    HarnessState,
    end_run,
    request_abort,
)
from sim.harness.subagents import collect
from sim.harness.tool_calls import NUDGE_PREFIX, close_unanswered, run_tools

__all__ = ["CONTINUATION", "NUDGE_PREFIX", "Loop", "agent_loop", "cancel"]

Loop = Generator[Effect, Result, HarnessState]
"""The loop as its driver sees it: yields effects, is sent results, returns the state."""


def agent_loop(params: HarnessParams, state: HarnessState, *, detector: Detector | None = None,
               observers: Sequence[ev.Observer] = (), retry_budget: RetryBudget | None = None,
               retry_key: str = "", ledgers: Sequence[Ledger] | None = None,
               started_s: float = 0.0) -> Loop:
    """Run the loop until a terminal state; return the final state.

    ``state`` is a fresh state (:func:`~sim.harness.state.new_state`) or one
    restored from a checkpoint and made runnable with
    :func:`~sim.harness.state.resume`. A state that has already ended (a
    checkpoint of a finished run) is returned unchanged, without any effect.
    ``params`` are valid by construction. ``detector`` replaces the default
    :class:`~sim.harness.detector.NoProgressDetector`; ``params.detector.enabled``
    False switches any detector off. ``retry_budget``: the retry bucket this
    run shares with the other runs of its client (None: none); ``retry_key``:
    the run's key for jitter draws (``params.retry.jitter_scope: run``).
    ``ledgers`` are the shared budgets' ledgers the run charges (its
    session's, its tenant's; None: its own, one per
    ``params.shared_budgets``), ``started_s`` the driver's clock at its start
    (:class:`~sim.harness.budgets.Limits`).
    """
    if state.terminal:
        return state
    limits = Limits(params, ledgers, started_s)
    run = Run(params, state,
              detector if detector is not None else NoProgressDetector(params.detector),
              emitter(state, observers), {spec.name: spec for spec in params.tools},
              limits, params.cache_ttl_s,
              params.thinking.budget_tokens if params.thinking.enabled else 0,
              retry_budget=retry_budget, retry_key=retry_key)
    compact_at = _limit(params.context.compact_at_tokens)
    checkpoints, shared = CHECKPOINTS, len(CHECKPOINTS)
    show_budget, on_limit = params.visibility.show_budget, params.visibility.on_limit
    state.status = RUNNING
    if not state.model:
        state.model = params.model
    try:
        while True:
            if state.abort_requested:                                            # 1
                stop(CANCELLED, "external_signal")
            try:
                limits.check_before_step(state)                                  # 2
                if state.pending_children:  # results of children started without waiting
                    yield from collect(run, False)
                if state.context_tokens > compact_at:                            # 3
                    yield from compact_history(run, "context_budget")
                if show_budget:  # the model is told what its budgets leave
                    state.append(make_message("user", [text_block(
                        limits.budget_note(state), "budget")]))
                request = step_request(run)  # 4; None when the context overflows (5), else 6
            except LimitExceeded as end:
                if on_limit == "stop" or end.limit not in FINALIZABLE:
                    raise
                if on_limit == "ask":
                    yield from ask(run, end)  # extended: go round again
                    continue
                yield from _final_answer(run, (yield from finalize_call(run, end)), end)
            if request is None:
                yield from overflow(run)
                continue
            answer = yield request
            if took_reply(answer, run):  # the common reply, on a fast path
                response: ModelResponse | ModelError = answer
            else:
                response = yield from answered(run, request, answer)
            if isinstance(response, ModelError):  # the provider says the prompt is too long
                yield from overflow(run)
                continue
            calls = _take_reply(run, response)
            if response.stop_reason == "max_tokens":                             # 7
                yield from continue_truncated(run)
            elif not calls:                                                      # 8
                yield from _final_answer(run, response.content)
            else:                                                                # 9-10
                yield from run_tools(run, calls)
            turn = state.turns                                                   # 11
            checkpoint = checkpoints[turn] if turn < shared else Checkpoint(turn)
            if (answer := (yield checkpoint)) is not None:
                raise ProtocolError(checkpoint, answer)
    except Stop as end:
        yield from _finish(run, end)
    return state


def _limit(value: int | None) -> float:
    """``value``, or math.inf for an unset limit (never reached)."""
    return math.inf if value is None else value


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
    except StopIteration as end:
        final: HarnessState = end.value
        return final
    loop.close()
    raise RuntimeError(f"the loop asked for {effect!r} after an abort")  # pragma: no cover


def _finish(run: Run, end: Stop) -> Generator[Effect, Result, None]:
    """Record the end, tell the observers, and leave a valid, resumable history."""
    state = run.state
    end_run(state, end.status, end.reason, end.detail)
    if run.limits.ledgers:
        run.limits.release(state)
    if run.emit:
        run.emit(ev.TERMINAL, {"status": end.status, "reason": end.reason, **end.detail})
    if run.open_calls is not None and run.blocks is not None:
        # stopped mid-step: answer the calls that did not run
        close_unanswered(state, run.open_calls, run.blocks)
        if state.status in RESUMABLE:  # resumable from this step
            checkpoint = Checkpoint(state.turns)
            check_answer(checkpoint, (yield checkpoint))


# --------------------------------------------------------------- the reply
def _take_reply(run: Run, response: ModelResponse) -> list[ToolUseBlock]:
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
        message: Message = _new(Message)  # Message("assistant", content, billed), by field
        message.role, message.content, message.tokens = "assistant", content, billed
        state.messages.append(message)  # state.append's effect
        state.context_tokens += billed
        only = content[0]  # a tool_use block: the step's one call, in the message's own list
        calls: list[ToolUseBlock] = (
            content if only.type == "tool_use" else [])  # type: ignore[assignment]
    else:
        message = billed_message(content, usage.output_tokens, usage.thinking_tokens)
        state.append(message)
        blocks = message.content
        calls = [b for b in blocks if b.type == "tool_use"]
    if run.emit:
        run.emit(ev.MODEL_RESPONSE, {"stop_reason": response.stop_reason,
                                     "input_tokens": usage.prompt_tokens,
                                     "output_tokens": usage.output_tokens,
                                     "tool_calls": len(calls)})
    return calls


_new = object.__new__
"""Per-step objects are built field by field (every field set, as ``__init__``
sets them): CPython 3.11 calls a dataclass's ``__init__`` through a slow path
(see :func:`~sim.harness.model_calls.step_request`)."""


def _final_answer(run: Run, content: list[Block], limit: LimitExceeded | None = None
                  ) -> Generator[Effect, Result, None]:
    """A reply without tool calls (8): in a conversation (``end_marker`` set)
    one without the marker goes to the task-giver, anything else to the
    verifier. The answer of a finalize call (``limit``: the refusal that
    asked for it) goes to the verifier and always ends the run:
    ``succeeded:finalized`` when accepted, else as ``limit``."""
    if limit is not None:
        yield from _verify(run, content, True)
        raise LimitExceeded(limit.limit, finalize="rejected", **limit.detail)
    if run.state.pending_children:  # not before the children have ended: go round again
        yield from collect(run, True)
        return
    marker = run.params.end_marker
    if marker is not None and not any(isinstance(b, TextBlock) and marker in b.text
                                      for b in content):
        yield from _user_turn(run, content)
    else:
        yield from _verify(run, content)


# ------------------------------------------------------------- verification
def _verify(run: Run, content: list[Block], finalized: bool = False
            ) -> Generator[Effect, Result, None]:
    """Check a claimed success; a pass ends the run (``succeeded:finalized``
    for the answer of a finalize call), a rejection goes back to the model
    as an observation. A paid check (a model grader) is first held against
    the budgets with its stated worst case."""
    params, state = run.params, run.state
    check = params.verifier
    if not check.enabled:
        if finalized:
            stop(SUCCEEDED, "finalized")
        stop(SUCCEEDED, "model_complete")
    if check.max_prompt_tokens or check.max_output_tokens:
        run.limits.check_before_model_call(state, check.max_prompt_tokens,
                                           check.max_output_tokens)
    if check.max_duration_s and run.limits.timed:
        run.limits.check_duration(state, check.max_duration_s)
    answer = "".join(b.text for b in content if isinstance(b, TextBlock))
    request = VerifyRequest(answer, state.turns)
    verdict = receive(request, (yield request))
    spend(run, verdict.duration_s)
    check_abort(state)  # cancelled while the check ran
    if verdict.usage is not None:
        account(run, state.model, verdict.usage)
    if run.emit:
        run.emit(ev.VERIFIER, {"passed": verdict.passed})
    if verdict.passed:
        if finalized:
            stop(SUCCEEDED, "finalized")
        stop(SUCCEEDED, "verified")
    state.verifier_rejections += 1
    feedback = verdict.feedback or "Verification failed: the task is not done yet."
    state.append(make_message("user", [TextBlock(
        feedback, verdict.feedback_tokens or text_block(feedback).tokens, "verifier")]))


# ------------------------------------------------------------- conversation
def _user_turn(run: Run, content: list[Block]) -> Generator[Effect, Result, None]:
    """Hand the model's message to the task-giver; append the answer, or end
    the run when the task-giver ends it (or the run is cancelled meanwhile)."""
    state = run.state
    message = "".join(b.text for b in content if isinstance(b, TextBlock))
    turn = UserTurn(message, state.turns)
    reply = receive(turn, (yield turn))
    spend(run, reply.duration_s)
    check_abort(state)
    if reply.ended:
        stop(SUCCEEDED, "user_stop")
    state.append(make_message("user", [TextBlock(reply.text, reply.tokens
                                                 or text_block(reply.text).tokens)]))
