"""When a simulate-and-compare search stops, and how many runs it simulates.

**The loss's noise floor.** The search's loss (:func:`sim.calibration.search.loss`)
is a sum of distances between the ``n`` runs searched against and ``m``
simulated runs: two-sample KS distances on steps, prompt tokens, output tokens
and cost, the total-variation distance of the exit mixes and the gap of the
resolved shares. Had the runs come from the simulated world itself, each term
would still be nonzero, and would vary from one sample of runs to another:

- a KS distance by ``sd(K) * sqrt(1 / n + 1 / m)``, ``K`` the Kolmogorov
  distribution (``scipy.stats.kstwobign``, sd 0.2603; ``n`` the runs with a
  finite value of that metric);
- the exit mixes' distance by the standard deviation of
  :func:`sim.calibration.verdict.tv_null` (multinomial draws of both mixes
  from the runs' mix, :data:`TV_DRAWS` of them on a fixed seed);
- the resolved gap by ``sqrt(p (1 - p) (1 / n + 1 / m))``.

:func:`noise_floor` is the square root of the sum of these variances: the
standard deviation of the loss that sampling alone makes (the terms taken as
independent; they are positively correlated, steps driving tokens and cost,
so the true figure is larger and this one stops the search no earlier than
the lead's rule asks). Two adjustments whose losses differ by less cannot be
told apart with these runs, so it is the search's ``fatol``. The matching
``xatol`` (:func:`x_tolerance`) is the move of the parameters that changes the
loss by that much at the steepest slope the first simplex shows (the search
stops when its simplex is that small and its losses are that close), kept
within [:data:`XATOL_MIN`, :data:`XATOL_MAX`] (log units).

**Runs per evaluation** (:func:`search_runs`): ``RATIO`` (4) simulated runs per
run searched against, at least :data:`MIN_RUNS` and at most :data:`MAX_RUNS`.
With common random numbers the simulation's sampling error is one error shared
by every evaluation: it moves the optimum as a real sample of ``m`` runs would,
adding ``n / m`` to the variance of the fitted adjustment (its standard error
grows by ``sqrt(1 + n / m)``). At ``m = 4 n`` that is 25% of the variance (12%
of the standard error); at the cap with the default sample (2,000 runs per
model: 1,600 in a 5-fold search, 2,000 in the final one) it is 40-50%
(18-22%), still smaller than the real sample's own error, and the verdict
counts it (its cap on the fit's variance uses ``1 / m``).
"""

from __future__ import annotations

import math

import numpy as np

KOLMOGOROV_SD = 0.260332871482069
"""Standard deviation of the Kolmogorov distribution (``scipy.stats.kstwobign.std()``)."""
TV_DRAWS = 2000
"""Multinomial draws of the exit mixes' null distance."""
TV_SEED = 20261202
"""Seed of those draws (fixed: the floor is a function of the sample sizes and mix)."""
XATOL_MIN = 0.01
"""Smallest ``xatol`` (log units; the search's tolerance before the noise floor)."""
XATOL_MAX = 0.1
"""Largest ``xatol`` (log units; below the first simplex's smallest step, 0.15)."""
RATIO = 4
"""Simulated runs per run searched against."""
MIN_RUNS = 1000
"""Fewest simulated runs per search evaluation."""
MAX_RUNS = 4000
"""Most simulated runs per search evaluation."""


def search_runs(sampled: int) -> int:
    """Simulated runs per search evaluation against ``sampled`` runs (see the
    module docstring)."""
    return min(MAX_RUNS, max(MIN_RUNS, RATIO * sampled))


def noise_floor(values: dict[str, np.ndarray], categories: np.ndarray, resolved: np.ndarray,
                m: int) -> float:
    """The loss's standard deviation under sampling alone (see the module
    docstring): ``values`` the per-run metrics compared by KS (their finite
    values counted), ``categories`` the runs' exit categories, ``resolved``
    1/0/NaN per run, ``m`` simulated runs."""
    from sim.calibration.exits import CATEGORIES
    from sim.calibration.verdict import tv_null

    variance = 0.0
    for v in values.values():
        n = int(np.isfinite(np.asarray(v, dtype=float)).sum())
        if n:
            variance += KOLMOGOROV_SD ** 2 * (1.0 / n + 1.0 / m)
    n = len(categories)
    if n:
        counts = np.array([float(np.sum(categories == c)) for c in CATEGORIES])
        draws = tv_null(counts, n, m, 0.0, np.random.default_rng(TV_SEED), TV_DRAWS)
        variance += float(np.var(draws, ddof=1))
    known = np.asarray(resolved, dtype=float)
    known = known[np.isfinite(known)]
    if known.size:
        p = float(known.mean())
        variance += p * (1 - p) * (1.0 / known.size + 1.0 / m)
    return math.sqrt(variance)


def x_tolerance(fatol: float, steps: np.ndarray, changes: np.ndarray) -> float:
    """The ``xatol`` matching ``fatol``: ``fatol`` over the steepest slope
    ``|change| / |step|`` of the first simplex's edges, within
    [:data:`XATOL_MIN`, :data:`XATOL_MAX`] (:data:`XATOL_MAX` when the loss
    did not move)."""
    lengths = np.abs(np.asarray(steps, dtype=float))
    slopes = np.abs(np.asarray(changes, dtype=float)) / np.where(lengths > 0, lengths, np.inf)
    steepest = float(slopes.max()) if slopes.size else 0.0
    if steepest <= 0:
        return XATOL_MAX
    return min(XATOL_MAX, max(XATOL_MIN, fatol / steepest))
