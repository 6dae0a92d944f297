"""Task difficulty: the hidden number of productive steps a task needs.

Distribution objects know their analytic mean (Ciw's style), so tests can
check samplers against theory.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from itertools import accumulate

from sim.world.params import MAX_NEED, ChoiceDifficulty, FixedDifficulty, LognormalDifficulty
from sim.world.streams import Draws

Spec = LognormalDifficulty | FixedDifficulty | ChoiceDifficulty


def sample_need(spec: Spec, draws: Draws) -> int:
    """Productive steps one task needs (seed 001: ``max(3, round(lognormal(2.3, 0.6)))``;
    a lognormal draw above ``MAX_NEED`` is cut to it, so no ``mu`` overflows).
    Draws one standard normal from ``draws`` for the lognormal, one uniform for
    choice, none for fixed."""
    if spec.distribution == "fixed":
        return spec.steps
    if spec.distribution == "choice":
        cumulative = _cumulative(spec)
        k = bisect_right(cumulative, draws.uniform() * cumulative[-1])
        return spec.values[min(k, len(spec.values) - 1)]
    log_need = spec.mu + spec.sigma * draws.normal()
    if log_need >= _LOG_MAX:
        return max(spec.min, MAX_NEED)
    return max(spec.min, round(math.exp(log_need)))


_LOG_MAX = math.log(MAX_NEED)


def continuous_mean(spec: Spec) -> float:
    """Mean of the distribution before rounding and the floor: ``exp(mu + sigma^2/2)``."""
    if spec.distribution == "fixed":
        return float(spec.steps)
    if spec.distribution == "choice":
        return sum(v * w for v, w in zip(spec.values, spec.weights, strict=True)) / sum(
            spec.weights)
    return math.exp(spec.mu + spec.sigma ** 2 / 2)


def need_cdf(spec: Spec, k: int) -> float:
    """P(need <= k) for the rounded, floored distribution (exact)."""
    if spec.distribution == "fixed":
        return 1.0 if k >= spec.steps else 0.0
    if spec.distribution == "choice":
        return sum(w for v, w in zip(spec.values, spec.weights, strict=True) if v <= k) / sum(
            spec.weights)
    if k < spec.min:
        return 0.0
    if k >= max(spec.min, MAX_NEED):
        return 1.0
    # round() sends exp(X) in [k + 0.5, k + 1.5) to k + 1, ties aside (measure zero)
    return 0.5 * (1 + math.erf((math.log(k + 0.5) - spec.mu) / (spec.sigma * math.sqrt(2))))


def _cumulative(spec: ChoiceDifficulty) -> list[float]:
    return list(accumulate(spec.weights))
