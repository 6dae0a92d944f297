"""Budgets: checked before every call against its worst case, never overshot."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scripted import (
    FAST,
    Reply,
    calls,
    final,
    make_params,
    run_script,
    tool_call,
    truncated,
    use,
)

from sim.harness import (
    TERMINAL_STATES,
    Budgets,
    ModelError,
    ModelRequest,
    Prices,
    RetryPolicy,
    TextBlock,
    ToolError,
    ToolRequest,
    ToolResult,
    Verdict,
    VerifierParams,
    Wait,
)
from sim.harness.budgets import LimitExceeded, Limits, worst_case_cost
from sim.harness.detector import NoProgressDetector
from sim.harness.guards import Run, check_ready, spend
from sim.harness.state import Stop

BUDGET_OF = {"steps": "steps", "tokens": "tokens", "output_tokens": "output_tokens",
             "money": "money_usd", "active_time": "active_s", "wall_time": "wall_s"}
TOOL_NAMES = ("search", "read_file", "build_status", "nope")
EPS = 1e-9


# ------------------------------------------------------------ strategies
def _prices() -> st.SearchStrategy[Prices]:
    price = st.floats(0.0, 30.0, allow_nan=False)
    return st.builds(Prices, input=price, output=price, cache_read=price, cache_write=price,
                     thinking=st.none() | price)


def _reply() -> st.SearchStrategy[Reply]:
    """Replies whose latency is a share of the model timeout (scaled later)."""
    size = dict(output_tokens=st.integers(1, 3_000), thinking_tokens=st.integers(0, 500),
                latency_s=st.floats(0.0, 1.0), cache_read_share=st.floats(0.0, 1.0))
    block = st.builds(lambda n, a: use(n, path=str(a), q=str(a)),
                      st.sampled_from(TOOL_NAMES), st.integers(0, 20))
    tools = st.builds(lambda bs, **kw: calls(*bs, **kw), st.lists(block, min_size=1, max_size=3),
                      **size)
    answer = st.builds(lambda **kw: final(**kw), **size)
    cut = st.builds(lambda b, **kw: truncated(TextBlock("partial", 5), b, **kw), block, **size)
    return st.one_of(tools, tools, tools, answer, cut)


def _model_error() -> st.SearchStrategy[ModelError]:
    return st.builds(ModelError, kind=st.sampled_from(["rate_limit", "overloaded", "timeout",
                                                       "server", "empty"]),
                     retry_after_s=st.none() | st.floats(0.0, 30.0),
                     latency_s=st.floats(0.0, 1.0))


def _tool_outcome() -> st.SearchStrategy[object]:
    duration = st.floats(0.0, 5.0)  # within the shortest tool timeout
    ok = st.builds(ToolResult, output=st.text("abc", max_size=6), tokens=st.integers(1, 4_000),
                   duration_s=duration, metric=st.none())
    err = st.builds(ToolError, kind=st.sampled_from(["transient", "timeout", "validation",
                                                     "not_found", "rate_limit"]),
                    message=st.just("boom"), tokens=st.integers(1, 200), duration_s=duration,
                    retry_after_s=st.none() | st.floats(0.0, 30.0))
    return st.one_of(ok, ok, err)


def _budgets() -> st.SearchStrategy[Budgets]:
    def opt(s):
        return st.none() | s
    return st.builds(Budgets, steps=opt(st.integers(1, 30)),
                     tokens=opt(st.integers(2_000, 200_000)),
                     output_tokens=opt(st.integers(500, 30_000)),
                     money_usd=opt(st.floats(0.001, 2.0)),
                     wall_s=opt(st.floats(10.0, 600.0)), active_s=opt(st.floats(10.0, 600.0)),
                     retries=opt(st.integers(0, 6)))


PRICES, BUDGETS, TOOL_OUTCOMES = _prices(), _budgets(), st.lists(_tool_outcome(), max_size=40)
MODEL_SCRIPT = st.lists(st.one_of(_reply(), _reply(), _model_error()), max_size=30)
VERDICTS = st.lists(st.builds(Verdict, passed=st.booleans(), feedback=st.just("no")),
                    max_size=5)


def _scaled(item, timeout: float):
    """The item with its latency share turned into seconds within ``timeout``."""
    return replace(item, latency_s=item.latency_s * timeout)


@st.composite
def scenarios(draw):
    timeout = draw(st.floats(1.0, 60.0))
    retry = RetryPolicy(base_s=draw(st.floats(0.1, 4.0)), cap_s=draw(st.floats(4.0, 64.0)),
                        jitter=draw(st.floats(0.0, 1.0)),
                        max_attempts=draw(st.integers(0, 5)),
                        fallback_after=draw(st.integers(1, 4)), fallback_model="small-model",
                        fallback_prices=draw(PRICES),
                        model_error_retries=draw(st.integers(0, 2)))
    params = make_params(
        max_output_tokens=draw(st.integers(100, 4_000)), model_timeout_s=timeout,
        context_window=draw(st.sampled_from([20_000, 50_000])), prices=draw(PRICES),
        retry=retry, budgets=draw(BUDGETS),
        verifier=VerifierParams(enabled=draw(st.booleans())))
    model = [_scaled(item, timeout) for item in draw(MODEL_SCRIPT)]
    return params, model, draw(TOOL_OUTCOMES), draw(VERDICTS)


def _worst_next(params, state) -> dict[str, float]:
    """Upper bounds of what any next call could add (for the 'bound' check)."""
    out = max(params.max_output_tokens, params.context.summary_max_tokens)
    price_sets = [params.prices] + [p for p in (params.retry.fallback_prices,) if p]
    money = max(worst_case_cost(p, state.context_tokens, out) for p in price_sets)
    seconds = max(params.model_timeout_s, params.retry.cap_s, 30.0,
                  *(t.timeout_s for t in params.tools))
    return {"tokens": state.context_tokens, "output_tokens": out, "money_usd": money,
            "active_s": seconds, "wall_s": seconds}


@FAST
@given(scenarios())
def test_no_budget_is_ever_overshot_and_every_run_ends_once(scenario) -> None:
    """For any scripted run (tool calls, final answers, truncations, model and
    tool errors, random sizes, prices and durations within their timeouts)
    and any budgets: no budget is overshot, the run ends in exactly one
    terminal state with a reason (one terminal event), and when it ends as
    budget_exhausted the reason names a budget that is set and that the next
    call's worst case would indeed have overshot."""
    params, model, tools, verdicts = scenario
    run = run_script(params, model=model, tools=tools, verdicts=verdicts,
                     default_reply=final(output_tokens=10, latency_s=0.0))
    s, b = run.state, params.budgets
    assert s.status in TERMINAL_STATES and s.reason
    assert len(run.events_of("terminal")) == 1
    if b.steps is not None:
        assert s.turns <= b.steps
    if b.tokens is not None:
        assert s.prompt_tokens <= b.tokens
    if b.output_tokens is not None:
        assert s.output_tokens + s.thinking_tokens <= b.output_tokens
    if b.money_usd is not None:
        assert s.money_usd <= b.money_usd + EPS
    if b.active_s is not None:
        assert s.active_s <= b.active_s + EPS
    if b.wall_s is not None:
        assert s.wall_s <= b.wall_s + EPS
    if b.retries is not None:
        assert s.retries <= b.retries
    if (s.status, s.reason) == ("budget_exhausted", "retries"):
        assert s.retries == b.retries  # the next retry would have overshot it
    elif s.status == "budget_exhausted":
        name = BUDGET_OF[s.reason]
        limit = getattr(b, name)
        assert limit is not None, f"{s.reason} ended the run but is not set"
        if name == "steps":
            assert s.turns == limit
        else:
            used = {"tokens": s.prompt_tokens, "output_tokens": s.output_tokens
                    + s.thinking_tokens, "money_usd": s.money_usd, "active_s": s.active_s,
                    "wall_s": s.wall_s}[name]
            assert used + _worst_next(params, s)[name] > limit


