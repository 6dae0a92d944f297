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
