"""The fixed-size sample the search and the held-out comparisons simulate against.

The scenario's direct estimates read every run, but a simulate-and-compare
search that simulates as many runs as the traces hold, and folds fitted on
all runs, grow with them. So one stratified
random sample of the runs is drawn once per calibration (:func:`draw`): at
most ``per_model`` runs of each model (the only grouping known before any
fit; ``None``: no cap), the same fraction of every stratum of the model
(model x exit category, the folds' strata), so the sample keeps the traces'
mix of models and exits. Within a stratum the runs are drawn without
replacement by ``numpy.random.default_rng(seed)``, a stratum's count the
fraction of its size rounded by largest remainders (ties by stratum order),
so the model's total is its cap exactly. When no model has more runs than
the cap, the sample is every run and no random number is drawn: calibrations
of traces that small are what they were without a sample.

The folds are dealt over the sample: each fold's world is fitted (direct
estimates and search) on the sample's other folds and the verdict and the
ladder compare the fold's runs with its simulation; the final scenario's
direct estimates read every run, its clusters and search the sample
(:mod:`sim.calibration.pipeline`).

:func:`loss_error` is the search's own sampling error: the bootstrap
standard error of its loss at the adjustment found, from the sample of runs
(with the finite-population correction ``1 - n / N``: 0 when the sample is
every run) and from its simulated runs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

PER_MODEL = 2000
"""Default cap on the sampled runs of each model."""
BOOTSTRAP = 200
"""Resamples of :func:`loss_error`."""


def draw(models: np.ndarray, categories: np.ndarray, per_model: int | None,
         seed: int) -> np.ndarray:
    """A boolean mask over the runs: those in the sample (see the module
    docstring); all True when no model has more than ``per_model`` runs."""
    n = len(models)
    models = np.asarray(models, dtype=object).astype(str)
    keep = np.ones(n, dtype=bool)
    if per_model is None:
        return keep
    names, counts = np.unique(models, return_counts=True)
    if not (counts > per_model).any():
        return keep
    rng = np.random.default_rng(seed)
    strata = np.char.add(np.char.add(models.astype(str), "\x00"),
                         np.asarray(categories, dtype=object).astype(str))
    for name, count in zip(names, counts, strict=True):
        if count <= per_model:
            continue
        cells = sorted(set(strata[models == name]))
        sizes = np.array([int((strata == c).sum()) for c in cells])
        quota = sizes * per_model / count
        take = np.floor(quota).astype(np.int64)
        short = per_model - int(take.sum())
        order = sorted(range(len(cells)), key=lambda i: (-(quota[i] - take[i]), i))
        for i in order[:short]:
            take[i] += 1
        for cell, k in zip(cells, take, strict=True):
            members = np.flatnonzero(strata == cell)
            chosen = rng.choice(members.size, size=int(k), replace=False)
            keep[members] = False
            keep[members[np.sort(chosen)]] = True
    return keep


def loss_error(loss: Callable[[np.ndarray, np.ndarray], float], n_real: int, n_sim: int,
               population: int, seed: int, draws: int = BOOTSTRAP) -> dict[str, float]:
    """Bootstrap standard errors of ``loss(real_positions, sim_positions)``
    (positions into the sampled runs and the simulated runs): ``runs`` from
    resampling the ``n_real`` sampled runs of a ``population`` (finite-
    population corrected: 0 when the sample is the population), ``simulation``
    from resampling the ``n_sim`` simulated runs, ``total`` the two combined
    (independent: root of the sum of squares)."""
    rng = np.random.default_rng(seed)
    every_real, every_sim = np.arange(n_real), np.arange(n_sim)
    fpc = max(0.0, 1.0 - n_real / population) if population > 0 else 0.0
    runs = [loss(rng.integers(0, n_real, n_real), every_sim) for _ in range(draws)] if fpc else []
    sims = [loss(every_real, rng.integers(0, n_sim, n_sim)) for _ in range(draws)]
    se_runs = float(np.std(runs, ddof=1)) * np.sqrt(fpc) if runs else 0.0
    se_sim = float(np.std(sims, ddof=1))
    return {"runs": se_runs, "simulation": se_sim, "total": float(np.hypot(se_runs, se_sim))}