# ------------------------------------------------------ single budgets
def _looping(n: int = 60):
    return [tool_call("search", q=str(i)) for i in range(n)]


def test_token_budget_refuses_the_call_that_would_overshoot_it() -> None:
    """budgets.tokens bounds total prompt tokens: the run stops before the
    call whose prompt would take the total over the budget."""
    params = make_params(budgets=Budgets(tokens=6_000))
    run = run_script(params, model=_looping())
    assert (run.state.status, run.state.reason) == ("budget_exhausted", "tokens")
    sent = sum(r.prompt_tokens for r in run.step_requests)
    assert sent == run.state.prompt_tokens <= 6_000
    assert sent + run.state.context_tokens > 6_000


def test_output_budget_counts_the_worst_case_output_of_the_next_call() -> None:
    """budgets.output_tokens is checked against max_output_tokens of the next
    call, so a run stops while its output spent is still under the budget."""
    params = make_params(max_output_tokens=1_000, budgets=Budgets(output_tokens=2_500))
    run = run_script(params, model=_looping())
    assert (run.state.status, run.state.reason) == ("budget_exhausted", "output_tokens")
    # 50 output tokens per call: after n calls the next is refused once 50n + 1,000 > 2,500
    assert run.state.turns == 31 and run.state.output_tokens == 1_550


