"""The replay driver: the real harness loop answered from recorded runs.

Runs are built by ``tests/recordings.py`` with prompts that grow exactly as the
trace model says, so a faithful replay reproduces every recorded number.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from recordings import PRICES, conversation, loose, recorded, tool

from sim.drivers.replay import (
    REPLY_TOOL,
    ReplayOptions,
    replay_run,
    replay_runs,
    reply_tool_name,
    run_params,
)
from sim.harness.budgets import worst_case_cost
from sim.harness.messages import Usage
from sim.harness.params import Budgets, ContextParams, DetectorParams, VerifierParams
from sim.traces.model import CallRecord


def replay(run, params=None, **options):
    """Replay ``run`` under ``params`` (default: nothing binds)."""
    params = run_params(params or loose(), run)
    return replay_run(run, params, ReplayOptions(**options))


def prompts(run):
    return [c.usage.prompt_tokens for c in run.calls]


# ---------------------------------------------------------------- identity
TOOLS = st.lists(st.builds(tool, st.sampled_from(["search", "read", "edit"]),
                           st.integers(0, 400), st.booleans(), st.floats(0, 5),
                           q=st.integers(0, 3)), max_size=3)


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(TOOLS, min_size=1, max_size=12), first=st.integers(1, 5_000),
       output=st.integers(1, 300), reasoning=st.integers(0, 60),
       extra=st.lists(st.integers(0, 80), max_size=12), resolved=st.sampled_from(
           [True, False, None]))
def test_replay_under_limits_that_do_not_bind_reproduces_the_recorded_run(
        steps, first, output, reasoning, extra, resolved):
    """Same calls, same tokens, same recorded cost, and the harness's own count
    of every prompt equals the recorded one; the run is neither stopped nor
    diverged, and every tool call (and text turn) is answered once."""
    run = recorded("r", conversation(steps, first=first, output=output, reasoning=reasoning,
                                     extra=extra), resolved=resolved)
    r = replay(run)
    s = r.state
    assert s.turns == len(run.calls) == r.calls
    assert s.prompt_tokens == run.prompt_tokens
    assert s.output_tokens == sum(c.usage.output_tokens for c in run.calls)
    assert s.thinking_tokens == sum(c.usage.thinking_tokens for c in run.calls)
    assert r.cost_usd == math.fsum(c.cost_usd for c in run.calls) and r.saved_usd == 0.0
    assert r.prompt_counts == prompts(run) and r.prompt_mismatches == 0
    assert not r.stopped and not r.diverged
    text_turns = sum(1 for c in run.calls[:-1] if not c.tool_calls)
    assert r.text_turns == text_turns
    assert r.tools_run == run.tool_calls + text_turns


def test_recorded_result_sizes_larger_than_the_growth_are_scaled_down_to_it():
    """A recorded result size that overcounts (the provider saw fewer tokens)
    is scaled down so the next prompt is still exact; the step is counted."""
    run = recorded("r", conversation([[tool(result=300), tool("read", result=100)], []],
                                     extra=[-200]))
    r = replay(run)
    assert r.prompt_counts == prompts(run) and r.resized == 1 and r.prompt_mismatches == 0


def test_a_prompt_that_grows_less_than_the_output_is_reported_and_the_next_one_is_exact():
    """When the recorded prompt grows less than the previous call's output
    (reasoning dropped from the history), the harness counts more for that call;
    the replay says so, and the following step returns to the recorded count."""
    calls = list(conversation([[tool(result=30)], [tool("read", result=200)], [tool("edit")],
                               []], reasoning=50))
    shrink = 70  # call 1's prompt holds 70 tokens less: the reasoning was dropped
    for k in range(1, len(calls)):
        c = calls[k]
        calls[k] = replace(c, usage=replace(c.usage, input_tokens=c.usage.input_tokens - shrink))
    run = recorded("r", calls)
    r = replay(run)
    assert r.prompt_mismatches == 1 and r.prompt_max_deviation == shrink - 30
    assert r.prompt_counts[1] == run.calls[1].usage.prompt_tokens + shrink - 30
    assert r.prompt_counts[2:] == prompts(run)[2:]
    assert r.state.prompt_tokens == run.prompt_tokens  # usage is the recorded one


# ---------------------------------------------------------------- outcomes
@pytest.mark.parametrize(("resolved", "outcome"), [
    (True, "succeeded"), (False, "false_success"), (None, "succeeded:model_complete")])
def test_the_last_text_call_is_the_final_answer_and_mid_run_text_turns_reply_to_the_user(
        resolved, outcome):
    """A text-only call in the middle of a run is a reply_to_user call whose
    result is the user's message; the last text-only call is the final answer
    the harness accepts, judged by the recorded resolved."""
    run = recorded("r", conversation([[], [tool()], [], []]), resolved=resolved)
    r = replay(run)
    assert r.outcome == outcome and r.text_turns == 2 and r.state.tool_calls == 3
    assert r.ended_by == "harness"


@pytest.mark.parametrize(("resolved", "outcome"), [
    (True, "succeeded"), (False, "ended:max_steps"), (None, "ended:max_steps")])
def test_a_recording_that_ends_after_tool_calls_ends_as_recorded(resolved, outcome):
    """The old harness (or the user) ended the run after a tool step: the
    candidate would go on, but there is nothing more to replay."""
    run = recorded("r", conversation([[tool()], [tool("read")]]), resolved=resolved,
                   exit="max_steps")
    r = replay(run)
    assert r.outcome == outcome and r.ended_by == "recording" and not r.stopped
    assert r.state.turns == 2 and r.tools_run == 2


def test_a_real_tool_named_reply_to_user_keeps_its_name():
    """The synthetic reply tool never takes a recorded tool's name."""
    run = recorded("r", conversation([[tool(REPLY_TOOL)], [], []]))
    assert reply_tool_name(run) != REPLY_TOOL
    r = replay(run)
    assert r.prompt_counts == prompts(run) and r.outcome == "succeeded"


