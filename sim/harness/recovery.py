"""Recovery by compaction: the context budget (step 3), a reply cut off at
max_tokens (step 7) and a context overflow (step 5).

Each summarises the oldest history with a model call
(:func:`~sim.harness.model_calls.call_model`, purpose ``"compaction"``) and
puts the summary in its place (:mod:`sim.harness.context`).
"""

from __future__ import annotations

from collections.abc import Generator

from sim.harness import events as ev
from sim.harness.context import apply_compaction, plan_compaction
from sim.harness.effects import Effect, ModelError, Result
from sim.harness.guards import Run, stop
from sim.harness.messages import TextBlock, make_message, text_block
from sim.harness.model_calls import call_model
from sim.harness.state import FAILED

CONTINUATION = "Your previous response was truncated. Continue from where you left off."


def compact(run: Run, drop_tokens: int, why: str) -> Generator[Effect, Result, bool]:
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
    run.limits.check_before_model_call(state, prompt, max_out)
    response = yield from call_model(run, span, prompt, max_out, "compaction")
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


def compact_history(run: Run, why: str) -> Generator[Effect, Result, bool]:
    """Compact ``context.compact_fraction`` of the history (all but the prefix)."""
    state = run.state
    history = state.context_tokens - state.prefix_tokens
    return (yield from compact(run, int(history * run.params.context.compact_fraction), why))


def continue_truncated(run: Run) -> Generator[Effect, Result, None]:
    """Output cut off at max_tokens: compact the oldest history, ask to continue."""
    yield from compact_history(run, "max_tokens")
    run.state.append(make_message("user", [text_block(CONTINUATION, "continuation")]))


def overflow(run: Run) -> Generator[Effect, Result, None]:
    """Context overflow: the token accounting let the prompt outgrow the window.
    Alert, compact to ``emergency_target`` of the window and continue, or fail."""
    params, state = run.params, run.state
    if not params.context.emergency_compaction:
        stop(FAILED, "context_overflow", context_tokens=state.context_tokens)
    state.alerts += 1
    if run.emit:
        run.emit(ev.ALERT, {"alert": "context_overflow", "context_tokens": state.context_tokens})
    target = int(params.context_window * params.context.emergency_target)
    before = state.context_tokens
    # drop room for the summary too, so that the context with it fits the target
    done = yield from compact(run, before - target + params.context.summary_max_tokens,
                              "overflow")
    if not done or state.context_tokens >= before or state.context_tokens > params.context_window:
        stop(FAILED, "context_overflow", context_tokens=state.context_tokens)
