"""The verdict's null replicates, its family-wise adjustment and its power.

The verdict refers each fold's distances to null replicates: held-out-sized
samples of the fold's own world compared with its simulation as the held-out
runs are (:func:`sim.calibration.verdict.fold_null`); the family-wise
adjustment is the replicates' smallest combined p-value; the power against a
shift reuses the same replicates (:func:`sim.calibration.power.shift_power`).
Checked here: the vectorised distances against hand computations and scipy,
p-values and the adjustment against hand counts, replicates widened by the
fit's error and never narrowed, and a power that is about the size at no
shift and grows with the shift.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from sim.calibration.exits import CATEGORIES
from sim.calibration.power import shift_power, shift_powers
from sim.calibration.simulate import Sample
from sim.calibration.verdict import (
    EXITS,
    FoldNull,
    adjusted,
    fold_null,
    judge,
    ks_rows,
    tv_rows,
)


def test_ks_rows_is_each_rows_two_sample_distance():
    """Rows [1, 1, 2] and [3, 4, 4] of the world [1, 2, 3, 4] against [2, 3]:
    the first's CDF is 2/3 at 1 where the other's is 0 (2/3); the second's is
    1/3 at 3 where the other's is 1 (2/3). Random rows agree with scipy's
    two-sample statistic."""
    world = np.array([1.0, 2.0, 3.0, 4.0])
    d = ks_rows(world, np.array([[0, 0, 1], [2, 3, 3]]), np.array([2.0, 3.0]))
    assert d == pytest.approx([2 / 3, 2 / 3])
    rng = np.random.default_rng(5)
    world = rng.integers(0, 12, 40).astype(float)  # ties, as steps have
    draws = rng.integers(0, 40, (25, 17))
    sim = np.sort(rng.integers(0, 12, 30).astype(float))
    expected = [stats.ks_2samp(world[row], sim).statistic for row in draws]
    assert ks_rows(world, draws, sim) == pytest.approx(expected)


def test_tv_rows_is_each_rows_exit_mix_distance():
    """Four drawn runs, three of category 0 and one of category 1, against a
    mix of half and half: total variation 0.25."""
    sim_mix = np.zeros(len(CATEGORIES))
    sim_mix[[0, 1]] = 0.5
    world = np.array([0, 1, 0])
    assert tv_rows(world, np.array([[0, 0, 2, 1], [1, 1, 1, 1]]), sim_mix) == pytest.approx(
        [0.25, 0.5])


def _null(replicates: list[float], observed: float) -> FoldNull:
    return FoldNull({"steps": observed}, {"steps": np.array(replicates)}, {"steps": 1.0},
                    {}, np.zeros((len(replicates), 0), np.int64), {}, {})


def test_a_p_value_counts_the_replicates_at_least_as_far_and_itself():
    """Replicates 0.1, 0.2, 0.3, 0.4: a distance of 0.25 has two at least as
    far, p = (1 + 2) / 5; 0.5 none, p = 1/5; 0.1 all four, p = 1. Each
    replicate among the others: 4/4, 3/4, 2/4, 1/4."""
    null = _null([0.1, 0.2, 0.3, 0.4], 0.25)
    assert null.p_values("steps", np.array([0.25, 0.5, 0.1])) == pytest.approx(
        [3 / 5, 1 / 5, 1.0])
    assert null.replicate_p("steps") == pytest.approx([1.0, 0.75, 0.5, 0.25])


def test_the_adjusted_p_value_is_the_share_of_replicates_as_extreme():
    """Null smallest p-values 0.01, 0.02, 0.5, 0.9: a combined p of 0.02 has
    two at most it, adjusted (1 + 2) / 5 = 0.6; 0.001 none, 1/5."""
    family = np.array([0.01, 0.02, 0.5, 0.9])
    assert adjusted(0.02, family) == pytest.approx(0.6)
    assert adjusted(0.001, family) == pytest.approx(0.2)


def _sample(n: int, rng: np.random.Generator, scale: float = 1.0) -> Sample:
    steps = rng.geometric(0.15, n)
    prompt = np.round(steps * rng.lognormal(8.0, 0.3, n))
    output = np.round(steps * rng.lognormal(4.0, 0.3, n))
    cost = scale * (prompt * 3e-6 + output * 15e-6)
    cats = np.where(rng.random(n) < 0.1, "steps", "agent").astype(object)
    return Sample(steps, prompt, output, cost, cats, np.ones(n), np.zeros(0, np.int64),
                  np.zeros(0, np.int64))


def test_replicates_are_widened_by_the_fits_error_and_never_narrowed():
    """With no fit variance the factor is 1 (the world sample's own noise is
    not taken off a discrete statistic); with v_fit = 0.01 on a world fitted on
    2 of 3 folds, the factor is sqrt((1/60 + 1/300 + 0.015) / (1/60 + 1/300 +
    1/1000))."""
    rng = np.random.default_rng(1)
    real, sim, world = _sample(60, rng), _sample(300, rng), _sample(1000, rng)
    keys = ["steps", "prompt", "output", "cost"]
    none = fold_null(real, sim, world, dict.fromkeys([*keys, EXITS], 0.0), 3, keys,
                     np.random.default_rng(0), 50)
    assert all(v == 1.0 for v in none.scale.values())
    some = fold_null(real, sim, world, dict.fromkeys([*keys, EXITS], 0.01), 3, keys,
                     np.random.default_rng(0), 50)
    own = 1 / 60 + 1 / 300
    assert some.scale["cost"] == pytest.approx(math.sqrt((own + 0.015) / (own + 1 / 1000)))
    assert some.replicates["cost"] == pytest.approx(some.scale["cost"]
                                                    * none.replicates["cost"])


@pytest.fixture(scope="module")
def right():
    """Five folds whose held-out runs come from the world the folds simulate
    (no fitting: the world is right and known), judged once."""
    rng = np.random.default_rng(11)
    real = [_sample(80, rng) for _ in range(5)]
    sims = [_sample(400, rng) for _ in range(5)]
    worlds = [_sample(1000, rng) for _ in range(5)]
    return judge(real, sims, 3, jackknife=worlds, intervals=False)


def test_power_at_no_shift_is_the_size(right):
    """A shift of 0 is the null: the share of replicates rejected is 5%
    within 2 points (400 replicates: a standard error of 1.1)."""
    assert abs(shift_power(right.nulls, right.family, "cost", 0.0) - 0.05) <= 0.02


def test_power_grows_with_the_shift_and_a_large_one_is_always_seen(right):
    """At 400 held-out runs (5 folds of 80), cost 5% higher is seen at most
    as often as 10% higher (more often than the size), less often than 20%
    higher, and 50% higher every time; each metric has a power."""
    small, low, mid = (shift_power(right.nulls, right.family, "cost", s)
                       for s in (0.05, 0.1, 0.2))
    assert small <= low and 0.05 < low < mid < 1.0
    assert shift_power(right.nulls, right.family, "cost", 0.5) == 1.0
    powers = shift_powers(right.nulls, right.family, ["steps", "prompt", "output", "cost"])
    assert set(powers) == {"steps", "prompt", "output", "cost"}
    assert all(0.05 < p <= 1.0 for p in powers.values())


def test_a_right_world_is_accepted_and_a_shifted_one_rejected():
    """Held-out runs from the simulated world: accepted; the same runs with
    cost twice the world's: rejected on cost."""
    rng = np.random.default_rng(12)
    sims = [_sample(400, rng) for _ in range(3)]
    worlds = [_sample(1000, rng) for _ in range(3)]
    real = [_sample(80, np.random.default_rng(20 + i)) for i in range(3)]
    assert judge(real, sims, 0, jackknife=worlds, intervals=False).status == 0
    costly = [_sample(80, np.random.default_rng(20 + i), scale=2.0) for i in range(3)]
    j = judge(costly, sims, 0, jackknife=worlds, intervals=False)
    assert j.status == 1 and [m.key for m in j.rejected] == ["cost"]
