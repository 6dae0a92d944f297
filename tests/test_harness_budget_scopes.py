"""Budgets shared by a session or a tenant: windows, soft alerts, and the
overshoot each rule allows (before_call: none; between_turns: at most one
call per run in flight), computed by hand and checked against the runs."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from sim.harness import (
    HarnessParams,
    ModelRequest,
    ModelResponse,
    ToolResult,
    ToolUseBlock,
    Usage,
    agent_loop,
    new_state,
)
from sim.harness.effects import (
    Checkpoint,
    ChildResults,
    SpawnRequest,
    ToolRequest,
)
from sim.harness.params import ParameterError, ScopedBudget, SubagentParams, ToolSpec
from sim.harness.scopes import Ledger, overshoot_bound, window_index
from sim.harness.state import HarnessState
from sim.harness.subagents import child_result, child_state

DAY = 86_400.0
CALL_IN, CALL_OUT = 900, 100  # every scripted call: 1,000 tokens
TOOL = ToolSpec("look", "read", timeout_s=10.0)


def params(*budgets: ScopedBudget, **more: Any) -> HarnessParams:
    return HarnessParams(system_prompt_tokens=100, max_output_tokens=1_000,
                         context_window=100_000, tools=(TOOL,), shared_budgets=budgets,
                         **more)


def step_reply(request: ModelRequest, n: int) -> ModelResponse:
    """A tool call using 900 prompt + 100 output tokens, whatever the prompt."""
    return ModelResponse([ToolUseBlock(f"c{n}", "look", {"n": n}, 10)],
                         Usage(CALL_IN, CALL_OUT), "tool_use", 1.0)


def advance(loop: Generator[Any, Any, HarnessState], result: Any
            ) -> tuple[Any, HarnessState | None]:
    """Send ``result``; answer tools and checkpoints until the next model
    request (returned), or the run's end (its state)."""
    try:
        effect = loop.send(result)
        while not isinstance(effect, ModelRequest):
            if isinstance(effect, ToolRequest):
                effect = loop.send(ToolResult("ok", 5, 1.0))
            elif isinstance(effect, Checkpoint):
                effect = loop.send(None)
            else:  # pragma: no cover
                raise AssertionError(effect)
        return effect, None
    except StopIteration as end:
        return None, end.value


def run_concurrently(p: HarnessParams, ledger: Ledger, runs: int
                     ) -> tuple[list[HarnessState], int]:
    """``runs`` runs sharing ``ledger`` in lock step: each round, every live
    run is brought to its next model request (its checks made) before any
    of those calls is answered, so all ``runs`` calls are in flight at once.
    Return the final states and the number of rounds."""
    states = [new_state(p.prefix_tokens, p.model, "go", 10) for _ in range(runs)]
    loops = [agent_loop(p, s, ledgers=[ledger]) for s in states]
    pending: list[Any] = [None] * runs
    live = list(range(runs))
    for i in live:
        pending[i], _ = advance(loops[i], None)
    rounds = 0
    while live:
        rounds += 1
        asked = [i for i in live if pending[i] is not None]
        replies = {i: step_reply(pending[i], rounds) for i in asked}
        still = []
        for i in live:
            pending[i], final = advance(loops[i], replies.get(i))
            if final is None:
                still.append(i)
        live = still
        assert rounds < 1_000
    return states, rounds


