"""The inner loop: the order of its steps and the terminal state it ends in."""

from __future__ import annotations

import pytest
from scripted import (
    ScriptedDriver,
    calls,
    final,
    last_user_blocks,
    make_params,
    make_state,
    run_script,
    thinking,
    tool_call,
    use,
)

from sim.harness import (
    TERMINAL_STATES,
    Budgets,
    Checkpoint,
    ModelError,
    ModelRequest,
    TextBlock,
    ToolError,
    ToolRequest,
    ToolResultBlock,
    Usage,
    Verdict,
    VerifierParams,
    VerifyRequest,
    Wait,
    agent_loop,
)

VERIFIED = make_params(verifier=VerifierParams(enabled=True))


def test_final_answer_without_verifier_succeeds_as_model_complete() -> None:
    """A reply with no tool call ends the run as succeeded:model_complete
    after exactly one model call, with no verification and no checkpoint."""
    run = run_script(model=[final()])
    assert (run.state.status, run.state.reason) == ("succeeded", "model_complete")
    assert [type(e) for e in run.effects] == [ModelRequest]
    assert run.state.turns == 1


def test_a_tool_step_runs_model_then_tool_then_checkpoint() -> None:
    """One step is: model request, tool request for the proposed call,
    checkpoint; the next model request carries the assistant's tool_use and
    the user's tool_result keyed by the same id."""
    run = run_script(model=[tool_call("search", q="flaky test"), final()])
    kinds = [type(e) for e in run.effects]
    assert kinds == [ModelRequest, ToolRequest, Checkpoint, ModelRequest]
    tool_req = run.of(ToolRequest)[0]
    assert (tool_req.call.name, tool_req.call.input) == ("search", {"q": "flaky test"})
    second = run.step_requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "user"]
    result = second[2].content[0]
    assert isinstance(result, ToolResultBlock)
    assert result.tool_use_id == tool_req.call.id and not result.is_error


def test_prompt_size_is_prefix_plus_history() -> None:
    """Each model request's prompt_tokens is the prefix plus the tokens of the
    history it carries, so the prompt grows with every step."""
    params = make_params()
    run = run_script(params, model=[tool_call("search", q=str(i)) for i in range(4)] + [final()])
    sizes = [r.prompt_tokens for r in run.step_requests]
    for req in run.step_requests:
        assert req.prompt_tokens == params.prefix_tokens + sum(m.tokens for m in req.messages)
    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)


def test_several_calls_in_one_reply_run_in_order_into_one_message() -> None:
    """All tool calls of one reply run in the order proposed; their results go
    back in one user message, in the same order."""
    run = run_script(model=[calls(use("search", q="a"), use("read_file", path="b"),
                                  use("search", q="c")), final()])
    names = [r.call.name for r in run.of(ToolRequest)]
    assert names == ["search", "read_file", "search"]
    ids = [r.call.id for r in run.of(ToolRequest)]
    blocks = run.state.messages[2].content
    assert [b.tool_use_id for b in blocks] == ids
    assert run.state.tool_calls == 3 and run.state.turns == 2


def test_thinking_blocks_stay_in_the_history() -> None:
    """Thinking blocks are kept in the assistant message unchanged (the cached
    prefix would change otherwise) and their tokens count as thinking."""
    block = thinking("plan: read the file", 30)
    run = run_script(model=[calls(block, use("search", q="x"), thinking_tokens=30), final()])
    assert run.state.messages[1].content[0] is block
    assert run.state.thinking_tokens == 30


def test_verifier_rejection_goes_back_to_the_model_and_the_run_continues() -> None:
    """With a verifier, a claimed success is checked; a rejection is appended
    as a user message with a text block of origin "verifier" carrying the
    feedback, the loop calls the model again, and a later pass ends the run as
    succeeded:verified."""
    run = run_script(VERIFIED, model=[final("done"), tool_call("search", q="tests"),
                                      final("really done")],
                     verdicts=[Verdict(False, "2 tests still fail", 7), Verdict(True)])
    assert (run.state.status, run.state.reason) == ("succeeded", "verified")
    assert [v.answer for v in run.of(VerifyRequest)] == ["done", "really done"]
    assert run.state.verifier_rejections == 1
    feedback = run.step_requests[1].messages[-1]
    assert feedback.role == "user"
    (block,) = feedback.content
    assert isinstance(block, TextBlock)
    assert (block.origin, block.text, block.tokens) == ("verifier", "2 tests still fail", 7)
    assert run.state.turns == 3


def test_verifier_rejection_without_feedback_says_not_done() -> None:
    """A rejection with no feedback still tells the model the task is not done."""
    run = run_script(VERIFIED, model=[final(), final()], verdicts=[Verdict(False), Verdict(True)])
    block = run.step_requests[1].messages[-1].content[0]
    assert block.origin == "verifier" and "not done" in block.text


