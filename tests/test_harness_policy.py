"""Tool policy and approval: the code between a proposed call and its run."""

from __future__ import annotations

import pytest
from scripted import (
    ScriptedDriver,
    final,
    make_params,
    make_state,
    run_script,
    tool_call,
    use,
)

from sim.harness import (
    ApprovalDecision,
    ApprovalRequest,
    Budgets,
    ToolRequest,
    ToolSpec,
)
from sim.harness.policy import ALLOW, APPROVE, REJECT, check_call

GATED = make_params(approval_required=frozenset({"irreversible"}), model_timeout_s=30.0)


def _observation(run, step: int = 1):
    """The first block of the user message sent with step ``step``."""
    return run.step_requests[step].messages[-1].content[0]


# ------------------------------------------------------------- policy
def test_policy_decisions() -> None:
    """check_call allows a known call, asks for approval for a gated effect
    class, and rejects unknown tools and missing required arguments."""
    assert check_call(GATED, use("search", q="x"))[0] == ALLOW
    assert check_call(GATED, use("deploy", env="prod"))[0] == APPROVE
    assert check_call(GATED, use("rm_rf"))[0] == REJECT
    assert check_call(GATED, use("read_file"))[0] == REJECT


def test_unknown_tool_is_an_error_observation_without_a_tool_request() -> None:
    """A call to a tool that does not exist is never run: the model gets an
    is_error result listing the tools it can use, and the run goes on."""
    run = run_script(model=[tool_call("rm_rf", path="/"), final()])
    assert run.of(ToolRequest) == []
    block = _observation(run)
    assert block.is_error and "no tool named 'rm_rf'" in block.content
    assert "search" in block.content and "read_file" in block.content
    assert run.state.status == "succeeded"


def test_missing_required_argument_is_an_error_observation() -> None:
    """A call missing a required argument is not run; the model is told which
    argument to add."""
    run = run_script(model=[tool_call("read_file", file="x"), final()])
    assert run.of(ToolRequest) == []
    block = _observation(run)
    assert block.is_error and "path" in block.content


# ------------------------------------------------------------ approval
def test_gated_call_asks_for_approval_and_waits_in_waiting_approval() -> None:
    """A call whose effect class needs approval yields an ApprovalRequest
    (with the call, its effect class and the approval timeout); while it is
    pending the run is in the non-terminal state waiting_approval; once
    approved the tool runs."""
    run = run_script(GATED, model=[tool_call("deploy", env="prod"), final()],
                     approvals=[ApprovalDecision(True, waited_s=60.0)])
    (request,) = run.of(ApprovalRequest)
    assert (request.call.name, request.effect) == ("deploy", "irreversible")
    assert request.timeout_s == GATED.approval_timeout_s
    index = run.effects.index(request)
    assert run.statuses[index] == "waiting_approval"
    assert isinstance(run.effects[index + 1], ToolRequest)
    assert run.statuses[index + 1] == "running"
    assert run.state.status == "succeeded"
    assert run.events_of("approval")[0].data == {"tool": "deploy", "approved": True,
                                                 "timed_out": False, "waited_s": 60.0}


def test_ungated_calls_need_no_approval() -> None:
    """Calls of effect classes not listed in approval_required run directly."""
    run = run_script(GATED, model=[tool_call("search", q="x"), tool_call("write_file"), final()])
    assert run.of(ApprovalRequest) == [] and len(run.of(ToolRequest)) == 2


def test_refused_call_is_a_denied_observation() -> None:
    """A refusal is not run; the model reads "denied" with the reason and is
    told not to retry the action."""
    run = run_script(GATED, model=[tool_call("deploy", env="prod"), final()],
                     approvals=[ApprovalDecision(False, 5.0, reason="change freeze")])
    assert run.of(ToolRequest) == []
    block = _observation(run)
    assert block.is_error and block.content.startswith("denied: change freeze")
    assert "Do not retry" in block.content
    assert run.state.status == "succeeded"


def test_approval_timeout_cancels_the_run() -> None:
    """Nobody answered in time: cancelled:approval_timeout naming the tool."""
    run = run_script(GATED, model=[tool_call("deploy", env="prod"), final()],
                     approvals=[ApprovalDecision(False, GATED.approval_timeout_s,
                                                 timed_out=True)])
    s = run.state
    assert (s.status, s.reason) == ("cancelled", "approval_timeout")
    assert s.detail == {"tool": "deploy"}
    assert run.of(ToolRequest) == []