# ------------------------------------------------------------ windows
def test_window_index_by_seconds_day_and_iso_week() -> None:
    """Every 3,600 s: t=7,199 is window 1; a UTC day: 1970-01-04T12:00 is day
    3; an ISO week (from Monday): Thursday 1970-01-01 is in week -1 (it began
    Monday 1969-12-29), Monday 1970-01-05 starts week 0; an epoch of
    2026-12-04T00:00Z (a Friday, 20,791 days) puts now=3 days (Monday
    2026-12-07) in a new week."""
    hourly = ScopedBudget(scope="tenant", tokens=10, window_s=3_600)
    daily = ScopedBudget(scope="tenant", tokens=10, calendar="day")
    weekly = ScopedBudget(scope="tenant", tokens=10, calendar="week")
    assert window_index(hourly, 7_199.0) == 1
    assert window_index(daily, 3.5 * DAY) == 3
    assert window_index(weekly, 0.0) == -1
    assert window_index(weekly, 4 * DAY) == 0
    epoch = 20_791 * DAY
    assert window_index(weekly, 3 * DAY - 1, epoch) + 1 == window_index(weekly, 3 * DAY, epoch)
    assert window_index(ScopedBudget(tokens=10), 10 * DAY) == 0  # a session never resets


def test_a_tenant_window_resets_at_the_calendar_day() -> None:
    """A daily tenant ledger spent at 23:00 is full again at 00:00 UTC; a
    between_turns check says spent before midnight and not after."""
    ledger = Ledger(ScopedBudget(scope="tenant", tokens=1_000, calendar="day",
                                 check="between_turns"))
    ledger.charge("a", 1_000, 0.0, 23 * 3_600.0)
    assert ledger.spent(23.5 * 3_600)
    assert not ledger.spent(DAY)
    assert ledger.tokens == 0 and ledger.peak_tokens == 1_000


def test_bad_scoped_budgets_name_the_field() -> None:
    """A window on a session budget, both window kinds, an unknown check, no
    limit at all and a window under a millisecond (5e-324 made the window's
    number infinite: an OverflowError mid-run) are refused naming the field."""
    for kwargs, name in [({"tokens": 5, "window_s": 60}, "scope"),
                         ({"scope": "tenant", "tokens": 5, "window_s": 5e-324}, "window_s"),
                         ({"scope": "tenant", "tokens": 5, "window_s": 0.0009}, "window_s"),
                         ({"scope": "tenant", "tokens": 5, "window_s": 60,
                           "calendar": "day"}, "window_s"),
                         ({"tokens": 5, "check": "after"}, "check"),
                         ({}, "tokens")]:
        with pytest.raises(ParameterError, match=name):
            ScopedBudget(**kwargs)


# ------------------------------------------------- rules and overshoot
def test_between_turns_overshoot_with_four_runs_is_hand_computed() -> None:
    """Four runs share 10,000 tokens checked between turns; every call uses
    1,000, and each run checks right after its call is charged. Rounds 1-2
    charge 8 calls (8,000). Round 3: run 1's call lands (9,000), it checks
    9,000 < 10,000 and makes a call; runs 2-4 land (10,000, 11,000, 12,000)
    and each is stopped at its check; round 4: run 1's call lands: 13,000,
    an overshoot of 3,000, within the bound of one call in flight per run
    (4 x 1,000). All four end as budget_exhausted:session."""
    budget = ScopedBudget(tokens=10_000, check="between_turns")
    ledger = Ledger(budget)
    states, _ = run_concurrently(params(budget), ledger, 4)
    assert ledger.peak_tokens == 13_000
    assert ledger.overshoot() == (3_000, 0.0)
    assert overshoot_bound(budget, 4, CALL_IN + CALL_OUT, 0.0) == (4_000, 0.0)
    assert ledger.overshoot()[0] <= 4 * (CALL_IN + CALL_OUT)
    assert {(s.status, s.reason) for s in states} == {("budget_exhausted", "session")}
    assert [s.turns for s in states] == [4, 3, 3, 3]


def test_between_turns_overshoot_of_one_run_is_at_most_one_call() -> None:
    """One run, 9,500 tokens between turns: calls 1-9 leave 9,000 < 9,500,
    so a 10th is made: 10,000, overshoot 500 (< one call of 1,000)."""
    budget = ScopedBudget(tokens=9_500, check="between_turns")
    ledger = Ledger(budget)
    states, _ = run_concurrently(params(budget), ledger, 1)
    assert ledger.peak_tokens == 10_000 and states[0].turns == 10


