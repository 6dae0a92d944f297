"""What the harness does when a budget refuses the next step
(``visibility.on_limit``; the budget rules themselves, with the room kept
for a finalize call, live in :mod:`sim.harness.budgets`).

- ``stop``: the run ends as ``budget_exhausted:<limit>`` (the caller
  re-raises the refusal).
- ``finalize`` (:func:`finalize_call`): :data:`~sim.harness.budgets.FINALIZE_NOTE`
  goes into the history and the model is called ONCE more without tool use
  (``tool_choice`` none, purpose ``"finalize"``, an output cap of
  ``finalize_output_tokens``; the tools stay declared, as a provider whose
  history holds tool blocks requires, but may not be called), after the
  usual budget check of that call, which the earlier checks left room for.
  The reply's text is the final answer the loop then checks as usual; a
  tool call in it is dropped (it is never run).
- ``ask`` (:func:`ask`): the run parks for a human, as for an approval (an
  :class:`~sim.harness.effects.ApprovalRequest` for a call of
  ``extend_budget`` with effect class ``limit``, its timeout the approval
  timeout within the wall-time budget). A yes extends every set budget by
  ``extend_by`` of itself (once per run) and the loop goes on; a no, or no
  answer in time, ends the run as ``needs_human:limit``.
"""

from __future__ import annotations

from collections.abc import Generator

from sim.harness import events as ev
from sim.harness.budgets import FINALIZE_NOTE, FINALIZE_NOTE_TOKENS, LimitExceeded
from sim.harness.effects import (
    ApprovalDecision,
    ApprovalRequest,
    Effect,
    ModelError,
    Result,
)
from sim.harness.guards import Run, check_abort, receive, stop
from sim.harness.messages import Block, TextBlock, ToolUseBlock, billed_message, make_message
from sim.harness.model_calls import call_model
from sim.harness.state import NEEDS_HUMAN, RUNNING, WAITING_APPROVAL

LIMIT_EFFECT = "limit"
"""The effect class of the approval request ``on_limit: ask`` makes."""

EXTEND_TOOL = "extend_budget"
"""The name of the call a human is asked to approve (``on_limit: ask``)."""


def finalize_call(run: Run, end: LimitExceeded) -> Generator[Effect, Result, list[Block]]:
    """Make the one tool-free call for the final answer after ``end``
    refused the next step; return the reply's content without tool calls.
    A call the budgets cannot hold (or a prompt past the context window)
    ends the run as ``end`` would have, with ``finalize`` in its detail."""
    params, state = run.params, run.state
    limits = run.limits
    limits.finalizing()
    state.append(make_message("user", [TextBlock(FINALIZE_NOTE, FINALIZE_NOTE_TOKENS,
                                                 "limit")]))
    cap = min(params.visibility.finalize_output_tokens, params.max_output_tokens)
    prompt = state.context_tokens
    try:
        limits.check_before_model_call(state, prompt, cap)
    except LimitExceeded as refused:
        raise LimitExceeded(end.limit, finalize="refused", by=refused.limit,
                            **end.detail) from None
    if prompt > params.context_window:
        raise LimitExceeded(end.limit, finalize="context_window", **end.detail)
    if run.emit:
        run.emit(ev.ALERT, {"alert": "finalize", "limit": end.limit})
    response = yield from call_model(run, state.messages, prompt, cap, "finalize")
    if isinstance(response, ModelError):  # the provider says the prompt is too long
        raise LimitExceeded(end.limit, finalize="context_overflow", **end.detail)
    state.turns += 1
    content: list[Block] = [b for b in response.content if not isinstance(b, ToolUseBlock)]
    usage = response.usage
    state.append(billed_message(content, usage.output_tokens, usage.thinking_tokens))
    return content


def ask(run: Run, end: LimitExceeded) -> Generator[Effect, Result, None]:
    """Park the run for a human after ``end`` refused the next step: return
    once the budgets are extended (a yes), else end the run as
    ``needs_human:limit``; a second limit after the extension ends the run
    as ``end``."""
    params, state, limits = run.params, run.state, run.limits
    if limits.extended:
        raise end
    state.status = WAITING_APPROVAL
    timeout = params.approval_timeout_s
    wall_left = limits.wall_left(state)
    if wall_left is not None:  # nobody may answer after the wall-time budget is spent
        timeout = min(timeout, wall_left)
    call = ToolUseBlock(f"limit_{state.turns}", EXTEND_TOOL,
                        {"limit": end.limit, "extend_by": params.visibility.extend_by}, 0)
    request = ApprovalRequest(call, LIMIT_EFFECT, timeout)
    answer = receive(request, (yield request))
    if wall_left is not None and answer.waited_s > timeout:
        answer = ApprovalDecision(False, timeout, True, "no decision in time")
    state.status = RUNNING
    state.parked_s += answer.waited_s
    if run.emit:
        run.emit(ev.APPROVAL, {"tool": EXTEND_TOOL, "approved": answer.approved,
                               "timed_out": answer.timed_out, "waited_s": answer.waited_s})
    check_abort(state)
    if not answer.approved:
        stop(NEEDS_HUMAN, "limit", limit=end.limit, timed_out=answer.timed_out)
    limits.extend(params.visibility.extend_by)
