"""Calibration fits the prompt cache's lifetime (``world.cache.hits.ttl_s``)
from the gaps between calls, and a world with a fitted lifetime keeps its
entries that long.

Known worlds: automatic caching, every call with a live entry hits; the
gaps between calls are one tool's durations, lognormal with median 600 s and
log-sd 1.5, so that about a third of the gaps are under 300 s and an eighth
over 3,600 s. The lifetime is 300 s (``cache.ttl_s``), 3,600 s (``cache.ttl_s``)
or 600 s (``cache.hits.ttl_s`` over a ``cache.ttl_s`` of 300 s). Each runs
through ``sim run --traces`` and the traces are read back as calibration
reads them. The fit's lifetime is one of the providers' documented ones
(:data:`~sim.calibration.estimate.PROVIDER_TTLS_S`), so recovering it is
exact: the known lifetime, not a neighbour.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from sim.calibration.data import load
from sim.calibration.estimate import HIT_SHRINK, PROVIDER_TTLS_S, cache_hits
from sim.cli import main

TASKS = 100
STEPS = 12


def _world(ttl_s: float, hits_ttl_s: float | None = None) -> dict:
    hits: dict = {"run_share": 1.0, "first_hit": 0.0, "edges": [2], "gap_edges_s": [0.0],
                  "hit": [[1.0]]}
    if hits_ttl_s is not None:
        hits["ttl_s"] = hits_ttl_s
    return {
        "name": "known-ttl", "tasks": TASKS, "seed": 3,
        "harness": {"model": "gpt-4.1",
                    "prices": {"input": 2.0, "output": 8.0, "cache_read": 0.5},
                    "max_output_tokens": 4096, "budgets": {"steps": 60},
                    "detector": {"enabled": False}, "verifier": {"name": "none"}},
        "world": {
            "difficulty": {"distribution": "fixed", "steps": STEPS},
            "policy": {"loop": 0.0, "transient": 0.0, "validation": 0.0, "premature": 0.0},
            "tools": [{"name": "wait", "weight": 1, "definition_tokens": 0,
                       "timeout_s": 10**7,
                       "result_tokens": {"distribution": "lognormal", "median": 300,
                                         "sigma": 0.5},
                       "duration": {"median_s": 600.0, "sigma": 1.5}}],
            "tokens": {"prefix": 3000, "task": 200,
                       "output": {"distribution": "lognormal", "median": 60, "sigma": 0.4}},
            "latency": {"ttft_s": 0.3, "decode_tps": 100.0},
            "cache": {"automatic": True, "ttl_s": ttl_s, "hits": hits}},
    }


def _traces(tmp_path_factory, world: dict, label: str):
    folder = tmp_path_factory.mktemp(f"ttl_{label}")
    scenario = folder / "known.yaml"
    scenario.write_text(yaml.safe_dump(world), encoding="utf-8")
    runs = folder / "runs"
    assert main(["run", str(scenario), "--traces", "--out", str(runs), "--quiet",
                 "--workers", "1"]) == 0
    return load(runs)


@pytest.fixture(scope="module")
def five_minutes(tmp_path_factory):
    """The world whose entries live 300 s (``cache.ttl_s``)."""
    return _traces(tmp_path_factory, _world(300.0), "300")


@pytest.fixture(scope="module")
def one_hour(tmp_path_factory):
    """The world whose entries live 3,600 s (``cache.ttl_s``)."""
    return _traces(tmp_path_factory, _world(3600.0), "3600")


@pytest.fixture(scope="module")
def ten_minutes(tmp_path_factory):
    """The world whose entries live 600 s by ``cache.hits.ttl_s`` (its
    ``cache.ttl_s`` 300 s)."""
    return _traces(tmp_path_factory, _world(300.0, 600.0), "600")


def _gaps(calls) -> np.ndarray:
    """Seconds from the end of each call's predecessor in its run to it (NaN first)."""
    g = calls.groupby("run_id", sort=False)
    return (calls["started_s"] - g["started_s"].shift(1) - g["latency_s"].shift(1)).to_numpy(
        float)


