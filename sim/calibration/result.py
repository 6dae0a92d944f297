"""The outcome of a calibration: :class:`Calibration`, ``calibration.json``'s
content (:meth:`Calibration.summary`) and the scenario file's header.

The search's sample and its own sampling error (:mod:`sim.calibration.sample`)
are reported under ``sample`` and ``search.sampling_error``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sim.calibration import accuracy
from sim.calibration import structure as st
from sim.calibration.build import render_yaml
from sim.calibration.data import Traces
from sim.calibration.estimate import Estimates
from sim.calibration.fitting import FoldFit
from sim.calibration.ladder import Rung
from sim.calibration.sample import PER_MODEL
from sim.calibration.search import SearchResult
from sim.calibration.simulate import Sample
from sim.calibration.verdict import ExitMix, Judgement, Metric


@dataclass
class Calibration:
    """The outcome of one calibration (see the module docstring).

    ``fit`` holds every usable run (the scenario's direct estimates read all
    of them) and ``held_out`` the runs of the sample (every run when the
    sample is all of them), each held out once; ``labels``,
    ``estimates``, ``search``, ``doc`` and ``comments`` are the final fit's;
    ``metrics`` and ``exits`` the pooled cross-validated comparison (with
    ``judgement``: the verdict and the per-fold checks); ``real`` the pooled
    held-out runs and ``sim`` a fresh simulation of the final scenario;
    ``folds`` the chosen structure's fold fits, ``structure`` the choice,
    ``ladder`` the forecast-vs-replay rungs and ``sampled`` which runs are in
    the sample the searches and the held-out comparisons use
    (:mod:`sim.calibration.sample`); ``fanout`` the fan-out fitted on every
    run and ``fanout_rows`` its held-out comparisons (None and empty when no
    call records a subagent: :mod:`sim.calibration.fanout`)."""

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
    sampled: np.ndarray | None = None
    fanout: Any = None
    fanout_rows: list[Any] = field(default_factory=list)

    @property
    def sampled_runs(self) -> int:
        """Runs in the sample (every run when nothing was sampled)."""
        return self.fit.n if self.sampled is None else int(self.sampled.sum())

    def fitted_on(self) -> dict[str, Any]:
        """What was fitted on what (runs): the scenario's direct estimates on
        every run, its clusters (when the structure has them) and its search
        on the sample; the folds (their fits, simulations and held-out
        comparisons) on the sample alone."""
        n, s = self.fit.n, self.sampled_runs
        clusters = self.structure.chosen.by is None and self.structure.chosen.classes != 1
        return {"scenario": {"direct_estimates": n, "classes": s if clusters else n,
                             "search": self.search.sampled or s},
                "folds": {"runs": s, "fitted": [f.fitted for f in self.folds],
                          "held_out": [f.held_out for f in self.folds]},
                "method": ("the scenario's direct estimates from every run; its clusters "
                           "(if any: every run then given its most probable cluster) and its "
                           "search from the stratified sample; the folds dealt over the "
                           "sample, each fold's world fitted (direct estimates and search) "
                           "on the sample's other folds and compared with the fold's sampled "
                           "runs" if s < n else "every run, in the scenario and the folds")}

    def power(self) -> dict[str, Any]:
        """The verdict's power at the sample's size (:mod:`sim.calibration.power`):
        per tested metric, the KS distance it rejects with probability 0.8
        (``detectable_ks``, an approximation) and its probability of rejecting
        a world whose runs' metric is 10% higher, the rest right (``at_shift``,
        from the verdict's own null replicates)."""
        from sim.calibration import power as pw

        j = self.judgement
        keys = [m.key for m in self.metrics if m.tested and m.p_adjusted is not None]
        tests = len(keys) + 1  # and the exit mix
        return {"probability": pw.POWER, "alpha": j.alpha, "tests": tests,
                "held_out": self.real.n,
                "detectable_ks": pw.verdict_power(j.folds, keys, j.alpha, tests),
                "shift": pw.SHIFT,
                "at_shift": pw.shift_powers(j.nulls, j.family, keys, pw.SHIFT, j.alpha)}

    def yaml_text(self) -> str:
        """The scenario file, commented."""
        return render_yaml(self.doc, self.comments, self.header)

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

    def summary(self) -> dict[str, Any]:
        """``calibration.json``'s content (numbers rounded to 6 significant digits)."""
        classes = [{"name": c.name, "runs": c.runs, "model": c.model}
                   for c in self.estimates.classes]
        j = self.judgement
        return _rounded({
            "traces": self.folder,
            "options": self.options,
            "runs": {"fitted": self.fit.n, "held_out": self.held_out.n,
                     "folds": [f.held_out for f in self.folds], "dropped": self.dropped,
                     "repaired": self.fit.repaired},
            "sample": {"per_model": self.options.get("sample"), "runs": self.sampled_runs,
                       "all": self.sampled_runs == self.fit.n,
                       "searched": [f.sampled for f in self.folds],
                       "held_out": [len(f.held_ids) for f in self.folds]},
            "fitted_on": self.fitted_on(),
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
                       "simulations": self.search.evaluations,
                       "sampled_runs": self.search.sampled,
                       "sampling_error": self.search.error,
                       "stopping": _stopping(self.search, self.folds)},
            "simulated_runs": {"folds": [f.sim_runs for f in self.folds],
                               "final": self.sim.n},
            "metrics": {m.key: {
                "label": m.label, "unit": m.unit, "held_out": m.n_real, "simulated": m.n_sim,
                "ks": m.ks, "critical": m.critical, "critical_method": m.critical_method,
                "in_verdict": m.tested, "p": m.p_value, "p_holm": m.p_adjusted,
                "fit_variance": j.fit_variance.get(m.key),
                "fit_response": j.fit_response.get(m.key),
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
                         "fit_response": j.fit_response.get("exits"),
                         "rejected": self.exits.rejected},
            "folds": [{"fold": f.fold, "held_out": f.n_real, "simulated": f.n_sim,
                       "ks": f.ks, "critical_95": f.critical, "p": f.p, "tv": f.tv,
                       "tv_critical_95": f.tv_critical, "tv_p": f.tv_p,
                       "loss": self.folds[f.fold].loss,
                       "search": {"need_shift": self.folds[f.fold].search.adjustment.need_shift,
                                  "loss": self.folds[f.fold].search.loss,
                                  "simulations": self.folds[f.fold].search.evaluations,
                                  "fatol": self.folds[f.fold].search.fatol,
                                  "xatol": self.folds[f.fold].search.xatol}}
                      for f in j.folds],
            "ladder": [{"budget": r.budget.label, "kind": r.budget.kind,
                        "value": r.budget.value, "forecast": r.forecast, "replay": r.replay,
                        "forecast_interval": {k: list(v)
                                              for k, v in r.forecast_interval.items()},
                        "replay_interval": {k: list(v) for k, v in r.replay_interval.items()},
                        "folds": r.folds} for r in self.ladder],
            "verdict": {"status": self.status, "rejected": self.reasons,
                        "power": self.power(),
                        "method": "per fold, held-out runs against the world fitted on the "
                                  "other folds (per-run KS, exit mix), each referred to "
                                  "null replicates: held-out-sized samples of the fold's own "
                                  "world, widened by the fit's own error (the runs' sampling "
                                  "variance times the fold worlds' response to them, "
                                  "fit_response, plus the jackknife's excess over it counted "
                                  "once, capped at 1/n + 1/search runs); folds "
                                  "combined by Stouffer (the sum over its standard deviation "
                                  "under the folds' dependence, from how closely the fold "
                                  "worlds follow their runs, fit_response); adjusted over "
                                  "the metrics "
                                  "and the exit mix by the replicates' smallest combined p "
                                  "(5% family-wise)"},
            "accuracy": [r.summary() | {"key": r.key} for r in accuracy.rows(self)],
            **({} if self.fanout is None else {"fanout": self.fanout.summary(self.fanout_rows)}),
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


def _import_sources(folder: str) -> list[str]:
    """The sources a trace folder's ``import.json`` names, if it has one."""
    import json

    try:
        data = json.loads((Path(folder) / "import.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    sources = data.get("sources") if isinstance(data, dict) else None
    return [str(s) for s in sources] if isinstance(sources, list) else []


def header_lines(c: Calibration) -> list[str]:
    opts = c.options
    flags = f"--folds {opts['folds']} --seed {opts['seed']}"
    if c.structure.forced:
        flags += " " + opts["structure"]
    if opts["evaluations"] != 45:
        flags += f" --evaluations {opts['evaluations']}"
    if opts.get("sample") != PER_MODEL:
        flags += f" --sample {opts.get('sample') or 0}"
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
                 f"critical values from null replicates of each fold's world that count the "
                 f"fit's own error; folds combined, one verdict adjusted over the tests). "
                 f"All held-out runs against all fold simulations (two-sample 5% critical "
                 f"value, for scale; p: the folds' combined, family-wise adjusted):")
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
    return lines + _sample_lines(c)


def _sample_lines(c: Calibration) -> list[str]:
    """What the sample was, when it was not every run (none otherwise, so that
    small traces' scenario files stay as they were)."""
    if c.sampled_runs == c.fit.n:
        return []
    error = c.search.error or {}
    return ["", f"Direct estimates from all {c.fit.n} runs; the search, the clusters (if "
            f"any) and the cross-validation (the folds' fits, simulations and held-out "
            f"comparisons) on a stratified sample of {c.sampled_runs} (at most "
            f"{c.options.get('sample')} per model, the mix of models and exits kept). The "
            f"search's loss {c.search.loss:.4f} carries a sampling error of "
            f"{error.get('total', math.nan):.4f} (runs sampled {error.get('runs', math.nan):.4f},"
            f" simulated {error.get('simulation', math.nan):.4f}; bootstrap standard errors)."]


def _stopping(search: SearchResult, folds: list[FoldFit]) -> dict[str, Any]:
    """How the searches stopped (:mod:`sim.calibration.tolerance`): the final
    search's tolerances, its simulated runs per simulation and warm start, the
    folds' simulations."""
    return {"rule": "Nelder-Mead stops when its simplex's losses are within the loss's noise "
                    "floor (fatol: the loss's standard deviation under sampling alone at the "
                    "sizes compared) and its points within the matching parameter move "
                    "(xatol: fatol over the first simplex's steepest slope, 0.01-0.1)",
            "fatol": search.fatol, "xatol": search.xatol,
            "runs_per_simulation": search.simulated,
            "warm_start": search.start,
            "warm_start_from": "the chosen structure's fold optima (median)"
            if search.start is not None else None,
            "fold_simulations": [f.search.evaluations for f in folds]}
