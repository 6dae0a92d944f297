"""Summary statistics (sim.analysis.stats): one percentile definition, shares, intervals."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from sim.analysis.stats import (
    cost_summary,
    describe,
    outcome_counts,
    outcome_shares,
    percentile,
    rank,
    share_ci,
)

samples = st.lists(st.integers(-10**6, 10**6), min_size=1, max_size=200)
float_samples = st.lists(st.floats(-1e9, 1e9, allow_nan=False), min_size=1, max_size=200)
qs = st.floats(0.0, 1.0)


def seed_001_pct(xs: list, q: float):
    """seed 001's ``pct``, verbatim."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


# ------------------------------------------------------------- percentile

@pytest.mark.parametrize(("q", "expected"), [
    (0.0, 10), (0.2, 10), (0.25, 20), (0.5, 30), (0.74, 30), (0.75, 40), (0.95, 40), (1.0, 40),
])
def test_percentile_is_value_at_rank_floor_q_n(q, expected):
    """On [40, 10, 30, 20] (n=4) the q-th percentile is sorted[floor(4q)], clamped to 3."""
    assert percentile([40, 10, 30, 20], q) == expected


def test_percentile_of_even_sample_is_upper_median_and_of_one_value_is_that_value():
    """p50 of an even-sized sample is the upper median; a one-value sample is its own percentile."""
    assert percentile([1, 2, 3, 4, 5, 6], 0.5) == 4
    assert percentile([7.25], 0.0) == percentile([7.25], 0.95) == 7.25


def test_rank_is_seed_001_float_product_or_exact_for_a_fraction():
    """rank is int(q*n) in floating point as in seed 001 (0.29*100 = 28.999... gives 28);
    a Fraction q is exact (29/100 of 100 gives 29)."""
    assert rank(0.29, 100) == int(0.29 * 100) == 28
    assert rank(Fraction(29, 100), 100) == 29
    assert rank(Fraction(1, 3), 3) == 1
    assert rank(0.95, 20) == 19
    assert rank(1.0, 20) == 19


def test_report_quantiles_lose_no_rank_to_float_rounding():
    """For q = 0.5 and 0.95 the float rank equals the exact decimal floor(q*n) for every
    n up to 20,000, so the percentiles in reports are exactly the documented ones."""
    for q, exact in ((0.5, Fraction(1, 2)), (0.95, Fraction(19, 20))):
        assert all(rank(q, n) == min(n - 1, math.floor(exact * n)) for n in range(1, 20_001))


def test_percentile_returns_plain_python_numbers():
    """Integral input gives int, float input gives float (stable JSON, no numpy scalars)."""
    assert type(percentile(np.array([3, 1, 2], dtype=np.int64), 0.5)) is int
    assert type(percentile([0.5, 1.5], 0.5)) is float
    assert type(percentile([True, False, True], 0.5)) is int


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], ["a", "b"]])
def test_percentile_refuses_empty_nan_and_non_numeric_samples(bad):
    """An empty sample, a NaN or strings raise ValueError instead of a silent number."""
    with pytest.raises(ValueError):
        percentile(bad, 0.5)


@pytest.mark.parametrize("q", [-0.01, 1.01, float("nan"), float("inf")])
def test_percentile_refuses_q_outside_unit_interval(q):
    """q must be in [0, 1]."""
    with pytest.raises(ValueError):
        percentile([1, 2, 3], q)


@given(samples, st.sampled_from([0.5, 0.95, 0.99, 0.9, 0.05, 0.0, 1.0]))
def test_percentile_equals_seed_001_pct_for_report_quantiles(xs, q):
    """For the quantiles reports use, the definition is seed 001's ``pct`` exactly."""
    assert percentile(xs, q) == seed_001_pct(xs, q)


@given(samples, qs)
def test_percentile_is_an_observed_value(xs, q):
    """A percentile is always one of the sample's values (no interpolation)."""
    assert percentile(xs, q) in xs


@given(float_samples, qs, qs)
def test_percentile_is_monotone_in_q(xs, q1, q2):
    """q1 <= q2 implies percentile(q1) <= percentile(q2)."""
    lo, hi = sorted((q1, q2))
    assert percentile(xs, lo) <= percentile(xs, hi)


