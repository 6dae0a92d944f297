"""Fan-out in the engines: the simulated model spawns children
(``world.fanout``), the direct engine runs them inline and the parent waits
their makespan under ``harness.subagents.max_concurrent``; the DES runs
each child as its own process competing for model slots, and Little's law
holds on all runs, children included."""

from __future__ import annotations

from typing import Any

import pytest

import sim.engines.direct as direct
from sim.engines.direct import makespan, run_tasks
from sim.harness.effects import ChildResults
from sim.scenario.model import validate
from sim.sweeps.cells import build_cell, cells_of

QUIET = {"loop": 0.0, "transient": 0.0, "validation": 0.0, "premature": 0.0}


def fanout_scenario(children: list[float], max_concurrent: int = 20, steps: int = 4,
                    **harness: Any) -> dict[str, Any]:
    """Roots of class ``lead`` (need ``steps``) whose first model call spawns
    (edges [1, 2]: spawn 1.0 at call 1, 0 after) children of class
    ``worker`` (need 2); no faults, no loops."""
    return {
        "seed": 3, "tasks": 20,
        "harness": {"subagents": {"max_concurrent": max_concurrent}, **harness},
        "world": {
            "policy": QUIET,
            "difficulty": {"distribution": "fixed", "steps": steps},
            "classes": [{"name": "lead", "weight": 1.0},
                        {"name": "worker", "weight": 0.0,
                         "difficulty": {"distribution": "fixed", "steps": 2}}],
            "fanout": {"spawn": 0.0, "edges": [1, 2], "spawn_by_step": [1.0, 0.0],
                       "children": children, "child_class": "worker"},
        },
    }


def cell_of(raw: dict[str, Any]) -> Any:
    return build_cell(cells_of(validate(raw, "fanout-test"))[0])


# ------------------------------------------------------------ makespan
@pytest.mark.parametrize(("durations", "slots", "expected"), [
    ([3.0, 1.0, 2.0], 1, 6.0),     # one at a time: the sum
    ([3.0, 1.0, 2.0], 3, 3.0),     # all at once: the longest
    ([3.0, 1.0, 2.0], 2, 3.0),     # slot A: 3; slot B: 1 then 2 (ends at 3)
    ([5.0, 1.0, 1.0, 1.0], 2, 5.0),
    ([1.0, 1.0, 1.0, 5.0], 2, 6.0),  # the 5 starts at 1 on the first slot free
    ([], 4, 0.0),
])
def test_makespan_by_hand(durations: list[float], slots: int, expected: float) -> None:
    """Children queued in order take the first slot free."""
    assert makespan(durations, slots) == expected


# ------------------------------------------------------- direct engine
def test_direct_engine_counts_children_exactly() -> None:
    """Every root (need 4) spawns 3 children at its first call (children
    PMF [0, 0, 0, 1]), each a worker needing 2 productive steps: a root
    makes 1 spawn + 2 tool calls + 1 answer = 4 steps; each child 1 + 1
    answer = 2 steps, and succeeds."""
    cell = cell_of(fanout_scenario([0.0, 0.0, 0.0, 1.0]))
    seen: list[ChildResults] = []
    original = direct.run_children

    def spy(*args: Any) -> ChildResults:
        out = original(*args)
        seen.append(out)
        return out

    direct.run_children = spy  # type: ignore[assignment]
    try:
        records = run_tasks(cell, range(5))
    finally:
        direct.run_children = original  # type: ignore[assignment]
    assert len(seen) == 5 and all(len(r.results) == 3 for r in seen)
    assert all((c.status, c.reason) == ("succeeded", "model_complete")
               for r in seen for c in r.results)
    assert [r.steps for r in records] == [4] * 5
    assert [r.tool_calls for r in records] == [3] * 5  # the spawn is one tool call
    assert all(r.outcome == "succeeded" for r in records)