def test_model_grader_verifier_is_priced_and_timed() -> None:
    """A verdict with usage (a model grader) adds its tokens and cost to the
    run, and its duration to active time."""
    verdict = Verdict(True, duration_s=4.0, usage=Usage(input_tokens=1_000, output_tokens=100))
    run = run_script(VERIFIED, model=[final()], verdicts=[verdict])
    s = run.state
    assert s.active_s == pytest.approx(1.0 + 4.0)
    assert s.output_tokens == 50 + 100
    assert s.money_usd == pytest.approx(VERIFIED.prices.cost(s.input_tokens, s.output_tokens))


def test_abort_flag_before_start_cancels_without_any_call() -> None:
    """An abort flag already set is checked first: the run ends as
    cancelled:external_signal without yielding any effect."""
    params = make_params()
    state = make_state(params)
    state.abort_requested = True
    run = ScriptedDriver(model=[final()])
    run.drive(params, state)
    assert (state.status, state.reason) == ("cancelled", "external_signal")
    assert run.effects == []


def test_abort_during_a_model_call_cancels_before_the_tool_runs() -> None:
    """An abort signalled while the model is answering stops the run before
    the proposed tool call is executed."""
    def abort(effect, state):
        if isinstance(effect, ModelRequest):
            state.abort_requested = True

    run = ScriptedDriver(model=[tool_call("deploy", env="prod")], on_effect=abort)
    params = make_params()
    state = run.drive(params, make_state(params))
    assert (state.status, state.reason) == ("cancelled", "external_signal")
    assert run.of(ToolRequest) == []


def test_abort_between_steps_cancels_at_the_top_of_the_next_iteration() -> None:
    """An abort signalled at a checkpoint ends the run before the next model call."""
    def abort(effect, state):
        if isinstance(effect, Checkpoint):
            state.abort_requested = True

    run = ScriptedDriver(model=[tool_call("search", q="x"), final()], on_effect=abort)
    params = make_params()
    state = run.drive(params, make_state(params))
    assert (state.status, state.reason) == ("cancelled", "external_signal")
    assert len(run.step_requests) == 1


def _abort_on(kind: type):
    def hook(effect, state):
        if isinstance(effect, kind):
            state.abort_requested = True
    return hook


@pytest.mark.parametrize(("kind", "script", "tools", "verify"), [
    (ToolRequest, [tool_call("search", q="x"), final()], [], False),
    (Wait, [tool_call("search", q="x"), final()], [ToolError("transient", "503", 5)], False),
    (Wait, [ModelError("rate_limit", 429), final()], [], False),
    (VerifyRequest, [final()], [], True),
], ids=["tool call", "tool backoff", "model backoff", "verification"])
def test_abort_while_a_call_is_in_flight_cancels_right_after_it(kind, script, tools,
                                                                verify) -> None:
    """An abort signalled while a tool runs, a backoff waits or the verifier
    checks ends the run as cancelled:external_signal as soon as that effect
    returns: no further effect is yielded (a passing verdict does not count)."""
    params = make_params(verifier=VerifierParams(enabled=verify))
    driver = ScriptedDriver(model=script, tools=tools, on_effect=_abort_on(kind))
    state = driver.drive(params, make_state(params))
    assert (state.status, state.reason) == ("cancelled", "external_signal")
    assert isinstance(driver.effects[-1], kind)
    assert len(driver.events_of("terminal")) == 1


@pytest.mark.parametrize("steps", [1, 2, 5, 12])
def test_step_budget_ends_after_exactly_n_model_calls(steps: int) -> None:
    """With budgets.steps = N and a model that never finishes, the run makes
    exactly N model calls and ends as budget_exhausted:steps."""
    run = run_script(make_params(budgets=Budgets(steps=steps)),
                     model=[tool_call("search", q=str(i)) for i in range(steps + 5)])
    assert (run.state.status, run.state.reason) == ("budget_exhausted", "steps")
    assert len(run.step_requests) == steps == run.state.turns


def test_every_run_returns_its_state_in_one_terminal_state() -> None:
    """The generator's return value is the state object it was given, now in
    a terminal state with a non-empty reason."""
    params = make_params()
    state = make_state(params)
    gen = agent_loop(params, state)
    driver = ScriptedDriver(model=[final()])
    effect = next(gen)
    with pytest.raises(StopIteration) as stop:
        gen.send(driver._answer(effect))
    assert stop.value.value is state
    assert state.status in TERMINAL_STATES and state.reason
    assert last_user_blocks(state)[0].text.startswith("Fix the failing test")
