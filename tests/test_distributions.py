"""Distribution objects (sim/world/distributions.py): samplers against their
CDFs (KS), analytic moments against sample moments, maximum-likelihood fits
against the parameters that made the data.

Every tolerance comes from the sample size: a mean within ``Z`` standard errors
``sqrt(variance / n)``; a variance within ``Z`` standard errors of the sample
variance (estimated from the sample's fourth central moment, the delta method);
a fitted parameter within ``Z`` asymptotic standard errors (the inverse Fisher
information over ``n``). ``ALPHA`` is each test's false-alarm rate.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
from pydantic import TypeAdapter, ValidationError
from scipy import special, stats
from stats_helpers import within

from sim.world.distributions import (
    Distribution,
    Empirical,
    Exponential,
    Fixed,
    Gamma,
    Lognormal,
    Mixture,
    as_distribution,
)
from sim.world.streams import Draws

ALPHA = 1e-3
Z = float(stats.norm.ppf(1 - ALPHA / 2))
N = 4000


def draws(seed: int) -> Draws:
    """A project stream with its own seed."""
    return Draws(np.random.Generator(np.random.PCG64(seed)))


def sample(dist, n: int = N, seed: int = 1) -> np.ndarray:
    """``n`` values of ``dist.sample`` from one stream."""
    d = draws(seed)
    return np.array([dist.sample(d) for _ in range(n)])


CONTINUOUS = {
    "lognormal": Lognormal(median=50.0, sigma=0.6),
    "lognormal_wide": Lognormal(median=3.0, sigma=1.2),
    "gamma": Gamma(shape=2.5, scale=40.0),
    "gamma_small_shape": Gamma(shape=0.4, scale=10.0),
    "exponential": Exponential(mean=7.0),
    "mixture": Mixture(components=(Lognormal(median=20.0, sigma=0.3),
                                   Gamma(shape=3.0, scale=100.0)), weights=(3.0, 1.0)),
}
ALL = {**CONTINUOUS,
       "fixed": Fixed(value=600.0),
       "empirical": Empirical(values=(3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0)),
       "mixture_of_points": Mixture(components=(Fixed(value=5.0), Fixed(value=40.0)),
                                    weights=(0.95, 0.05))}


@pytest.mark.parametrize("name", sorted(CONTINUOUS))
def test_samples_follow_the_cdf(name):
    """Samples of a continuous distribution pass a KS test against its own cdf."""
    dist = CONTINUOUS[name]
    x = sample(dist, seed=zlib.crc32(name.encode()))
    p = stats.kstest(x, np.vectorize(dist.cdf)).pvalue
    assert p > ALPHA, (name, p)


@pytest.mark.parametrize("name", sorted(ALL))
def test_analytic_mean_matches_samples(name):
    """The sample mean is within Z standard errors sqrt(variance / n) of ``mean``."""
    dist = ALL[name]
    x = sample(dist, seed=11)
    se = math.sqrt(dist.variance / N)
    assert abs(x.mean() - dist.mean) <= Z * se + 1e-12, (name, x.mean(), dist.mean, se)


@pytest.mark.parametrize("name", sorted(ALL))
def test_analytic_variance_matches_samples(name):
    """The sample variance is within Z standard errors of ``variance``; the
    standard error is sqrt((m4 - s^4) / n), m4 the sample's fourth central moment."""
    dist = ALL[name]
    x = sample(dist, n=20_000, seed=12)
    centred = x - x.mean()
    s2 = float(np.mean(centred ** 2))
    se = math.sqrt(max(float(np.mean(centred ** 4)) - s2 ** 2, 0.0) / x.size)
    assert abs(s2 - dist.variance) <= Z * se + 1e-9 * (1 + dist.variance), (name, s2,
                                                                             dist.variance, se)