# ----------------------------------------------------------------- budgets
def _crossing(run, budget):
    """The first call whose prompt takes the run's prompt total over ``budget``."""
    total = 0
    for k, c in enumerate(run.calls):
        total += c.usage.prompt_tokens
        if total > budget:
            return k
    return None


@pytest.mark.parametrize("budget", [999, 1_000, 2_200, 5_000, 8_000, 10 ** 6])
def test_a_token_budget_stops_the_run_before_the_call_that_would_cross_it(budget):
    """The harness refuses the first call whose prompt would take the total past
    the budget: the run ends there, with the cost of the calls before it."""
    run = recorded("r", conversation([[tool()]] * 5 + [[]]))
    r = replay(run, loose(budgets=Budgets(tokens=budget)))
    k = _crossing(run, budget)
    assert r.stopped_at == k
    made = len(run.calls) if k is None else k
    assert r.state.turns == made
    assert r.cost_usd == math.fsum(c.cost_usd for c in run.calls[:made])
    assert r.outcome == ("succeeded" if k is None else "budget_exhausted:tokens")


def test_a_step_budget_that_binds_only_after_the_recording_ended_changes_nothing():
    """A step budget of 3 stops a 6-call run after 3 calls; on a 3-call run it
    would refuse a fourth call that never happened: the run ends as recorded."""
    params = loose(budgets=Budgets(steps=3))
    long_run = recorded("long", conversation([[tool()]] * 6))
    assert replay(long_run, params).stopped_at == 3
    short = recorded("short", conversation([[tool()]] * 3), resolved=True)
    r = replay(short, params)
    assert not r.stopped and r.outcome == "succeeded" and r.state.turns == 3