def test_the_known_worlds_gaps_straddle_every_lifetime(five_minutes):
    """At least 30 later calls (a gap bin's minimum) fall in each of the gap
    bins [0, 300), [300, 600), [600, 3600) and [3600, ...) seconds."""
    gap = _gaps(five_minutes.calls)
    gap = gap[np.isfinite(gap)]
    assert gap.size == TASKS * (STEPS - 1)
    counts = np.histogram(gap, bins=[0, 300, 600, 3600, math.inf])[0]
    assert (counts >= 30).all(), counts


def test_a_world_that_misses_after_a_gap_is_the_ttls(five_minutes, ten_minutes, one_hour):
    """In the known worlds' traces a later call reads the cache exactly when
    its gap (plus the previous call's latency, a few seconds) is within the
    lifetime: no call after a gap over the TTL reads, every one well under it
    does; ``cache.hits.ttl_s`` (600 s) overrides ``cache.ttl_s`` (300 s)."""
    for traces, ttl in ((five_minutes, 300.0), (ten_minutes, 600.0), (one_hour, 3600.0)):
        calls = traces.calls
        gap = _gaps(calls)
        read = calls["cache_read_tokens"].to_numpy() > 0
        assert not read[gap > ttl].any()
        assert read[gap < ttl - 10].all()


@pytest.mark.parametrize(("label", "ttl"), [("five_minutes", 300.0), ("ten_minutes", 600.0),
                                            ("one_hour", 3600.0)])
def test_fit_recovers_the_known_lifetime(label, ttl, request):
    """The fitted ``ttl_s`` is the known world's lifetime (300, 600 or 3,600 s),
    the gap bins start at the providers' lifetimes the gaps reach, and each
    cell's fitted hit probability is the world's (1 in a gap bin ending by the
    lifetime, 0 in one starting at it: no sampling error) up to the fit's
    shrinkage toward its call bin's share (at most ``HIT_SHRINK / (m +
    HIT_SHRINK)`` for a cell of ``m`` calls, counted here)."""
    traces = request.getfixturevalue(label)
    hits = cache_hits(traces.calls)
    assert hits is not None
    assert hits["ttl_s"] == ttl
    edges = hits["gap_edges_s"]
    assert edges[0] == 0.0 and ttl in edges
    assert set(edges[1:]) <= set(PROVIDER_TTLS_S)
    calls = traces.calls
    n = calls.groupby("run_id", sort=False).cumcount().to_numpy() + 1
    gap = _gaps(calls)
    bounds = [*edges, math.inf]
    calls_at = [*hits["edges"], 10**9]
    for i, row in enumerate(hits["hit"]):
        for j, p in enumerate(row):
            m = int(((n >= calls_at[i]) & (n < calls_at[i + 1]) & (gap >= bounds[j])
                     & (gap < bounds[j + 1])).sum())
            truth = 1.0 if bounds[j + 1] <= ttl else 0.0
            assert abs(p - truth) <= HIT_SHRINK / (m + HIT_SHRINK), (i, j, m, hits["hit"])


def test_gaps_that_never_reach_a_provider_ttl_leave_the_lifetime_to_the_harness(
        five_minutes):
    """The same traces with every gap cut under 300 s (calls restarted
    60 s after their predecessor ended) tell no lifetime: no ``ttl_s``, one
    gap bin."""
    calls = five_minutes.calls.copy()
    g = calls.groupby("run_id", sort=False)
    n = g.cumcount().to_numpy()
    start = calls["started_s"].to_numpy(float).copy()
    for i in range(len(calls)):
        if n[i] > 0:
            start[i] = start[i - 1] + calls["latency_s"].iloc[i - 1] + 60.0
    calls["started_s"] = start
    hits = cache_hits(calls)
    assert hits is not None
    assert "ttl_s" not in hits
    assert hits["gap_edges_s"] == [0.0]
