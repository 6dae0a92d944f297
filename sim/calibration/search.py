"""Simulate and compare: the search over what direct estimates cannot give.

Steps are need plus wasted steps (messages, errors, loops), and a run's need
is seen only through its productive steps, cut short when a limit or the
task-giver ends the run. So the need's location and spread (for every class
alike: :class:`~sim.calibration.build.Adjustment`) and the extra work of an
unsolvable task are chosen by simulating the scenario and comparing it with
the fitted runs: Nelder-Mead (``scipy.optimize.minimize``) on

    loss = KS(steps) + KS(prompt tokens) + KS(output tokens) + KS(cost)
           + TV(exit mix) + |resolved share difference|

per run (KS distances two-sample, cost only where recorded, resolved only
where known). Every evaluation simulates the same tasks with the same random
streams (common random numbers: one root seed), so the loss is a
deterministic function of the parameters and differences between evaluations
come from the parameters alone.

The search stops when its simplex's losses can no longer be told apart from
sampling error: ``fatol`` is the loss's noise floor at the sizes compared and
``xatol`` the matching move of the parameters
(:mod:`sim.calibration.tolerance`), at most ``max_evaluations`` simulations.
It starts from the direct estimates (all zero) or, given ``start``, from
there with a first simplex of the given ``steps`` (the final fit starts from
its folds' optima: :func:`warm_start`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim.calibration.build import Adjustment
from sim.calibration.exits import mix, total_variation
from sim.calibration.simulate import Sample


def ks(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov distance (finite values only): the
    statistic of ``scipy.stats.ks_2samp``, computed as it computes it (the
    two empirical CDFs at every pooled value, and its exact method's rounding
    for samples of at most :data:`KS_EXACT_N`), without its p-value, which the
    loss does not use and which costs more than the statistic."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if a.size == 0 or b.size == 0:
        return 0.0
    a, b = np.sort(a), np.sort(b)
    pooled = np.concatenate([a, b])
    diffs = (np.searchsorted(a, pooled, side="right") / a.size
             - np.searchsorted(b, pooled, side="right") / b.size)
    d = float(max(np.clip(-diffs[np.argmin(diffs)], 0, 1), diffs[np.argmax(diffs)]))
    if max(a.size, b.size) <= KS_EXACT_N:  # ks_2samp's exact method rounds it to a grid
        lcm = (a.size // math.gcd(a.size, b.size)) * b.size
        d = int(np.round(d * lcm)) * 1.0 / lcm
    return d


KS_EXACT_N = 10_000
"""Largest sample ``ks_2samp`` (method ``auto``) takes exactly, its statistic
then rounded to a multiple of ``1 / lcm(n, m)`` (``scipy.stats._stats_py.MAX_AUTO_N``)."""


def loss(real: Sample, sim: Sample) -> float:
    """The search's loss (see the module docstring)."""
    total = ks(real.steps, sim.steps) + ks(real.prompt, sim.prompt) + ks(real.output,
                                                                         sim.output)
    if np.isfinite(real.cost).any():
        total += ks(real.cost, sim.cost)
    total += total_variation(mix(list(real.category)), mix(list(sim.category)))
    known = np.isfinite(real.resolved)
    if known.any():
        total += abs(float(real.resolved[known].mean()) - float(sim.resolved.mean()))
    return total


@dataclass
class SearchResult:
    """The adjustment found, its loss, the loss before the search and the
    number of simulations it took; ``sim``: the simulated runs of the
    adjustment found (for the search's own sampling error,
    :func:`sim.calibration.sample.loss_error`; None once dropped); ``error``:
    that sampling error when measured, and ``sampled`` the runs searched
    against; ``fatol`` and ``xatol`` the tolerances it stopped at (the loss's
    noise floor and the matching parameter move; None: no search ran),
    ``simulated`` the runs of each simulation and ``start`` the warm start's
    parameters (None: the direct estimates)."""

    adjustment: Adjustment
    loss: float
    start_loss: float
    evaluations: int
    sim: Sample | None = None
    error: dict[str, float] | None = None
    sampled: int | None = None
    fatol: float | None = None
    xatol: float | None = None
    simulated: int | None = None
    start: list[float] | None = None


DEFAULT_STEPS = np.array([0.15, -0.25, 0.2])
"""The first simplex's steps from the direct estimates (need shift, log sigma
scale, log unsolvable scale)."""
MIN_STEP = 0.02
"""Smallest first-simplex step of a warm start (log units)."""