def test_a_money_budget_sees_the_runs_prices_and_the_worst_case_of_the_next_call():
    """The harness prices the recorded usage at the run's prices and refuses a
    call whose worst case (prompt plus output cap) could pass the budget."""
    run = recorded("r", conversation([[tool()]] * 6 + [[]], first=20_000))
    params = loose()
    spent, expected = 0.0, None
    budget = 0.12
    for k, c in enumerate(run.calls):
        u = c.usage
        if spent + worst_case_cost(PRICES, u.prompt_tokens, params.max_output_tokens) > budget:
            expected = k
            break
        spent += PRICES.cost(u.input_tokens, u.output_tokens, u.cache_read_tokens)
    assert expected is not None
    r = replay(run, loose(budgets=Budgets(money_usd=budget)))
    assert r.stopped_at == expected and r.outcome == "budget_exhausted:money"
    assert math.isclose(r.priced_usd, spent)


# ---------------------------------------------------------------- detector
def _looping():
    same = tool("search", q=1)
    return recorded("loop", conversation([[same], [same], [same], [same], [tool("read")], []]),
                    resolved=False)


def test_a_repetition_is_nudged_then_stopped_when_the_run_continues_as_recorded():
    """repeat_threshold 2: the second identical call fires the detector (a
    nudge the recording cannot answer: the run is flagged), the fourth fires
    again and the run stops as needs_human, before call 4."""
    run = _looping()
    params = loose(detector=DetectorParams(repeat_threshold=2))
    r = replay(run, params)
    assert r.firings == [(1, "repetition"), (3, "repetition")]
    assert r.interventions == [(1, "nudge")] and r.diverged
    assert r.outcome == "needs_human:no_progress" and r.stopped_at == 4
    assert r.cost_usd == math.fsum(c.cost_usd for c in run.calls[:4])


def test_stop_after_intervention_ends_the_run_at_the_nudge_and_gives_the_lower_bound():
    """In stop mode the run ends where the nudge would have been read; replay_runs
    reports both bounds for a diverged run."""
    run = _looping()
    params = loose(detector=DetectorParams(repeat_threshold=2))
    r = replay(run, params, after_intervention="stop")
    assert r.outcome == "diverged:nudge" and r.state.turns == 2 and not r.stopped
    assert r.cost_usd == math.fsum(c.cost_usd for c in run.calls[:2])
    (both,) = replay_runs([run], params)
    assert both.lower.cost_usd == r.cost_usd < both.upper.cost_usd == both.chosen.cost_usd
    clean = recorded("clean", conversation([[tool()], []]))
    (plain,) = replay_runs([clean], params)
    assert plain.lower is plain.upper is plain.chosen


def _text_turns(texts, replies):
    calls = conversation([[]] * (len(texts) + 1))
    calls = tuple(replace(c, text_sha256=t, observation_sha256=o)
                  for c, t, o in zip(calls, [*texts, None], [*replies, None], strict=True))
    return recorded("talk", calls)


def test_identical_text_turns_repeat_only_when_the_user_answers_the_same():
    """reply_to_user is keyed on the message and the reply (polling): the same
    message answered the same way twice is a repetition; answered differently,
    or without recorded hashes, it is not."""
    params = loose(detector=DetectorParams(repeat_threshold=2))
    assert replay(_text_turns(["a", "a"], ["x", "x"]), params).firings == [(1, "repetition")]
    assert replay(_text_turns(["a", "a"], ["x", "y"]), params).firings == []
    assert replay(_text_turns([None, None], [None, None]), params).firings == []


def test_tool_calls_without_recorded_arguments_never_look_repeated():
    """Unrecorded arguments are made distinct (and counted), so the detector
    cannot take two of them for a repetition."""
    blank = replace(tool(), arguments=None)
    run = recorded("r", conversation([[blank], [blank], [blank], []]))
    r = replay(run, loose(detector=DetectorParams(repeat_threshold=2)))
    assert r.firings == [] and r.unrecorded_arguments == 3