def test_direct_engine_parent_waits_the_makespan_of_its_children() -> None:
    """The same tasks with max_concurrent 1 and 20: every parent's wall time
    differs by exactly sum - max of its children's wall times (the queue),
    children identical in both (their own streams)."""
    runs = {}
    for cap in (1, 20):
        cell = cell_of(fanout_scenario([0.0, 0.0, 0.5, 0.5], max_concurrent=cap))
        seen: list[ChildResults] = []
        original = direct.run_children

        def spy(*args: Any, seen: list[ChildResults] = seen,
                original: Any = original) -> ChildResults:
            out = original(*args)
            seen.append(out)
            return out

        direct.run_children = spy  # type: ignore[assignment]
        try:
            runs[cap] = (run_tasks(cell, range(8)), seen)
        finally:
            direct.run_children = original  # type: ignore[assignment]
    (one, kids_one), (many, kids_many) = runs[1], runs[20]
    for a, b, ka, kb in zip(one, many, kids_one, kids_many, strict=True):
        durations = [c.duration_s for c in ka.results]
        assert durations == [c.duration_s for c in kb.results]
        assert ka.duration_s == pytest.approx(sum(durations))
        assert kb.duration_s == pytest.approx(max(durations))
        assert a.wall_s - b.wall_s == pytest.approx(sum(durations) - max(durations))


def test_a_world_without_fanout_never_spawns_and_draws_the_same() -> None:
    """fanout null (or spawn 0 everywhere): the same records as a world
    without the section (no draw moves)."""
    plain = fanout_scenario([0.0, 1.0])
    del plain["world"]["fanout"]
    quiet = fanout_scenario([0.0, 1.0])
    quiet["world"]["fanout"]["spawn_by_step"] = [0.0, 0.0]
    a = run_tasks(cell_of(plain), range(10))
    b = run_tasks(cell_of(quiet), range(10))
    assert a == b


def test_session_budget_covers_children_in_the_direct_engine() -> None:
    """A session token budget checked before each call is never passed by a
    root and its children together (their tokens summed)."""
    raw = fanout_scenario([0.0, 0.0, 0.0, 0.0, 0.0, 1.0], steps=6,
                          shared_budgets=[{"tokens": 200_000}])
    records = run_tasks(cell_of(raw), range(6))
    assert any(r.reason == "session" for r in records)
    # the root's own prompt + output + thinking tokens, plus its children's (via the state)
    cell = cell_of(raw)
    from sim.harness.state import new_state
    from sim.world.streams import StreamPool
    from sim.world.task import SimulatedTask
    for i in range(6):
        streams = StreamPool().acquire(cell.seed, i)
        task = SimulatedTask(cell.world, streams)
        state = new_state(cell.params.prefix_tokens, cell.params.model, "Complete the task.",
                          task.task_tokens)
        final = direct.drive(cell, task, state, path=(i,))
        assert final.total_tokens + final.children_tokens <= 200_000


# ---------------------------------------------------------------- DES
def des_run(raw: dict[str, Any], tasks: int, des: dict[str, Any]) -> tuple[Any, Any]:
    """Run ``raw`` in the DES with ``des``; assert the drained-run invariants
    (conservation, Little's law for the system and each pool and queue)."""
    from sim.analysis.capacity import check_drained
    from sim.engines.des import DesEngine, arrival_schedule
    scenario = validate({**raw, "engine": "des", "tasks": tasks, "des": des}, "fanout-des")
    cell = build_cell(cells_of(scenario)[0])
    arrivals = arrival_schedule(scenario.des, tasks, cell.seed)
    result = DesEngine(cell, scenario.des, arrivals).run()
    assert check_drained(result, scenario.des, arrivals) == []
    return result, cell


def test_des_with_unlimited_capacity_matches_the_direct_engine_children_included() -> None:
    """Unlimited capacity, 2-3 children per root, all at once: every root
    does the same work and takes the same wall time in both engines (the
    parent waits its longest child), and the DES ran 2 or 3 children per
    root, each its own process."""
    raw = fanout_scenario([0.0, 0.0, 0.5, 0.5])
    result, cell = des_run(raw, 30, {"tenants": [{"name": "a", "rate_per_hour": 600}]})
    direct_records = run_tasks(cell, range(30))
    for a, b in zip(result.records, direct_records, strict=True):
        assert (a.outcome, a.steps, a.tool_calls, a.input_tokens, a.cost_usd) == (
            b.outcome, b.steps, b.tool_calls, b.input_tokens, b.cost_usd)
        assert a.wall_s == pytest.approx(b.wall_s)
    assert 60 <= len(result.child_times) <= 90
    assert result.series["runs_in_system"].peak >= 3


