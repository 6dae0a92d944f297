"""Calibration fits the provider's cache hits (``world.cache.hits``) from a
trace's per-call cache columns and recovers a known world's.

The known world caches automatically, 70% of its runs at all; its runs all
make 12 calls; a cached run's first call hits an earlier run's entry with
probability 0.3 and then reads 80% of its prompt; a later call hits by call
bin (calls 2-5, 6+) and by the gap since the previous call (under 2 s, or
more: one tool takes about 0.4 s, the other about 6 s). It runs through
``sim run --traces`` and the traces are read back as calibration reads them.
Every fitted share lies within ``Z`` binomial standard errors of the truth
(``Z`` at a false-alarm rate of 1e-4 per assertion), plus the pull of the
fit's shrinkage toward its call bin's share (at most
``HIT_SHRINK / (n + HIT_SHRINK)`` for a cell of ``n`` calls).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from scipy import stats

from sim.calibration.build import scenario_document
from sim.calibration.data import Traces, load
from sim.calibration.estimate import HIT_SHRINK, cache_hits, estimate
from sim.cli import main
from sim.scenario.model import validate

Z = float(stats.norm.ppf(1 - 1e-4 / 2))
TASKS = 300
STEPS = 12
RUN_SHARE, FIRST_HIT, FIRST_SHARE = 0.7, 0.3, 0.8
HIT = ((0.2, 0.7), (0.5, 0.95))  # call bins [2, 6) and [6, ...) x gap bins [0, 2 s), [2 s, ...)

KNOWN = {
    "name": "known-cache", "tasks": TASKS, "seed": 5,
    "harness": {"model": "claude-sonnet-4-20250514",
                "prices": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75},
                "max_output_tokens": 4096, "budgets": {"steps": 60},
                "detector": {"enabled": False}, "verifier": {"name": "none"}},
    "world": {
        "difficulty": {"distribution": "fixed", "steps": STEPS},
        "policy": {"loop": 0.0, "transient": 0.0, "validation": 0.0, "premature": 0.0},
        "tools": [
            {"name": "quick", "weight": 1, "definition_tokens": 0, "timeout_s": 100,
             "result_tokens": {"distribution": "lognormal", "median": 300, "sigma": 0.5},
             "duration": {"median_s": 0.4, "sigma": 0.2}},
            {"name": "slow", "weight": 1, "definition_tokens": 0, "timeout_s": 100,
             "result_tokens": {"distribution": "lognormal", "median": 300, "sigma": 0.5},
             "duration": {"median_s": 6.0, "sigma": 0.2}}],
        "tokens": {"prefix": 3000, "task": 200,
                   "output": {"distribution": "lognormal", "median": 60, "sigma": 0.4}},
        "latency": {"ttft_s": 0.3, "decode_tps": 100.0},
        "cache": {"automatic": True,
                  "hits": {"run_share": RUN_SHARE, "first_hit": FIRST_HIT,
                           "first_share": FIRST_SHARE,
                           "edges": [2, 6], "gap_edges_s": [0.0, 2.0],
                           "hit": [list(r) for r in HIT]}}},
}


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """The known world's runs, written by ``sim run --traces`` and read back."""
    folder = tmp_path_factory.mktemp("cache_hits")
    scenario = folder / "known.yaml"
    scenario.write_text(yaml.safe_dump(KNOWN), encoding="utf-8")
    runs = folder / "runs"
    assert main(["run", str(scenario), "--traces", "--out", str(runs), "--quiet",
                 "--workers", "1"]) == 0
    return load(runs)


def _close(fitted: float, truth: float, n: int, shrink: bool = True) -> bool:
    se = math.sqrt(truth * (1 - truth) / n)
    return abs(fitted - truth) <= Z * se + (HIT_SHRINK / (n + HIT_SHRINK) if shrink else 0.0)


def test_the_traces_are_the_known_worlds(traces):
    """Every run made 12 calls and the cache is read, never written."""
    assert traces.n == TASKS
    assert (traces.runs["steps"] == STEPS).all()
    assert traces.calls["cache_write_tokens"].sum() == 0
    assert traces.calls["cache_read_tokens"].sum() > 0


def cached_runs(calls) -> np.ndarray:
    """Per call, whether any call of its run read the cache."""
    return (calls["cache_read_tokens"] > 0).groupby(calls["run_id"]).transform(
        "any").to_numpy(bool)


def test_fit_recovers_the_cached_runs_first_call_hits_and_what_they_read(traces):
    """The share of runs cached at all is 0.7 and, in them, the share of
    first calls that read 0.3, within sampling error; they read 80% of their
    prompt (to a token's rounding)."""
    hits = cache_hits(traces.calls)
    assert hits is not None
    assert _close(hits["run_share"], RUN_SHARE, TASKS, shrink=False)
    runs = int(cached_runs(traces.calls).sum()) // STEPS
    assert _close(hits["first_hit"], FIRST_HIT, runs, shrink=False)
    assert hits["first_share"] == pytest.approx(FIRST_SHARE, abs=1e-3)


