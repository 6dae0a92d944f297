"""Calibration's independent pieces, run by a scheduler over worker processes.

The folds of every candidate structure (:func:`fold_job`), then the ladder of
each fold and the final fit (:func:`ladder_job`, :func:`final_job`) are pure
functions of small arguments and their seeds (:mod:`sim.calibration.folds`),
so :func:`run_jobs` hands them to a scheduler of :mod:`sim.sweeps.schedulers`
(this process, ``--workers`` local processes, or Dask) and puts the results
back in job order: the same traces, options and seed give the same
calibration for any worker count.

A job names the traces by a :class:`Spec` (folder and its files' sizes and
modification times, folds, seed, sample cap), not by value: the runs, their
folds and the sample (:class:`Context`) are built by :func:`install` in the
parent before the jobs start, so forked local workers inherit them, and
built once by :func:`context` in a process that lacks them (a Dask worker
reads the folder, which it must be able to reach; changed files are another
spec).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sim.calibration import folds as fl
from sim.calibration import structure as st
from sim.calibration.costs import price_unrecorded
from sim.calibration.data import Traces, load
from sim.calibration.fitting import FoldFit, Settings, fit_fold, fit_world
from sim.calibration.ladder import Budget, FoldWorld, Side, fold_sides
from sim.calibration.sample import draw
from sim.calibration.simulate import Sample, simulate
from sim.cost.prices import prices_day


@dataclass(frozen=True)
class Spec:
    """Which traces a job reads: the folder, the number of folds, the root
    seed, the sample's cap of runs per model (None: no cap) and ``stamp``
    (the folder's files' sizes and modification times, :func:`stamp`)."""

    folder: str
    folds: int
    seed: int
    per_model: int | None
    stamp: tuple[int, ...] = ()


def stamp(folder: str) -> tuple[int, ...]:
    """Sizes and modification times (ns) of the folder's two tables (0 when missing)."""
    out: list[int] = []
    for name in ("runs.parquet", "calls.parquet"):
        try:
            info = os.stat(os.path.join(folder, name))
            out += [info.st_size, info.st_mtime_ns]
        except OSError:
            out += [0, 0]
    return tuple(out)


@dataclass
class Context:
    """The usable runs (``traces``, unrecorded costs priced), whether each is
    in the sample (``sampled``), the sample's runs (``sample``: ``traces``
    itself when the sample is every run) and the fold of each of them
    (``fold_of``, in the sample's run order): the folds are dealt over the
    sample, so their fits, simulations and held-out comparisons take a time
    that does not grow with the traces; ``prices_date``, the traces' day
    (:func:`prices_date`), which prices the runs and the fits."""

    traces: Traces
    fold_of: np.ndarray
    sampled: np.ndarray
    sample: Traces
    prices_date: str | None = None


_CONTEXTS: dict[Spec, Context] = {}


def build(spec: Spec) -> Context:
    """Read the traces of ``spec``, draw their sample and deal its folds."""
    traces = load(spec.folder, keep_empty=True)  # a run that failed before its first reply
    day = prices_date(spec.folder)
    traces = price_unrecorded(traces, prices_day(day))  # a $0 recorded for a run that used tokens
    sampled = draw(traces.runs["model"].to_numpy(object), traces.runs["category"].to_numpy(object),
                   spec.per_model, fl.seed_for(spec.seed, "sample"))
    sample = traces if sampled.all() else traces.subset(traces.runs["run_id"].to_numpy()[sampled])
    return Context(traces, fl.assign(sample, spec.folds, spec.seed), sampled, sample, day)


def install(spec: Spec) -> Context:
    """Build the context of ``spec`` afresh and keep it for the jobs (the only one kept)."""
    forget()
    _CONTEXTS[spec] = build(spec)
    return _CONTEXTS[spec]


def forget() -> None:
    """Drop the kept context (its memory is the traces')."""
    _CONTEXTS.clear()


def context(spec: Spec) -> Context:
    """The context of ``spec``: the one kept, else built and kept."""
    return _CONTEXTS[spec] if spec in _CONTEXTS else install(spec)


def fold_job(spec: Spec, structure: st.Structure, fold: int, seed: int,
             settings: Settings) -> FoldFit:
    """One fold of one candidate structure, on the sample
    (:func:`sim.calibration.fitting.fit_fold`)."""
    c = context(spec)
    return fit_fold(c.sample, c.fold_of, np.ones(c.sample.n, dtype=bool), structure, fold,
                    seed, settings)


def ladder_job(world: FoldWorld, recorded: dict[str, Any], rungs: list[Budget],
               fold: int) -> list[tuple[Side, Side]]:
    """One fold's forecast and replay for every budget
    (:func:`sim.calibration.ladder.fold_sides`)."""
    return fold_sides(world, recorded, rungs, fold)


def final_job(spec: Spec, structure: st.Structure, seed: int, settings: Settings,
              description: str, runs: int,
              start: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[Any, ...]:
    """The chosen structure fitted on all runs (its search on the sample, from
    ``start``: a start and first-simplex steps, None: the direct estimates; its
    sampling error measured) and simulated afresh for ``runs`` runs:
    ``(labels, estimates, search, doc, comments, sim, fan-out)`` (fan-out:
    None without subagents)."""
    c = context(spec)
    labels, est, found, doc, comments, fan = fit_world(
        c.traces, structure, seed, settings, description, c.sampled,
        error_seed=fl.seed_for(seed, "sampling error"), start=start)
    doc = {**doc, "tasks": runs}
    sim: Sample = simulate(doc, runs, fl.seed_for(seed, "simulation"))
    return labels, est, found, doc, comments, sim, fan


def run_jobs(scheduler: Any, work: Callable[..., Any], jobs: Sequence[tuple[Any, ...]],
             progress: Callable[[int, int], None] | None = None) -> list[Any]:
    """``work(*job)`` for every job on ``scheduler``, results in job order."""
    results: list[Any] = [None] * len(jobs)
    for done, (index, result) in enumerate(scheduler.run(work, list(jobs)), start=1):
        results[index] = result
        if progress is not None:
            progress(done, len(jobs))
    return results


def prices_date(folder: str) -> str | None:
    """The day the newest run in ``folder`` started (ISO ``YYYY-MM-DD``; None
    when no run records its start): the day of the catalogue prices calibrate
    prices the runs and fits its scenario at, so they do not change with the
    day the command runs."""
    import pandas as pd

    from sim.parquet import read_parquet  # not pd.read_parquet: see it

    path = Path(folder) / "runs.parquet"
    try:
        started = read_parquet(path, columns=["started_at"])["started_at"].dropna()
    except (KeyError, ValueError, OSError):
        return None
    return None if started.empty else str(pd.Timestamp(started.max()).date())