def test_money_budget_uses_prices_and_the_worst_case_of_the_call() -> None:
    """budgets.money_usd stops the run before a call whose worst-case cost
    (prompt at the dearest input price, max output at the dearest output
    price) would exceed it; spend stays within the budget."""
    prices = Prices(input=3.0, output=15.0)
    params = make_params(prices=prices, budgets=Budgets(money_usd=0.05))
    run = run_script(params, model=_looping())
    s = run.state
    assert (s.status, s.reason) == ("budget_exhausted", "money")
    assert s.money_usd <= 0.05
    assert s.money_usd + worst_case_cost(prices, s.context_tokens, 1_000) > 0.05
    assert s.money_usd == pytest.approx(prices.cost(s.input_tokens, s.output_tokens))


def test_active_time_budget_counts_model_and_tool_durations() -> None:
    """budgets.active_s counts model latency, tool durations and backoff
    waits; a call that could take the run over it (model_timeout_s for a
    model call, the tool's timeout for a tool call) is refused."""
    params = make_params(model_timeout_s=30.0, budgets=Budgets(active_s=100.0))
    run = run_script(params, model=[Reply(r.content, "tool_use", latency_s=10.0)
                                    for r in _looping()],
                     tools=[ToolResult("x", 5, 4.0)] * 60)
    s = run.state
    assert (s.status, s.reason) == ("budget_exhausted", "active_time")
    assert s.active_s <= 100.0
    # each step: 10 s model + 4 s tool; step 7 would start at 84 s + 30 s timeout > 100 s
    assert s.turns == 6 and s.active_s == pytest.approx(84.0)


def test_wall_time_budget_is_reported_as_wall_time() -> None:
    """budgets.wall_s alone stops a run as budget_exhausted:wall_time."""
    params = make_params(model_timeout_s=30.0, budgets=Budgets(wall_s=100.0))
    run = run_script(params, model=_looping())
    assert (run.state.status, run.state.reason) == ("budget_exhausted", "wall_time")
    assert run.state.wall_s <= 100.0


def test_tool_call_is_refused_when_its_timeout_could_overshoot_time() -> None:
    """Before a tool runs, its timeout is checked against the time budgets:
    with 25 s of active budget left after the model call, a tool with a 60 s
    timeout is not run."""
    params = make_params(model_timeout_s=30.0, budgets=Budgets(active_s=31.0))
    run = run_script(params, model=[Reply(tool_call("deploy", env="x").content, "tool_use",
                                          latency_s=6.0)])
    assert (run.state.status, run.state.reason) == ("budget_exhausted", "active_time")
    assert run.of(ToolRequest) == []


def test_a_retry_after_a_slow_model_error_is_checked_against_time() -> None:
    """A retried model call is a model call: after an error that took most of
    the active budget, the retry is refused rather than allowed to overshoot."""
    params = make_params(model_timeout_s=30.0, budgets=Budgets(active_s=40.0))
    run = run_script(params, model=[ModelError("overloaded", 529, latency_s=25.0), final()])
    s = run.state
    assert (s.status, s.reason) == ("budget_exhausted", "active_time")
    assert s.active_s <= 40.0
    assert len(run.of(ModelRequest)) == 1


