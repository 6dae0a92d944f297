"""Calibration recovers how runs end, partial cache reads and the step limit.

A known world whose resolved share falls with run length (competing risks
per step: resolution early, giving up late, rare faults), whose provider
reads only part of each later prompt from its cache (and sometimes nothing),
run under a step limit that stops some runs (censored observations), writes
its traces with ``sim run --traces``; the direct estimates of them must give
back, within tolerances from the sample sizes: the cumulative hazard of each
cause, the resolved share by step tercile of a fresh simulation of the fitted
scenario, the cache's miss rate and read-share distribution, and the step
limit as the fitted harness's budget (no simulated run goes past it).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from scipy import stats

from sim.calibration.build import scenario_document
from sim.calibration.data import load
from sim.calibration.estimate import estimate
from sim.calibration.simulate import from_traces, simulate
from sim.cli import main

ALPHA = 1e-4
Z = float(stats.norm.ppf(1 - ALPHA / 2))
TASKS = 400
LIMIT = 30
ENDINGS = {"edges": [1, 3, 8, 16], "resolve": [0.0, 0.14, 0.08, 0.02],
           "give_up": [0.0, 0.01, 0.04, 0.06], "error": [0.0, 0.004, 0.004, 0.004],
           "frailty": 0.0}
SHARES = [0.55, 0.7, 0.8, 0.88, 0.93, 0.97]
MISS = 0.1
KNOWN = {
    "name": "known-endings", "tasks": TASKS, "seed": 5,
    "harness": {"model": "deepseek-chat",
                "prices": {"input": 0.28, "output": 0.42, "cache_read": 0.028,
                           "cache_write": 0.35},
                "max_output_tokens": 4096, "budgets": {"steps": LIMIT},
                "detector": {"enabled": False}, "retry": {"retry_tool_errors": False},
                "verifier": {"name": "none"}},
    "world": {
        "policy": {"loop": 0.0, "transient": 0.0, "validation": 0.05, "premature": 0.0},
        "tools": [{"name": "lookup", "weight": 1, "definition_tokens": 0,
                   "result_tokens": {"distribution": "lognormal", "median": 300, "sigma": 0.5},
                   "duration": {"median_s": 0.2, "sigma": 0.3}}],
        "tokens": {"prefix": 3000, "task": 200,
                   "output": {"distribution": "lognormal", "median": 60, "sigma": 0.4}},
        "cache": {"automatic": True, "ttl_s": 1e6, "miss": MISS,
                  "read_share": {"distribution": "empirical", "values": SHARES}},
        "endings": ENDINGS},
}


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """The known world's traces, their direct estimates (one class) and the
    scenario they make."""
    folder = tmp_path_factory.mktemp("endings")
    scenario = folder / "known.yaml"
    scenario.write_text(yaml.safe_dump(KNOWN), encoding="utf-8")
    runs = folder / "runs"
    assert main(["run", str(scenario), "--traces", "--out", str(runs), "--quiet",
                 "--workers", "1"]) == 0
    traces = load(runs)
    est = estimate(traces, np.array(["all"] * traces.n, dtype=object))
    doc, _ = scenario_document(est, name="fitted", description="recovery", tasks=2000, seed=1)
    return traces, est, doc


def _cumulative(section: dict, cause: str, t: int) -> float:
    """Sum of a section's per-step hazard of ``cause`` over steps 1..t."""
    edges = section["edges"]
    return sum(section[cause][max(0, int(np.searchsorted(edges, s, side="right")) - 1)]
               for s in range(1, t + 1))


def test_the_hazards_of_each_cause_are_recovered(fitted):
    """Each cause's cumulative hazard at steps 6, 12 and 20 (the fitted bins'
    sums, no frailty found or a small one) within Z Nelson-Aalen standard
    errors of the truth, plus the smoothing of a bin (10% of it)."""
    traces, est, _ = fitted
    c = est.classes[0]
    assert c.endings is not None
    section = c.endings.section()
    assert section["frailty"] < 0.5
    steps = traces.runs["steps"].to_numpy()
    for cause in ("resolve", "give_up", "error"):
        for t in (6, 12, 20):
            truth = _cumulative(ENDINGS, cause, t)
            got = _cumulative(section, cause, t)
            at_risk = np.array([(steps >= s).sum() for s in range(1, t + 1)], dtype=float)
            hazards = np.array([_cumulative(ENDINGS, cause, s) - _cumulative(ENDINGS, cause, s - 1)
                                for s in range(1, t + 1)])
            se = math.sqrt(float((hazards / np.maximum(at_risk, 1.0)).sum()))
            assert abs(got - truth) <= Z * se + 0.1 * truth + 1e-3, (cause, t, got, truth, se)


def test_the_harness_limit_is_censoring_and_the_fitted_budget(fitted):
    """Runs the step limit stopped are censored, not endings; the fitted
    harness carries the limit, and no simulated run goes past it."""
    traces, est, doc = fitted
    stopped = int((traces.runs["category"] == "steps").sum())
    assert stopped > 0
    assert est.classes[0].endings.censored == stopped
    assert doc["harness"]["budgets"]["steps"] == LIMIT
    sim = simulate(doc, 600, seed=3)
    assert sim.steps.max() <= LIMIT


