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
and it is well above 1 (what independent folds would give). The same
with a parametric world (a normal fitted by maximum likelihood on the other
folds' runs), which follows its runs less closely: the response
:func:`sim.calibration.verdict.fit_response` reads from the folds matches the
model's theory (the share of the empirical CDF's variance a location-scale
normal fit keeps over the central range, 0.649), and the summed scores
spread as :func:`fold_dependence` predicts at that response, well below an
empirical world's. Also: the correlation of two normals' sizes against a
direct simulation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import kolmogorov, ndtri

from sim.calibration.verdict import (
    absolute_correlation,
    fit_response,
    fold_dependence,
    ks_distance,
    mix_response,
)

DATA_SETS = 2000


NORMAL_FIT_RESPONSE = 0.649
"""The share of an empirical CDF's variance a location-scale normal fit
(maximum likelihood) keeps, over the central range: the integral of
``phi(z)^2 (1 + z^2 / 2)`` over that of ``p (1 - p)``, ``p`` from 0.1 to 0.9
and ``z`` its normal quantile (the fitted CDF's variance at ``z`` is
``phi(z)^2 (1 + z^2 / 2) / N``)."""


def _summed_variance(folds: int, held_out: int, simulated: int, seed: int,
                     parametric: bool = False) -> float:
    """Variance of the folds' summed normal scores over sqrt(K), over one
    fold's (see the module docstring): each fold's world the empirical
    distribution of the other folds' runs, or (``parametric``) the normal
    fitted to them."""
    rng = np.random.default_rng(seed)
    scores = np.empty((DATA_SETS, folds))
    fitted = held_out * (folds - 1)
    response = NORMAL_FIT_RESPONSE if parametric else 1.0
    size = math.sqrt(1.0 / (1.0 / held_out + 1.0 / simulated + response / fitted))
    for d in range(DATA_SETS):
        runs = rng.standard_normal((folds, held_out))
        for k in range(folds):
            world = np.delete(runs, k, axis=0).ravel()
            sim = (world.mean() + world.std() * rng.standard_normal(simulated) if parametric
                   else rng.choice(world, simulated))
            p = kolmogorov(ks_distance(runs[k], sim) * size)
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


def test_a_parametric_world_follows_its_runs_less_and_the_folds_depend_less():
    folds, held_out, simulated = 3, 20, 100
    measured = _summed_variance(folds, held_out, simulated, seed=11, parametric=True)
    fit = [NORMAL_FIT_RESPONSE / (held_out * (folds - 1))] * folds
    predicted = fold_dependence([held_out] * folds, [simulated] * folds, fit,
                                NORMAL_FIT_RESPONSE) ** 2
    empirical = fold_dependence([held_out] * folds, [simulated] * folds, fit) ** 2
    error = measured * math.sqrt(2.0 / DATA_SETS)
    assert predicted - 0.06 - 3 * error <= measured <= predicted + 3 * error
    assert measured < empirical - 3 * error  # an empirical world's dependence is too much


def test_the_response_read_from_the_folds_is_the_models():
    """Folds of unequal sizes; worlds simulated on common random numbers. An
    empirical world follows its runs exactly (1), a normal fitted to them by
    the model's share, a world that ignores them not at all."""
    rng = np.random.default_rng(5)
    sizes = [20, 25, 30, 35, 40]
    draws = rng.standard_normal(4000)  # the worlds' common random numbers
    fitted, ignoring = [], []
    for _ in range(300):
        runs = [rng.standard_normal(n) for n in sizes]
        others = [np.concatenate(runs[:k] + runs[k + 1:]) for k in range(len(sizes))]
        assert fit_response(runs, others) == pytest.approx(1.0, abs=1e-9)
        fitted.append(fit_response(runs, [o.mean() + o.std() * draws for o in others]))
        ignoring.append(fit_response(runs, [rng.standard_normal(4000) for _ in sizes]))
    fitted_ = np.array(fitted)
    error = 3 * fitted_.std() / math.sqrt(fitted_.size)
    # A data set's slope is a ratio of two sums and has a ratio estimator's
    # small downward bias (0.59 against 0.63 for the ratio of the sums' means
    # at these sizes).
    assert NORMAL_FIT_RESPONSE - 0.08 - error <= fitted_.mean() <= NORMAL_FIT_RESPONSE + error
    assert np.median(ignoring) <= 0.05 and np.mean(ignoring) < 0.1


def test_the_exit_mix_response_and_the_unreadable_cases():
    counts = [np.array([8, 2, 0]), np.array([5, 5, 0]), np.array([7, 2, 1])]
    shares = [c / c.sum() for c in counts]
    training = [(sum(counts) - c) / (sum(counts) - c).sum() for c in counts]
    assert mix_response(counts, training) == pytest.approx(1.0)
    assert mix_response(counts, [shares[0]] * 3) == pytest.approx(0.0)  # ignores them
    assert mix_response([np.array([4, 0, 0])] * 3, [np.array([1.0, 0, 0])] * 3) == 1.0
    # folds dealt balanced on the exit (stratified): their training runs do not
    # differ, so there is no slope to read
    balanced = [np.array([16, 122, 1, 1])] * 4 + [np.array([16, 123, 1, 0])]
    worlds = [np.array([0.118, 0.86, 0.014, 0.008]) + d for d in (0, 1e-3, -1e-3, 2e-3, 0)]
    assert math.isnan(mix_response(balanced, worlds))
    assert fit_response([np.ones(5)] * 3, [np.ones(50)] * 3) == 1.0  # no spread to read
    assert fit_response([np.arange(5.0)], [np.arange(50.0)]) == 1.0  # one fold


def test_no_response_no_dependence_and_one_fold_none():
    """A world that ignores its runs shares nothing with the other folds'."""
    assert fold_dependence([30] * 5, [150] * 5, [0.01] * 5, 0.0) == 1.0
    assert fold_dependence([30], [150], [0.01]) == 1.0


def test_the_dependence_shrinks_with_the_folds_and_the_fit():
    """More folds: each fold's world holds a smaller share of any one fold's
    runs; a smaller fit error: less of them in it."""
    at = [fold_dependence([60 // k] * k, [300 // k] * k, [1 / (60 - 60 // k)] * k)
          for k in (3, 5, 10)]
    assert at[0] > at[1] > at[2] > 1.0
    assert fold_dependence([20] * 3, [100] * 3, [0.5 / 40] * 3, 0.5) < at[0]


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
