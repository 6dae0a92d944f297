"""A world whose runs end by competing risks per step, and partial cache reads.

``world.endings`` ends a run at its n-th model call with probability
``1 - exp(-Z * total hazard of n's bin)``, by a cause in proportion to the
hazards, ``Z`` a gamma frailty of mean 1 drawn once per run; ``cache.miss``
and ``cache.read_share`` make a later call read nothing or a drawn share of
its prompt. Checked against theory with tolerances from the sample size.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats
from stats_helpers import within
from worldkit import QUIET, Z, simulate

HARNESS = {"model": "claude-sonnet-4-20250514", "budgets": {"steps": 60},
           "detector": {"enabled": False}, "retry": {"retry_tool_errors": False},
           "verifier": {"name": "none"}}
ENDINGS = {"edges": [1, 4, 10], "resolve": [0.0, 0.12, 0.05], "give_up": [0.0, 0.03, 0.1],
           "error": [0.0, 0.01, 0.02], "frailty": 0.0}


def _world(endings: dict, **extra) -> dict:
    return {"name": "endings", "tasks": 1, "harness": HARNESS,
            "world": {"policy": {**QUIET, "validation": 0.05}, "endings": endings, **extra}}


def _times(records) -> tuple[np.ndarray, np.ndarray]:
    """Event time and cause (0 resolve, 1 give up, 2 error, -1 censored by a
    budget) of each record: a fault ends a run at its ``steps + 1``-th call."""
    times, causes = [], []
    for r in records:
        if r.reason == "model_error" or r.outcome.startswith("failed:"):
            times.append(r.steps + 1)
            causes.append(2)
        elif r.state == "budget_exhausted":
            times.append(r.steps)
            causes.append(-1)
        else:
            times.append(r.steps)
            causes.append(0 if r.truly_done else 1)
    return np.asarray(times), np.asarray(causes)


def test_each_bin_ends_runs_at_its_hazard_by_cause():
    """Per bin: events / run-steps at risk is ``1 - exp(-total)`` within
    binomial error, and the causes split as the hazards do; no run ends
    before the first bin with a hazard; a budget stops the rest (steps 60)."""
    records, _ = simulate(_world(ENDINGS), 1500)
    t, c = _times(records)
    assert t[c >= 0].min() >= 4
    edges = ENDINGS["edges"] + [10 ** 9]
    for b in range(1, 3):
        lo, hi = edges[b], edges[b + 1]
        total = ENDINGS["resolve"][b] + ENDINGS["give_up"][b] + ENDINGS["error"][b]
        exposure = int(sum(max(0, min(x, hi - 1) - lo + 1) for x in t))
        ev = (c >= 0) & (t >= lo) & (t < hi)
        assert within(ev.sum() / exposure, -math.expm1(-total), exposure, z=Z)
        for k, name in enumerate(("resolve", "give_up", "error")):
            assert within(((c == k) & ev).sum() / ev.sum(), ENDINGS[name][b] / total,
                          int(ev.sum()), z=Z)
    assert max(r.steps for r in records) <= 60


def test_resolved_runs_are_the_truly_done_ones_and_faults_fail():
    """A resolve ending is a correct final answer (succeeded, truly done), a
    give-up ending a wrong one (false_success without a verifier), an error
    ending ``failed:model_error``."""
    records, _ = simulate(_world(ENDINGS), 300)
    outcomes = {r.outcome for r in records}
    assert {"succeeded", "false_success", "failed:model_error"} <= outcomes
    for r in records:
        assert r.truly_done == (r.outcome == "succeeded")


def test_a_gamma_frailty_gives_the_gamma_mixture_of_geometric_lengths():
    """One bin of hazard lam and frailty variance theta: P(steps >= t + 1) =
    (1 + theta lam t)^(-1/theta) (survival of t calls), KS within its 1e-3
    critical value (conservative for a discrete law)."""
    lam, theta = 0.15, 1.0
    endings = {"edges": [1], "resolve": [lam], "give_up": [0.0], "error": [0.0],
               "frailty": theta}
    records, _ = simulate(_world(endings), 1200)
    steps = np.array([r.steps for r in records if r.state != "budget_exhausted"])
    cut = 60
    grid = np.arange(1, cut)
    ecdf = np.array([(np.array([r.steps for r in records]) > g).mean() for g in grid])
    theory = (1 + theta * lam * grid) ** (-1 / theta)
    n = len(records)
    assert np.abs(ecdf - theory).max() <= 1.95 / math.sqrt(n)
    # over-dispersed against one geometric of the same mean
    mean = steps.mean()
    assert steps.var() > 1.3 * mean * (mean - 1)


def test_partial_cache_reads_follow_the_share_and_the_miss_rate():
    """Automatic caching with ``read_share`` and ``miss``: a later call reads
    nothing with probability ``miss`` and otherwise ``round(share * prompt)``,
    the share's distribution within KS of the given one."""
    share = {"distribution": "empirical", "values": [0.6, 0.7, 0.8, 0.85, 0.9, 0.95]}
    endings = {"edges": [1, 6], "resolve": [0.0, 0.08], "give_up": [0.0, 0.0],
               "error": [0.0, 0.0]}
    raw = _world(endings, cache={"automatic": True, "miss": 0.1, "read_share": share,
                                 "ttl_s": 1e6})
    _, tasks = simulate(raw, 150)
    reads, prompts = [], []
    for task in tasks:
        for call in task.log[1:]:
            reads.append(call.cache_read_tokens)
            prompts.append(call.input_tokens + call.cache_read_tokens + call.cache_write_tokens)
    reads_a, prompts_a = np.asarray(reads, float), np.asarray(prompts, float)
    hit = reads_a > 0
    assert within(1 - hit.mean(), 0.1, len(reads_a), z=Z)
    observed = reads_a[hit] / prompts_a[hit]
    values = np.asarray(share["values"])
    assert np.abs(observed[:, None] - values[None, :]).min(axis=1).max() < 0.01
    counts = np.array([(np.abs(observed - v) < 0.01).sum() for v in values])
    assert stats.chisquare(counts).pvalue > 1e-3