@given(samples, qs)
def test_percentile_lies_between_numpy_inverted_cdf_and_higher(xs, q):
    """numpy inverted_cdf <= percentile <= numpy higher (rank ceil(qn)-1 <= floor(qn) <=
    ceil(q(n-1)))."""
    arr = np.array(xs)
    low = np.quantile(arr, q, method="inverted_cdf")
    high = np.quantile(arr, q, method="higher")
    assert low <= percentile(xs, q) <= high


@given(samples, st.data())
def test_percentile_equals_inverted_cdf_when_q_n_is_not_an_integer(xs, data):
    """When q*n is not an integer the definition is numpy's inverted_cdf."""
    n = len(xs)
    r = data.draw(st.integers(0, n - 1))
    frac = data.draw(st.floats(0.05, 0.95))
    q = (r + frac) / n
    assert percentile(xs, q) == np.quantile(np.array(xs), q, method="inverted_cdf")


@given(samples, st.data())
def test_percentile_is_next_order_statistic_when_q_n_is_an_integer(xs, data):
    """When q*n = k (0 <= k < n) the percentile is sorted[k], one above numpy's inverted_cdf,
    which gives sorted[k-1]."""
    n = len(xs)
    k = data.draw(st.integers(0, n - 1))
    ordered = sorted(xs)
    assert percentile(xs, Fraction(k, n)) == ordered[k]
    q = k / n
    assume(k > 0 and q * n == k)
    assert percentile(xs, q) == ordered[k]
    assert np.quantile(np.array(xs), q, method="inverted_cdf") == ordered[k - 1]


# --------------------------------------------------------------- describe

@given(float_samples)
def test_describe_orders_p50_p95_max_and_bounds_mean(xs):
    """p50 <= p95 <= max, and min <= mean <= max."""
    d = describe(xs)
    assert d["p50"] <= d["p95"] <= d["max"] == max(xs)
    assert min(xs) <= d["mean"] <= max(xs)


def test_describe_uses_the_percentile_definition_and_exact_mean():
    """describe's p50 and p95 are ``percentile``'s; ints stay ints; the mean is a float."""
    xs = list(range(1, 21))
    assert describe(xs) == {"p50": 11, "p95": 20, "max": 20, "mean": 10.5}
    assert all(type(describe(xs)[k]) is int for k in ("p50", "p95", "max"))


def test_describe_mean_does_not_depend_on_order():
    """The mean is a correctly rounded sum, identical for any order of the sample."""
    rng = np.random.default_rng(1)
    xs = rng.lognormal(0, 3, 5000)
    means = {describe(sample)["mean"] for sample in (xs, xs[::-1], rng.permutation(xs))}
    assert len(means) == 1


def test_cost_summary_has_mean_percentiles_max_and_exact_total():
    """Costs in USD: total is math.fsum of the costs, mean is total / n, all floats."""
    costs = [0.1, 0.2, 0.3, 4.0]
    s = cost_summary(costs)
    assert s == {"mean": math.fsum(costs) / 4, "p50": 0.3, "p95": 4.0, "max": 4.0,
                 "total": math.fsum(costs)}
    assert all(type(v) is float for v in cost_summary([1, 2, 3]).values())


# ---------------------------------------------------------------- outcomes

def test_outcome_shares_are_ordered_by_share_then_name():
    """Shares descend; ties are broken by name, so the order is deterministic."""
    outcomes = ["b", "c", "a", "c", "b", "c", "d"]
    shares = outcome_shares(outcomes)
    assert list(shares) == ["c", "b", "a", "d"]
    assert shares == {"c": 3 / 7, "b": 2 / 7, "a": 1 / 7, "d": 1 / 7}
    assert outcome_counts(outcomes) == {"c": 3, "b": 2, "a": 1, "d": 1}


@given(st.lists(st.sampled_from(["succeeded", "failed:x", "needs_human:no_progress"]),
                min_size=1, max_size=300))
def test_outcome_shares_sum_to_one_and_match_counts(outcomes):
    """Shares are count / tasks and add up to 1."""
    shares, counts = outcome_shares(outcomes), outcome_counts(outcomes)
    assert math.isclose(sum(shares.values()), 1.0)
    assert list(shares) == list(counts)
    assert all(shares[k] == counts[k] / len(outcomes) for k in counts)


def test_outcome_shares_of_nothing_is_empty():
    """No outcomes, no shares."""
    assert outcome_shares([]) == {}


# ---------------------------------------------------------------- share_ci

