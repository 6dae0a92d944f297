"""The forecast-vs-replay ladder: budgets at percentiles of the recorded runs,
and on a known world the fold worlds' forecasts agree with the replay of the
held-out runs within sampling error (held-out runs, simulated runs and the
fit's own error, which under a right model is no larger than the runs'
empirical distribution's)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from scipy import stats
from test_calibrate_verdict import KNOWN

from sim.analysis.stats import percentile
from sim.calibration import folds as fl
from sim.calibration import structure as st
from sim.calibration.data import load
from sim.calibration.ladder import Budget, FoldWorld, budgets, ladder
from sim.calibration.pipeline import Settings, cross_validate
from sim.cli import main

RUNS = 300
Z = float(stats.norm.ppf(1 - 1e-3 / 2))  # per assertion; about twenty of them


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """RUNS runs of the known world, 3-fold cross-validated (direct estimates)."""
    folder = tmp_path_factory.mktemp("ladder")
    (folder / "world.yaml").write_text(yaml.safe_dump({**KNOWN, "tasks": RUNS}),
                                       encoding="utf-8")
    assert main(["run", str(folder / "world.yaml"), "--traces", "--out", str(folder / "runs"),
                 "--quiet", "--workers", "1"]) == 0
    traces = load(folder / "runs")
    settings = Settings(evaluations=0, search_runs=20, sim_ratio=5.0, jackknife_runs=200)
    fits = cross_validate(traces, fl.assign(traces, 3, 4), st.ONE, 4, settings)
    return traces, fits


def _worlds(fits):
    return [FoldWorld(f.doc, f.held_ids, f.sim, f.sim_runs, f.sim_seed)
            for f in fits]


def _recorded(traces):
    from sim.drivers.replay.reading import read_trace_folder

    return {r.run_id: r for r in read_trace_folder(traces.folder)}


def test_budgets_sit_at_the_recorded_percentiles(fitted):
    """Prompt tokens, steps and cost at p50, p75, p90 and p95 (the project's
    percentile), then 50k, 100k and 200k prompt tokens; no budget twice."""
    traces, _ = fitted
    rungs = budgets(traces)
    by_label = {b.label: b for b in rungs}
    assert by_label["p75 steps"].value == math.floor(percentile(traces.runs["steps"], 0.75))
    assert by_label["p90 prompt tokens"].value == math.floor(
        percentile(traces.runs["prompt"], 0.9))
    assert by_label["p50 cost"].value == pytest.approx(percentile(traces.runs["cost"], 0.5))
    assert [b.label for b in rungs][-3:] == ["50k prompt tokens", "100k prompt tokens",
                                            "200k prompt tokens"]
    assert len({(b.kind, b.value) for b in rungs}) == len(rungs)


def test_a_budget_nothing_reaches_stops_nothing_on_either_side(fitted):
    """A billion prompt tokens: no run stopped, no success lost, nothing saved."""
    traces, fits = fitted
    (rung,) = ladder(_worlds(fits), _recorded(traces), [Budget("tokens", 1e9, "huge")], 0)
    for side in (rung.forecast, rung.replay):
        assert side["stopped"] == 0 and side["lost"] == 0 and side["saved"] == 0


def test_forecasts_agree_with_replay_within_sampling_error_on_a_known_world(fitted):
    """Share stopped and successes lost, forecast against replay, for step and
    token budgets at the recorded percentiles: within Z standard errors of
    their difference (held-out runs, simulated runs, and a fit no noisier
    than the held-out runs)."""
    traces, fits = fitted
    rungs = [b for b in budgets(traces) if b.label.startswith("p") and b.kind != "money_usd"]
    result = ladder(_worlds(fits), _recorded(traces), rungs, 0)
    m = sum(f.sim_runs for f in fits)
    for r in result:
        for figure in ("stopped", "lost"):
            p = (r.forecast[figure] + r.replay[figure]) / 2
            se = math.sqrt(max(p * (1 - p), 1 / RUNS) * (2 / RUNS + 1 / m))
            assert abs(r.gap(figure)) <= Z * se, (r.budget.label, figure, r.forecast, r.replay)
        lo, hi = r.replay_interval["stopped"]
        assert lo <= r.replay["stopped"] <= hi
    stopped = [r.replay["stopped"] for r in result if r.budget.kind == "steps"]
    assert np.all(np.diff(stopped) <= 0)  # looser budgets stop fewer runs


def _full_forecast(world, budget):
    """The forecast as a full re-simulation under the budget makes it (every
    run simulated again), for holding the ladder's shortcut to it."""
    from sim.calibration.simulate import simulate

    cut = simulate(budget.apply(world.doc), world.runs, world.seed)
    base = world.base
    return ((cut.steps < base.steps) | (cut.category != base.category),
            (base.resolved == 1) & (cut.resolved != 1),
            np.nan_to_num(base.cost.astype(float)) - np.nan_to_num(cut.cost.astype(float)))


@pytest.mark.parametrize("source", ["fold", "scenarios/bounded.yaml", "scenarios/cached.yaml",
                                    "scenarios/tail.yaml", "scenarios/tau2.yaml"])
