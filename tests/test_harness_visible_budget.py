"""Limits the model sees (harness.visibility): the budget note each turn,
finalize-on-limit (one tool-free call whose worst case the budgets kept room
for) and ask-on-limit (park for a human who may extend the budgets once).
The harness is driven with hand-made results (tests/scripted.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from scripted import (
    FAST,
    Reply,
    ScriptedDriver,
    final,
    make_params,
    make_state,
    run_script,
    tool_call,
)

from sim.harness import (
    ApprovalDecision,
    ApprovalRequest,
    Budgets,
    ModelRequest,
    Prices,
    ToolRequest,
    ToolResult,
    Verdict,
    VerifierParams,
)
from sim.harness.budgets import FINALIZE_NOTE_TOKENS
from sim.harness.messages import estimate_tokens
from sim.harness.params import Visibility

READ = tool_call("read_file", path="a.py")


def distinct(request: ModelRequest) -> Reply:
    """A call of a new file each turn (the no-progress detector stays quiet)."""
    return tool_call("read_file", path=f"f{request.turn}.py")


def _params(on_limit: str = "stop", show: bool = False, **budgets: float | int):
    return make_params(budgets=Budgets(**budgets),
                       visibility=Visibility(show_budget=show, on_limit=on_limit,
                                             finalize_output_tokens=300))


def test_the_budget_note_ends_every_step_prompt_and_its_tokens_are_counted() -> None:
    """With show_budget each step's prompt ends with the note of what the
    budgets leave ("<left> of <total>"), and the prompt size counts it."""
    params = _params(show=True, steps=5, tokens=100_000)
    driver = run_script(params, model=[READ, READ, final()])
    steps = driver.step_requests
    assert len(steps) == 3
    first = steps[0].messages[-1].content[-1]
    assert first.origin == "budget"
    assert first.text == "Budget: 100,000 of 100,000 prompt tokens left; 5 of 5 steps left"
    note_tokens = estimate_tokens(first.text)
    assert first.tokens == note_tokens
    assert steps[0].prompt_tokens == params.prefix_tokens + 50 + note_tokens
    second = steps[1].messages[-1].content[-1]
    used = steps[0].prompt_tokens  # the scripted provider bills the prompt as input
    assert second.text == (f"Budget: {100_000 - used:,} of 100,000 prompt tokens left; "
                           f"4 of 5 steps left")
    assert driver.state is not None and driver.state.status == "succeeded"


def test_without_show_budget_no_note_is_added() -> None:
    """The default shows nothing: no block of origin budget in any prompt."""
    driver = run_script(_params(steps=5), model=[READ, final()])
    assert all(b.origin != "budget" for r in driver.step_requests
               for m in r.messages for b in m.content if b.type == "text")


def test_stop_on_limit_is_todays_behaviour() -> None:
    """on_limit stop: the step budget ends the run, with no extra call."""
    driver = run_script(_params(steps=3), default_reply=distinct)
    assert driver.state is not None
    assert (driver.state.status, driver.state.reason) == ("budget_exhausted", "steps")
    assert len(driver.of(ModelRequest)) == 3


def test_finalize_makes_exactly_one_tool_free_call_within_the_step_budget() -> None:
    """on_limit finalize with 3 steps: two ordinary steps, then ONE call that
    may not use tools (tool_choice none; the tools stay declared, as
    Anthropic requires of a history with tool blocks; the finalize output
    cap) whose accepted
    answer ends the run as succeeded:finalized at 3 turns; a tool call in
    that reply is never run."""
    params = _params("finalize", steps=3)
    driver = run_script(params, model=[READ, READ, READ])  # the third disobeys: a tool call
    requests = driver.of(ModelRequest)
    assert [r.purpose for r in requests] == ["step", "step", "finalize"]
    last = requests[-1]
    assert last.tool_choice == "none" and last.tools == requests[0].tools
    assert last.max_output_tokens == 300
    assert last.messages[-1].content[-1].origin == "limit"
    assert all(r.tool_choice == "auto" for r in requests[:2])
    assert len(driver.of(ToolRequest)) == 2
    state = driver.state
    assert state is not None
    assert (state.status, state.reason) == ("succeeded", "finalized")
    assert state.turns == 3


def test_a_rejected_final_answer_ends_as_the_limit_would_have() -> None:
    """The verifier checks the finalize call's answer; a rejection ends the
    run as budget_exhausted:steps (detail finalize=rejected), without a
    second finalize call."""
    params = make_params(budgets=Budgets(steps=2), verifier=VerifierParams(enabled=True),
                         visibility=Visibility(on_limit="finalize"))
    driver = run_script(params, model=[READ, final("my best guess")],
                        verdicts=[Verdict(False)])
    state = driver.state
    assert state is not None
    assert (state.status, state.reason) == ("budget_exhausted", "steps")
    assert state.detail.get("finalize") == "rejected"
    assert [r.purpose for r in driver.of(ModelRequest)] == ["step", "finalize"]


def test_finalize_keeps_room_for_its_call_in_the_token_budget() -> None:
    """A hand-computed case: the first prompt p1 = prefix 1,100 + task 50 =
    1,150; each step adds its 50-token reply and a 10-token result, so p_k =
    1,150 + 60 (k - 1). Budget 5,000 prompt tokens. Stop makes 4 calls
    (1,150 + 1,210 + 1,270 + 1,330 = 4,960; a fifth would pass). Finalize
    admits step k only if p_1 + ... + p_k plus the reserved finalize prompt
    p_k + 1,000 (output cap) + note fits: k = 2 needs 4,593 (fits), k = 3
    needs 5,923 (does not), so it makes 2 steps and the finalize call, whose
    prompt is p_3 + note, within the budget."""
    note = FINALIZE_NOTE_TOKENS
    p1 = make_params().prefix_tokens + 50
    assert p1 == 1_150
    prompts = [p1 + 60 * k for k in range(5)]
    budget = 5_000
    stop = run_script(_params("stop", tokens=budget), default_reply=distinct)
    assert stop.state is not None and stop.state.reason == "tokens"
    assert [r.prompt_tokens for r in stop.of(ModelRequest)] == prompts[:4]
    assert sum(prompts[:2]) + prompts[1] + 1_000 + note <= budget
    assert sum(prompts[:3]) + prompts[2] + 1_000 + note > budget
    fin = run_script(_params("finalize", tokens=budget), default_reply=distinct)
    requests = fin.of(ModelRequest)
    assert [r.purpose for r in requests] == ["step", "step", "finalize"]
    assert [r.prompt_tokens for r in requests] == [prompts[0], prompts[1], prompts[2] + note]
    state = fin.state
    assert state is not None and (state.status, state.reason) == ("succeeded", "finalized")
    assert state.input_tokens == prompts[0] + prompts[1] + prompts[2] + note <= budget


@FAST
@given(tokens=st.integers(1_500, 20_000), money=st.floats(0.005, 0.2),
       output=st.integers(400, 6_000), sizes=st.lists(st.integers(1, 3_000), min_size=1,
                                                      max_size=8))
def test_finalize_never_passes_a_budget(tokens: int, money: float, output: int,
                                        sizes: list[int]) -> None:
    """Whatever the budgets and tool result sizes, a run with on_limit
    finalize never passes its token, output-token or money budget, and makes
    at most one finalize call."""
    params = make_params(budgets=Budgets(tokens=tokens, money_usd=money, output_tokens=output),
                         prices=Prices(input=3.0, output=15.0),
                         visibility=Visibility(on_limit="finalize", finalize_output_tokens=200))
    results = [ToolResult("x", n, 0.5) for n in sizes]
    driver = ScriptedDriver(default_reply=distinct, tools=results)
    state = driver.drive(params, make_state(params))
    assert state.input_tokens + state.cache_read_tokens + state.cache_write_tokens <= tokens
    assert state.output_tokens + state.thinking_tokens <= output
    assert state.money_usd <= money * (1 + 1e-9)
    assert sum(r.purpose == "finalize" for r in driver.of(ModelRequest)) <= 1


def test_ask_parks_for_a_human_and_a_yes_extends_the_budget_once() -> None:
    """on_limit ask with 2 steps: the run parks (waiting_approval, an
    approval request of effect class limit), a yes after 30 s adds half the
    step budget (1 step) once; at the next limit it ends as
    budget_exhausted:steps after 3 steps, 30 s parked, one request."""
    params = _params("ask", steps=2)
    driver = run_script(params, default_reply=distinct,
                        approvals=[ApprovalDecision(True, 30.0)])
    asks = driver.of(ApprovalRequest)
    assert len(asks) == 1 and asks[0].effect == "limit"
    assert asks[0].call.name == "extend_budget" and asks[0].call.input["limit"] == "steps"
    index = driver.effects.index(asks[0])
    assert driver.statuses[index] == "waiting_approval"
    state = driver.state
    assert state is not None
    assert (state.status, state.reason) == ("budget_exhausted", "steps")
    assert state.turns == 3 and state.parked_s == 30.0


def test_ask_answered_no_ends_as_needs_human_limit() -> None:
    """A no (or no answer in time) ends the run as needs_human:limit."""
    for decision in (ApprovalDecision(False, 5.0), ApprovalDecision(False, 3_600.0, True)):
        driver = run_script(_params("ask", steps=2), default_reply=distinct, approvals=[decision])
        state = driver.state
        assert state is not None
        assert (state.status, state.reason) == ("needs_human", "limit")
        assert state.turns == 2


def test_time_budgets_always_stop() -> None:
    """A limit on_limit does not answer (active time) stops the run as before."""
    driver = run_script(_params("finalize", active_s=2.5), default_reply=distinct)
    state = driver.state
    assert state is not None and state.status == "budget_exhausted"
    assert state.reason == "active_time"
    assert all(r.purpose == "step" for r in driver.of(ModelRequest))
