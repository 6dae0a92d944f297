"""``tune`` at scale: a candidate replays again only the runs its budgets could
stop (the rest are the replay in force), and the worker count never changes
the answer.

Traces are simulated from the known world (``benchmarks.tune_world``: a
60-step backstop in force, no other budget)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from benchmarks.tune_world import STEP_GRID, simulated_traces
from sim.drivers.replay import replay_runs
from sim.drivers.replay.reading import TraceTables
from sim.scenario.model import harness_params, resolve_detector
from sim.tuning import evidence, replayed
from sim.tuning.inforce import harness_in_force
from sim.tuning.knobs import setting
from sim.tuning.replayed import ReplayEvaluator, apply
from sim.tuning.search import tune
from sim.tuning.stops import as_stopped
from sim.world.params import WorldParams


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> Path:
    """120 runs of the known world."""
    return simulated_traces(tmp_path_factory.mktemp("tune_scale"), 120, seed=5)


@pytest.fixture(scope="module")
def evaluator(traces) -> ReplayEvaluator:
    tables = TraceTables.load(traces)
    return ReplayEvaluator(tables.recorded(0, len(tables)), harness_in_force(None, traces))


SETTINGS = [setting({"tokens": t, "money": m, "steps": s}) for t, m, s in (
    (20_000, None, 60), (150_000, None, 60), (400_000, None, 60), (5_000_000, None, 60),
    (None, 0.05, 60), (None, 0.3, 60), (None, 2.0, 60), (None, None, 1), (None, None, 8),
    (None, None, 20), (None, None, 60), (250_000, 0.4, 25))]


@pytest.mark.parametrize("s", SETTINGS, ids=lambda s: "-".join(str(v) for _, v in s))
def test_a_candidates_replays_are_a_replay_of_every_run(evaluator, s):
    """What tune reads of each run's replay under a tighter setting (the
    baseline's where the candidate's Limits cannot refuse, else the marks'
    stop or replayed again) is what a replay of every run under that setting
    gives, field by field; and every run whose replay differs from the
    baseline's is one the candidate could stop."""
    h = apply(evaluator.harness, s)
    fast = evaluator.replays(s)
    full = [r.chosen for r in replay_runs(
        evaluator.runs, harness_params(h, WorldParams()), prices_for=evaluator.prices_for,
        make_detector=resolve_detector(h.detector.name), pricing=evaluator.pricing)]
    assert fast == [as_stopped(r) for r in full]
    changed = {i for i, (b, r) in enumerate(zip(evaluator.baseline, full, strict=True))
               if as_stopped(b.chosen) != as_stopped(r)}
    assert changed <= set(evaluator.could_stop(h))


@pytest.mark.parametrize("cap", [1, 8, 20, 40, 60])
def test_a_step_cap_replays_again_exactly_the_runs_that_reach_it(traces, evaluator, cap):
    """With only a step budget, the runs replayed again for a cap of c steps
    are those whose recording made c steps or more (the harness checks the
    step budget before the step after the last recorded one too), counted
    from runs.parquet's steps column."""
    steps = pq.read_table(traces / "runs.parquet", columns=["steps"]).column("steps").to_pylist()
    expected = [i for i, n in enumerate(steps) if n >= cap]
    h = apply(evaluator.harness, setting({"tokens": None, "money": None, "steps": cap}))
    assert evaluator.could_stop(h) == expected


def test_the_setting_in_force_replays_nothing_again(evaluator):
    """The harness in force itself stops no run it did not stop: nothing is
    replayed again for it unless a run reached the step backstop."""
    steps = [b.chosen.state.turns for b in evaluator.baseline]
    h = apply(evaluator.harness, setting({"tokens": None, "money": None, "steps": 60}))
    assert evaluator.could_stop(h) == [i for i, n in enumerate(steps) if n >= 60]


def test_one_or_two_workers_give_the_same_answer(traces, monkeypatch):
    """Replayed in two forked worker processes (the threshold lowered so that
    120 runs are spread), tune gives the same frontier, recommendation,
    boundaries and drill-down table as in one process."""
    one = tune(traces, knobs="steps", keep_successes=0.9, grid={"steps": list(STEP_GRID)},
               workers=1)
    monkeypatch.setattr(replayed, "MIN_PARALLEL", 10)
    two = tune(traces, knobs="steps", keep_successes=0.9, grid={"steps": list(STEP_GRID)},
               workers=2)
    assert one.frontier.to_json() == two.frontier.to_json()
    assert one.recommendation.label == two.recommendation.label
    assert one.recommendation.row == two.recommendation.row
    assert [b.sentence() for b in one.boundaries] == [b.sentence() for b in two.boundaries]
    assert one.stopped_runs is not None and two.stopped_runs is not None
    assert one.stopped_runs.to_json() == two.stopped_runs.to_json()
    assert len(one.frontier) == len(STEP_GRID) + 1  # the grid and the 60 in force