def test_a_retry_on_the_fallback_model_is_priced_at_fallback_prices() -> None:
    """The money check of a retry uses the prices of the model it will go to:
    when rate limits switch the run to a dearer fallback model, a retry that
    the budget cannot pay for at fallback prices is refused."""
    cheap, dear = Prices(input=0.1, output=0.5), Prices(input=30.0, output=150.0)
    params = make_params(prices=cheap, budgets=Budgets(money_usd=0.05),
                         retry=RetryPolicy(fallback_after=1, fallback_model="big",
                                           fallback_prices=dear))
    run = run_script(params, model=[ModelError("rate_limit", 429), final()])
    s = run.state
    assert s.money_usd <= 0.05
    assert (s.status, s.reason) == ("budget_exhausted", "money")
    assert [r.model for r in run.of(ModelRequest)] == [params.model]


def test_limits_refuse_nothing_when_unlimited(params, state) -> None:
    """With no budgets set, no call, wait or retry is ever refused."""
    limits = Limits(params)
    state.retries = state.tool_errors = state.turns = 10**9
    limits.check_before_step(state)
    limits.check_before_model_call(state, 10**9, 10**6)
    limits.check_duration(state, 10**9)
    limits.check_usage(state)
    assert limits.may_retry(state)
    assert limits.time_left(state) == math.inf and limits.wall_left(state) is None


def _refused(check: Any, *args: Any) -> str | None:
    """The limit ``check(*args)`` raised LimitExceeded for, or None."""
    try:
        check(*args)
    except LimitExceeded as end:
        assert isinstance(end, Stop) and end.status == "budget_exhausted"
        assert end.reason == end.limit
        return end.limit
    return None


def test_limits_name_the_first_budget_a_model_call_could_overshoot(params, state) -> None:
    """Before a model call the budgets are checked in one order (tool errors,
    prompt tokens, output tokens, money, time), each against the call's worst
    case, and the one exception names the first that refuses."""
    prices = Prices(input=2.0, output=10.0, cache_read=1.0, cache_write=4.0, thinking=20.0)
    params = replace(params, prices=prices, model_timeout_s=30.0, budgets=Budgets(
        tool_errors=3, tokens=10_000, output_tokens=2_000, money_usd=1.0, active_s=100.0,
        wall_s=150.0))
    limits = Limits(params)
    state.input_tokens, state.cache_read_tokens, state.cache_write_tokens = 4_000, 2_000, 1_000
    state.output_tokens, state.thinking_tokens, state.money_usd = 900, 100, 0.9
    state.active_s, state.parked_s = 60.0, 50.0
    check = limits.check_before_model_call
    # prompt 7,000 so far; output 1,000; worst case of (2,000, 500) is
    # (2,000 * 4 + 500 * 20) / 1e6 = 0.018 USD; 30 s more active time
    assert _refused(check, state, 2_000, 500) is None
    state.tool_errors = 3
    assert _refused(check, state, 2_000, 500) == "errors"
    state.tool_errors = 2
    assert _refused(check, state, 3_001, 0) == "tokens"  # 7,000 + 3,001 > 10,000
    assert _refused(check, state, 3_000, 1_001) == "output_tokens"  # 1,000 + 1,001 > 2,000
    state.money_usd = 0.983  # 0.983 + 0.018 > 1.0
    assert _refused(check, state, 2_000, 500) == "money"
    state.money_usd = 0.9
    state.active_s = 70.5  # 70.5 + 30 > 100
    assert _refused(check, state, 2_000, 500) == "active_time"
    state.active_s, state.parked_s = 60.0, 60.5  # 60 + 60.5 + 30 > 150
    assert _refused(check, state, 2_000, 500) == "wall_time"
    assert limits.time_left(state) == 150.0 - 120.5
    assert limits.wall_left(state) == 150.0 - 120.5
    state.parked_s = 200.0
    assert limits.wall_left(state) == 0.0 and limits.time_left(state) == -110.0