def test_fit_finds_the_gap_split_and_recovers_each_cells_hit_probability(traces):
    """The gap split lies between the two tools' gaps (about 0.4 s and 6 s);
    each fitted cell's hit probability is the known world's for its call and
    gap bin within sampling error; hits read the whole previous prompt
    (read_ratio 1, no partial hits)."""
    hits = cache_hits(traces.calls)
    assert hits is not None
    assert len(hits["gap_edges_s"]) == 2 and 0.8 < hits["gap_edges_s"][1] < 4.0
    assert hits["edges"] == [2, 3, 6, 11]
    assert (hits["read_ratio"], hits["partial"]) == (1.0, 0.0)
    calls = traces.calls
    n = calls.groupby("run_id", sort=False).cumcount().to_numpy() + 1
    g = calls.groupby("run_id", sort=False)
    gap = (calls["started_s"] - g["started_s"].shift(1) - g["latency_s"].shift(1)).to_numpy(float)
    cut = hits["gap_edges_s"][1]
    for i, lo in enumerate(hits["edges"]):
        hi = hits["edges"][i + 1] if i + 1 < len(hits["edges"]) else math.inf
        for j, slow in enumerate((False, True)):
            cell = (n >= lo) & (n < hi) & ((gap >= cut) == slow) & cached_runs(calls)
            truth = HIT[0 if lo < 6 else 1][j]
            assert _close(hits["hit"][i][j], truth, int(cell.sum())), (lo, slow, hits["hit"])


def test_the_calibrated_scenario_carries_the_hits_and_loads(traces):
    """The scenario calibration writes has the fitted hits in world.cache
    (automatic caching, no per-call shares) and is a valid scenario."""
    est = estimate(traces, np.zeros(traces.n, dtype=int))
    doc, comments = scenario_document(est, name="fit", description="", tasks=10, seed=1)
    cache = doc["world"]["cache"]
    assert cache["automatic"] is True
    assert set(cache) == {"automatic", "hits"}
    assert cache["hits"]["first_hit"] == est.classes[0].cache_hits["first_hit"]
    assert "the provider's hits" in comments["world.cache"]
    scenario = validate(yaml.safe_load(yaml.safe_dump(doc)), "fit")
    assert scenario.world.cache.hits is not None


def test_a_class_reading_the_cache_on_few_calls_is_still_cached(traces):
    """The known world's traces with four of every five cache reads removed
    (a class whose calls read the cache a fifth of the time or less, never
    writing) are still fitted as the provider's automatic caching, whose
    share of cached runs times their pooled hit share is the traces' share
    of later calls that read."""
    calls = traces.calls.copy()
    keep = np.arange(len(calls)) % 5 == 0
    calls.loc[~keep, "cache_read_tokens"] = 0
    calls["input_tokens"] = calls["prompt"] - calls["cache_read_tokens"]
    sparse = Traces(traces.folder, traces.runs, calls, {}, {})
    est = estimate(sparse, np.zeros(sparse.n, dtype=int)).classes[0]
    assert est.automatic_cache
    hits = est.cache_hits
    assert hits is not None
    n = calls.groupby("run_id", sort=False).cumcount().to_numpy() + 1
    later = n >= 2
    share = float((calls["cache_read_tokens"].to_numpy()[later] > 0).mean())
    assert share < 0.2
    sizes = [int(((n >= lo) & (n < hi)).sum()) for lo, hi in
             zip(hits["edges"], [*hits["edges"][1:], math.inf], strict=True)]
    pooled = [float(np.mean(row)) for row in hits["hit"]]
    assert hits["run_share"] * np.average(pooled, weights=sizes) == pytest.approx(share,
                                                                                abs=0.03)


def test_outputs_past_the_default_window_still_make_a_valid_scenario(traces):
    """Traces whose largest output passes 200,000 tokens made a scenario
    whose max_output_tokens exceeded its context window: calibrate failed
    with an error about its own generated file. The window now holds the
    largest prompt and output; a recorded window (an overflow seen) bounds
    the output instead."""
    import dataclasses

    est = estimate(traces, np.zeros(traces.n, dtype=int))
    huge = dataclasses.replace(est, max_output=750_000_000)
    doc, _ = scenario_document(huge, name="fit", description="", tasks=10, seed=1)
    harness = validate(yaml.safe_load(yaml.safe_dump(doc)), "fit").harness
    assert harness.max_output_tokens >= 750_000_000
    assert harness.context_window >= harness.max_output_tokens + est.max_prompt
    assert harness.context_window == max(200_000, 2 * est.max_prompt,
                                         est.max_prompt + harness.max_output_tokens)
    recorded = dataclasses.replace(huge, context_window=150_000,
                                   notes={**est.notes, "context": "an overflow at 150,000"})
    doc, _ = scenario_document(recorded, name="fit", description="", tasks=10, seed=1)
    harness = validate(yaml.safe_load(yaml.safe_dump(doc)), "fit").harness
    assert (harness.context_window, harness.max_output_tokens) == (150_000, 150_000)
    plain, _ = scenario_document(est, name="fit", description="", tasks=10, seed=1)
    assert plain["harness"]["context_window"] == max(200_000, 2 * est.max_prompt)
