"""Task difficulty: the hidden number of productive steps a task needs.

Each difficulty spec of :mod:`sim.world.params` carries its distribution
object (``spec.dist``, :mod:`sim.world.distributions`); this module applies
the spec's rounding and floor to it and gives the exact CDF of the result.
"""

from __future__ import annotations

from sim.world.params import MAX_NEED, ChoiceDifficulty, FixedDifficulty, LognormalDifficulty
from sim.world.streams import Draws

Spec = LognormalDifficulty | FixedDifficulty | ChoiceDifficulty


def sample_need(spec: Spec, draws: Draws) -> int:
    """Productive steps one task needs (seed 001: ``max(3, round(lognormal(2.3, 0.6)))``;
    a lognormal draw above ``MAX_NEED`` is cut to it, so no ``mu`` overflows).
    Draws one standard normal from ``draws`` for the lognormal, one uniform for
    choice, none for fixed."""
    if spec.distribution == "lognormal":
        need = spec.dist.sample(draws)  # inf when exp overflows (a huge mu)
        return max(spec.min, MAX_NEED) if need >= MAX_NEED else max(spec.min, round(need))
    return int(spec.dist.sample(draws))


def continuous_mean(spec: Spec) -> float:
    """Mean of the distribution before rounding and the floor: ``exp(mu + sigma^2/2)``."""
    return spec.dist.mean


def need_cdf(spec: Spec, k: int) -> float:
    """P(need <= k) for the rounded, floored distribution (exact)."""
    if spec.distribution != "lognormal":
        return spec.dist.cdf(k)
    if k < spec.min:
        return 0.0
    if k >= max(spec.min, MAX_NEED):
        return 1.0
    # round() sends exp(X) in [k + 0.5, k + 1.5) to k + 1, ties aside (measure zero)
    return spec.dist.cdf(k + 0.5)
