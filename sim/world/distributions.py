"""Distributions as objects (Ciw's way): each draws from a project stream,
knows its analytic mean, variance and CDF, and fits itself to data.

Every duration or size the world draws goes through one of these:
:class:`Fixed`, :class:`Lognormal`, :class:`Gamma`, :class:`Exponential`,
:class:`Empirical` (observed values, sampled by inverse CDF) and a weighted
:class:`Mixture` of those. They are frozen pydantic models, so a scenario file
spells them directly (``{distribution: lognormal, median: 50, sigma: 1.1}``),
tagged by ``distribution``.

- ``sample(draws)`` takes its randomness from a :class:`~sim.world.streams.Draws`
  stream only, with a fixed number of draws per sample where the kind allows
  (fixed: none; lognormal: one standard normal; exponential and empirical:
  one uniform; a mixture: one uniform to pick a component, then the
  component's); gamma samples by Marsaglia and Tsang's rejection method (a
  normal and a uniform per attempt).
- ``mean`` and ``variance`` are analytic; ``cdf(x)`` is ``P(X <= x)``.
- ``fit(values)`` is the maximum-likelihood estimate, by scipy where scipy has
  the estimator (lognormal, gamma and exponential with the location fixed at
  0); an empirical distribution fits by keeping the values; a fixed one by
  their mean (the least-squares constant; a point mass has no likelihood to
  maximise unless all values are equal, and then the mean is that value); a
  mixture of lognormals by expectation maximisation on the logarithms.

Units are the caller's: tokens for sizes, seconds for durations.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from functools import cached_property
from itertools import accumulate
from typing import TYPE_CHECKING, Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sim.world.streams import Draws

_SQRT2 = math.sqrt(2.0)


class BaseDistribution(BaseModel):
    """What every distribution provides: ``sample(draws)``, ``mean``,
    ``variance``, ``cdf(x)`` and the class method ``fit(values)``."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    if TYPE_CHECKING:  # every kind defines these; declared for the type checker only (an
        # annotation would be a pydantic field, and Exponential's mean is one)
        def sample(self, draws: Draws) -> float: ...
        @property
        def mean(self) -> float: ...
        @property
        def variance(self) -> float: ...
        def cdf(self, x: float) -> float: ...


def _values(values: Sequence[float] | np.ndarray, *, positive: bool = False) -> np.ndarray:
    """``values`` as a finite float array with at least one value (all > 0 when
    ``positive``), or a ValueError saying what is wrong."""
    x = np.asarray(values, dtype=float).ravel()
    if x.size == 0:
        raise ValueError("no values to fit")
    if not np.all(np.isfinite(x)):
        raise ValueError("values must be finite")
    if positive and np.any(x <= 0):
        raise ValueError(f"values must be > 0, got {x.min():g}")
    return x


class Fixed(BaseDistribution):
    """Always ``value``."""

    distribution: Literal["fixed"] = "fixed"
    value: float = Field(ge=0, description="the value every draw takes")

    def sample(self, draws: Draws) -> float:
        """``value`` (takes no draw)."""
        return self.value

    @property
    def mean(self) -> float:
        """``value``."""
        return self.value

    @property
    def variance(self) -> float:
        """0."""
        return 0.0

    def cdf(self, x: float) -> float:
        """1 from ``value`` on, else 0."""
        return 1.0 if x >= self.value else 0.0

    @classmethod
    def fit(cls, values: Sequence[float]) -> Fixed:
        """The mean of ``values`` (the least-squares constant)."""
        return cls(value=float(_values(values).mean()))


class Lognormal(BaseDistribution):
    """``median * exp(sigma * Z)``, Z standard normal: log X is normal with
    mean ``log(median)`` and standard deviation ``sigma``."""

    distribution: Literal["lognormal"] = "lognormal"
    median: float = Field(gt=0, description="median (exp of the mean of log X)")
    sigma: float = Field(ge=0, description="standard deviation of log X")

    @cached_property
    def log_median(self) -> float:
        """``log(median)``, the mean of log X."""
        return math.log(self.median)

    def sample(self, draws: Draws) -> float:
        """One value from one standard normal draw."""
        return math.exp(self.log_median + self.sigma * draws.normal())

    @property
    def mean(self) -> float:
        """``median * exp(sigma^2 / 2)``."""
        return self.median * math.exp(self.sigma ** 2 / 2)

    @property
    def variance(self) -> float:
        """``(exp(sigma^2) - 1) * median^2 * exp(sigma^2)``."""
        s2 = self.sigma ** 2
        return math.expm1(s2) * self.median ** 2 * math.exp(s2)

    def cdf(self, x: float) -> float:
        """``Phi((log x - log median) / sigma)`` (a step at the median when sigma is 0)."""
        if x <= 0:
            return 0.0
        if self.sigma == 0:
            return 1.0 if x >= self.median else 0.0
        return 0.5 * (1 + math.erf((math.log(x) - math.log(self.median)) / (self.sigma * _SQRT2)))

    @classmethod
    def fit(cls, values: Sequence[float]) -> Lognormal:
        """Maximum likelihood (``scipy.stats.lognorm.fit`` with location 0);
        values must be > 0."""
        from scipy import stats

        x = _values(values, positive=True)
        if np.ptp(x) == 0:
            return cls(median=float(x[0]), sigma=0.0)
        sigma, _, scale = stats.lognorm.fit(x, floc=0)
        return cls(median=float(scale), sigma=float(sigma))


