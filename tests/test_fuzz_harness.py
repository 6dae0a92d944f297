"""Generated driver results beyond any sane range (issue 25, item 5): ints of
10**400, floats of 1e300, 2**63, NaN, latencies of 1e9 s against a 30 s
model timeout, Retry-After of 10**30, tool arguments nested thousands deep.

Whatever a driver sends (of the right types), nothing raises out of
``agent_loop``, the run ends in exactly one outcome of the table, and no
budget is overshot at the end: active time within its budget (a reply past
``model_timeout_s`` is a timeout, counted at the timeout), wall time within
its budget, tokens and money only past a budget by the one usage that ended
the run for it. Driven by hypothesis, with the fuzz driver of
``tests/test_harness_distrust.py``.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from scripted import make_params, make_state
from test_harness_distrust import FuzzDriver, OddReply

from sim.harness import Budgets, VerifierParams
from sim.harness.classifier import MAX_WAIT_S
from sim.harness.effects import (
    ApprovalDecision,
    ModelError,
    ModelResponse,
    ToolError,
    ToolResult,
    Verdict,
    Wait,
)
from sim.harness.loop import agent_loop
from sim.harness.messages import TextBlock, ToolUseBlock, Usage
from sim.harness.policy import MAX_ARGUMENT_DEPTH
from sim.harness.state import OUTCOMES

HUGE = st.sampled_from([10**400, 10**30, 2**63, 2**40, 1e300, 1e308, 1e9, 10**9 + 1,
                        float("nan"), -(10**400), 0, 1])
COUNT = st.one_of(st.integers(0, 2_000), st.integers(0, 2_000), HUGE)
SECONDS = st.one_of(st.floats(0.0, 20.0), st.floats(0.0, 20.0), HUGE)


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


ARGS = st.one_of(st.just({"q": "a"}), st.just({"q": "b"}),
                 st.sampled_from([10, MAX_ARGUMENT_DEPTH, MAX_ARGUMENT_DEPTH + 1, 5_000])
                 .map(nested))
REPLY = st.builds(
    OddReply,
    st.lists(st.one_of(
        st.builds(lambda a, n: ToolUseBlock("", "search", a, n), ARGS, COUNT),
        st.builds(lambda n: TextBlock("done", n), COUNT)), min_size=1, max_size=2),
    st.sampled_from(["honest", "odd", "odd", "inflated output"]),
    st.tuples(COUNT, COUNT, COUNT, COUNT, COUNT), SECONDS,
    st.sampled_from(["tool_use", "end_turn", "max_tokens"]))
MODEL_ERROR = st.builds(ModelError, st.sampled_from(["rate_limit", "server", "overloaded"]),
                        st.sampled_from([429, 500, 529]), st.none() | HUGE, st.just("err"),
                        SECONDS)
TOOL_OUTCOME = st.one_of(
    st.builds(ToolResult, st.just("r"), COUNT, SECONDS, st.none() | HUGE),
    st.builds(ToolError, st.sampled_from(["transient", "timeout", "validation"]),
              st.just("e"), COUNT, SECONDS, st.none() | st.just(503), st.none() | HUGE))
VERDICT = st.builds(Verdict, st.booleans(), st.just("no"), COUNT, SECONDS,
                    st.none() | st.builds(Usage, COUNT, COUNT))
APPROVAL = st.builds(ApprovalDecision, st.booleans(), SECONDS, st.booleans(), st.just(""))
WAITED = st.none() | SECONDS


class HugeDriver(FuzzDriver):
    """The fuzz driver, answering waits with generated seconds too."""

    def __init__(self, *args: Any, waits: list[Any]) -> None:
        super().__init__(*args)
        self.waits = waits
        self.asked_waits: list[float] = []

    def answer(self, effect: Any, state: Any) -> Any:
        if isinstance(effect, Wait):
            self.asked_waits.append(effect.seconds)
            waited = self.waits.pop(0) if self.waits else None
            return waited if waited is None or isinstance(waited, int | float) else None
        return super().answer(effect, state)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.lists(st.one_of(REPLY, REPLY, MODEL_ERROR), max_size=12),
       tools=st.lists(TOOL_OUTCOME, max_size=8), verdicts=st.lists(VERDICT, max_size=2),
       approvals=st.lists(APPROVAL, max_size=2), waits=st.lists(WAITED, max_size=4),
       active=st.none() | st.just(100.0) | st.floats(10.0, 500.0),
       tokens=st.none() | st.integers(4_000, 60_000), money=st.none() | st.floats(0.01, 2.0),
       verify=st.booleans())
def test_oversized_numbers_never_escape_and_no_time_budget_is_overshot(
        model, tools, verdicts, approvals, waits, active, tokens, money, verify) -> None:
    params = make_params(
        budgets=Budgets(tokens=tokens, money_usd=money, active_s=active,
                        wall_s=None if active is None else 4 * active),
        verifier=VerifierParams(enabled=verify), approval_required=frozenset({"irreversible"}),
        context_window=30_000, model_timeout_s=30.0)
    state = make_state(params)
    driver = HugeDriver(model, tools, verdicts, approvals, waits=waits)
    loop = agent_loop(params, state)
    result = None
    try:
        while True:
            result = driver.answer(loop.send(result), state)
    except StopIteration as stop:
        assert stop.value is state
    event(f"{state.status}:{state.reason}")
    assert state.status in OUTCOMES and state.reason in OUTCOMES[state.status]
    assert all(math.isfinite(x) for x in (state.money_usd, state.active_s, state.parked_s))
    assert state.input_tokens < 2**63 and state.output_tokens < 2**63
    if active is not None:
        assert state.active_s <= active * (1 + 1e-9), (state.active_s, state.reason)
        assert state.wall_s <= 4 * active * (1 + 1e-9)
    assert all(0 <= w <= MAX_WAIT_S for w in driver.asked_waits)


def test_a_server_failure_after_a_too_deep_tool_call_ends_with_its_diagnostic() -> None:
    """A reply whose tool call nests 5,000 levels (refused by the policy, but
    kept in the history), then two server errors: the run fails with
    model_error and a diagnostic that hashes every message (it used to raise
    RecursionError out of agent_loop while encoding the deep arguments; found
    by the fuzz campaign). 65 levels, just past the limit, ends alike."""
    for depth in (MAX_ARGUMENT_DEPTH + 1, 5_000):
        params = make_params(context_window=30_000, model_timeout_s=30.0)
        state = make_state(params)
        deep = ModelResponse([ToolUseBlock("t1", "search", nested(depth), 10)], Usage(10, 10),
                             "tool_use", 1.0)
        answers = [deep, ModelError("server", 500, None, "err", 1.0),
                   ModelError("server", 500, None, "err", 1.0)]
        loop = agent_loop(params, state)
        effect = next(loop)
        try:
            while True:
                kind = type(effect).__name__
                effect = loop.send(answers.pop(0) if kind == "ModelRequest" else
                                   ToolResult("r", 10, 1.0) if kind == "ToolRequest" else None)
        except StopIteration:
            pass
        assert (state.status, state.reason) == ("failed", "model_error"), depth
        request = state.detail["diagnostic"]["request"]
        assert len(request) == len(state.messages) and all(len(m["sha256"]) == 64
                                                           for m in request)


def test_a_latency_of_1e9_s_never_overshoots_a_100_s_active_budget() -> None:
    """The issue's reproducer: model_timeout_s 30, active budget 100 s, a
    reply after 1e9 s. The harness gave up at 30 s: a timeout, retried; the
    run ends within the budget."""
    params = make_params(budgets=Budgets(active_s=100.0), model_timeout_s=30.0)
    state = make_state(params)
    slow = ModelResponse([TextBlock("done", 5)], Usage(10, 5), "end_turn", 1e9)
    loop = agent_loop(params, state)
    effect = next(loop)
    try:
        while True:
            effect = loop.send(slow if type(effect).__name__ == "ModelRequest" else None)
    except StopIteration:
        pass
    assert state.active_s <= 100.0
    assert (state.status, state.reason) in {("budget_exhausted", "active_time"),
                                            ("failed", "retries_exhausted")}


@pytest.mark.parametrize("value", [10**400, 2**63, 10**13])
@pytest.mark.parametrize("where", ["usage", "latency", "tool duration", "waited",
                                   "retry_after"])
def test_an_int_too_large_for_a_float_is_a_structured_ending(value, where) -> None:
    """An int of 10**400 (or just past the bounds) anywhere a driver reports
    a number: no OverflowError out of agent_loop; the run ends in an outcome
    of the table (failed:invalid_response where the number is impossible)."""
    params = make_params()
    state = make_state(params)
    model: list[Any] = [ModelResponse([ToolUseBlock("t1", "search", {"q": "a"}, 5)],
                                      Usage(10, 5), "tool_use", 1.0),
                        ModelResponse([TextBlock("done", 5)], Usage(10, 5), "end_turn", 1.0)]
    tool: Any = ToolResult("r", 5, 0.5)
    if where == "usage":
        model[0] = ModelResponse(model[0].content, Usage(10, value), "tool_use", 1.0)
    elif where == "latency":
        model[0] = ModelResponse(model[0].content, Usage(10, 5), "tool_use", value)
    elif where == "tool duration":
        tool = ToolResult("r", 5, value)
    elif where in ("waited", "retry_after"):
        model.insert(0, ModelError("rate_limit", 429,
                                   value if where == "retry_after" else 1.0, "slow", 0.1))
    loop = agent_loop(params, state)
    effect = next(loop)
    try:
        while True:
            kind = type(effect).__name__
            if kind == "ModelRequest":
                answer: Any = model.pop(0)
            elif kind == "ToolRequest":
                answer = tool
            elif kind == "Wait":
                assert effect.seconds <= MAX_WAIT_S
                answer = value if where == "waited" else None
            else:
                answer = None
            effect = loop.send(answer)
    except StopIteration:
        pass
    assert state.status in OUTCOMES and state.reason in OUTCOMES[state.status]
    assert math.isfinite(state.active_s)
    if where in ("usage", "latency", "tool duration") and value > 2**40:
        assert (state.status, state.reason) == ("failed", "invalid_response")