def test_discrete_samples_take_their_probabilities():
    """An empirical distribution gives each observed value its share, and a
    mixture of points each point its weight (binomial tolerances)."""
    emp = ALL["empirical"]
    x = sample(emp, n=N, seed=3)
    for value in set(emp.values):
        p = emp.values.count(value) / len(emp.values)
        share = float(np.mean(x == value))
        assert within(share, p, N, z=Z), (value, share, p)
    mix = ALL["mixture_of_points"]
    x = sample(mix, n=N, seed=4)
    assert set(np.unique(x)) == {5.0, 40.0}
    assert within(float(np.mean(x == 40.0)), 0.05, N, z=Z)


def test_fixed_takes_no_draw_and_lognormal_one_normal():
    """Fixed draws nothing; a lognormal sample is exp(log median + sigma z) from
    exactly one standard normal of the stream (what the world drew before)."""
    d, ref = draws(5), draws(5)
    assert Fixed(value=3.0).sample(d) == 3.0
    dist = Lognormal(median=0.2, sigma=0.5)
    for _ in range(50):
        assert dist.sample(d) == math.exp(math.log(0.2) + 0.5 * ref.normal())
    u, ref_u = draws(6), draws(6)
    exp = Exponential(mean=60.0)
    for _ in range(50):
        assert exp.sample(u) == -60.0 * math.log1p(-ref_u.uniform())


def test_cdfs_match_scipy():
    """Each cdf equals scipy's for the same parameters."""
    xs = [0.0, 0.5, 3.0, 20.0, 55.0, 300.0]
    pairs = [(Lognormal(median=50.0, sigma=0.6), stats.lognorm(s=0.6, scale=50.0)),
             (Gamma(shape=2.5, scale=40.0), stats.gamma(a=2.5, scale=40.0)),
             (Exponential(mean=7.0), stats.expon(scale=7.0))]
    for dist, ref in pairs:
        for x in xs:
            assert dist.cdf(x) == pytest.approx(ref.cdf(x), abs=1e-12)
    emp = Empirical(values=(1.0, 2.0, 2.0, 5.0))
    assert [emp.cdf(x) for x in (0.5, 1.0, 2.0, 4.9, 5.0)] == [0.0, 0.25, 0.75, 0.75, 1.0]
    mix = ALL["mixture"]
    assert mix.cdf(30.0) == pytest.approx(0.75 * stats.lognorm(s=0.3, scale=20).cdf(30)
                                          + 0.25 * stats.gamma(a=3, scale=100).cdf(30))


# ------------------------------------------------------------------ fitting
def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.mark.parametrize("n", [200, 5000])
def test_lognormal_fit_recovers_parameters(n):
    """log median within Z sigma/sqrt(n), sigma within Z sigma/sqrt(2n)."""
    mu, sigma = math.log(120.0), 0.9
    x = np.exp(rng(n).normal(mu, sigma, n))
    fit = Lognormal.fit(x)
    assert abs(math.log(fit.median) - mu) <= Z * sigma / math.sqrt(n)
    assert abs(fit.sigma - sigma) <= Z * sigma / math.sqrt(2 * n)


@pytest.mark.parametrize(("shape", "n"), [(0.6, 3000), (4.0, 1000)])
def test_gamma_fit_recovers_parameters(shape, n):
    """Shape and scale within Z asymptotic standard errors: the inverse of the
    Fisher information [[psi'(k), 1/theta], [1/theta, k/theta^2]] over n."""
    scale = 25.0
    x = rng(int(shape * 10) + n).gamma(shape, scale, n)
    fit = Gamma.fit(x)
    info = np.array([[special.polygamma(1, shape), 1 / scale],
                     [1 / scale, shape / scale ** 2]])
    cov = np.linalg.inv(info) / n
    assert abs(fit.shape - shape) <= Z * math.sqrt(cov[0, 0]), (fit, cov)
    assert abs(fit.scale - scale) <= Z * math.sqrt(cov[1, 1]), (fit, cov)