class Gamma(BaseDistribution):
    """Gamma with ``shape`` k and ``scale`` theta: mean k theta."""

    distribution: Literal["gamma"] = "gamma"
    shape: float = Field(gt=0, description="shape k")
    scale: float = Field(gt=0, description="scale theta (the value's unit)")

    def sample(self, draws: Draws) -> float:
        """One value by Marsaglia and Tsang's method (boosted for shape < 1)."""
        return self.scale * _unit_gamma(self.shape, draws)

    @property
    def mean(self) -> float:
        """``shape * scale``."""
        return self.shape * self.scale

    @property
    def variance(self) -> float:
        """``shape * scale^2``."""
        return self.shape * self.scale ** 2

    def cdf(self, x: float) -> float:
        """The regularised lower incomplete gamma function at ``x / scale``."""
        from scipy.special import gammainc

        return float(gammainc(self.shape, x / self.scale)) if x > 0 else 0.0

    @classmethod
    def fit(cls, values: Sequence[float]) -> Gamma:
        """Maximum likelihood (``scipy.stats.gamma.fit`` with location 0);
        values must be > 0 and not all equal."""
        from scipy import stats

        x = _values(values, positive=True)
        if np.ptp(x) == 0:
            raise ValueError("all values are equal: a gamma distribution cannot fit them")
        shape, _, scale = stats.gamma.fit(x, floc=0)
        return cls(shape=float(shape), scale=float(scale))


def _unit_gamma(k: float, draws: Draws) -> float:
    """A Gamma(k, 1) draw (Marsaglia & Tsang 2000; for k < 1 the draw for k + 1
    times ``U^(1/k)``)."""
    if k < 1.0:
        return _unit_gamma(k + 1.0, draws) * (1.0 - draws.uniform()) ** (1.0 / k)
    d = k - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        z = draws.normal()
        v = 1.0 + c * z
        if v <= 0.0:
            continue
        v = v * v * v
        u = 1.0 - draws.uniform()  # in (0, 1]
        if math.log(u) < 0.5 * z * z + d - d * v + d * math.log(v):
            return d * v


class Exponential(BaseDistribution):
    """Exponential with mean ``mean`` (memoryless)."""

    distribution: Literal["exponential"] = "exponential"
    mean: float = Field(gt=0, description="the mean (1 / rate)")

    def sample(self, draws: Draws) -> float:
        """``-mean * log(1 - U)`` from one uniform draw (inverse CDF)."""
        return -self.mean * math.log1p(-draws.uniform())

    @property
    def variance(self) -> float:
        """``mean^2``."""
        return self.mean ** 2

    def cdf(self, x: float) -> float:
        """``1 - exp(-x / mean)``."""
        return -math.expm1(-x / self.mean) if x > 0 else 0.0

    @classmethod
    def fit(cls, values: Sequence[float]) -> Exponential:
        """Maximum likelihood (``scipy.stats.expon.fit`` with location 0: the
        sample mean); values must be >= 0 with a positive mean."""
        from scipy import stats

        x = _values(values)
        if np.any(x < 0) or x.mean() <= 0:
            raise ValueError("values must be >= 0 with a positive mean")
        _, scale = stats.expon.fit(x, floc=0)
        return cls(mean=float(scale))


class Empirical(BaseDistribution):
    """The observed ``values``, each with probability 1/n; sampled by the
    inverse of the empirical CDF (one uniform draw picks value
    ``floor(U n)`` of the sorted values)."""

    distribution: Literal["empirical"] = "empirical"
    values: tuple[float, ...] = Field(min_length=1, description="observed values (sorted "
                                                                "on loading)")

    @field_validator("values")
    @classmethod
    def _sorted(cls, values: tuple[float, ...]) -> tuple[float, ...]:
        if not all(math.isfinite(v) for v in values):
            raise ValueError("values must be finite")
        return tuple(sorted(values))

    def sample(self, draws: Draws) -> float:
        """One of the values, by inverse CDF from one uniform draw."""
        values = self.values
        return values[min(int(draws.uniform() * len(values)), len(values) - 1)]

    @property
    def mean(self) -> float:
        """The mean of the values."""
        return math.fsum(self.values) / len(self.values)

    @property
    def variance(self) -> float:
        """The variance of the values (dividing by n: the distribution's own)."""
        m = self.mean
        return math.fsum((v - m) ** 2 for v in self.values) / len(self.values)

    def cdf(self, x: float) -> float:
        """The share of values <= ``x``."""
        return bisect_right(self.values, x) / len(self.values)

    @classmethod
    def fit(cls, values: Sequence[float]) -> Empirical:
        """The values themselves (the nonparametric maximum-likelihood estimate)."""
        return cls(values=tuple(float(v) for v in np.sort(_values(values))))