def test_des_children_compete_for_model_slots() -> None:
    """With 2 model slots shared by roots and children, roots wait longer
    for slots than with 50 (the children's calls queue with everyone's)."""
    raw = fanout_scenario([0.0, 0.0, 0.0, 1.0])
    tight, _ = des_run(raw, 40, {"tenants": [{"name": "a", "rate_per_hour": 600}],
                                 "capacity": {"model_slots": 2}})
    loose, _ = des_run(raw, 40, {"tenants": [{"name": "a", "rate_per_hour": 600}],
                                 "capacity": {"model_slots": 50}})
    assert len(tight.child_times) == len(loose.child_times) == 120
    assert sum(r.model_wait_s for r in tight.records) > sum(
        r.model_wait_s for r in loose.records)


def test_littles_law_holds_with_nested_runs() -> None:
    """L = lambda W on all runs, children included, over a steady-state
    window [10%, 70%] of the horizon: L is the monitor's time-average of
    runs_in_system; lambda the scenario's root arrival rate times 4 (every
    root spawns exactly 3 children); W the mean time in system of the runs
    arriving in the window, measured per run (roots: end - arrival from the
    records; children: end - spawn). Tolerance: z(0.001) = 3.29 times the
    relative standard error of lambda-hat W-hat, sqrt(1/N + cv(W)^2/n), N
    the roots and n the runs arriving in the window."""
    import math
    import statistics

    from sim.analysis.capacity import window_average
    raw = fanout_scenario([0.0, 0.0, 0.0, 1.0], max_concurrent=2)
    raw["seed"] = 5
    result, _ = des_run(raw, 1200, {"tenants": [{"name": "a", "rate_per_hour": 360}],
                                    "capacity": {"model_slots": 12}})
    horizon = result.horizon_s
    t1, t2 = 0.1 * horizon, 0.7 * horizon
    level = window_average(result.series["runs_in_system"], t2, t1)
    rate = result.offered_rate_per_s * 4
    roots = [r.end_s - r.arrival_s for r in result.records if t1 <= r.arrival_s < t2]
    kids = [end - start for start, end in result.child_times if t1 <= start < t2]
    times = roots + kids
    mean = statistics.mean(times)
    cv = statistics.stdev(times) / mean
    tolerance = 3.29 * math.sqrt(1 / len(roots) + cv ** 2 / len(times))
    assert abs(level / (rate * mean) - 1) < tolerance, (level, rate * mean, tolerance)


# ------------------------------------------------- without waiting
def test_without_waiting_the_parent_goes_on_and_collects_later() -> None:
    """wait false, the same tasks: every root still counts its 3 children
    and their endings (none left pending: an answer that comes while a child
    still runs is not taken before it ends), succeeds, and takes no longer
    than when it waits at the spawn."""
    waiting = run_tasks(cell_of(fanout_scenario([0.0, 0.0, 0.0, 1.0])), range(6))
    raw = fanout_scenario([0.0, 0.0, 0.0, 1.0])
    raw["harness"]["subagents"]["wait"] = False
    cell = cell_of(raw)
    from sim.engines.direct import run_task_state
    for i, before in enumerate(waiting):
        record, state = run_task_state(cell, i)
        assert (state.children, state.pending_children) == (3, 0)
        assert sum(state.children_outcomes.values()) == 3
        assert record.wall_s <= before.wall_s + 1e-9
        assert record.outcome == "succeeded"


def test_des_without_waiting_collects_every_child() -> None:
    """The DES with wait false: every root ends having collected its 3
    children (the drained-run invariants hold), and 3 children ran per root."""
    raw = fanout_scenario([0.0, 0.0, 0.0, 1.0])
    raw["harness"]["subagents"]["wait"] = False
    result, _ = des_run(raw, 20, {"tenants": [{"name": "a", "rate_per_hour": 600}],
                                  "capacity": {"model_slots": 4}})
    assert len(result.child_times) == 60
    assert all(r.outcome == "succeeded" for r in result.records)
