"""scenarios/fanout.yaml: a lead agent fans out to 3-8 worker subagents under
a shared session budget; it loads, runs, is the same with 1 and 2 workers,
and its children table shows the parents' and the children's endings."""

from __future__ import annotations

import pandas as pd

from sim.api.simulating import sweep
from sim.engines.direct import run_task_state
from sim.scenario.model import load_scenario
from sim.sweeps.cells import build_cell, cells_of
from sim.sweeps.fanout import fanout_table

PATH = "scenarios/fanout.yaml"


def test_the_scenario_loads_with_its_sweep() -> None:
    """Six cells: max_concurrent 1, 4, 20 x the session budget checked
    before each call or between turns; children of class worker, 3-8 per
    spawn, at most 20 per run, children cannot spawn."""
    scenario = load_scenario(PATH, [])
    runs = cells_of(scenario)
    assert len(runs) == 6
    cell = build_cell(runs[0])
    sub = cell.params.subagents
    assert sub is not None and (sub.max_total, sub.max_depth) == (20, 1)
    assert cell.params.shared_budgets[0].scope == "session"
    fanout = cell.world.fanout
    assert fanout is not None and fanout.child_class == "worker"
    assert [fanout.children(u) for u in (0.0, 0.19, 0.2, 0.99)] == [3, 3, 4, 8]


def test_the_same_results_with_one_and_two_workers() -> None:
    """Same scenario, same seed: identical rows whatever the worker count."""
    one, _ = sweep(PATH, tasks=12, workers=1)
    two, _ = sweep(PATH, tasks=12, workers=2)
    pd.testing.assert_frame_equal(one, two)
    assert len(one) == 6 * 12


def test_children_table_counts_parents_and_children() -> None:
    """The children table of a cell: one parent per task, children of the
    worker class counted by ending, every child counted once (the endings
    sum to the children spawned), and a session total that adds them."""
    scenario = load_scenario(PATH, [])
    cell = build_cell(cells_of(scenario)[0])
    table = fanout_table(cell, range(20))
    assert sum(table.parents.values()) == 20
    assert table.spawned > 0 and sum(table.children.values()) == table.spawned
    assert table.descendants == table.spawned  # depth 1: children have no children
    assert table.session_cost_usd > table.parent_cost_usd
    text = "\n".join(table.lines())
    assert "parents" in text and "children" in text


def test_between_turns_lets_the_session_overshoot_and_before_call_does_not() -> None:
    """The session budget (1.5M tokens) is never passed by a parent and its
    children together when checked before each call; checked between turns
    it may be passed, by at most one call (the direct engine runs one run
    at a time, so one call is in flight: at most a full context window plus
    the output cap)."""
    scenario = load_scenario(PATH, ["tasks=40"])
    limit = 1_500_000
    for run in cells_of(scenario):
        cell = build_cell(run)
        budget = cell.params.shared_budgets[0]
        worst_call = cell.params.context_window + cell.params.max_output_tokens
        states = [run_task_state(cell, i)[1] for i in range(40)]
        assert sum(s.children for s in states) > 0
        for state in states:
            total = state.total_tokens + state.children_tokens
            assert total <= (limit if budget.check == "before_call" else limit + worst_call)