Component = Annotated[Fixed | Lognormal | Gamma | Exponential | Empirical,
                      Field(discriminator="distribution")]


class Mixture(BaseDistribution):
    """Component ``k`` with probability ``weights[k] / sum(weights)``."""

    distribution: Literal["mixture"] = "mixture"
    components: tuple[Component, ...] = Field(min_length=1, description="the distributions "
                                                                         "mixed")
    weights: tuple[float, ...] = Field(min_length=1, description="relative share of each "
                                                                 "component")

    @model_validator(mode="after")
    def _matching(self) -> Mixture:
        if len(self.components) != len(self.weights):
            raise ValueError(f"components ({len(self.components)}) and weights "
                             f"({len(self.weights)}) must have the same length")
        if min(self.weights) < 0 or sum(self.weights) <= 0:
            raise ValueError("weights must be >= 0 with a positive sum")
        return self

    @cached_property
    def probabilities(self) -> tuple[float, ...]:
        """The weights normalised to sum to 1."""
        total = math.fsum(self.weights)
        return tuple(w / total for w in self.weights)

    @cached_property
    def cumulative(self) -> tuple[float, ...]:
        """Cumulative probabilities, the last exactly 1."""
        cum = list(accumulate(self.probabilities))
        cum[-1] = 1.0
        return tuple(cum)

    def pick(self, u: float) -> int:
        """The component a uniform draw ``u`` in [0, 1) selects."""
        cum = self.cumulative
        return min(bisect_right(cum, u), len(cum) - 1)

    def sample(self, draws: Draws) -> float:
        """One uniform draw picks a component; the component draws the value."""
        return self.components[self.pick(draws.uniform())].sample(draws)

    @property
    def mean(self) -> float:
        """``sum_k p_k mean_k``."""
        return math.fsum(p * c.mean for p, c in zip(self.probabilities, self.components,
                                                    strict=True))

    @property
    def variance(self) -> float:
        """``sum_k p_k (variance_k + mean_k^2) - mean^2``."""
        second = math.fsum(p * (c.variance + c.mean ** 2)
                           for p, c in zip(self.probabilities, self.components, strict=True))
        return max(0.0, second - self.mean ** 2)

    def cdf(self, x: float) -> float:
        """``sum_k p_k F_k(x)``."""
        return math.fsum(p * c.cdf(x) for p, c in zip(self.probabilities, self.components,
                                                      strict=True))

    @classmethod
    def fit(cls, values: Sequence[float], k: int = 2, *, iterations: int = 500,
            tol: float = 1e-10) -> Mixture:
        """A mixture of ``k`` lognormals by maximum likelihood: expectation
        maximisation on ``log(values)`` (a Gaussian mixture), started from the
        quantiles; components sorted by median. Values must be > 0."""
        x = np.log(_values(values, positive=True))
        n = x.size
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if k == 1 or n < 2 * k or np.ptp(x) == 0:
            single = Lognormal.fit(np.exp(x))
            return cls(components=(single,), weights=(1.0,))
        mu = np.quantile(x, (np.arange(k) + 0.5) / k)
        sd = np.full(k, max(x.std(), 1e-6) / k)
        w = np.full(k, 1.0 / k)
        floor = max(1e-3 * x.std(), 1e-9)
        previous = -np.inf
        for _ in range(iterations):
            log_p = (np.log(w) - np.log(sd) - 0.5 * ((x[:, None] - mu) / sd) ** 2)
            top = log_p.max(axis=1, keepdims=True)
            log_total = top + np.log(np.exp(log_p - top).sum(axis=1, keepdims=True))
            r = np.exp(log_p - log_total)
            nk = r.sum(axis=0) + 1e-300
            w = nk / n
            mu = (r * x[:, None]).sum(axis=0) / nk
            sd = np.maximum(np.sqrt((r * (x[:, None] - mu) ** 2).sum(axis=0) / nk), floor)
            loglik = float(log_total.sum())
            if loglik - previous < tol * max(1.0, abs(loglik)):
                break
            previous = loglik
        order = np.argsort(mu)
        return cls(components=tuple(Lognormal(median=float(np.exp(mu[i])), sigma=float(sd[i]))
                                    for i in order),
                   weights=tuple(float(w[i]) for i in order))


Distribution = Annotated[Fixed | Lognormal | Gamma | Exponential | Empirical | Mixture,
                         Field(discriminator="distribution")]
"""Any distribution, tagged by ``distribution`` in a scenario file."""

KINDS: dict[str, type[BaseDistribution]] = {"fixed": Fixed, "lognormal": Lognormal, "gamma": Gamma,
                                 "exponential": Exponential, "empirical": Empirical,
                                 "mixture": Mixture}


def as_distribution(value: float | BaseDistribution) -> BaseDistribution:
    """``value`` as a distribution: a number is :class:`Fixed` at that number."""
    if isinstance(value, BaseDistribution):
        return value
    return Fixed(value=float(value))