def position(a: Adjustment) -> np.ndarray:
    """An adjustment as the search's parameters (need shift, log sigma scale,
    log unsolvable scale)."""
    return np.array([a.need_shift, math.log(a.sigma_scale), math.log(a.unsolvable_scale)])


def warm_start(found: list[Adjustment]) -> tuple[np.ndarray, np.ndarray]:
    """A start and first-simplex steps from earlier searches' optima (the
    folds'): their coordinate-wise median, and per coordinate their largest
    distance from it (at least :data:`MIN_STEP`, at most the default step,
    in the default step's direction)."""
    points = np.array([position(a) for a in found])
    centre = np.median(points, axis=0)
    spread = np.abs(points - centre).max(axis=0)
    steps = np.sign(DEFAULT_STEPS) * np.clip(spread, MIN_STEP, np.abs(DEFAULT_STEPS))
    return centre, steps


def search(real: Sample, simulate: Callable[[Adjustment], Sample], *,
           max_evaluations: int = 45, progress: bool = True,
           start: np.ndarray | None = None, steps: np.ndarray | None = None) -> SearchResult:
    """Minimise :func:`loss` over (need shift, log sigma scale, log unsolvable
    scale) from ``start`` (None: the direct estimates, all zero; see the module
    docstring), with ``simulate`` giving the simulated runs of an adjustment
    (always on the same random streams). When no step of the first simplex
    changes the loss (a world whose endings are fitted directly and have no
    frailty: the adjustment acts on nothing), the start stands after those
    four simulations."""
    from sim.progress import progress_bar

    seen: dict[tuple[float, ...], float] = {}
    best: list[Sample] = []  # the simulation of the first point with the lowest loss
    bar = progress_bar(total=max(1, max_evaluations), desc="searching", unit="simulation",
                       disable=not progress)
    try:
        return _search(real, simulate, max_evaluations, start, steps, seen, best, bar)
    finally:
        bar.close()


def _search(real: Sample, simulate: Callable[[Adjustment], Sample], max_evaluations: int,
            start: np.ndarray | None, steps: np.ndarray | None,
            seen: dict[tuple[float, ...], float], best: list[Sample], bar: Any) -> SearchResult:
    """:func:`search`'s work, counting each new simulation on ``bar``."""
    from scipy.optimize import minimize

    from sim.calibration.tolerance import noise_floor, x_tolerance

    def adjustment(x: np.ndarray) -> Adjustment:
        return Adjustment(need_shift=float(x[0]), sigma_scale=math.exp(float(x[1])),
                          unsolvable_scale=math.exp(float(x[2])))

    def objective(x: np.ndarray) -> float:
        key = tuple(round(float(v), 9) for v in x)
        if key not in seen:
            sim = simulate(adjustment(x))
            value = loss(real, sim)
            if not seen or value < min(seen.values()):
                best[:] = [sim]
            seen[key] = value
            bar.set_postfix_str(f"best loss {min(seen.values()):.4f}", refresh=False)
            bar.update(1)
        return seen[key]

    x0 = np.zeros(3) if start is None else np.asarray(start, dtype=float)
    step = DEFAULT_STEPS if steps is None else np.asarray(steps, dtype=float)
    start_loss = objective(x0)
    if max_evaluations <= 1:
        return SearchResult(adjustment(x0), start_loss, start_loss, len(seen), best[0])
    simplex = np.vstack([x0, x0 + np.diag(step)])
    changes = np.array([objective(x) - start_loss for x in simplex[1:]])
    if not changes.any():
        # nothing the search changes moves the loss (endings fitted directly,
        # no frailty): the start stands
        return SearchResult(adjustment(x0), start_loss, start_loss, len(seen), best[0])
    fatol = noise_floor({"steps": real.steps, "prompt": real.prompt, "output": real.output,
                         "cost": real.cost}, real.category, real.resolved, best[0].n)
    xatol = x_tolerance(fatol, step, changes)
    minimize(objective, x0, method="Nelder-Mead",
             options={"initial_simplex": simplex, "maxfev": max_evaluations,
                      "xatol": xatol, "fatol": fatol})
    found = min(seen, key=seen.__getitem__)
    return SearchResult(adjustment(np.array(found)), seen[found], start_loss, len(seen), best[0],
                        fatol=fatol, xatol=xatol, simulated=best[0].n,
                        start=None if start is None else [float(v) for v in x0])
