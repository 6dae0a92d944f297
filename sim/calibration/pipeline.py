"""Calibration from end to end, as ``python -m sim calibrate`` runs it.

:func:`calibrate` reads the traces, deals every run into one of K folds
(:mod:`sim.calibration.folds`) and draws the sample the cross-validation
uses (:mod:`sim.calibration.sample`: at most ``sample`` runs per model, every
run of smaller traces), then deals the sample's runs into K folds
(:mod:`sim.calibration.folds`). For each fold, a world is fitted on the
sample's other K - 1 folds (task classes, direct estimates and the
simulate-and-compare search) and simulated afresh, in proportion to the
fold's held-out runs (:mod:`sim.calibration.fitting`): the folds' fits,
simulations and held-out comparisons take a time set by the sample, not by
the traces. Then:

- **structure**: unless ``classes`` or ``by`` forces one, each candidate
  structure (one class, one class per model, clusters) is cross-validated and
  the one with the lowest held-out loss is used, a simpler one winning ties
  within a standard error (:mod:`sim.calibration.structure`);
- **verdict**: the chosen structure's held-out runs of all folds against their
  folds' simulations, one test adjusted family-wise over the per-run metrics
  and the exit mix, critical values from null replicates of each fold's world
  that count the fit's own error (:mod:`sim.calibration.verdict`);
- **ladder**: for budgets at percentiles of the recorded prompt tokens, steps
  and cost, the folds' forecasts of share stopped, successes lost and dollars
  saved against a replay of their held-out runs (:mod:`sim.calibration.ladder`);
- **the scenario**: the chosen structure's direct estimates fitted on all
  runs (vectorised: a time linear in the calls, no per-run Python), its
  clusters (if any) and its search on the sample (the search's own sampling
  error measured), and simulated afresh (``Calibration.sim``).
  ``calibration.json`` says what was fitted on what (``fitted_on``) and the
  verdict's power at the sample's size (``verdict.power``,
  :mod:`sim.calibration.power`);
- **fan-out**: when calls record subagents (``calls.agent``), every world
  fitted (the folds' and the final one) carries the fan-out fitted on its
  runs (:mod:`sim.calibration.fanout`: ``world.fanout`` and the children's
  ``worker`` class; :func:`sim.calibration.fitting.fit_world`), so its search
  and simulations spawn; each fold's held-out runs are also compared with the
  fan-out fitted on the sample's other folds (``Calibration.fanout_rows``).

:class:`~sim.calibration.result.Calibration` holds all of it; this is the
Python entry point (``sim.calibration.pipeline.calibrate(folder, folds=5,
...)``). The folds of all candidates, then the ladder's folds and the final
fit, run as jobs on ``workers`` processes or a Dask ``scheduler``
(:mod:`sim.calibration.jobs`).

Seeds, all derived from ``seed`` by :func:`sim.calibration.folds.seed_for` with
a key per use (the folds; the sample; per candidate structure and fold: the
classes, the search's common random numbers, the fold's simulation; the final
fit's; the verdict's bootstrap; the ladder's intervals): folds and candidates
are independent of the order and the process they run in. Same traces,
options and seed: identical outputs, whatever the worker count.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sim.calibration import folds as fl
from sim.calibration import jobs as jb
from sim.calibration import structure as st
from sim.calibration.fitting import (
    MIN_FOLD_SIM,
    FoldFit,
    Settings,
    fit_fold,
    fit_world,
    search_runs,
)
from sim.calibration.jobs import Context, Spec
from sim.calibration.ladder import Budget, FoldWorld, budgets, pool_rungs
from sim.calibration.result import Calibration, header_lines
from sim.calibration.sample import PER_MODEL
from sim.calibration.search import warm_start
from sim.calibration.verdict import judge, pooled

__all__ = ["MIN_FOLD_SIM", "Calibration", "FoldFit", "Settings", "calibrate", "cross_validate",
           "fit_world"]


def cross_validate(traces: Any, fold_of: Any, structure: st.Structure, seed: int,
                   settings: Settings, sampled: Any = None) -> list[FoldFit]:
    """Fit ``structure`` on the other folds of each fold and simulate it (see
    the module docstring), in this process; ``sampled`` (None: every run)
    marks the runs of the sample."""
    import numpy as np

    mask = np.ones(traces.n, dtype=bool) if sampled is None else sampled
    k = int(fold_of.max()) + 1
    return [fit_fold(traces, fold_of, mask, structure, fold, seed, settings)
            for fold in range(k)]


def _dispatch(kind: str, *args: Any) -> Any:
    """One job of the second batch: the ladder of a fold, or the final fit."""
    return jb.ladder_job(*args) if kind == "ladder" else jb.final_job(*args)


def calibrate(folder: str | Path, *, folds: int = 5, seed: int = 0,
              classes: int | str | None = None, by: str | None = None,
              name: str = "calibrated", search_runs: int | None = None,
              final_runs: int | None = None, evaluations: int = 45, sim_ratio: float = 5.0,
              with_ladder: bool = True, progress: bool = True,
              sample: int | None = PER_MODEL, workers: int = 1,
              scheduler: str | None = None) -> Calibration:
    """Fit a scenario to the traces in ``folder`` and judge it by ``folds``-fold
    cross-validation (see the module docstring).

    ``classes``/``by`` force a structure (None, None: chosen by cross-validated
    loss); ``search_runs`` simulated runs per search evaluation (default four
    times the sampled fitted runs, at least 1,000); ``sim_ratio`` simulated
    runs per sampled held-out run in each fold; ``final_runs`` for the final
    scenario's fresh simulation (default ten times the runs, between 2,000 and
    5,000); ``with_ladder`` False skips the forecast-vs-replay ladder;
    ``sample`` the most runs per model the searches and held-out comparisons
    use (None: every run); ``workers`` processes (or a Dask ``scheduler``, as
    ``sim run --scheduler`` takes it) run the folds and candidates."""
    spec = Spec(str(folder), folds, seed, sample, jb.stamp(str(folder)))
    ctx = jb.install(spec)  # before any worker starts: forked workers inherit it
    try:
        return _calibrate(spec, ctx, classes=classes, by=by, name=name, search_runs=search_runs,
                          final_runs=final_runs, evaluations=evaluations, sim_ratio=sim_ratio,
                          with_ladder=with_ladder, progress=progress, workers=workers,
                          scheduler=scheduler)
    finally:
        jb.forget()


def _calibrate(spec: Spec, ctx: Context, *, classes: int | str | None, by: str | None,
               name: str, search_runs: int | None, final_runs: int | None, evaluations: int,
               sim_ratio: float, with_ladder: bool, progress: bool, workers: int,
               scheduler: str | None) -> Calibration:
    """:func:`calibrate` once the traces, folds and sample are in ``ctx``."""
    from sim.sweeps.schedulers import make_scheduler

    folder, folds, seed, sample = spec.folder, spec.folds, spec.seed, spec.per_model
    traces = ctx.traces
    # the jobs print nothing (parallel folds would interleave): this process
    # shows one bar per phase (sim.progress: one line per tenth off a terminal)
    settings = Settings(evaluations=evaluations, search_runs=search_runs, sim_ratio=sim_ratio,
                        name=name, prices_date=ctx.prices_date, progress=False)
    fixed = st.forced(classes, by)
    structures = [fixed] if fixed is not None else st.candidates(traces)
    with make_scheduler(scheduler, workers) as pool:
        # the most complex structures' folds first (their searches take
        # longest): no long fold is left to run alone at the end
        queue = structures[::-1]
        jobs = [(spec, s, fold, fl.seed_for(seed, s.name), settings)
                for s in queue for fold in range(folds)]
        done = _run_shown(pool, jb.fold_job, jobs, progress,
                          "fitting folds")
        at = {s.name: i * folds for i, s in enumerate(queue)}
        tried = {s.name: done[at[s.name]:at[s.name] + folds] for s in structures}
        if fixed is not None:
            choice = st.Choice(fixed, {}, f"{fixed.name}: forced by {fixed.flags()}")
        else:
            choice = st.choose(structures, {n: [f.loss for f in v] for n, v in tried.items()})
        chosen, fits = choice.chosen, tried[choice.chosen.name]
        description = (f"Fitted by sim calibrate to {traces.n} runs of {folder} ({chosen.name}: "
                       f"{choice.reason.split(': ', 1)[-1]}); judged by {folds}-fold "
                       f"cross-validation.")
        final_runs = final_runs or min(5000, max(2000, 10 * traces.n))
        rungs = budgets(traces) if with_ladder else []
        # the final fit first: the longest job (direct estimates on all runs)
        # starts while the other workers take the ladder's folds
        second: list[tuple[Any, ...]] = [("final", spec, chosen, fl.seed_for(seed, "final"),
                                          settings, description, final_runs, _start(fits))]
        second += _ladder_jobs(ctx, fits, rungs) if with_ladder else []
        results = _run_shown(pool, _dispatch, second, progress,
                             "final fit and ladder")
    labels, est, found, doc, comments, sim, fanout = results[0]
    judgement = judge([f.real for f in fits], [f.sim for f in fits], fl.seed_for(seed, "verdict"),
                      jackknife=[f.jackknife for f in fits],
                      search_runs=_search_runs(settings, fits))
    ladder = pool_rungs(results[1:], rungs, fl.seed_for(seed, "ladder")) if with_ladder else []
    options = {"folds": folds, "seed": seed, "classes": classes, "by": by,
               "structure": chosen.flags(), "evaluations": evaluations,
               "search_runs": search_runs, "sim_ratio": sim_ratio, "final_runs": final_runs,
               "sample": sample}
    result = Calibration(str(folder), options, traces, ctx.sample, traces.dropped, labels, est,
                         found, doc, comments, judgement, pooled([f.real for f in fits]), sim,
                         fits, choice, ladder, sampled=ctx.sampled, fanout=fanout)
    if fanout is not None:
        from sim.calibration.fanout import validate

        result.fanout_rows = validate(ctx.sample, ctx.fold_of, fl.seed_for(seed, "fanout folds"))
    result.header = header_lines(result)
    return result


def _run_shown(pool: Any, work: Any, jobs: list[tuple[Any, ...]], progress: bool,
               desc: str) -> list[Any]:
    """:func:`sim.calibration.jobs.run_jobs` with a bar of the jobs done on
    stderr (when ``progress``)."""
    from sim.progress import progress_bar

    bar = progress_bar(total=len(jobs), desc=desc, unit="job", disable=not progress)

    def one_more(done: int, total: int) -> None:
        bar.update(1)

    try:
        return jb.run_jobs(pool, work, jobs, progress=one_more)
    finally:
        bar.close()


def _search_runs(settings: Settings, fits: list[FoldFit]) -> int | None:
    """Simulated runs per search evaluation of the fold fits (None: no search)."""
    if settings.evaluations <= 0:
        return None
    return search_runs(settings, min(f.sampled for f in fits))


def _start(fits: list[FoldFit]) -> tuple[Any, Any] | None:
    """The final search's warm start: from the chosen structure's fold optima
    (:func:`sim.calibration.search.warm_start`), None when no fold's search
    moved (the direct estimates stand). The folds' worlds are fitted on the
    sample's runs, which the final fit reads too, and the final world is not
    what the verdict judges (the folds' worlds are), so the held-out runs never
    inform the fit used to predict them. The other way round, a fold search
    started from the final optimum, would let its held-out runs do so."""
    if not any(f.search.fatol is not None for f in fits):
        return None
    return warm_start([f.search.adjustment for f in fits])


def _ladder_jobs(ctx: Context, fits: list[FoldFit], rungs: list[Budget]) -> list[tuple[Any, ...]]:
    """A ladder job per fold: its world and its sampled held-out runs as
    recorded (read by the one reader of recorded runs,
    :class:`sim.drivers.replay.reading.TraceTables`, as replay and tune read them)."""
    from sim.drivers.replay.reading import TraceTables

    wanted = sorted({r for f in fits for r in f.held_ids})
    tables = TraceTables.load(ctx.traces.folder).only(wanted)
    recorded = {r.run_id: r for r in tables.recorded(0, len(tables))}
    return [("ladder", FoldWorld(f.doc, f.held_ids, f.sim, f.sim_runs, f.sim_seed),
             {r: recorded[r] for r in f.held_ids if r in recorded}, rungs, k)
            for k, f in enumerate(fits)]