def test_wilson_interval_for_zero_successes_has_closed_form_upper_bound():
    """Wilson with k=0: (0, z^2 / (n + z^2)); for n=10 at 95% that is 0.2775."""
    z = scipy_stats.norm.ppf(0.975)
    low, high = share_ci(0, 10)
    assert low == pytest.approx(0.0, abs=1e-12)
    assert high == pytest.approx(z**2 / (10 + z**2), rel=1e-12)
    assert high == pytest.approx(0.2775, abs=1e-4)


@settings(deadline=None)
@given(st.integers(1, 10**6), st.data(), st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_the_closed_form_wilson_interval_is_scipys(n, data, level):
    """share_ci's Wilson interval (computed without scipy, so simulating needs
    no scipy) equals scipy's binomtest(k, n).proportion_ci(method="wilson")
    to within 1e-12."""
    k = data.draw(st.integers(0, n))
    ci = scipy_stats.binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
    assert share_ci(k, n, level) == pytest.approx((ci.low, ci.high), abs=1e-12)


@pytest.mark.parametrize("n", [1, 5, 30, 1000])
def test_exact_interval_at_the_edges_has_closed_form(n):
    """Clopper-Pearson: 0/n gives (0, 1-(a/2)^(1/n)); n/n gives ((a/2)^(1/n), 1)."""
    alpha = 0.05
    assert share_ci(0, n, method="exact") == pytest.approx((0.0, 1 - (alpha / 2) ** (1 / n)))
    assert share_ci(n, n, method="exact") == pytest.approx(((alpha / 2) ** (1 / n), 1.0))


@settings(deadline=None)
@given(st.integers(1, 500), st.data(), st.sampled_from(["wilson", "exact"]))
def test_share_ci_contains_the_share_and_is_symmetric(n, data, method):
    """0 <= low <= k/n <= high <= 1, and CI(n-k) mirrors CI(k)."""
    k = data.draw(st.integers(0, n))
    low, high = share_ci(k, n, method=method)
    assert 0 <= low <= k / n <= high <= 1
    mirror_low, mirror_high = share_ci(n - k, n, method=method)
    assert low == pytest.approx(1 - mirror_high, abs=1e-9)
    assert high == pytest.approx(1 - mirror_low, abs=1e-9)


def _coverage(ps, n: int, method: str, level: float = 0.95) -> list[float]:
    """Exact coverage probability of the interval for each true share in ``ps`` (a sum
    over all k of P(k) for the k whose interval holds p)."""
    intervals = np.array([share_ci(k, n, level, method) for k in range(n + 1)])
    covered = []
    for p in ps:
        pmf = scipy_stats.binom.pmf(np.arange(n + 1), n, p)
        hits = (intervals[:, 0] <= p) & (p <= intervals[:, 1])
        covered.append(float(pmf[hits].sum()))
    return covered


def test_exact_interval_covers_at_least_the_nominal_level():
    """Clopper-Pearson coverage is >= 95% for every true share (computed, not sampled)."""
    assert min(_coverage(np.linspace(0.01, 0.99, 99), 60, "exact")) >= 0.95


def test_wilson_interval_covers_near_the_nominal_level_on_average():
    """Wilson coverage averaged over true shares is within a point of 95%."""
    assert 0.94 <= np.mean(_coverage(np.linspace(0.05, 0.95, 91), 100, "wilson")) <= 0.96


def test_share_ci_narrows_with_more_tasks_and_widens_with_level():
    """More tasks, narrower interval; a higher level, wider interval."""
    def width(k, n, level=0.95):
        low, high = share_ci(k, n, level)
        return high - low
    assert width(900, 1000) < width(90, 100) < width(9, 10)
    assert width(90, 100, 0.99) > width(90, 100, 0.95) > width(90, 100, 0.80)


@pytest.mark.parametrize(("k", "n", "level", "method"), [
    (-1, 10, 0.95, "wilson"), (11, 10, 0.95, "wilson"), (0, 0, 0.95, "wilson"),
    (1, 10, 1.0, "wilson"), (1, 10, 0.95, "wald"),
])
def test_share_ci_refuses_bad_arguments(k, n, level, method):
    """k outside [0, n], n < 1, level outside (0, 1) or an unknown method raise ValueError."""
    with pytest.raises(ValueError):
        share_ci(k, n, level, method)