def test_default_world_has_no_endings_and_draws_as_before():
    """Without ``endings`` the need ends runs (seed 001's process): every run
    of a quiet world with no budget finishes truly done at its need + 0
    wasted steps."""
    raw = {"name": "plain", "tasks": 1, "harness": HARNESS,
           "world": {"policy": QUIET, "difficulty": {"distribution": "fixed", "steps": 7}}}
    records, _ = simulate(raw, 20)
    assert all(r.steps == 7 and r.truly_done for r in records)


def test_the_des_engine_with_unlimited_capacity_gives_the_same_endings():
    """Endings, a frailty, partial cache reads and transient faults: every
    task ends the same way after the same work in both engines (the
    endings are drawn per turn, not per attempt, so retries change nothing)."""
    import pytest

    from sim.analysis.capacity import check_drained
    from sim.engines.des import DesEngine, arrival_schedule
    from sim.engines.direct import run_tasks
    from sim.scenario.model import load_scenario
    from sim.sweeps.cells import build_cell, cells_of

    overrides = [
        "engine=des", "des.capacity={}", "des.operations=[]", "des.resume={share: 0}",
        "des.tenants=[{name: a, rate_per_hour: 900}]",
        "world.endings={edges: [1, 4, 10], resolve: [0.0, 0.12, 0.05], "
        "give_up: [0.0, 0.03, 0.1], error: [0.0, 0.01, 0.02], frailty: 0.5}",
        "world.cache={automatic: true, miss: 0.2, read_share: {distribution: empirical, "
        "values: [0.5, 0.9]}}",
        "world.faults={rate_limit: 0.03, server_error: 0.02}", "tasks=80"]
    outcomes = set()
    for seed in range(3):
        scenario = load_scenario("scenarios/bounded.yaml", [*overrides, f"seed={seed}"])
        cell = build_cell(cells_of(scenario)[0])
        direct = run_tasks(cell, range(80))
        arrivals = arrival_schedule(scenario.des, 80, cell.seed)
        result = DesEngine(cell, scenario.des, arrivals).run()
        assert not check_drained(result, scenario.des, arrivals)
        for d, s in zip(direct, result.records, strict=True):
            for name in ("outcome", "steps", "input_tokens", "cache_read_tokens", "cost_usd",
                         "retries", "truly_done"):
                assert getattr(s, name) == getattr(d, name), (seed, d.task, name)
            assert s.wall_s == pytest.approx(d.wall_s, rel=1e-9, abs=1e-9)
            outcomes.add(d.outcome)
    assert {"succeeded", "failed:model_error"} <= outcomes
