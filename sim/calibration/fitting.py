"""Fitting one world, and one fold of a cross-validation.

:func:`fit_world` fits a task-class structure to a set of runs: direct
estimates from every run, classes (clusters fitted to the sample, every run
given its most probable one), then the simulate-and-compare search
(:mod:`sim.calibration.search`) against the runs of the sample
(:mod:`sim.calibration.sample`; every run when the sample is all of them),
with ``4 x sampled runs`` (1,000 to 4,000) simulated runs per evaluation unless
:attr:`Settings.search_runs` says. :func:`fit_fold` fits the world of one
fold (on the other folds) and simulates it against the fold's held-out runs
of the sample (the pipeline passes the sample's runs alone: its folds are
the sample's). Both are pure functions of their arguments and seeds, so the
folds of every candidate structure can run in any order, in any process
(:mod:`sim.calibration.jobs`).

When the runs record subagents (``calls.agent``), :func:`fit_world` fits
their fan-out too (:func:`sim.calibration.fanout.fit_fanout`) and puts it in
the world it searches and returns, so the search's, the folds' and the
final simulations spawn children as the recorded runs did. Per-run
quantities compare **a run's own calls** on both sides: a recorded run's
parent calls (:mod:`sim.calibration.data`), a simulated run's own steps,
tokens and cost (its ``TaskRecord``, not ``session_*``). That is what the
harness's per-run budgets count (each child has its own), and so what the
ladder replays; the children's work is compared by the fan-out's own
checks (children per run, :mod:`sim.calibration.fanout`).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim.calibration import folds as fl
from sim.calibration import structure as st
from sim.calibration import tolerance
from sim.calibration.build import Adjustment, scenario_document
from sim.calibration.data import Traces
from sim.calibration.estimate import Estimates, estimate
from sim.calibration.fanout import FanoutFit, fit_fanout
from sim.calibration.sample import loss_error
from sim.calibration.search import SearchResult, loss, search
from sim.calibration.simulate import Sample, from_traces, simulate
from sim.cost.prices import prices_day

MIN_FOLD_SIM = 200
"""Fewest simulated runs per fold."""


@dataclass
class Settings:
    """How each world is fitted: search simulations and runs per evaluation
    (None: four times the sampled fitted runs, 1,000 to 4,000), simulated runs
    per held-out run of the sample (at least ``min_fold_sim`` per fold), runs
    of each fold world's common-random-number simulation for the fit's
    variance (``jackknife_runs``), the scenario's name and prices date, and
    whether to print progress."""

    evaluations: int = 45
    search_runs: int | None = None
    sim_ratio: float = 5.0
    jackknife_runs: int = 1000
    min_fold_sim: int = MIN_FOLD_SIM
    name: str = "calibrated"
    prices_date: str | None = None
    progress: bool = False


@dataclass
class FoldFit:
    """One fold: how many runs were fitted (``fitted``; ``sampled``: of them
    in the sample, the search's) and held out (``held_out``), the held-out
    runs of the sample compared (``held_ids``, run ids), the world fitted
    (classes, estimates, search, scenario mapping), its simulation ``sim``
    (``sim_runs`` runs at ``sim_seed``), the compared held-out runs as a
    Sample (``real``), the held-out ``loss``
    (:func:`sim.calibration.search.loss`) and ``jackknife``: the world
    simulated on the random numbers every fold shares (for the fit's
    variance, :mod:`sim.calibration.verdict`)."""

    fold: int
    fitted: int
    sampled: int
    held_out: int
    held_ids: list[str]
    labels: np.ndarray
    estimates: Estimates
    search: SearchResult
    doc: dict[str, Any]
    sim: Sample
    sim_runs: int
    sim_seed: int
    real: Sample
    loss: float
    jackknife: Sample


def search_runs(settings: Settings, sampled: int) -> int:
    """Simulated runs per search evaluation for ``sampled`` runs searched against."""
    return settings.search_runs or tolerance.search_runs(sampled)


def fit_world(train: Traces, structure: st.Structure, seed: int, settings: Settings,
              description: str = "", sampled: np.ndarray | None = None, *,
              error_seed: int | None = None, start: tuple[np.ndarray, np.ndarray] | None = None
              ) -> tuple[np.ndarray, Estimates, SearchResult, dict[str, Any], dict[str, str],
                         FanoutFit | None]:
    """Fit one world to ``train``: ``(labels, estimates, search, doc,
    comments, fan-out)`` (fan-out None: no call records a subagent; else it
    is in ``doc`` and in every simulation of the search).
    ``sampled``: which of the runs the search compares against (None: all);
    ``error_seed``: also measure the search's sampling error
    (``search.sim`` is kept for it; otherwise dropped); ``start``: the
    search's start and first-simplex steps (None: the direct estimates)."""
    labels = structure.labels(train, fl.seed_for(seed, "classes"), sampled)
    est = estimate(train, labels, prices_day(settings.prices_date))
    fan = fit_fanout(train, labels=labels, tools=[t.name for t in est.tools],
                     seed=fl.seed_for(seed, "fanout"))
    real_runs = train
    if sampled is not None and not sampled.all():
        real_runs = train.subset(train.runs["run_id"].to_numpy()[sampled])
    real = from_traces(real_runs)
    runs = search_runs(settings, real.n)

    def document(adjust: Adjustment, tasks: int) -> tuple[dict[str, Any], dict[str, str]]:
        return scenario_document(est, adjust, name=settings.name, description=description,
                                 tasks=tasks, seed=seed, prices_date=settings.prices_date,
                                 fanout=fan)

    crn = fl.seed_for(seed, "search")
    found = search(real, lambda a: simulate(document(a, runs)[0], runs, crn, calls=False),
                   max_evaluations=settings.evaluations, progress=settings.progress,
                   start=None if start is None else start[0],
                   steps=None if start is None else start[1])
    doc, comments = document(found.adjustment, runs)
    if error_seed is not None and found.sim is not None:
        sim = found.sim
        found.error = loss_error(lambda r, s: loss(real.take(r), sim.take(s)), real.n, sim.n,
                                 train.n, error_seed)
        found.sampled = real.n
    found.sim = None
    return labels, est, found, doc, comments, fan


def fit_fold(traces: Traces, fold_of: np.ndarray, sampled: np.ndarray, structure: st.Structure,
             fold: int, seed: int, settings: Settings) -> FoldFit:
    """Fit ``structure`` on the folds other than ``fold`` and simulate it
    against the fold's held-out runs of the sample (``seed``: the structure's;
    the fold's seeds derive from it and the fold, the jackknife simulation's
    from it alone, so every fold of a structure shares it)."""
    if settings.progress:
        k = int(fold_of.max()) + 1
        print(f"{structure.name}: fold {fold + 1} of {k}", file=sys.stderr)
    ids = traces.runs["run_id"].to_numpy()
    train_mask = fold_of != fold
    train = traces.subset(ids[train_mask])
    held_mask = fold_of == fold
    held = traces.subset(ids[held_mask & sampled])
    fold_seed = fl.seed_for(seed, "fold", fold)
    labels, est, found, doc, _, _ = fit_world(train, structure, fold_seed, settings,
                                           sampled=sampled[train_mask])
    runs = max(settings.min_fold_sim, math.ceil(settings.sim_ratio * held.n))
    sim_seed = fl.seed_for(fold_seed, "simulation")
    sim = simulate(doc, runs, sim_seed)
    real = from_traces(held)
    jack = simulate(doc, settings.jackknife_runs, fl.seed_for(seed, "jackknife"),
                    calls=False)  # the fit's variance reads the per-run metrics alone
    return FoldFit(fold, train.n, int(sampled[train_mask].sum()), int(held_mask.sum()),
                   [str(r) for r in held.runs["run_id"]], labels, est, found, doc, sim, runs,
                   sim_seed, real, loss(real, sim), jack)