def test_the_forecast_simulates_again_only_runs_a_budget_can_touch(fitted, source):
    """The forecast under a budget (its runs that the budget cannot reach kept
    from the simulation without it, :mod:`sim.calibration.reach`) is, run by
    run, the forecast of a full re-simulation under the budget: every rung of
    the ladder (prompt tokens, steps, cost), and tight budgets of each kind,
    on a fold world and on shipped scenarios (caching, retries, a tail)."""
    from sim.calibration.ladder import forecast_side
    from sim.calibration.simulate import simulate

    traces, fits = fitted
    if source == "fold":
        world = _worlds(fits)[0]
    else:
        with open(source, encoding="utf-8") as handle:
            doc = yaml.safe_load(handle)
        doc.pop("sweep", None)
        world = FoldWorld(doc, [], simulate(doc, 150, 7), 150, 7)
    base = world.base
    rungs = budgets(traces) + [
        Budget("steps", float(np.percentile(base.steps, q)), "s") for q in (10, 50, 90)] + [
        Budget("tokens", float(np.percentile(base.prompt, q)), "t") for q in (10, 50, 90)] + [
        Budget("money_usd", float(np.nanpercentile(base.cost, q)), "m") for q in (10, 50, 90)]
    for budget in (b for b in rungs if b.value > 0):  # as the ladder's own rungs
        side = forecast_side(world, budget, 0)
        stopped, lost, saved = _full_forecast(world, budget)
        assert np.array_equal(side.stopped, stopped), budget
        assert np.array_equal(side.lost, lost), budget
        assert np.array_equal(side.saved, saved), budget


def test_the_replay_replays_again_only_runs_a_budget_can_touch(fitted):
    """The held-out runs' replay under a budget (runs the budget cannot reach
    kept from their replay without it) is, run by run, a full replay of every
    run under the budget: every rung, and tight budgets of each kind."""
    from sim.calibration.ladder import _template, replay_side
    from sim.drivers.replay import replay_runs

    traces, fits = fitted
    recorded = _recorded(traces)
    world = _worlds(fits)[0]
    runs = [recorded[r] for r in world.held_out if r in recorded]
    baseline = replay_side(world, None, recorded, 0)[1]
    steps, prompt = traces.runs["steps"], traces.runs["prompt"]
    rungs = budgets(traces) + [
        Budget("steps", float(np.percentile(steps, q)), "s") for q in (5, 50)] + [
        Budget("tokens", float(np.percentile(prompt, q)), "t") for q in (5, 50)]
    for budget in rungs:
        side = replay_side(world, budget, recorded, 0, baseline)[0]
        template, prices_for = _template(budget.apply(world.doc))
        full = replay_runs(runs, template, prices_for=prices_for)
        assert np.array_equal(side.stopped, [r.chosen.stopped and not b.chosen.stopped
                                             for r, b in zip(full, baseline, strict=True)])
        assert np.array_equal(side.saved, [r.chosen.saved_usd - b.chosen.saved_usd
                                           for r, b in zip(full, baseline, strict=True)])


def _replays(runs, params):
    from sim.drivers.replay import replay_runs

    return [r.chosen for r in replay_runs(runs, params)]


@pytest.mark.parametrize("on_limit", ["stop", "finalize"])
def test_the_replay_screen_asks_the_harness_and_never_misses_a_run_it_stops(on_limit):
    """Four constructed runs (2, 4, 6 and 8 calls; prompts from 1,000 tokens
    growing 240 a call) replayed under every step budget 1..9 and prompt-token
    budgets 1,000..20,000 (every 250), with ``on_limit`` stop and finalize
    (which keeps the last step and room for a finalize call: its prompt is
    this call's plus the 4,000-token output cap, more than the rest of a run
    adds, so the final counters alone miss it): a run the
    budgeted replay ends differently from its replay without the budget is
    always screened as touched (``reach.replay_touched``, the harness's
    ``Limits`` asked), and a run screened as untouched replays alike. The
    screen is exact where the final state can tell: under ``stop`` a step
    budget touches exactly the runs of at least that many calls (one more
    than it stops: the check before a step the run never asked for), a
    token budget exactly the runs whose prompt tokens plus largest prompt
    exceed it, counted by hand from the fixture."""
    from recordings import conversation, loose, recorded, tool

    from sim.calibration.reach import replay_touched
    from sim.harness.params import Budgets, Visibility

    lengths = (2, 4, 6, 8)
    runs = [recorded(f"r{k}", conversation([[tool(result=200, q=i)] for i in range(k - 1)]
                                           + [[]], first=1_000))
            for k in lengths]
    visibility = Visibility(on_limit=on_limit, finalize_output_tokens=100)
    baseline = _replays(runs, loose(visibility=visibility, max_output_tokens=4_000))
    rungs = [Budget("steps", float(n), "s") for n in range(1, 10)] + [
        Budget("tokens", float(t), "t") for t in range(1_000, 20_001, 250)]
    prompts = {k: [1_000 + 240 * i for i in range(k)] for k in lengths}
    for budget in rungs:
        params = loose(visibility=visibility, max_output_tokens=4_000,
                       budgets=Budgets(**{budget.kind: int(budget.value)}))
        under = _replays(runs, params)
        for k, base, cut in zip(lengths, baseline, under, strict=True):
            touched = replay_touched(budget, base, params)
            changed = (cut.outcome, cut.state.turns, cut.calls) != (
                base.outcome, base.state.turns, base.calls)
            assert touched or not changed, (on_limit, budget, k)
            if on_limit == "stop":
                spent = sum(prompts[k])
                expected = (k >= budget.value if budget.kind == "steps"
                            else spent + max(base.state.context_tokens, *prompts[k])
                            > budget.value)
                assert touched == expected, (budget, k)