def test_resolved_share_by_step_tercile_is_recovered(fitted):
    """A fresh simulation of the fitted scenario and of the known world: the
    resolved share in each tercile of the known world's steps agrees within
    Z standard errors of the two samples; it falls with length."""
    _, _, doc = fitted
    truth = simulate(KNOWN, 2000, seed=11)
    sim = simulate(doc, 2000, seed=12)
    cuts = np.quantile(truth.steps, [1 / 3, 2 / 3])
    shares = []
    for s in (truth, sim):
        t = np.digitize(s.steps, cuts, right=True)
        shares.append([(s.resolved[t == k].mean(), int((t == k).sum())) for k in range(3)])
    for (p, n), (q, m) in zip(*shares, strict=True):
        se = math.sqrt(p * (1 - p) / n + q * (1 - q) / m)
        assert abs(p - q) <= Z * se, shares
    assert shares[0][0][0] > shares[0][2][0] + 0.2


def test_partial_cache_reads_are_recovered(fitted):
    """The miss probability within binomial error, the read share's
    distribution within Z binomial errors (plus a quantile's width) of the
    truth at points between its values; the scenario carries them as the
    provider's hits, whose hit share is one less the miss probability."""
    traces, est, doc = fitted
    c = est.classes[0]
    assert c.automatic_cache
    calls = traces.calls
    later = int((calls.groupby("run_id").cumcount() > 0).sum())
    assert abs(c.cache_miss - MISS) <= Z * math.sqrt(MISS * (1 - MISS) / later)
    hits = later * (1 - MISS)
    for k, x in enumerate(np.array(SHARES[:-1]) + 0.01):
        truth = (k + 1) / len(SHARES)
        got = float(np.mean(np.asarray(c.cache_share.values) <= x))
        assert abs(got - truth) <= Z * math.sqrt(truth * (1 - truth) / hits) + 1 / 100
    # the scenario models them as the provider's hits (issue 38): misses and partial reads
    hits = doc["world"]["cache"]["hits"]
    assert "miss" not in doc["world"]["cache"] and "read_share" not in doc["world"]["cache"]
    pooled = np.average([np.mean(row) for row in hits["hit"]], weights=None)
    assert abs(pooled - (1 - MISS)) <= 0.05


def test_cost_follows_partial_reads(fitted):
    """Cost per run of the fitted scenario (a fresh simulation) against the
    traces it was fitted to: two-sample KS under its 1e-4 critical value (the
    fit's own sampling error is the traces'), the mean within 3 standard
    errors of the traces' mean."""
    traces, _, doc = fitted
    real = from_traces(traces)
    sim = simulate(doc, 1500, seed=22)
    result = stats.ks_2samp(real.cost, sim.cost)
    assert result.pvalue > ALPHA, result
    se = real.cost.std() / math.sqrt(real.n)
    assert abs(sim.cost.mean() - real.cost.mean()) <= Z * se


def test_runs_with_no_calls_are_faults_at_the_first_call(fitted, tmp_path):
    """A run that failed before its first reply (zero calls, a fault's exit),
    kept by ``load(keep_empty=True)``: zero steps, and one more fault for the
    endings at step 1; by default it is dropped and counted."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    traces, est, _ = fitted
    folder = tmp_path / "runs"
    shutil.copytree(traces.folder, folder)
    table = pq.read_table(folder / "runs.parquet")
    row = {}
    for f in table.schema:
        value = table.column(f.name)[0].as_py()
        if f.name == "run_id":
            value = "empty/1"
        elif f.name == "steps" or f.name.endswith("_tokens"):
            value = 0
        elif f.name == "exit":
            value = "failed:model_error"
        elif f.name == "cost_usd":
            value = 0.0
        row[f.name] = [value]
    pq.write_table(pa.concat_tables([table, pa.Table.from_pydict(row, schema=table.schema)]),
                   folder / "runs.parquet")
    assert load(folder).dropped == {"no model calls": 1}
    kept = load(folder, keep_empty=True)
    assert kept.n == traces.n + 1 and kept.dropped == {}
    empty = kept.runs[kept.runs["run_id"] == "empty/1"].iloc[0]
    assert (empty["steps"], empty["category"]) == (0, "model_error")
    again = estimate(kept, np.array(["all"] * kept.n, dtype=object))
    c = again.classes[0]
    assert c.endings.events["error"] == est.classes[0].endings.events["error"] + 1
    assert min(c.first_prompts) == min(est.classes[0].first_prompts)
    assert np.isfinite(c.need_mu)


def test_cumulative_incidence_matches_aalen_johansen(fitted):
    """The fitted world's cumulative incidence of resolution and of giving up
    at steps 6, 12 and 20 (a fresh simulation) within Z standard errors of
    lifelines' Aalen-Johansen estimate on the traces (its 95% interval's
    half-width / 1.96) and of the simulation's binomial error."""
    import warnings

    from lifelines import AalenJohansenFitter

    from sim.calibration.survival import observations

    traces, _, doc = fitted
    times, causes, weights = observations(traces.runs)
    assert np.all(weights == 1.0)
    sim = simulate(doc, 3000, seed=31)
    for k, cause in enumerate(("resolve", "give_up")):
        fitter = AalenJohansenFitter(calculate_variance=True, seed=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitter.fit(times, causes + 1, event_of_interest=k + 1)
        cif = fitter.cumulative_density_.iloc[:, 0]
        band = fitter.confidence_interval_
        for t in (6, 12, 20):
            got = float(cif.loc[:t + 0.999].iloc[-1])
            row = band.loc[:t + 0.999].iloc[-1]
            se = abs(float(row.iloc[0]) - float(row.iloc[1])) / (2 * 1.96)
            mine = (sim.steps <= t) & (sim.category == "agent") & (  # the model ended it
                sim.resolved == (1.0 if cause == "resolve" else 0.0))
            p = float(mine.mean())
            se_sim = math.sqrt(max(p * (1 - p), 1e-6) / sim.n)
            assert abs(p - got) <= Z * (se + se_sim), (cause, t, p, got, se)
