"""The verdict's power at the sizes it was judged on.

**Power against a shift** (:func:`shift_power`, exact for the verdict as it
is run): the verdict's null replicates (:class:`sim.calibration.verdict.FoldNull`:
per fold, samples of the held-out size drawn from the fold's own world) are
judged again with one metric of every drawn run multiplied by ``1 + shift``
(a 10% change of each run's cost, say: of the mean cost too), the other
metrics and the exit mix as drawn. Each shifted replicate's fold distances
are referred to the fold's unshifted replicates, combined over folds and
adjusted over the family exactly as the verdict does; the power is the share
of shifted replicates rejected at :data:`~sim.calibration.verdict.ALPHA`. It
reuses the samples the verdict drew: no simulation is run.

**The distance detectable** (:func:`detectable`, an approximation):

the folds, their simulations and their held-out comparisons use the
stratified sample (:mod:`sim.calibration.sample`), so the verdict's power is
set by the sample's size, not by the traces'. :func:`detectable` states it per
per-run metric: the smallest KS distance between the real runs and the fitted
world that the verdict rejects with probability :data:`POWER`.

Each fold ``k`` is referred to the Kolmogorov distribution at its effective
size ``n_k`` (held-out runs, simulated runs and the fit's own error,
:func:`sim.calibration.verdict.ks_p_value`), read back from its 5% critical
value: ``n_k = (kolmogi(0.05) / critical_k)^2``. Under a misfit of distance
``D`` in one metric, fold ``k`` shows ``D + e_k`` with ``e_k`` normal of
variance ``1 / (4 n_k)`` (the largest variance of a difference of two
empirical distribution functions at one point, a quarter of ``1 / n + 1 / m``,
with the fit's variance added). The folds' p-values are combined by Stouffer's
method and the metric is rejected when the combined p-value is at most
``alpha / tests`` (Bonferroni's bound on the verdict's family-wise
adjustment: the misfit alone among ``tests`` tests). The power at ``D``
is the share of :data:`DRAWS` draws rejected (the same draws at every
``D``, so it grows with ``D``) and the distance of :data:`POWER` is found
by bisection. It is an approximation of the verdict's power (the normal
error and the largest variance are conservative for a distance well inside
``(0, 1)``); ``tests/test_calibrate_verdict.py`` measures the real size and
power on known worlds.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import kolmogi, kolmogorov
from scipy.stats import norm

POWER = 0.8
"""The probability of rejection :func:`detectable` solves for."""
DRAWS = 4000
"""Draws of the folds' errors."""


def effective_sizes(criticals: list[float], alpha: float) -> list[float]:
    """Each fold's effective size from its critical KS distance at ``alpha``."""
    return [(float(kolmogi(alpha)) / c) ** 2 for c in criticals if c > 0 and math.isfinite(c)]


def power_at(distance: float, sizes: list[float], alpha: float, tests: int,
             errors: np.ndarray) -> float:
    """The share of ``errors`` (draws x folds, standard normal) for which a
    misfit of ``distance`` in every fold of effective ``sizes`` is rejected."""
    n = np.asarray(sizes, float)
    shown = np.clip(distance + errors / (2.0 * np.sqrt(n)), 0.0, 1.0)
    p = np.clip(kolmogorov(shown * np.sqrt(n)), 1e-300, 1.0 - 1e-16)
    combined = norm.sf(norm.isf(p).sum(axis=1) / math.sqrt(n.size))
    return float((combined <= alpha / tests).mean())


def detectable(sizes: list[float], alpha: float, tests: int, power: float = POWER,
               seed: int = 0) -> float:
    """The smallest KS distance rejected with probability ``power`` (see the
    module docstring; NaN without folds)."""
    if not sizes:
        return math.nan
    errors = np.random.default_rng(seed).standard_normal((DRAWS, len(sizes)))
    low, high = 0.0, 1.0
    for _ in range(40):
        mid = (low + high) / 2
        if power_at(mid, sizes, alpha, tests, errors) >= power:
            high = mid
        else:
            low = mid
    return high


def verdict_power(folds: list, keys: list[str], alpha: float, tests: int
                  ) -> dict[str, float]:
    """``detectable`` per tested metric of a judgement's ``folds``
    (:class:`sim.calibration.verdict.FoldCheck`)."""
    out = {}
    for key in keys:
        sizes = effective_sizes([f.critical[key] for f in folds if key in f.critical], alpha)
        out[key] = detectable(sizes, alpha, tests)
    return out


SHIFT = 0.1
"""The relative change of a per-run metric :func:`shift_power` is reported at."""


def shift_power(nulls: list[Any], family: np.ndarray, key: str, shift: float = SHIFT,
                alpha: float = 0.05) -> float:
    """The verdict's probability of rejecting a world whose runs' ``key``
    (``steps``, ``prompt``, ``output``, ``cost``) is ``1 + shift`` times the
    fitted world's (counts rounded to whole numbers), the rest right (see
    the module docstring); ``nulls`` and ``family`` a judgement's
    (:class:`sim.calibration.verdict.Judgement`). NaN when the verdict has
    no replicates of ``key``."""
    from sim.calibration.verdict import EXITS, adjusted, family_p, ks_rows

    if not nulls or family.size == 0 or not all(key in n.replicates for n in nulls):
        return math.nan
    names = [k for k in nulls[0].replicates if k != EXITS and all(k in n.replicates
                                                                    for n in nulls)] + [EXITS]
    def moved(values: np.ndarray) -> np.ndarray:
        out = values * (1.0 + shift)
        return out if key == "cost" else np.round(out)  # counts stay whole

    shifted = np.column_stack([
        ks_rows(moved(n.world[key]), n.draws[:, :n.n[key]], n.sim[key])
        + (1.0 - 1.0 / n.scale[key]) * n.replicates[key] for n in nulls])
    combined = family_p(nulls, names, observed={key: shifted})
    smallest = np.min(np.column_stack([combined[k] for k in names]), axis=1)
    return float(np.mean([adjusted(float(p), family) <= alpha for p in smallest]))


def shift_powers(nulls: list[Any], family: np.ndarray, keys: list[str], shift: float = SHIFT,
                 alpha: float = 0.05) -> dict[str, float]:
    """:func:`shift_power` of each of ``keys``."""
    return {key: shift_power(nulls, family, key, shift, alpha) for key in keys}