# ------------------------------------------------------------ interventions
def test_retrying_a_recorded_tool_error_is_an_intervention():
    """A recorded error replayed as transient is retried by the candidate (the
    old harness passed it on): continue answers each retry with the recorded
    error and goes on; stop ends the run there."""
    run = recorded("r", conversation([[tool(error=True)], [tool("read")], []]))
    params = loose()
    r = replay(run, params, tool_error_kind="transient")
    assert r.interventions[0] == (0, "tool_retry") and r.state.retries == params.tool_retries
    assert r.outcome == "succeeded" and r.state.turns == 3
    stopped = replay(run, params, tool_error_kind="transient", after_intervention="stop")
    assert stopped.outcome == "diverged:tool_retry" and stopped.state.turns == 1
    as_recorded = replay(run, params)  # validation: passed to the model, as recorded
    assert not as_recorded.diverged and as_recorded.prompt_counts == prompts(run)


@pytest.mark.parametrize(("resolved", "outcome", "diverged"), [
    (True, "succeeded", False), (False, "ended:user_stop", True),
    (None, "succeeded:unverified", False)])
def test_a_verifier_answers_with_the_recorded_resolved(resolved, outcome, diverged):
    """The candidate's verifier passes a resolved run's final answer and rejects
    an unresolved one (a rejection the recording cannot answer: the run ends as
    recorded, flagged); a run the source does not judge passes, as it did,
    labelled unverified (not 'verified': nothing checked it)."""
    run = recorded("r", conversation([[tool()], []]), resolved=resolved)
    params = loose(verifier=VerifierParams(enabled=True))
    r = replay(run, params)
    assert r.outcome == outcome and r.diverged == diverged
    assert r.verdict_unknown == (resolved is None)
    if diverged:
        assert r.interventions == [(1, "verifier_rejection")]
        assert replay(run, params, after_intervention="stop").outcome == (
            "diverged:verifier_rejection")


def test_a_compaction_the_recording_does_not_hold_is_answered_with_its_worst_case():
    """A candidate that compacts above 2,000 tokens asks for a summary the
    recording cannot give: continue answers it with its worst case (priced, so
    the cost is an upper bound) and goes on with the recorded calls; stop ends
    the run there."""
    run = recorded("r", conversation([[tool(result=400)]] * 6 + [[]]))
    params = loose(context=ContextParams(compact_at_tokens=2_000))
    r = replay(run, params)
    assert r.interventions[0][1] == "compaction" and r.state.compactions >= 1
    assert r.state.turns == len(run.calls) and r.calls == len(run.calls) + r.state.compactions
    assert r.cost_usd > math.fsum(c.cost_usd for c in run.calls)  # plus the summaries
    assert replay(run, params, after_intervention="stop").outcome == "diverged:compaction"


def test_a_truncated_response_is_an_intervention():
    """A recorded finish reason 'length' is max_tokens for the harness, which
    drops the call's tool calls, compacts what it can and asks the model to
    continue: the recording cannot follow."""
    calls = list(conversation([[tool()], [tool("read")], [tool("edit")], []]))
    calls[2] = replace(calls[2], finish_reason="length")
    r = replay(recorded("r", calls))
    kinds = [kind for _, kind in r.interventions]
    assert kinds[0] == "compaction" and "continuation" in kinds and r.diverged


def test_calls_without_a_recorded_cost_are_priced_at_the_runs_prices():
    """cost_usd is the recorded cost where recorded, the priced usage elsewhere."""
    run = recorded("r", conversation([[tool()], []], cost=None))
    r = replay(run)
    expected = math.fsum(PRICES.cost(c.usage.input_tokens, c.usage.output_tokens,
                                     c.usage.cache_read_tokens)
                         for c in run.calls)
    assert math.isclose(r.cost_usd, expected) and run.recorded_cost_usd is None


def test_a_run_without_calls_ends_as_recorded():
    """Nothing to replay: no step, no cost."""
    run = recorded("empty", (), resolved=None, exit="error")
    r = replay(run)
    assert r.outcome == "ended:error" and r.state.turns == 0 and r.cost_usd == 0.0