def test_exponential_fit_recovers_the_mean():
    """The fitted mean is within Z mean/sqrt(n) of the true mean."""
    n, mean = 2000, 45.0
    fit = Exponential.fit(rng(3).exponential(mean, n))
    assert abs(fit.mean - mean) <= Z * mean / math.sqrt(n)


def test_empirical_fit_keeps_the_values_and_fixed_fits_the_mean():
    """The empirical fit is the sample's own distribution (cdf = ECDF, mean =
    sample mean); a fixed fit is the sample mean."""
    x = rng(4).lognormal(3.0, 1.0, 500)
    emp = Empirical.fit(x)
    for q in np.quantile(x, [0.1, 0.5, 0.9]):
        assert emp.cdf(q) == np.mean(x <= q)
    assert emp.mean == pytest.approx(x.mean(), rel=1e-12)
    assert emp.variance == pytest.approx(x.var(), rel=1e-9)
    assert Fixed.fit(x).value == pytest.approx(x.mean(), rel=1e-12)


def test_mixture_fit_recovers_two_lognormal_groups():
    """Two well-separated lognormal groups (like tau2's two prefix sizes):
    weights within Z sqrt(w(1-w)/n); each log median within Z sigma_k/sqrt(n w_k)
    and each sigma within Z sigma_k/sqrt(2 n w_k)."""
    n, w = 3000, 0.35
    truth = [(math.log(3500.0), 0.08), (math.log(5600.0), 0.06)]
    g = rng(5)
    first = g.random(n) < w
    x = np.where(first, np.exp(g.normal(*truth[0], n)), np.exp(g.normal(*truth[1], n)))
    fit = Mixture.fit(x, k=2)
    weights = fit.probabilities
    assert abs(weights[0] - w) <= Z * math.sqrt(w * (1 - w) / n)
    for comp, (mu, sigma), share in zip(fit.components, truth, (w, 1 - w), strict=True):
        m = n * share
        assert abs(math.log(comp.median) - mu) <= Z * sigma / math.sqrt(m)
        assert abs(comp.sigma - sigma) <= Z * sigma / math.sqrt(2 * m)


@pytest.mark.parametrize("kind", [Lognormal, Gamma, Exponential, Empirical, Fixed, Mixture])
def test_fit_refuses_unusable_values(kind):
    """No values, or non-finite ones, are a ValueError naming the problem."""
    with pytest.raises(ValueError, match="no values"):
        kind.fit([])
    with pytest.raises(ValueError, match="finite"):
        kind.fit([1.0, float("nan")])


def test_positive_kinds_refuse_non_positive_values():
    """Lognormal, gamma and lognormal mixtures need values > 0."""
    for kind in (Lognormal, Gamma, Mixture):
        with pytest.raises(ValueError, match="> 0"):
            kind.fit([1.0, 0.0, 3.0])


# ------------------------------------------------------------------ schema
def test_scenario_spelling_is_tagged_by_distribution():
    """A mapping tagged ``distribution`` validates to its kind; a number is a
    fixed distribution; unknown tags and bad parameters are errors."""
    adapter = TypeAdapter(Distribution)
    assert adapter.validate_python({"distribution": "gamma", "shape": 2, "scale": 3}) == Gamma(
        shape=2, scale=3)
    mix = adapter.validate_python({"distribution": "mixture", "weights": [1, 1], "components": [
        {"distribution": "fixed", "value": 1}, {"distribution": "exponential", "mean": 2}]})
    assert mix.mean == pytest.approx(1.5)
    assert as_distribution(7) == Fixed(value=7.0)
    with pytest.raises(ValidationError):
        adapter.validate_python({"distribution": "weibull", "k": 1})
    with pytest.raises(ValidationError):
        adapter.validate_python({"distribution": "lognormal", "median": -1, "sigma": 1})
    with pytest.raises(ValidationError, match="same length"):
        Mixture(components=(Fixed(value=1),), weights=(1.0, 2.0))
    assert Empirical(values=(3.0, 1.0, 2.0)).values == (1.0, 2.0, 3.0)
