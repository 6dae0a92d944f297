"""The DES engine with unlimited capacity equals the direct engine
(DESIGN.md "Time and capacity").

Both engines drive the same harness generator against the same simulated
task with the same random streams. With no shared capacity (unlimited
sandboxes and model slots, no rate limits, no operator actions, no human
resumption) nothing couples the tasks, so every task must end with the same
outcome, steps, tool calls, tokens of every kind, cost, retries, nudges,
verifier rejections and compactions in both, and take the same active and
wall time (up to float rounding: the DES clock adds durations to the arrival
time). This holds even for time-dependent rules (prompt-cache lifetimes,
time budgets): each task's clock runs the same in both engines.

Checked over ten seeds x 120 tasks for each of several harnesses; every DES
run is also checked for the drained-run invariants, Little's law among them
(:func:`sim.analysis.capacity.check_drained`).
"""

from __future__ import annotations

import pytest

from sim.analysis.capacity import check_drained
from sim.engines.des import DesEngine, arrival_schedule
from sim.engines.direct import run_tasks
from sim.scenario.model import load_scenario
from sim.sweeps.cells import build_cell, cells_of

SEEDS = range(10)
TASKS = 120
UNLIMITED = ["engine=des", "des.capacity={}", "des.operations=[]", "des.resume={share: 0}",
             "des.tenants=[{name: a, rate_per_hour: 900}, {name: b, rate_per_hour: 300}]"]

HARNESSES = {
    # seed 001's bounded harness: budgets, detector, harness retries, verifier
    "bounded": ("scenarios/bounded.yaml", []),
    # the naive harness: runs of up to 126 steps ending in context overflow
    "naive": ("scenarios/naive.yaml", []),
    # prompt caching with a 5-minute lifetime and a cache-invalidating compaction
    "cached": ("scenarios/cached.yaml", ["sweep={}", "harness.prompt_cache=5m",
                                         "harness.context.compact_at_tokens=40000"]),
    # model-API faults (429s, 5xx, truncated output) and extended thinking
    "faults": ("scenarios/bounded.yaml", [
        "world.faults={rate_limit: 0.03, server_error: 0.01, max_tokens: 0.02}",
        "world.tokens.thinking=300", "harness.thinking={enabled: true, budget_tokens: 400}",
        "harness.max_output_tokens=1000", "harness.retry.jitter=0.5"]),
    # time and money budgets that bind for some runs
    "time budgets": ("scenarios/bounded.yaml", ["harness.budgets.active_s=150",
                                                "harness.budgets.wall_s=400",
                                                "harness.budgets.money_usd=1.5"]),
    # approvals of external calls: parked time, refusals, approval timeouts
    "approvals": ("scenarios/bounded.yaml", ["harness.approval_required=[external]",
                                             "harness.approval_timeout_s=300"]),
}

EXACT = ("state", "reason", "outcome", "steps", "tool_calls", "input_tokens", "output_tokens",
         "cache_read_tokens", "cache_write_tokens", "thinking_tokens", "cost_usd", "retries",
         "nudges", "verifier_rejections", "compactions", "ground_truth", "truly_done")


class _Seeds:
    """The equivalence on the seeds in ``seeds``: the ten seeds are two
    classes so that pytest-xdist can run the halves on two workers (every task
    is still checked; nothing is pooled across seeds but the endings seen)."""

    seeds: range = range(0)

    @pytest.mark.slow
    @pytest.mark.parametrize("harness", HARNESSES)
    def test_des_with_unlimited_capacity_equals_the_direct_engine(self, harness):
        """Every task of every seed: the same work in both engines, and the same
        active and wall time to a relative 1e-9."""
        path, overrides = HARNESSES[harness]
        outcomes = set()
        for seed in self.seeds:
            scenario = load_scenario(path, [*UNLIMITED, *overrides, f"seed={seed}",
                                            f"tasks={TASKS}"])
            cell = build_cell(cells_of(scenario)[0])
            direct = run_tasks(cell, range(TASKS))
            arrivals = arrival_schedule(scenario.des, TASKS, cell.seed)
            result = DesEngine(cell, scenario.des, arrivals).run()
            assert not check_drained(result, scenario.des, arrivals)
            for d, s in zip(direct, result.records, strict=True):
                for name in EXACT:
                    assert getattr(s, name) == getattr(d, name), (seed, d.task, name)
                assert s.active_s == pytest.approx(d.active_s, rel=1e-9, abs=1e-9)
                assert s.wall_s == pytest.approx(d.wall_s, rel=1e-9, abs=1e-9)
                assert s.end_s - s.arrival_s == pytest.approx(d.wall_s, rel=1e-9, abs=1e-6)
                assert s.queue_s == 0 and s.model_wait_s == 0
                outcomes.add(d.outcome)
        assert len(outcomes) >= 2  # the harness exercised more than one ending


class TestFirstSeeds(_Seeds):
    seeds = SEEDS[:5]


class TestLastSeeds(_Seeds):
    seeds = SEEDS[5:]


def test_the_configurations_exercise_what_they_name():
    """Guard against a vacuous equivalence: the cached harness reads the cache,
    the faults harness retries and truncates, the time budgets stop runs,
    approvals park runs and time some out."""
    def records(name, seed=0):
        path, overrides = HARNESSES[name]
        scenario = load_scenario(path, [*UNLIMITED, *overrides, f"seed={seed}",
                                        f"tasks={TASKS}"])
        return run_tasks(build_cell(cells_of(scenario)[0]), range(TASKS))

    assert sum(r.cache_read_tokens for r in records("cached")) > 0
    assert sum(r.compactions for r in records("cached")) > 0
    faults = records("faults")
    assert sum(r.retries for r in faults) > 0 and sum(r.thinking_tokens for r in faults) > 0
    timed = {r.outcome for s in SEEDS for r in records("time budgets", s)}
    assert {"budget_exhausted:active_time", "budget_exhausted:wall_time",
            "budget_exhausted:money"} & timed
    approvals = [r for s in SEEDS[:3] for r in records("approvals", s)]
    assert any(r.wall_s > r.active_s for r in approvals)
    assert any(r.outcome == "cancelled:approval_timeout" for r in approvals)