def test_a_call_prompt_larger_than_the_candidates_window_fails_as_context_overflow():
    """The candidate's window is a limit too: a recorded prompt beyond it is an
    overflow the harness cannot compact away (only the first message is there)."""
    call = CallRecord(usage=Usage(input_tokens=50_000, output_tokens=10), cost_usd=0.1)
    run = recorded("r", (call,))
    r = replay(run, loose(context_window=20_000))
    assert r.outcome == "failed:context_overflow" and r.stopped_at == 0


def test_a_nudge_after_the_last_recorded_call_is_not_a_divergence():
    """The detector fires on the last recorded step: the nudge is never read
    (the recording ended), so the run ends as recorded, with the firing counted."""
    same = tool("search", q=1)
    run = recorded("r", conversation([[tool("read")], [same], [same]]), exit="max_steps",
                   resolved=False)
    r = replay(run, loose(detector=DetectorParams(repeat_threshold=2)), after_intervention="stop")
    assert r.firings == [(2, "repetition")] and not r.diverged
    assert r.outcome == "ended:max_steps" and r.state.turns == 3


def test_recorded_compaction_and_grader_calls_answer_the_candidates_own():
    """sim's own traces hold compaction and grader calls: a candidate that asks
    for a compaction where the recording made one gets it (no divergence); one
    that does not passes it over (counted; its cost is saved). A verification
    gets the recorded grader call's usage and cost."""
    steps = conversation([[tool(result=600)], [tool(result=600)], [tool(result=600)], []])
    summary = CallRecord(usage=Usage(input_tokens=1_500, output_tokens=200), cost_usd=0.5,
                         purpose="compaction")
    grader = CallRecord(usage=Usage(input_tokens=300, output_tokens=20), cost_usd=0.25,
                        purpose="verifier")
    run = recorded("r", (*steps[:3], summary, steps[3], grader))
    loose_run = replay(run, loose(verifier=VerifierParams(enabled=True)))
    assert loose_run.passed_over == 1 and not loose_run.diverged
    assert loose_run.outcome == "succeeded"
    assert math.isclose(loose_run.saved_usd, 0.5)
    assert loose_run.state.input_tokens == sum(c.usage.input_tokens for c in steps) + 300
    compacting = loose(verifier=VerifierParams(enabled=True),
                       context=ContextParams(compact_at_tokens=steps[3].usage.prompt_tokens - 1))
    r = replay(run, compacting)
    assert r.state.compactions == 1 and r.passed_over == 0 and r.saved_usd == 0.0
    assert "compaction" not in [kind for _, kind in r.interventions]


def test_the_drivers_answer_effects_through_the_engines_table():
    """The replay and live drivers have no switch on effect type: the engines'
    table (sim.engines.perform.answers) maps every effect to their methods; an
    effect a driver has no method for is a TypeError naming the driver and the
    method (replay has no task-giver), and waits are answered with None by a
    driver without its own (replay) or by its own (live); checkpoints by each
    driver's own (replay's notes that a step's tool calls were all taken)."""
    from sim.drivers.live.driver import LiveDriver
    from sim.drivers.replay.driver import RunDriver
    from sim.engines.perform import EFFECTS, answers
    from sim.harness import effects as fx

    replayed, live = answers(RunDriver), answers(LiveDriver)
    assert set(replayed) == set(live) == set(EFFECTS)
    for kind, method in ((fx.ModelRequest, "respond"), (fx.ToolRequest, "execute"),
                         (fx.VerifyRequest, "verify"), (fx.ApprovalRequest, "approve")):
        assert replayed[kind] is getattr(RunDriver, method)
        assert live[kind] is getattr(LiveDriver, method)
    assert live[fx.Wait] is LiveDriver.wait and live[fx.Checkpoint] is LiveDriver.checkpoint
    assert replayed[fx.Wait](None, fx.Wait(1.0), 0.0) is None
    assert replayed[fx.Checkpoint] is RunDriver.checkpoint
    with pytest.raises(TypeError, match=r"RunDriver cannot answer UserTurn.*'reply'"):
        replayed[fx.UserTurn](None, fx.UserTurn("hi", 1), 0.0)