def test_a_bootstrap_in_batches_gives_the_same_interval(monkeypatch):
    """Beyond evidence.BATCH_VALUES resampled values the bootstrap draws its
    resamples a batch at a time (bounded memory at 100,000 runs); the
    intervals of the mean and the p95 are the same, to the bit, as in one go."""
    rng = np.random.default_rng(3)
    cost = rng.lognormal(size=3001)
    args = {"base_success": rng.random(3001) < 0.8, "success": rng.random(3001) < 0.7,
            "cost": cost, "base_cost": cost * 1.2, "time_s": rng.lognormal(size=3001),
            "outcomes": ["succeeded"] * 3001, "method": "replayed"}
    whole = evidence.row(**args)
    monkeypatch.setattr(evidence, "BATCH_VALUES", 50_000)  # 16 resamples a batch
    batched = evidence.row(**args)
    assert batched == whole
    assert whole["cost_p95_low"] < whole["cost_p95_high"]  # a real interval, not a point


def test_the_p95_of_a_row_is_the_value_of_rank_95_of_100():
    """A frontier row's p95 cost (found by a partition, not a sort) is the
    value at rank floor(0.95 * n) in sorted order: of the costs 0..99
    shuffled, 95."""
    cost = np.random.default_rng(1).permutation(100).astype(float)
    row = evidence.row(base_success=np.ones(100, bool), success=np.ones(100, bool), cost=cost,
                       base_cost=cost, time_s=cost, outcomes=[], method="replayed")
    assert row["cost_p95"] == 95.0


def test_an_interval_found_again_is_the_bootstraps_own(monkeypatch):
    """The bootstrap interval of values already seen is remembered: the same
    values (another array) give the interval scipy's bootstrap gives them,
    without a second bootstrap; other values of the same size are
    bootstrapped anew."""
    rng = np.random.default_rng(8)
    values = rng.lognormal(size=500)
    monkeypatch.setattr(evidence, "_INTERVALS", {})
    calls = []
    real = evidence._bootstrap

    def counted(v, statistic):
        calls.append(statistic)
        return real(v, statistic)

    monkeypatch.setattr(evidence, "_bootstrap", counted)
    first = evidence._interval(values, np.mean)
    again = evidence._interval(values.copy(), np.mean)
    other = evidence._interval(values[::-1].copy() * 1.5, np.mean)
    assert first == again == real(values, np.mean)
    assert other != first
    assert len(calls) == 2


@pytest.mark.parametrize("n, batch_values", [(40, 4_000_000), (3001, 4_000_000),
                                             (3001, 50_000)])
def test_a_rows_intervals_drawn_together_are_each_ones_own_bootstrap(monkeypatch, n,
                                                                     batch_values):
    """A row's four intervals (mean and p95 cost, mean time, mean saving) come
    from one paired bootstrap; each equals, to the bit, the interval of its own
    bootstrap of its values (scipy's, same seed), in batches or not, and when
    one of them was already known (the other three drawn together)."""
    rng = np.random.default_rng(n)
    cost, time_s = rng.lognormal(size=n), rng.lognormal(size=n)
    saved = cost * 0.3
    wanted = [(cost, np.mean), (cost, evidence._p95), (time_s, np.mean), (saved, np.mean)]
    own = [evidence._bootstrap(v, f) for v, f in wanted]
    monkeypatch.setattr(evidence, "BATCH_VALUES", batch_values)
    monkeypatch.setattr(evidence, "_INTERVALS", {})
    assert evidence._intervals(wanted) == own
    monkeypatch.setattr(evidence, "_INTERVALS", {})
    evidence._intervals(wanted[2:3])
    assert evidence._intervals(wanted) == own


@pytest.mark.parametrize("workers", [1, 2])
def test_intervals_drawn_at_the_end_are_each_rows_own(monkeypatch, workers):
    """Rows made without their bootstrap intervals (``intervals=False``) and
    filled together at the end (:func:`evidence.fill_intervals`, in one
    process or two forked ones) equal, key for key and in the same order,
    the rows made with them; two rows of the same costs share them."""
    rng = np.random.default_rng(12)
    n = 700
    base_cost = rng.lognormal(size=n)
    args = [{"base_success": rng.random(n) < 0.8, "success": rng.random(n) < 0.7,
             "cost": base_cost * share, "base_cost": base_cost,
             "time_s": rng.lognormal(size=n), "outcomes": ["budget_exhausted:steps"] * 3,
             "method": "replayed"} for share in (0.5, 0.9, 0.5)]
    monkeypatch.setattr(evidence, "_INTERVALS", {})
    whole = [evidence.row(**a) for a in args]
    monkeypatch.setattr(evidence, "_INTERVALS", {})
    later = [evidence.row(**a, intervals=False) for a in args]
    assert all(np.isnan(r["cost_mean_low"]) for r in later)
    evidence.fill_intervals(later, workers)
    assert [list(r) for r in later] == [list(r) for r in whole]
    assert later == whole