def test_limits_name_the_budget_a_reported_usage_exceeded(params, state) -> None:
    """After a call, a usage past a budget (the provider reported more than
    the worst case) is named; money has a relative slack of 1e-9 for
    rounding, and time is not checked then."""
    limits = Limits(replace(params, budgets=Budgets(tokens=1_000, output_tokens=100,
                                                    money_usd=2.0, active_s=1.0)))
    state.active_s = 5.0
    state.input_tokens, state.cache_read_tokens, state.cache_write_tokens = 400, 300, 300
    state.output_tokens, state.thinking_tokens, state.money_usd = 60, 40, 2.0 * (1 + 5e-10)
    assert _refused(limits.check_usage, state) is None
    state.cache_write_tokens = 301
    assert _refused(limits.check_usage, state) == "tokens"
    state.cache_write_tokens, state.thinking_tokens = 300, 41
    assert _refused(limits.check_usage, state) == "output_tokens"
    state.thinking_tokens, state.money_usd = 40, 2.0 * (1 + 2e-9)
    assert _refused(limits.check_usage, state) == "money"


def test_limits_of_steps_and_retries(params, state) -> None:
    """The step budget refuses the step after the last allowed one; the retry
    budget allows retries until that many were made."""
    limits = Limits(replace(params, budgets=Budgets(steps=4, retries=2)))
    state.turns = 3
    assert _refused(limits.check_before_step, state) is None
    state.turns = 4
    assert _refused(limits.check_before_step, state) == "steps"
    state.retries = 1
    assert limits.may_retry(state)
    state.retries = 2
    assert not limits.may_retry(state)


def test_spend_past_a_time_budget_counts_only_the_time_left(params, state) -> None:
    """An effect that took longer than the time budgets left counts only the
    time left (the harness stopped waiting then) and ends the run."""
    params = replace(params, budgets=Budgets(active_s=100.0, wall_s=120.0))
    run = Run(params, state, NoProgressDetector(params.detector), None, {}, Limits(params),
              None)
    state.active_s, state.parked_s = 90.0, 25.0  # wall leaves 5 s, active 10 s
    spend(run, 3.0)
    assert state.active_s == 93.0
    with pytest.raises(LimitExceeded) as end:
        spend(run, 4.0)
    assert end.value.limit == "wall_time" and state.active_s == 95.0
    check_ready(run, 0.0)  # nothing more is taken: 0 s fits
    state.abort_requested = True
    with pytest.raises(Stop) as cancelled:
        check_ready(run, 0.0)
    assert (cancelled.value.status, cancelled.value.reason) == ("cancelled", "external_signal")


def test_worst_case_cost_is_priced_at_the_tier_the_prompt_reaches() -> None:
    """A prompt past a tier's start is bounded at that tier's dearest prices."""
    tier = Prices(input=6.0, output=22.5, cache_read=0.6, cache_write=7.5, thinking=None)
    prices = Prices(tiers=((200_000, tier),))
    assert worst_case_cost(prices, 200_000, 1_000) == (200_000 * 3.75 + 1_000 * 15.0) / 1e6
    assert worst_case_cost(prices, 200_001, 1_000) == (200_001 * 7.5 + 1_000 * 22.5) / 1e6


def test_worst_case_cost_bounds_every_split_of_the_prompt() -> None:
    """The worst-case cost of a call is at least the cost of any split of its
    prompt into uncached, cache-read and cache-written tokens and of its
    output into text and thinking."""
    prices = Prices(input=1.0, output=2.0, cache_read=5.0, cache_write=3.0, thinking=4.0)
    worst = worst_case_cost(prices, 1_000, 100)
    for split in [(1_000, 0, 0), (0, 1_000, 0), (0, 0, 1_000), (300, 300, 400)]:
        for think in (0, 50, 100):
            actual = prices.cost(split[0], 100 - think, split[1], split[2], think)
            assert actual <= worst + EPS


def test_retries_spend_the_retry_budget_without_model_steps() -> None:
    """Harness retries count against budgets.retries and never as steps."""
    params = make_params(budgets=Budgets(retries=2))
    run = run_script(params, model=[tool_call("search", q="a"), final()],
                     tools=[ToolError("transient", "503", 5)] * 3)
    assert run.state.retries == 2 and len(run.of(Wait)) == 2
    assert run.state.turns == 2
