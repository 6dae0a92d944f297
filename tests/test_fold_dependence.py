"""The folds of a cross-validation are not independent, and the verdict's
Stouffer sum says by how much (:func:`sim.calibration.verdict.fold_dependence`).

Checked against simulation: K folds of a standard normal sample, each fold's
held-out runs against a sample of the empirical distribution of the other
folds' runs (a world exactly as uncertain as the runs it was fitted on), each
fold's KS distance turned into a normal score by the Kolmogorov distribution
at its effective size. The variance of the folds' summed scores over sqrt(K),
relative to one fold's, is what :func:`fold_dependence` squared predicts,
within 3 standard errors of a variance (``sqrt(2 / D)`` relative, D data sets)
plus the approximation's own excess (a KS distance's supremum correlates a
little less than one point's size: at 3 folds 1.30 against 1.35 predicted),
and it is well above 1 (what independent folds would give). Also: the
correlation of two normals' sizes against a direct simulation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import kolmogorov, ndtri

from sim.calibration.verdict import absolute_correlation, fold_dependence, ks_distance

DATA_SETS = 2000


def _summed_variance(folds: int, held_out: int, simulated: int, seed: int) -> float:
    """Variance of the folds' summed normal scores over sqrt(K), over one
    fold's (see the module docstring)."""
    rng = np.random.default_rng(seed)
    scores = np.empty((DATA_SETS, folds))
    fitted = held_out * (folds - 1)
    size = math.sqrt(1.0 / (1.0 / held_out + 1.0 / simulated + 1.0 / fitted))
    for d in range(DATA_SETS):
        runs = rng.standard_normal((folds, held_out))
        for k in range(folds):
            world = np.delete(runs, k, axis=0).ravel()
            p = kolmogorov(ks_distance(runs[k], rng.choice(world, simulated)) * size)
            scores[d, k] = ndtri(1.0 - min(max(float(p), 1e-12), 1.0 - 1e-12))
    return float((scores.sum(axis=1) / math.sqrt(folds)).var() / scores.var(axis=0).mean())


@pytest.mark.parametrize(("folds", "held_out", "simulated"), [(3, 20, 100), (5, 30, 150)])
def test_the_folds_summed_scores_spread_as_predicted(folds, held_out, simulated):
    measured = _summed_variance(folds, held_out, simulated, seed=folds)
    predicted = fold_dependence([held_out] * folds, [simulated] * folds,
                                [1.0 / (held_out * (folds - 1))] * folds) ** 2
    error = measured * math.sqrt(2.0 / DATA_SETS)
    assert predicted - 0.06 - 3 * error <= measured <= predicted + 3 * error
    assert measured > 1.0 + 3 * error  # the folds are not independent


def test_no_fit_error_no_dependence_and_one_fold_none():
    """A world with no fit error shares nothing with the other folds' runs."""
    assert fold_dependence([30] * 5, [150] * 5, [0.0] * 5) == 1.0
    assert fold_dependence([30], [150], [0.01]) == 1.0


def test_the_dependence_shrinks_with_the_folds_and_the_fit():
    """More folds: each fold's world holds a smaller share of any one fold's
    runs; a smaller fit error: less of them in it."""
    at = [fold_dependence([60 // k] * k, [300 // k] * k, [1 / (60 - 60 // k)] * k)
          for k in (3, 5, 10)]
    assert at[0] > at[1] > at[2] > 1.0
    assert fold_dependence([20] * 3, [100] * 3, [0.5 / 40] * 3) < at[0]


def test_the_sizes_of_two_correlated_normals_correlate_as_the_closed_form():
    rng = np.random.default_rng(0)
    draws = 200_000
    for rho in (-0.5, -0.25, 0.3, 0.9):
        x = rng.standard_normal(draws)
        y = rho * x + math.sqrt(1 - rho * rho) * rng.standard_normal(draws)
        measured = float(np.corrcoef(np.abs(x), np.abs(y))[0, 1])
        assert measured == pytest.approx(absolute_correlation(rho), abs=4 / math.sqrt(draws))
    assert absolute_correlation(1.0) == pytest.approx(1.0)
    assert absolute_correlation(-1.0) == pytest.approx(1.0)
