"""The search's stopping rule, runs per evaluation, warm start and simulation
shortcuts (:mod:`sim.calibration.tolerance`, :mod:`sim.calibration.search`,
:func:`sim.calibration.simulate.simulate` without calls)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from sim.calibration import tolerance as tl
from sim.calibration.build import Adjustment
from sim.calibration.exits import CATEGORIES
from sim.calibration.search import DEFAULT_STEPS, MIN_STEP, loss, position, warm_start
from sim.calibration.simulate import Sample, simulate

ROOT = Path(__file__).resolve().parents[1]


def _sample(rng: np.random.Generator, n: int) -> Sample:
    """``n`` runs with independent metrics (continuous), a two-exit mix and a
    resolved flag, all from one fixed distribution."""
    cats = np.where(rng.random(n) < 0.8, "agent", "steps").astype(object)
    return Sample(rng.lognormal(3, 0.5, n), rng.lognormal(9, 0.7, n), rng.lognormal(6, 0.4, n),
                  rng.lognormal(-2, 0.6, n), cats, (rng.random(n) < 0.6).astype(float),
                  np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))


def test_the_noise_floor_is_the_loss_sd_of_samples_of_one_world():
    """Real and simulated runs of the same world (metrics independent, as the
    floor assumes): the floor is the loss's standard deviation over 400
    repetitions, within the sd estimate's own error (relative se about
    1/sqrt(2 x 399) = 3.5%; 4 se allowed) and a 5% allowance for the
    Kolmogorov limit at these sizes."""
    rng = np.random.default_rng(3)
    n, m, reps = 300, 1200, 400
    losses = [loss(_sample(rng, n), _sample(rng, m)) for _ in range(reps)]
    real = _sample(rng, n)
    floor = tl.noise_floor({"steps": real.steps, "prompt": real.prompt, "output": real.output,
                            "cost": real.cost}, real.category, real.resolved, m)
    sd = float(np.std(losses, ddof=1))
    assert abs(floor / sd - 1) <= 4 / math.sqrt(2 * (reps - 1)) + 0.05, (floor, sd)


def test_the_noise_floor_shrinks_with_the_sizes_and_counts_finite_values():
    cats = np.array(["agent"] * 100, dtype=object)
    values = {"steps": np.arange(100.0)}
    small = tl.noise_floor(values, cats, np.full(100, np.nan), 400)
    assert tl.noise_floor(values, cats, np.full(100, np.nan), 4000) < small
    # a KS term alone: sd(K) sqrt(1/n + 1/m), the mix of one exit has no spread
    assert small == pytest.approx(tl.KOLMOGOROV_SD * math.sqrt(1 / 100 + 1 / 400))
    unknown_cost = {**values, "cost": np.full(100, np.nan)}
    assert tl.noise_floor(unknown_cost, cats, np.full(100, np.nan), 400) == small
    assert set(CATEGORIES) >= {"agent", "steps"}


def test_xatol_matches_the_floor_at_the_steepest_slope():
    steps = np.array([0.15, -0.25, 0.2])
    # slopes 1.0, 0.2, 0 per log unit: the steepest moves the loss by fatol in fatol / 1.0
    assert tl.x_tolerance(0.05, steps, np.array([0.15, 0.05, 0.0])) == pytest.approx(0.05)
    assert tl.x_tolerance(0.05, steps, np.zeros(3)) == tl.XATOL_MAX
    assert tl.x_tolerance(1e-6, steps, np.array([0.15, 0, 0])) == tl.XATOL_MIN
    assert tl.x_tolerance(10.0, steps, np.array([0.15, 0, 0])) == tl.XATOL_MAX


def test_runs_per_evaluation_are_four_per_run_within_bounds():
    assert tl.search_runs(100) == tl.MIN_RUNS
    assert tl.search_runs(800) == 3200
    assert tl.search_runs(1600) == tl.MAX_RUNS == tl.search_runs(100_000)


def test_the_warm_start_is_the_folds_median_with_their_spread_as_steps():
    found = [Adjustment(need_shift=s, sigma_scale=math.exp(v), unsolvable_scale=1.0)
             for s, v in [(0.1, 0.0), (0.2, -0.1), (0.3, 0.05), (0.2, 0.0), (0.25, 0.02)]]
    centre, steps = warm_start(found)
    assert centre == pytest.approx([0.2, 0.0, 0.0])
    # spread 0.1 and 0.1; none for the third coordinate: the smallest step
    assert steps == pytest.approx([0.1, -0.1, MIN_STEP])
    assert np.all(np.sign(steps) == np.sign(DEFAULT_STEPS))
    wide = [Adjustment(need_shift=s) for s in (-2.0, 0.0, 2.0)]
    assert warm_start(wide)[1][0] == pytest.approx(DEFAULT_STEPS[0])
    assert position(found[1]) == pytest.approx([0.2, -0.1, 0.0])


def test_the_search_simulation_skips_the_call_log():
    """Without the call log (the search's simulations) the runs are the same."""
    doc = yaml.safe_load((ROOT / "scenarios" / "bounded.yaml").read_text(encoding="utf-8"))
    full = simulate(doc, 60, 5)
    bare = simulate(doc, 60, 5, calls=False)
    for field in ("steps", "prompt", "output", "cost", "resolved"):
        assert np.array_equal(getattr(full, field), getattr(bare, field)), field
    assert list(full.category) == list(bare.category)
    assert full.call_output.size > 0
    assert bare.call_output.size == 0 == bare.call_run.size


def test_the_ks_distance_is_ks_2samp_statistic_without_its_p_value():
    """:func:`sim.calibration.search.ks` equals ``scipy.stats.ks_2samp``'s
    statistic exactly (its exact method's rounding below 10,001 runs, none
    above), on tied and untied samples of many sizes, NaN dropped."""
    from scipy.stats import ks_2samp

    from sim.calibration.search import ks

    rng = np.random.default_rng(3)
    for trial in range(300):
        n, m = rng.integers(1, 300, 2) if trial % 30 else rng.integers(9000, 12000, 2)
        a = np.round(rng.lognormal(0, 1, n) * rng.choice([1, 10, 1000]))
        b = np.round(rng.lognormal(rng.choice([0.0, 0.2]), 1.1, m) * rng.choice([1, 10, 1000]))
        a[: trial % 3] = np.nan
        finite = a[np.isfinite(a)]
        expected = float(ks_2samp(finite, b).statistic) if finite.size else 0.0
        assert ks(a, b) == expected, (n, m)