def test_before_call_is_never_passed_with_four_runs_in_flight() -> None:
    """Four runs share 10,000 tokens checked before each call against its
    worst case (prompt + 1,000 output cap) reserved while in flight: the
    spend never passes 10,000, some call is refused, and the unspent rest is
    below one run's worst case per run (the rule gives up at most that)."""
    budget = ScopedBudget(tokens=10_000)
    ledger = Ledger(budget)
    states, _ = run_concurrently(params(budget), ledger, 4)
    assert ledger.peak_tokens <= 10_000 and ledger.overshoot() == (0, 0.0)
    assert overshoot_bound(budget, 4, 10**6, 1.0) == (0, 0.0)
    assert ledger.refused >= 1
    largest_worst = max(s.context_tokens for s in states) + 1_000
    assert 10_000 - ledger.peak_tokens < 4 * largest_worst
    assert all(s.reason == "session" for s in states)
    assert not ledger.reserved_tokens  # every reservation released at the end


def test_money_before_call_reserves_the_worst_case_price() -> None:
    """A $0.10 session budget at $3/$15 per million: the first call's worst
    case (prompt p + 1,000 output) is p*3e-6 + 0.015; each call costs
    900*3e-6 + 100*15e-6 = $0.0042; spend stays at or under $0.10."""
    budget = ScopedBudget(money_usd=0.10)
    ledger = Ledger(budget)
    run_concurrently(params(budget), ledger, 3)
    assert ledger.peak_usd <= 0.10
    assert ledger.usd == pytest.approx(0.0042 * ledger.admitted)


def test_soft_budget_alerts_once_and_never_stops() -> None:
    """A soft 5,000-token session budget alerting at 20% left: the alert is
    raised once, on the call that leaves 1,000 (4,000 spent), and the run
    goes on past the limit to its step budget."""
    from sim.harness.params import Budgets
    budget = ScopedBudget(tokens=5_000, hard=False, alert_at=0.2)
    ledger = Ledger(budget)
    p = params(budget, budgets=Budgets(steps=8))
    states, _ = run_concurrently(p, ledger, 1)
    assert ledger.alerts == 1 and states[0].alerts == 1
    assert (states[0].status, states[0].reason) == ("budget_exhausted", "steps")
    assert ledger.tokens == 8_000


def test_a_run_without_ledgers_keeps_its_own_session() -> None:
    """With shared_budgets set and no ledger given, a run has a private one:
    a 3,000-token session budget between turns stops it after 3 calls."""
    p = params(ScopedBudget(tokens=3_000, check="between_turns"))
    s = new_state(p.prefix_tokens, p.model, "go", 10)
    request, final = advance(agent_loop(p, s), None)
    loop = agent_loop(p, s2 := new_state(p.prefix_tokens, p.model, "go", 10))
    request, final = advance(loop, None)
    n = 0
    while final is None:
        n += 1
        request, final = advance(loop, step_reply(request, n))
    assert (s2.turns, s2.reason) == (3, "session")


# -------------------------------------------- a session with children
def test_session_budget_is_shared_by_parent_and_children() -> None:
    """A parent spawns 3 children, all sharing a 6,000-token session budget
    checked between turns: each call uses 1,000. Parent call 1 (1,000), then
    children in turn: child 1 makes calls while spent < 6,000 (2,000 ...
    6,000: 5 calls) and is then stopped; children 2 and 3 are stopped before
    their first call. All three end as budget_exhausted:session (the
    parent's tool error), and the parent's next turn is refused too."""
    budget = ScopedBudget(tokens=6_000, check="between_turns")
    p = params(budget, subagents=SubagentParams())
    ledger = Ledger(budget)
    state = new_state(p.prefix_tokens, p.model, "go", 10)
    final = _drive_tree(p, state, [ledger], 0.0)
    assert ledger.peak_tokens == 6_000
    assert (final.children, final.children_failed) == (3, 3)
    assert (final.status, final.reason) == ("budget_exhausted", "session")
    assert final.children_tokens == 5_000


