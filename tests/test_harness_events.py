"""Events: what observers (metrics, logs, traces) are told about a run."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from scripted import (
    FAST,
    ScriptedDriver,
    final,
    make_params,
    make_state,
    run_script,
    tool_call,
    truncated,
)

from sim.harness import (
    ApprovalDecision,
    ContextParams,
    ModelError,
    ToolError,
    ToolResult,
    Verdict,
    VerifierParams,
    agent_loop,
)


def _busy_run():
    """One run that emits every kind of event: a repeated call (nudge), a rate
    limit and a transient tool error (retries), two large results (context
    overflow: alert and compaction), an approval and a verifier rejection."""
    params = make_params(context_window=12_000, verifier=VerifierParams(enabled=True),
                         approval_required=frozenset({"irreversible"}),
                         context=ContextParams(summary_max_tokens=500))
    model = [tool_call("search", q="same")] * 3 + [
        ModelError("rate_limit", 429, retry_after_s=2.0),
        tool_call("read_file", path="big.log"),
        tool_call("read_file", path="big2.log"),
        tool_call("deploy", env="prod"),
        final("done"), final("done now")]
    tools = ["r1", "r1", "r1", ToolError("transient", "503", 5), ToolResult("log", 6_000),
             ToolResult("log2", 6_000), "deployed"]
    return run_script(params, model=model, tools=tools,
                      approvals=[ApprovalDecision(True, 30.0)],
                      verdicts=[Verdict(False, "not yet"), Verdict(True)])


def test_observers_see_every_kind_of_event() -> None:
    """A run with tool calls, a retry, a nudge, a compaction after an
    overflow, an approval and a verifier rejection tells observers about each:
    model_response, tool_executed, retry, nudge, compaction, alert, approval,
    verifier and terminal."""
    run = _busy_run()
    kinds = {e.kind for e in run.events}
    assert kinds >= {"model_response", "tool_executed", "retry", "nudge", "compaction", "alert",
                     "approval", "verifier", "terminal"}
    assert run.state.status == "succeeded"


def test_event_payloads() -> None:
    """Each event carries the facts a dashboard needs."""
    run = _busy_run()
    first = run.events_of("model_response")[0]
    assert first.data == {"stop_reason": "tool_use", "input_tokens": first.data["input_tokens"],
                          "output_tokens": 50, "tool_calls": 1}
    assert first.data["input_tokens"] == run.step_requests[0].prompt_tokens
    executed = run.events_of("tool_executed")
    assert executed[0].data["tool"] == "search" and executed[0].data["success"] is True
    failed = [e for e in executed if not e.data["success"]]
    assert failed and failed[0].data["kind"] == "transient"
    retries = run.events_of("retry")
    assert {e.data["target"] for e in retries} == {"model", "read_file"}
    assert [e.data["delay_s"] for e in retries if e.data["target"] == "model"] == [2.0]
    assert run.events_of("nudge")[0].data == {"signal": "repetition", "tool": "search"}
    compaction = run.events_of("compaction")[0].data
    assert compaction["after"] < compaction["before"]
    assert run.events_of("verifier")[0].data == {"passed": False}
    terminal = run.events_of("terminal")[0]
    assert terminal.data == {"status": "succeeded", "reason": "verified"}


def test_exactly_one_terminal_event_and_it_is_the_last() -> None:
    """The terminal event is emitted once, last, and matches the final state."""
    run = _busy_run()
    assert [e.kind for e in run.events].count("terminal") == 1
    assert run.events[-1].kind == "terminal"
    assert run.events[-1].data["status"] == run.state.status


def test_event_turns_follow_the_step_count() -> None:
    """An event's turn is the number of steps completed when it happened."""
    run = run_script(model=[tool_call("search", q=str(i)) for i in range(3)] + [final()])
    assert [e.turn for e in run.events_of("model_response")] == [1, 2, 3, 4]
    assert [e.turn for e in run.events_of("tool_executed")] == [1, 2, 3]


def test_terminal_event_carries_the_detail() -> None:
    """A terminal event repeats the state's detail (here the tool that failed)."""
    run = run_script(model=[tool_call("search", q="x")], tools=[ToolError("fatal", "gone", 1)])
    assert run.events_of("terminal")[0].data == {"status": "failed", "reason": "tool_fatal",
                                                 "tool": "search", "error": "gone"}


def test_observers_do_not_change_the_run() -> None:
    """Running with or without observers gives the same effects and end state;
    several observers all get the same events in the same order."""
    params = make_params()
    script = [tool_call("search", q="a"), ModelError("overloaded", 529), final()]
    seen_a, seen_b = [], []
    quiet = ScriptedDriver(model=script)
    end_quiet = quiet.drive(params, make_state(params))
    state = make_state(params)
    gen = agent_loop(params, state, observers=(seen_a.append, seen_b.append))
    loud = ScriptedDriver(model=script)
    try:
        effect = next(gen)
        while True:
            loud.effects.append(effect)
            effect = gen.send(loud._answer(effect))
    except StopIteration as stop:
        end_loud = stop.value
    assert seen_a == seen_b and seen_a[-1].kind == "terminal"
    assert (end_loud.status, end_loud.turns, end_loud.retries) == (
        end_quiet.status, end_quiet.turns, end_quiet.retries)
    assert [type(e) for e in loud.effects] == [type(e) for e in quiet.effects]


_ITEMS = st.lists(st.one_of(
    st.builds(lambda q: tool_call("search", q=str(q)), st.integers(0, 3)),
    st.just(final()), st.just(truncated()),
    st.builds(ModelError, st.sampled_from(["rate_limit", "server", "auth", "timeout"]))),
    max_size=20)


@FAST
@given(items=_ITEMS, outcomes=st.lists(st.sampled_from(
    ["ok", ToolError("transient", "503", 3), ToolError("fatal", "x", 1),
     ToolError("validation", "v", 2)]), max_size=20))
def test_every_run_emits_one_terminal_event(items, outcomes) -> None:
    """Whatever happens, a run emits exactly one terminal event, as its last
    event, and one model_response per step."""
    run = run_script(model=items, tools=outcomes, default_reply=final())
    kinds = [e.kind for e in run.events]
    assert kinds.count("terminal") == 1 and kinds[-1] == "terminal"
    assert kinds.count("model_response") == run.state.turns
