"""Recovery branches: truncated output, context overflow (by the harness's
count or the provider's word) and proactive compaction."""

from __future__ import annotations

from scripted import (
    calls,
    final,
    make_params,
    run_script,
    summary_reply,
    tool_call,
    truncated,
    use,
)

from sim.harness import (
    CONTINUATION,
    ContextParams,
    ModelError,
    TextBlock,
    ToolRequest,
    ToolResult,
)


def _steps(n: int, tokens: int = 1_500):
    """n tool steps whose results are ``tokens`` long."""
    return ([tool_call("search", q=f"part {i}") for i in range(n)],
            [ToolResult(f"page {i}", tokens, 0.5) for i in range(n)])


# ------------------------------------------------------------ max_tokens
def test_truncated_reply_compacts_the_oldest_sixty_percent_and_asks_to_continue() -> None:
    """stop_reason max_tokens: the harness summarises the oldest ~60% of the
    history with a model call of purpose "compaction", replaces it by the
    summary (kept with the task statement), appends CONTINUATION as a user
    message, and does not run the cut-off tool call."""
    params = make_params()
    model, tools = _steps(4, 300)
    cut = truncated(TextBlock("Now I will", 5), use("write_file", path="x"), output_tokens=100)
    run = run_script(params, model=[*model, cut, final()], tools=tools)
    assert (run.state.status, run.state.reason) == ("succeeded", "model_complete")

    truncated_step = run.step_requests[4]
    (compaction,) = run.compaction_requests
    history = truncated_step.messages  # the history the truncated reply was added to
    history_tokens = sum(m.tokens for m in history) + 100
    span = compaction.messages
    span_tokens = sum(m.tokens for m in span)
    # the oldest messages after the task, ending with a user message ...
    assert [m.role for m in span] == ["assistant", "user"] * (len(span) // 2)
    assert [m.content for m in span] == [m.content for m in history[1:1 + len(span)]]
    # ... the shortest such span holding 60% of the history
    assert span_tokens >= int(0.6 * history_tokens)
    assert span_tokens - sum(m.tokens for m in span[-2:]) < int(0.6 * history_tokens)
    assert compaction.prompt_tokens == params.prefix_tokens + span_tokens
    assert compaction.max_output_tokens == params.context.summary_max_tokens

    assert [r.call.name for r in run.of(ToolRequest)] == ["search"] * 4  # no write_file
    after = run.step_requests[5].messages
    assert after[0].content[0].text.startswith("Fix the failing test")
    assert after[0].content[-1].origin == "summary"
    assert [b.type for b in after[-2].content] == ["text"]  # the tool_use was dropped
    last = after[-1]
    assert last.role == "user" and last.content[-1].text == CONTINUATION
    assert last.content[-1].origin == "continuation"
    assert run.state.compactions == 1
    assert run.events_of("compaction")[0].data["why"] == "max_tokens"


def test_truncation_with_nothing_to_compact_still_continues() -> None:
    """A first reply cut off leaves only the task and that reply: there is
    nothing old to summarise, so the harness only asks to continue."""
    run = run_script(model=[truncated(), final()])
    assert run.compaction_requests == []
    assert run.step_requests[1].messages[-1].content[-1].text == CONTINUATION
    assert run.state.status == "succeeded" and run.state.turns == 2


def test_a_truncated_step_counts_as_a_step_and_is_checkpointed() -> None:
    """The truncated call is a step (its tokens are spent) and is checkpointed."""
    run = run_script(model=[truncated(), final()])
    assert [type(e).__name__ for e in run.effects] == ["ModelRequest", "Checkpoint",
                                                       "ModelRequest"]


# ------------------------------------------------------ context overflow
def test_overflow_alerts_compacts_to_half_the_window_and_continues() -> None:
    """When the assembled context exceeds the window, the harness raises an
    alert, compacts the history so that the context (summary included) is at
    most half the window, and the run goes on to finish."""
    params = make_params(context_window=10_000)
    model, tools = _steps(6)
    run = run_script(params, model=[*model, final()], tools=tools,
                     summaries=[summary_reply(tokens=1_000)])
    s = run.state
    assert (s.status, s.reason) == ("succeeded", "model_complete")
    (alert,) = run.events_of("alert")
    assert alert.data["alert"] == "context_overflow" and alert.data["context_tokens"] > 10_000
    assert s.alerts == 1 and s.compactions == 1
    assert run.events_of("compaction")[0].data["why"] == "overflow"
    assert max(r.prompt_tokens for r in run.step_requests) <= 10_000
    assert run.step_requests[-1].prompt_tokens <= 5_000


def test_overflow_without_emergency_compaction_fails() -> None:
    """With emergency_compaction off, an overflowing context ends the run as
    failed:context_overflow before the call is made."""
    params = make_params(context_window=10_000,
                         context=ContextParams(emergency_compaction=False))
    model, tools = _steps(6)
    run = run_script(params, model=[*model, final()], tools=tools)
    s = run.state
    assert (s.status, s.reason) == ("failed", "context_overflow")
    assert s.detail["context_tokens"] > 10_000
    assert len(run.step_requests) == 6
    assert run.compaction_requests == []


def test_provider_overflow_error_triggers_emergency_compaction() -> None:
    """A ModelError of kind context_overflow (the provider counted more than
    the harness) is handled like an overflow: alert, compaction, and the step
    is tried again without counting a turn."""
    params = make_params(context_window=20_000)
    model, tools = _steps(6)
    run = run_script(params, model=[*model, ModelError("context_overflow", 400), final()],
                     tools=tools)
    s = run.state
    assert (s.status, s.reason) == ("succeeded", "model_complete")
    assert s.alerts == 1 and s.compactions == 1 and s.turns == 7
    assert run.step_requests[-1].prompt_tokens <= 10_000


def test_provider_overflow_with_nothing_to_compact_fails() -> None:
    """If the provider says the prompt is too long and there is no history to
    compact, the run fails as context_overflow rather than looping."""
    run = run_script(model=[ModelError("context_overflow", 400), final()])
    assert (run.state.status, run.state.reason) == ("failed", "context_overflow")


def test_a_failed_summary_call_during_overflow_fails_the_run() -> None:
    """If the emergency summary itself hits a fatal model error, the run ends
    once (failed:model_error), with a single terminal event."""
    params = make_params(context_window=10_000)
    model, tools = _steps(6)
    run = run_script(params, model=[*model, final()], tools=tools,
                     summaries=[ModelError("auth", 401)])
    assert (run.state.status, run.state.reason) == ("failed", "model_error")
    assert len(run.events_of("terminal")) == 1


# ------------------------------------------------ proactive compaction
def test_context_over_compact_at_tokens_is_compacted_before_the_call() -> None:
    """With context.compact_at_tokens set, a context above it is compacted
    (compact_fraction of the history) before the next model call."""
    params = make_params(context=ContextParams(compact_at_tokens=6_000))
    model, tools = _steps(5)
    run = run_script(params, model=[*model, final()], tools=tools)
    assert run.state.compactions >= 1
    assert run.events_of("compaction")[0].data["why"] == "context_budget"
    first = run.events_of("compaction")[0].data
    assert first["before"] > 6_000 > first["after"]
    assert run.state.status == "succeeded"


def test_compaction_calls_are_priced_but_are_not_steps() -> None:
    """A summary call spends tokens and money like any call but no step."""
    params = make_params(context=ContextParams(compact_at_tokens=6_000))
    model, tools = _steps(5)
    run = run_script(params, model=[*model, final()], tools=tools)
    s = run.state
    assert s.turns == 6
    spent = sum(r.prompt_tokens for r in run.of(type(run.step_requests[0])))
    assert s.prompt_tokens == spent
    assert s.output_tokens == 6 * 50 + 20 * len(run.compaction_requests)


def test_multi_call_truncation_runs_none_of_the_calls() -> None:
    """Every tool_use of a truncated reply is dropped, not only the last."""
    cut = truncated(use("search", q="a"), use("search", q="b"))
    run = run_script(model=[cut, calls(use("search", q="c")), final()])
    assert [r.call.input for r in run.of(ToolRequest)] == [{"q": "c"}]