def _drive_tree(p: HarnessParams, state: HarnessState, ledgers: list[Ledger],
                started: float) -> HarnessState:
    """The root spawns three children in its first step; children call the
    tool forever; spawns run children one after another."""
    loop = agent_loop(p, state, ledgers=ledgers, started_s=started)
    result: Any = None
    n = 0
    try:
        while True:
            effect = loop.send(result)
            if isinstance(effect, ModelRequest):
                n += 1
                if state.depth == 0 and state.turns == 0:
                    result = ModelResponse([ToolUseBlock("s", "agent", {"tasks": ["a", "b",
                                                                                  "c"]})],
                                           Usage(CALL_IN, CALL_OUT), "tool_use", 1.0)
                else:
                    result = step_reply(effect, n)
            elif isinstance(effect, ToolRequest):
                result = ToolResult("ok", 5, 1.0)
            elif isinstance(effect, SpawnRequest):
                results = []
                for child in effect.children:
                    cs = child_state(p.prefix_tokens, p.model, child)
                    done = _drive_tree(p, cs, list(effect.ledgers), effect.now_s)
                    results.append(child_result(done, 0, done.wall_s))
                result = ChildResults(results, sum(r.duration_s for r in results))
            else:
                result = None
    except StopIteration as end:
        final: HarnessState = end.value
        return final


# ------------------------------------------ a tenant's budget in the DES
def _des_tenant(check: str, limit: int) -> tuple[Any, Any]:
    """200 tasks of one tenant arriving 1 a second (many at once), sharing a
    tenant token budget of ``limit`` checked by ``check``; the engine and
    its result."""
    from sim.analysis.capacity import check_drained
    from sim.engines.des import DesEngine, arrival_schedule
    from sim.scenario.model import validate
    from sim.sweeps.cells import build_cell, cells_of
    raw = {"seed": 2, "tasks": 200, "engine": "des",
           "harness": {"max_output_tokens": 600, "shared_budgets": [
               {"scope": "tenant", "tokens": limit, "check": check}]},
           "des": {"tenants": [{"name": "a", "rate_per_hour": 3600}]}}
    scenario = validate(raw, "tenant-budget")
    cell = build_cell(cells_of(scenario)[0])
    arrivals = arrival_schedule(scenario.des, 200, cell.seed)
    engine = DesEngine(cell, scenario.des, arrivals)
    result = engine.run()
    assert check_drained(result, scenario.des, arrivals) == []
    return engine, result


def test_des_tenant_budget_before_call_is_never_passed_under_concurrency() -> None:
    """A tenant's 5M tokens shared by 200 concurrent runs, checked before
    each call with reservations: the tenant's spend never passes 5M, and
    runs are stopped as budget_exhausted:tenant."""
    engine, result = _des_tenant("before_call", 5_000_000)
    ledger = engine.tenant_scoped["a"][0]
    assert ledger.peak_tokens <= 5_000_000
    assert any(r.reason == "tenant" for r in result.records)


def test_des_tenant_budget_between_turns_overshoots_by_at_most_a_call_per_run() -> None:
    """The same, checked between turns: the overshoot is at most one call
    (a full context window plus the output cap) per run in the system at
    its peak, the bound computed from the parameters and the series."""
    engine, result = _des_tenant("between_turns", 5_000_000)
    ledger = engine.tenant_scoped["a"][0]
    params = engine.cell.params
    in_system = int(result.series["tasks_in_system"].peak)
    bound = overshoot_bound(ledger.budget, in_system,
                            params.context_window + params.max_output_tokens, 0.0)[0]
    assert bound == in_system * 200_600
    assert ledger.overshoot()[0] <= bound
    assert any(r.reason == "tenant" for r in result.records)
