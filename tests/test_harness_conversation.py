"""Harness exits that real runs need: a task-giver in the loop (tau2-bench's
``user_stop`` against ``agent_stop``), a limit on tool errors
(``budget_exhausted:errors``, tau2-bench's ``too_many_errors``), and prices per
model for runs of a pooled population."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from scripted import FAST, final, make_params, make_state, run_script, tool_call

from sim.harness import (
    Budgets,
    DetectorParams,
    ModelRequest,
    Prices,
    ToolError,
    ToolResult,
    UserReply,
    UserTurn,
    VerifierParams,
)

MARKER = "###STOP###"


def chat(**changes):
    return make_params(end_marker=MARKER, **changes)


def test_a_message_without_the_marker_goes_to_the_task_giver():
    """The reply's text is handed over; the answer enters the history as a user
    message of its stated size, and the next prompt is larger by the model's
    output (50 tokens) and the answer."""
    driver = run_script(chat(), model=[final("Which order?"), final(f"Done. {MARKER}")],
                        users=[UserReply("Order #W42, please.", 37)])
    turns = driver.of(UserTurn)
    assert [t.message for t in turns] == ["Which order?"]
    requests = driver.of(ModelRequest)
    assert requests[1].prompt_tokens == requests[0].prompt_tokens + 50 + 37
    assert requests[1].messages[-1].role == "user"
    assert requests[1].messages[-1].content[-1].text == "Order #W42, please."
    s = driver.state
    assert (s.status, s.reason, s.turns) == ("succeeded", "model_complete", 2)


def test_the_task_giver_ends_the_run_as_user_stop():
    """A reply that ends the conversation stops the run at once as
    succeeded:user_stop, after the tool calls that came before it ran."""
    driver = run_script(chat(), model=[tool_call("search", q="x"), final("All set.")],
                        users=[UserReply(ended=True, duration_s=2.5)])
    s = driver.state
    assert (s.status, s.reason, s.turns, s.tool_calls) == ("succeeded", "user_stop", 2, 1)
    assert s.active_s == 1.0 + 0.5 + 1.0 + 2.5  # two model calls, one tool, the reply


def test_the_marker_is_the_models_own_end_and_is_verified_when_a_verifier_is_on():
    """With the marker the run does not ask the task-giver: it ends as
    model_complete, or goes to the verifier when one is enabled."""
    driver = run_script(chat(verifier=VerifierParams(enabled=True)),
                        model=[final(f"Done {MARKER}")])
    assert not driver.of(UserTurn)
    assert (driver.state.status, driver.state.reason) == ("succeeded", "verified")


def test_without_a_marker_every_text_reply_is_final():
    """Conversation mode is off by default: a text reply ends the run as before."""
    driver = run_script(make_params(), model=[final("Which order?")])
    assert not driver.of(UserTurn)
    assert driver.state.reason == "model_complete"


def test_cancelled_while_the_task_giver_answers():
    """An abort raised during the task-giver's turn ends the run as cancelled."""
    def abort(effect, state):
        if isinstance(effect, UserTurn):
            state.abort_requested = True

    driver = run_script(chat(), model=[final("Which order?")], users=[UserReply("#1", 3)],
                        on_effect=abort)
    assert (driver.state.status, driver.state.reason) == ("cancelled", "external_signal")


def _error(call):
    return ToolError("validation", "bad target", 12, 0.1, 400)


def test_tool_error_limit_stops_before_the_next_model_call():
    """With ``budgets.tool_errors`` = 3, the third error observation is shown
    and the next model call is refused: budget_exhausted:errors after 3 steps."""
    params = make_params(budgets=Budgets(tool_errors=3), detector=DetectorParams(enabled=False))
    driver = run_script(params, default_reply=tool_call("search", q="x"),
                        default_tool=_error)
    s = driver.state
    assert (s.status, s.reason, s.turns, s.tool_errors) == ("budget_exhausted", "errors", 3, 3)
    assert len(driver.of(ModelRequest)) == 3


@FAST
@given(outcomes=st.lists(st.booleans(), min_size=1, max_size=40), limit=st.integers(1, 6))
def test_no_model_call_after_the_error_limit_is_reached(outcomes, limit):
    """Whatever the sequence of tool successes and errors, the model is never
    called once ``limit`` errors have been shown; errors are counted exactly."""
    params = make_params(budgets=Budgets(tool_errors=limit, steps=len(outcomes) + 1),
                         detector=DetectorParams(enabled=False))
    results = [ToolResult("ok", 5, 0.1) if ok else ToolError("validation", "no", 5, 0.1, 400)
               for ok in outcomes]  # then the default tool: successes
    driver = run_script(params, default_reply=tool_call("search", q="x"), tools=results)
    s = driver.state
    shown = sum(not ok for ok in outcomes[:s.turns])
    assert s.tool_errors == shown
    if shown >= limit:
        assert (s.status, s.reason) == ("budget_exhausted", "errors")
        assert sum(not ok for ok in outcomes[:s.turns - 1]) < limit
    else:
        assert (s.status, s.reason) == ("budget_exhausted", "steps")


def test_a_run_of_another_model_is_priced_and_budgeted_at_its_prices():
    """``model_prices`` prices a run whose model is listed at that model's
    prices, for the spend and for the money budget's worst case; the harness's
    own model keeps ``prices``."""
    cheap, dear = Prices(1.0, 2.0, 0.1, 1.25), Prices(10.0, 40.0, 1.0, 12.5)
    params = make_params(prices=dear, model_prices=(("small-model", cheap),))
    state = make_state(params)
    state.model = "small-model"
    driver = run_script(params, state, model=[final()])
    s = driver.state
    assert s.money_usd == cheap.cost(s.input_tokens, s.output_tokens)
    own = run_script(params, model=[final()]).state
    assert own.money_usd == dear.cost(own.input_tokens, own.output_tokens)
    # a budget the dear model's worst case exceeds but the cheap one's does not
    worst = lambda p: (state.context_tokens * max(p.input, p.cache_read, p.cache_write)  # noqa: E731
                       + params.max_output_tokens * p.output) / 1e6
    budget = (worst(cheap) + worst(dear)) / 2
    limited = make_params(prices=dear, model_prices=(("small-model", cheap),),
                          budgets=Budgets(money_usd=budget))
    cheap_state = make_state(limited)
    cheap_state.model = "small-model"
    assert run_script(limited, cheap_state, model=[final()]).state.reason == "model_complete"
    assert run_script(limited, model=[final()]).state.reason == "money"
