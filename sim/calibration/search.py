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
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sim.calibration.build import Adjustment
from sim.calibration.exits import mix, total_variation
from sim.calibration.simulate import Sample


def ks(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov distance (finite values only)."""
    from scipy.stats import ks_2samp

    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if a.size == 0 or b.size == 0:
        return 0.0
    return float(ks_2samp(a, b).statistic)


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
    against."""

    adjustment: Adjustment
    loss: float
    start_loss: float
    evaluations: int
    sim: Sample | None = None
    error: dict[str, float] | None = None
    sampled: int | None = None


def search(real: Sample, simulate: Callable[[Adjustment], Sample], *,
           max_evaluations: int = 45, progress: bool = True) -> SearchResult:
    """Minimise :func:`loss` over (need shift, log sigma scale, log unsolvable
    scale) from the direct estimates (all zero), with ``simulate`` giving the
    simulated runs of an adjustment (always on the same random streams).
    When no step of the first simplex changes the loss (a world whose endings
    are fitted directly and have no frailty: the adjustment acts on nothing),
    the direct estimates stand after those four simulations."""
    from scipy.optimize import minimize

    seen: dict[tuple[float, ...], float] = {}
    best: list[Sample] = []  # the simulation of the first point with the lowest loss

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
            if progress:
                print(f"\rsearching: {len(seen)} simulations, best loss {min(seen.values()):.4f}",
                      end="", file=sys.stderr, flush=True)
        return seen[key]

    x0 = np.zeros(3)
    start = objective(x0)
    if max_evaluations <= 1:
        return SearchResult(adjustment(x0), start, start, len(seen), best[0])
    simplex = np.array([x0, [0.15, 0, 0], [0, -0.25, 0], [0, 0, 0.2]])
    if all(objective(x) == start for x in simplex[1:]):
        # nothing the search changes moves the loss (endings fitted directly,
        # no frailty): the direct estimates stand
        if progress:
            print(file=sys.stderr)
        return SearchResult(adjustment(x0), start, start, len(seen), best[0])
    minimize(objective, x0, method="Nelder-Mead",
             options={"initial_simplex": simplex, "maxfev": max_evaluations,
                      "xatol": 0.01, "fatol": 1e-4})
    if progress:
        print(file=sys.stderr)
    found = min(seen, key=seen.__getitem__)
    return SearchResult(adjustment(np.array(found)), seen[found], start, len(seen), best[0])