def test_abort_while_waiting_for_approval_cancels() -> None:
    """An abort signalled while a human decides cancels the run as
    external_signal, even if the call was then approved."""
    def abort(effect, state):
        if isinstance(effect, ApprovalRequest):
            state.abort_requested = True

    driver = ScriptedDriver(model=[tool_call("deploy", env="prod"), final()],
                            approvals=[ApprovalDecision(True, 10.0)], on_effect=abort)
    state = driver.drive(GATED, make_state(GATED))
    assert (state.status, state.reason) == ("cancelled", "external_signal")
    assert driver.of(ToolRequest) == []


def test_parked_time_counts_to_wall_time_but_not_to_the_active_budget() -> None:
    """Time waiting for a human is parked time: it is in wall_s but not in
    active_s, so a long approval does not exhaust an active-time budget."""
    params = GATED.with_budgets(active_s=100.0)
    run = run_script(params, model=[tool_call("deploy", env="prod"), final()],
                     approvals=[ApprovalDecision(True, waited_s=5_000.0)])
    s = run.state
    assert (s.status, s.reason) == ("succeeded", "model_complete")
    assert s.parked_s == 5_000.0
    assert s.active_s < 100.0
    assert s.wall_s == pytest.approx(s.active_s + 5_000.0)


def test_parked_time_spends_the_wall_budget() -> None:
    """With a wall-time budget, a long approval leaves too little time for the
    next model call: the run ends as budget_exhausted:wall_time."""
    params = GATED.with_budgets(wall_s=1_000.0)
    run = run_script(params, model=[tool_call("deploy", env="prod"), final()],
                     approvals=[ApprovalDecision(True, waited_s=950.0)])
    s = run.state
    assert (s.status, s.reason) == ("budget_exhausted", "wall_time")
    assert s.wall_s <= 1_000.0 and len(run.step_requests) == 1


@pytest.mark.parametrize("effect", ["read", "reversible_write", "external", "irreversible"])
def test_exactly_the_gated_effect_class_asks_for_approval(effect: str) -> None:
    """approval_required takes any of the four effect classes; only calls of
    a gated class ask for approval."""
    tools = tuple(ToolSpec(f"t_{e}", e) for e in
                  ("read", "reversible_write", "external", "irreversible"))
    params = make_params(tools=tools, approval_required=frozenset({effect}))
    script = [tool_call(t.name) for t in tools] + [final()]
    run = run_script(params, model=script, approvals=[ApprovalDecision(True)])
    assert [r.call.name for r in run.of(ApprovalRequest)] == [f"t_{effect}"]
    assert len(run.of(ToolRequest)) == 4


def test_repeated_refusals_count_as_tool_failures() -> None:
    """Three refused calls of one tool trigger the do-without-it message."""
    run = run_script(GATED, model=[tool_call("deploy", env=str(i)) for i in range(3)] + [final()],
                     approvals=[ApprovalDecision(False)] * 3)
    texts = [b.text for b in run.state.messages[-2].content if b.type == "text"]
    assert any(t.startswith("Tool deploy has failed 3 consecutive times") for t in texts)


def test_budgets_also_apply_to_approved_calls() -> None:
    """An approved call is still refused if its timeout could overshoot the
    active-time budget."""
    params = GATED.with_budgets(active_s=40.0)
    run = run_script(params, model=[tool_call("deploy", env="prod"), final()],
                     approvals=[ApprovalDecision(True, 1.0)])
    assert (run.state.status, run.state.reason) == ("budget_exhausted", "active_time")
    assert run.of(ToolRequest) == []


def test_an_approval_cannot_outlast_the_wall_time_budget() -> None:
    """The approval timeout is capped at the wall time left, so parked time
    never takes a run past budgets.wall_s: a decision that does not come in
    time ends the run as budget_exhausted:wall_time."""
    params = make_params(approval_required=frozenset({"irreversible"}),
                         approval_timeout_s=3_600.0, budgets=Budgets(wall_s=600.0))
    seen: list[ApprovalRequest] = []

    def watch(effect, state):
        if isinstance(effect, ApprovalRequest):
            seen.append(effect)

    run = run_script(params, model=[tool_call("deploy", env="prod")], on_effect=watch,
                     approvals=[ApprovalDecision(False, 0.0, timed_out=True)])
    assert seen and seen[0].timeout_s <= 600.0
    assert (run.state.status, run.state.reason) == ("budget_exhausted", "wall_time")
    assert run.state.wall_s <= 600.0
