"""Calibration from end to end, as ``python -m sim calibrate`` runs it.

:func:`calibrate` reads the traces and deals every run into one of K folds
(:mod:`sim.calibration.folds`). For each fold, a world is fitted on the other
K - 1 folds (task classes, direct estimates, the simulate-and-compare search)
and simulated afresh, in proportion to the fold's held-out runs. Then:

- **structure**: unless ``classes`` or ``by`` forces one, each candidate
  structure (one class, one class per model, clusters) is cross-validated and
  the one with the lowest held-out loss is used, a simpler one winning ties
  within a standard error (:mod:`sim.calibration.structure`);
- **verdict**: the chosen structure's held-out runs of all folds against their
  folds' simulations, one test with Holm's correction over the per-run metrics
  and the exit mix, critical values that count the fit's own error
  (:mod:`sim.calibration.verdict`);
- **ladder**: for budgets at percentiles of the recorded prompt tokens, steps
  and cost, the folds' forecasts of share stopped, successes lost and dollars
  saved against a replay of their held-out runs (:mod:`sim.calibration.ladder`);
- **the scenario**: the chosen structure fitted on all runs, and simulated
  afresh (``Calibration.sim``).

:class:`Calibration` holds all of it; it is the Python entry point
(``sim.calibration.pipeline.calibrate(folder, folds=5, ...)``).

Seeds, all derived from ``seed`` by :func:`sim.calibration.folds.seed_for` with
a key per use (the folds; per candidate structure and fold: the classes, the
search's common random numbers, the fold's simulation; the final fit's; the
verdict's bootstrap; the ladder's intervals): folds and candidates are
independent of the order they run in. Same traces, options and seed:
identical outputs.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sim.calibration import folds as fl
from sim.calibration import structure as st
from sim.calibration.build import Adjustment, render_yaml, scenario_document
from sim.calibration.costs import price_unrecorded
from sim.calibration.data import Traces, load
from sim.calibration.estimate import Estimates, estimate
from sim.calibration.ladder import Budget, FoldWorld, Rung, budgets, ladder
from sim.calibration.measure import ExitMix, Metric
from sim.calibration.search import SearchResult, loss, search
from sim.calibration.simulate import Sample, from_traces, simulate
from sim.calibration.verdict import Judgement, judge, pooled

MIN_FOLD_SIM = 200
"""Fewest simulated runs per fold."""


@dataclass
class FoldFit:
    """One fold: the runs fitted (``fit``) and held out, the world fitted
    (classes, estimates, search, scenario mapping), its simulation ``sim``
    (``sim_runs`` runs at ``sim_seed``), the held-out runs as a Sample
    (``real``), the held-out ``loss`` (:func:`sim.calibration.search.loss`)
    and ``jackknife``: the world simulated on the random numbers every fold
    shares (for the fit's variance, :mod:`sim.calibration.verdict`)."""

    fold: int
    fit: Traces
    held_out: Traces
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


@dataclass
class Settings:
    """How each world is fitted: search simulations and runs per evaluation
    (None: four times the fitted runs, at least 1,000), simulated runs per
    held-out run (at least ``min_fold_sim`` per fold), runs of each fold
    world's common-random-number simulation for the fit's variance
    (``jackknife_runs``), the scenario's name and prices date, and whether to
    print progress."""

    evaluations: int = 45
    search_runs: int | None = None
    sim_ratio: float = 5.0
    jackknife_runs: int = 1000
    min_fold_sim: int = MIN_FOLD_SIM
    name: str = "calibrated"
    prices_date: str | None = None
    progress: bool = False


def fit_world(train: Traces, structure: st.Structure, seed: int, settings: Settings,
              description: str = "") -> tuple[np.ndarray, Estimates, SearchResult,
                                               dict[str, Any], dict[str, str]]:
    """Fit one world to ``train``: ``(labels, estimates, search, doc, comments)``."""
    labels = structure.labels(train, fl.seed_for(seed, "classes"))
    est = estimate(train, labels)
    runs = settings.search_runs or max(1000, 4 * train.n)

    def document(adjust: Adjustment, tasks: int) -> tuple[dict[str, Any], dict[str, str]]:
        return scenario_document(est, adjust, name=settings.name, description=description,
                                 tasks=tasks, seed=seed, prices_date=settings.prices_date)

    crn = fl.seed_for(seed, "search")
    found = search(from_traces(train), lambda a: simulate(document(a, runs)[0], runs, crn),
                   max_evaluations=settings.evaluations, progress=settings.progress)
    doc, comments = document(found.adjustment, runs)
    return labels, est, found, doc, comments


def cross_validate(traces: Traces, fold_of: np.ndarray, structure: st.Structure, seed: int,
                   settings: Settings) -> list[FoldFit]:
    """Fit ``structure`` on the other folds of each fold and simulate it (see
    the module docstring); fold seeds from ``seed`` and the fold; the
    jackknife simulations of every fold share one seed."""
    ids = traces.runs["run_id"].to_numpy()
    out = []
    k = int(fold_of.max()) + 1
    for fold in range(k):
        if settings.progress:
            print(f"{structure.name}: fold {fold + 1} of {k}", file=sys.stderr)
        train = traces.subset(ids[fold_of != fold])
        held = traces.subset(ids[fold_of == fold])
        fold_seed = fl.seed_for(seed, "fold", fold)
        labels, est, found, doc, _ = fit_world(train, structure, fold_seed, settings)
        runs = max(settings.min_fold_sim, math.ceil(settings.sim_ratio * held.n))
        sim_seed = fl.seed_for(fold_seed, "simulation")
        sim = simulate(doc, runs, sim_seed)
        real = from_traces(held)
        jack = simulate(doc, settings.jackknife_runs, fl.seed_for(seed, "jackknife"))
        out.append(FoldFit(fold, train, held, labels, est, found, doc, sim, runs, sim_seed,
                           real, loss(real, sim), jack))
    return out


@dataclass
class Calibration:
    """The outcome of one calibration (see the module docstring).

    ``fit`` holds every usable run (the scenario is fitted on all of them) and
    ``held_out`` the same runs (each was held out once); ``labels``,
    ``estimates``, ``search``, ``doc`` and ``comments`` are the final fit's;
    ``metrics`` and ``exits`` the pooled cross-validated comparison (with
    ``judgement``: the verdict and the per-fold checks); ``real`` the pooled
    held-out runs and ``sim`` a fresh simulation of the final scenario;
    ``folds`` the chosen structure's fold fits, ``structure`` the choice and
    ``ladder`` the forecast-vs-replay rungs."""

    folder: str
    options: dict[str, Any]
    fit: Traces
    held_out: Traces
    dropped: dict[str, int]
    labels: np.ndarray
    estimates: Estimates
    search: SearchResult
    doc: dict[str, Any]
    comments: dict[str, str]
    judgement: Judgement
    real: Sample
    sim: Sample
    folds: list[FoldFit]
    structure: st.Choice
    ladder: list[Rung] = field(default_factory=list)
    header: list[str] = field(default_factory=list)

    @property
    def metrics(self) -> list[Metric]:
        """The pooled held-out comparison per metric."""
        return self.judgement.metrics

    @property
    def exits(self) -> ExitMix:
        """The pooled held-out exit mix against the simulated one."""
        return self.judgement.exits

    @property
    def rejected(self) -> list[Metric]:
        """The metrics the verdict rejects."""
        return self.judgement.rejected

    @property
    def reasons(self) -> list[str]:
        """Why the fit is rejected: a sentence per rejected test."""
        return self.judgement.reasons

    @property
    def status(self) -> int:
        """0 when the verdict accepts the fit, else 1."""
        return self.judgement.status

    def yaml_text(self) -> str:
        """The scenario file, commented."""
        return render_yaml(self.doc, self.comments, self.header)

    def summary(self) -> dict[str, Any]:
        """``calibration.json``'s content (numbers rounded to 6 significant digits)."""
        classes = [{"name": c.name, "runs": c.runs, "model": c.model}
                   for c in self.estimates.classes]
        j = self.judgement
        return _rounded({
            "traces": self.folder,
            "options": self.options,
            "runs": {"fitted": self.fit.n, "held_out": self.held_out.n,
                     "folds": [f.held_out.n for f in self.folds], "dropped": self.dropped,
                     "repaired": self.fit.repaired},
            "structure": {"chosen": self.structure.chosen.name,
                          "options": self.structure.chosen.flags(),
                          "forced": self.structure.forced, "why": self.structure.reason,
                          "losses": {name: {"folds": v, "mean": float(np.mean(v)),
                                            "se": self.structure.se(name)}
                                     for name, v in self.structure.losses.items()}},
            "classes": classes,
            "prices": {m: {"input": p.input, "output": p.output, "cache_read": p.cache_read,
                           "cache_write": p.cache_write, "source": p.source}
                       for m, p in self.estimates.prices.items()},
            "search": {"need_shift": self.search.adjustment.need_shift,
                       "sigma_scale": self.search.adjustment.sigma_scale,
                       "unsolvable_scale": self.search.adjustment.unsolvable_scale,
                       "loss_before": self.search.start_loss, "loss": self.search.loss,
                       "simulations": self.search.evaluations},
            "simulated_runs": {"folds": [f.sim_runs for f in self.folds],
                               "final": self.sim.n},
            "metrics": {m.key: {
                "label": m.label, "unit": m.unit, "held_out": m.n_real, "simulated": m.n_sim,
                "ks": m.ks, "critical": m.critical, "critical_method": m.critical_method,
                "in_verdict": m.tested, "p": m.p_value, "p_holm": m.p_adjusted,
                "fit_variance": j.fit_variance.get(m.key),
                "ks_interval": list(m.ks_interval), "rejected": m.rejected,
                "median": {"held_out": m.real_median, "simulated": m.sim_median,
                           "held_out_interval": list(m.real_median_interval)},
                "p95": {"held_out": m.real_p95, "simulated": m.sim_p95,
                        "held_out_interval": list(m.real_p95_interval)}}
                for m in self.metrics},
            "exit_mix": {"held_out": _nonzero(self.exits.real),
                         "simulated": _nonzero(self.exits.sim), "tv": self.exits.tv,
                         "tv_interval": list(self.exits.interval),
                         "critical": self.exits.critical, "p": self.exits.p_value,
                         "p_holm": self.exits.p_adjusted,
                         "fit_variance": j.fit_variance.get("exits"),
                         "rejected": self.exits.rejected},
            "folds": [{"fold": f.fold, "held_out": f.n_real, "simulated": f.n_sim,
                       "ks": f.ks, "critical_95": f.critical, "p": f.p, "tv": f.tv,
                       "tv_critical_95": f.tv_critical, "tv_p": f.tv_p,
                       "loss": self.folds[f.fold].loss,
                       "search": {"need_shift": self.folds[f.fold].search.adjustment.need_shift,
                                  "loss": self.folds[f.fold].search.loss}}
                      for f in j.folds],
            "ladder": [{"budget": r.budget.label, "kind": r.budget.kind,
                        "value": r.budget.value, "forecast": r.forecast, "replay": r.replay,
                        "forecast_interval": {k: list(v)
                                              for k, v in r.forecast_interval.items()},
                        "replay_interval": {k: list(v) for k, v in r.replay_interval.items()},
                        "folds": r.folds} for r in self.ladder],
            "verdict": {"status": self.status, "rejected": self.reasons,
                        "method": "per fold, held-out runs against the world fitted on the "
                                  "other folds (per-run KS, exit mix), critical values that "
                                  "count the fit's own error (jackknife of the fold worlds, "
                                  "capped at 1/n + 1/search runs); folds combined by "
                                  "Stouffer; Holm at 5% over the metrics and the exit mix"},
        })


def _nonzero(shares: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in shares.items() if v > 0}


def _rounded(value: Any) -> Any:
    if isinstance(value, float | np.floating):
        value = float(value)
        if not math.isfinite(value):
            return None
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    return value


def calibrate(folder: str | Path, *, folds: int = 5, seed: int = 0,
              classes: int | str | None = None, by: str | None = None,
              name: str = "calibrated", search_runs: int | None = None,
              final_runs: int | None = None, evaluations: int = 45, sim_ratio: float = 5.0,
              with_ladder: bool = True, progress: bool = True) -> Calibration:
    """Fit a scenario to the traces in ``folder`` and judge it by ``folds``-fold
    cross-validation (see the module docstring).

    ``classes``/``by`` force a structure (None, None: chosen by cross-validated
    loss); ``search_runs`` simulated runs per search evaluation (default four
    times the fitted runs, at least 1,000); ``sim_ratio`` simulated runs per
    held-out run in each fold; ``final_runs`` for the final scenario's fresh
    simulation (default ten times the runs, between 2,000 and 5,000);
    ``with_ladder`` False skips the forecast-vs-replay ladder."""
    traces = load(folder, keep_empty=True)  # a run that failed before its first reply
    traces = price_unrecorded(traces)  # a $0 recorded for a run that used tokens
    fold_of = fl.assign(traces, folds, seed)
    settings = Settings(evaluations=evaluations, search_runs=search_runs, sim_ratio=sim_ratio,
                        name=name, prices_date=_prices_date(traces), progress=progress)
    fixed = st.forced(classes, by)
    if fixed is not None:
        chosen = fixed
        fits = cross_validate(traces, fold_of, fixed, fl.seed_for(seed, fixed.name), settings)
        choice = st.Choice(fixed, {}, f"{fixed.name}: forced by {fixed.flags()}")
    else:
        structures = st.candidates(traces)
        tried = {s.name: cross_validate(traces, fold_of, s, fl.seed_for(seed, s.name), settings)
                 for s in structures}
        choice = st.choose(structures, {n: [f.loss for f in v] for n, v in tried.items()})
        chosen = choice.chosen
        fits = tried[chosen.name]
    judgement = judge([f.real for f in fits], [f.sim for f in fits], fl.seed_for(seed, "verdict"),
                      jackknife=[f.jackknife for f in fits],
                      search_runs=_search_runs(settings, fits))
    rungs: list[Rung] = []
    if with_ladder:
        rungs = _ladder(traces, fits, seed, progress)
    description = (f"Fitted by sim calibrate to {traces.n} runs of {folder} ({chosen.name}: "
                   f"{choice.reason.split(': ', 1)[-1]}); judged by {folds}-fold "
                   f"cross-validation.")
    final_seed = fl.seed_for(seed, "final")
    labels, est, found, doc, comments = fit_world(traces, chosen, final_seed, settings,
                                                  description)
    final_runs = final_runs or min(5000, max(2000, 10 * traces.n))
    if progress:
        print(f"simulating the fitted scenario: {final_runs} runs", file=sys.stderr)
    doc = {**doc, "tasks": final_runs}
    sim = simulate(doc, final_runs, fl.seed_for(final_seed, "simulation"))
    options = {"folds": folds, "seed": seed, "classes": classes, "by": by,
               "structure": chosen.flags(), "evaluations": evaluations,
               "search_runs": search_runs, "sim_ratio": sim_ratio, "final_runs": final_runs}
    result = Calibration(str(folder), options, traces, traces, traces.dropped, labels, est,
                         found, doc, comments, judgement, pooled([f.real for f in fits]), sim,
                         fits, choice, rungs)
    result.header = _header(result)
    return result


def _search_runs(settings: Settings, fits: list[FoldFit]) -> int | None:
    """Simulated runs per search evaluation of the fold fits (None: no search)."""
    if settings.evaluations <= 0:
        return None
    return settings.search_runs or max(1000, 4 * min(f.fit.n for f in fits))


def _ladder(traces: Traces, fits: list[FoldFit], seed: int, progress: bool) -> list[Rung]:
    """The forecast-vs-replay ladder over the folds (see :mod:`sim.calibration.ladder`)."""
    from sim.drivers.recorded_runs import read_trace_folder

    recorded = {r.run_id: r for r in read_trace_folder(traces.folder)}
    worlds = [FoldWorld(f.doc, list(f.held_out.runs["run_id"]), f.sim, f.sim_runs, f.sim_seed)
              for f in fits]
    rungs: list[Budget] = budgets(traces)

    def tick(done: int, total: int) -> None:
        if progress:
            print(f"\rladder: {done} of {total} budgets", end="" if done < total else "\n",
                  file=sys.stderr, flush=True)

    return ladder(worlds, recorded, rungs, fl.seed_for(seed, "ladder"), tick)


def _prices_date(traces: Traces) -> str | None:
    """The day the newest run started (a fixed date, so catalogue prices do
    not change with the day the scenario is run), if the traces say."""
    import pandas as pd

    folder = Path(traces.folder) / "runs.parquet"
    try:
        started = pd.read_parquet(folder, columns=["started_at"])["started_at"].dropna()
    except (KeyError, ValueError, OSError):
        return None
    return None if started.empty else str(pd.Timestamp(started.max()).date())


def _import_sources(folder: str) -> list[str]:
    """The sources a trace folder's ``import.json`` names, if it has one."""
    import json

    try:
        data = json.loads((Path(folder) / "import.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    sources = data.get("sources") if isinstance(data, dict) else None
    return [str(s) for s in sources] if isinstance(sources, list) else []


def _header(c: Calibration) -> list[str]:
    opts = c.options
    flags = f"--folds {opts['folds']} --seed {opts['seed']}"
    if c.structure.forced:
        flags += " " + opts["structure"]
    if opts["evaluations"] != 45:
        flags += f" --evaluations {opts['evaluations']}"
    lines = [f"{c.doc['name']}: a world fitted to real runs by sim calibrate.", "",
             f"    python -m sim calibrate {c.folder} {flags}", ""]
    if not c.structure.forced:
        lines += [f"(structure chosen by cross-validation: {opts['structure']} would force "
                  f"it)", ""]
    sources = _import_sources(c.folder)
    if sources:
        lines += [f"The traces were imported (python -m sim traces import) from "
                  f"{', '.join(sources)}.", ""]
    lines.append(f"Structure: {c.structure.reason}.")
    lines.append("")
    lines.append(f"Fitted on {c.fit.n} runs; judged by {opts['folds']}-fold cross-validation "
                 f"(each run held out once, against the world fitted on the other folds, with "
                 f"critical values that count the fit's own error; folds combined, one "
                 f"verdict under Holm's correction). All held-out runs against all fold "
                 f"simulations (two-sample 5% critical value, for scale; p: the folds' "
                 f"combined, Holm-adjusted):")
    for m in c.metrics:
        lines.append(f"  {m.label:<24} KS {m.ks:.3f} (critical {m.critical:.3f}"
                     + (f", p {m.p_adjusted:.3g})" if m.p_adjusted is not None else ")")
                     + ("  REJECTED" if m.rejected else "")
                     + ("" if m.tested else "  (not in the verdict)"))
    lines.append(f"  exit mix (total variation) {c.exits.tv:.3f} (critical "
                 f"{c.exits.critical:.3f})" + ("  REJECTED" if c.exits.rejected else ""))
    lines.append(f"  verdict: {'rejected' if c.status else 'accepted'}"
                 + (": " + "; ".join(c.reasons) if c.status else ""))
    a = c.search.adjustment
    fitted = [e.name for e in c.estimates.classes if e.endings is not None]
    if fitted:
        how = ("endings fitted directly (competing risks per step, the recorded harness's own "
               f"stops censored) for {len(fitted)} of {len(c.estimates.classes)} classes, "
               f"their frailty variance x {a.sigma_scale:.3f} by a simulate-and-compare "
               "search")
    else:
        how = (f"then a simulate-and-compare search (need shift {a.need_shift:+.3f}, need "
               f"sigma x {a.sigma_scale:.3f}, unsolvable work x {a.unsolvable_scale:.3f})")
    lines += ["", f"Direct estimates per class, {how}; each fitted section says what it was "
              "fitted from."]
    return lines

