"""scenarios/cached.yaml says what caching and a cache-invalidating compaction
do to cost; these checks hold it to its description (paired cells: every cell
runs the same tasks, so differences come from the harness, not from luck)."""

from __future__ import annotations

import numpy as np
import pytest

from sim.api import sweep
from sim.scenario.model import load_scenario
from sim.sweeps.cells import cells_of

TASKS = 1500


@pytest.fixture(scope="module")
def costs() -> dict[tuple[object, object], np.ndarray]:
    """Cost per task of each cell, keyed by (prompt_cache, compact_at_tokens)."""
    scenario = load_scenario("scenarios/cached.yaml", [f"tasks={TASKS}"])
    runs = cells_of(scenario)
    rows, _ = sweep(scenario)
    return {(dict(r.values)["harness.prompt_cache"],
             dict(r.values)["harness.context.compact_at_tokens"]):
            rows.loc[rows["cell"] == r.name, "cost_usd"].to_numpy() for r in runs}


def _p95(x: np.ndarray) -> float:
    return float(np.sort(x)[min(len(x) - 1, int(0.95 * len(x)))])


def test_caching_cuts_mean_and_p95_cost_by_more_than_half(costs):
    """Reading each previous prompt at a tenth of the input price cuts cost
    by about 70%: far more than half, for the mean and for p95."""
    plain, cached = costs[(None, None)], costs[("5m", None)]
    assert cached.mean() < 0.5 * plain.mean()
    assert _p95(cached) < 0.5 * _p95(plain)
    assert np.all(cached <= plain + 1e-12)  # task by task: caching never costs more here


def test_compaction_saves_without_a_cache_and_costs_with_one(costs):
    """Without a cache, compaction shrinks long prompts (cheaper); with a
    cache it rewrites the history, so the next prompt is written again: the
    p95 cost rises by more than 5% and the mean rises too."""
    assert costs[(None, 40000)].mean() < costs[(None, None)].mean()
    with_cache, compacted = costs[("5m", None)], costs[("5m", 40000)]
    assert compacted.mean() > with_cache.mean()
    assert _p95(compacted) > 1.05 * _p95(with_cache)
