"""Calibration from end to end, as ``python -m sim calibrate`` runs it.

:func:`calibrate` reads and splits the traces, groups the fitted runs into
classes, estimates directly, searches, simulates the fitted scenario afresh
(a root seed the search never used) and measures it against the held-out
runs; :class:`Calibration` holds all of it, and says whether the fit is
rejected (some KS distance, or the exit mix's total-variation distance, at or
above its critical value).

Seeds, all derived from ``seed``: the held-out split and the clusters use
``seed``, the search's common random numbers ``seed + 1``, the final
simulation ``seed + 2``, the bootstrap and permutations ``seed + 3``. Same
traces, options and seed: identical outputs.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sim.calibrate import classes as cl
from sim.calibrate.build import Adjustment, render_yaml, scenario_document
from sim.calibrate.data import Traces, load, split
from sim.calibrate.estimate import Estimates, estimate
from sim.calibrate.measure import ExitMix, Metric, compare
from sim.calibrate.search import SearchResult, search
from sim.calibrate.simulate import Sample, from_traces, simulate


@dataclass
class Calibration:
    """The outcome of one calibration (see the module docstring)."""

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
    metrics: list[Metric]
    exits: ExitMix
    real: Sample
    sim: Sample
    header: list[str] = field(default_factory=list)

    @property
    def rejected(self) -> list[Metric]:
        """The metrics whose KS distance reaches its critical value."""
        return [m for m in self.metrics if m.rejected]

    @property
    def reasons(self) -> list[str]:
        """Why the fit is rejected: a sentence per rejected metric, and one for
        the exit mix when its distance reaches its critical value."""
        return [m.why() for m in self.rejected] + (
            [self.exits.why()] if self.exits.rejected else [])

    @property
    def status(self) -> int:
        """0 when every KS distance and the exit mix's distance are under
        their critical values, else 1."""
        return 1 if self.reasons else 0

    def yaml_text(self) -> str:
        """The scenario file, commented."""
        return render_yaml(self.doc, self.comments, self.header)

    def summary(self) -> dict[str, Any]:
        """``calibration.json``'s content (numbers rounded to 6 significant digits)."""
        classes = [{"name": c.name, "runs": c.runs, "model": c.model}
                   for c in self.estimates.classes]
        return _rounded({
            "traces": self.folder,
            "options": self.options,
            "runs": {"fitted": self.fit.n, "held_out": self.held_out.n,
                     "dropped": self.dropped},
            "classes": classes,
            "prices": {m: {"input": p.input, "output": p.output, "cache_read": p.cache_read,
                           "cache_write": p.cache_write, "source": p.source}
                       for m, p in self.estimates.prices.items()},
            "search": {"need_shift": self.search.adjustment.need_shift,
                       "sigma_scale": self.search.adjustment.sigma_scale,
                       "unsolvable_scale": self.search.adjustment.unsolvable_scale,
                       "loss_before": self.search.start_loss, "loss": self.search.loss,
                       "simulations": self.search.evaluations},
            "simulated_runs": self.sim.n,
            "metrics": {m.key: {
                "label": m.label, "unit": m.unit, "held_out": m.n_real, "simulated": m.n_sim,
                "ks": m.ks, "critical": m.critical, "critical_method": m.critical_method,
                "ks_interval": list(m.ks_interval), "rejected": m.rejected,
                "median": {"held_out": m.real_median, "simulated": m.sim_median,
                           "held_out_interval": list(m.real_median_interval)},
                "p95": {"held_out": m.real_p95, "simulated": m.sim_p95,
                        "held_out_interval": list(m.real_p95_interval)}}
                for m in self.metrics},
            "exit_mix": {"held_out": _nonzero(self.exits.real),
                         "simulated": _nonzero(self.exits.sim), "tv": self.exits.tv,
                         "tv_interval": list(self.exits.interval),
                         "critical": self.exits.critical, "rejected": self.exits.rejected},
            "verdict": {"status": self.status, "rejected": self.reasons},
        })


def _nonzero(shares: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in shares.items() if v > 0}


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
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


def calibrate(folder: str | Path, *, holdout: float = 0.3, seed: int = 0,
              classes: int | str = "auto", by: str | None = None, name: str = "calibrated",
              search_runs: int | None = None, final_runs: int | None = None,
              evaluations: int = 45, progress: bool = True) -> Calibration:
    """Fit a scenario to the traces in ``folder`` (see the module docstring).

    ``search_runs`` simulated runs per search evaluation (default four times
    the fitted runs, at least 1,000) and ``final_runs`` for the measurement
    (default twenty times the held-out runs, between 2,000 and 5,000)."""
    traces = load(folder)
    fit, held = split(traces, holdout, seed)
    labels = cl.assign(fit, classes=classes, by=by, seed=seed)
    est = estimate(fit, labels)
    date = _prices_date(traces)
    search_runs = search_runs or max(1000, 4 * fit.n)
    final_runs = final_runs or min(5000, max(2000, 20 * held.n))
    grouping = "one class per model" if by == "model" else (
        f"{len(est.classes)} classes (clusters, chosen by BIC)" if classes == "auto"
        else f"{len(est.classes)} classes (clusters)")
    description = (f"Fitted by sim calibrate to {fit.n} runs of {folder} ({grouping}); "
                   f"measured on {held.n} held-out runs.")

    def document(adjust: Adjustment, runs: int) -> tuple[dict[str, Any], dict[str, str]]:
        return scenario_document(est, adjust, name=name, description=description, tasks=runs,
                                 seed=seed, prices_date=date)

    def run(adjust: Adjustment) -> Sample:
        return simulate(document(adjust, search_runs)[0], search_runs, seed + 1)

    found = search(from_traces(fit), run, max_evaluations=evaluations, progress=progress)
    doc, comments = document(found.adjustment, final_runs)
    if progress:
        print(f"simulating the fitted scenario: {final_runs} runs", file=sys.stderr)
    sim = simulate(doc, final_runs, seed + 2)
    real = from_traces(held)
    metrics, exits = compare(real, sim, seed + 3)
    options = {"holdout_fraction": holdout, "seed": seed, "classes": classes, "by": by,
               "evaluations": evaluations, "search_runs": search_runs,
               "final_runs": final_runs}
    result = Calibration(str(folder), options, fit, held, traces.dropped, labels, est, found,
                         doc, comments, metrics, exits, real, sim)
    result.header = _header(result)
    return result


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
    flags = f"--holdout-fraction {opts['holdout_fraction']} --seed {opts['seed']}"
    flags += " --by model" if opts["by"] else f" --classes {opts['classes']}"
    if opts["evaluations"] != 45:
        flags += f" --evaluations {opts['evaluations']}"
    lines = [f"{c.doc['name']}: a world fitted to real runs by sim calibrate.", "",
             f"    python -m sim calibrate {c.folder} {flags}", ""]
    sources = _import_sources(c.folder)
    if sources:
        lines += [f"The traces were imported (python -m sim traces import) from "
                  f"{', '.join(sources)}.", ""]
    lines.append(f"Fitted on {c.fit.n} runs; measured on {c.held_out.n} held-out runs against "
                 f"{c.sim.n} simulated ones (two-sample KS distance, 5% critical value):")
    for m in c.metrics:
        lines.append(f"  {m.label:<24} KS {m.ks:.3f} (critical {m.critical:.3f})"
                     + ("  REJECTED" if m.rejected else ""))
    lines.append(f"  exit mix (total variation) {c.exits.tv:.3f} (critical "
                 f"{c.exits.critical:.3f})" + ("  REJECTED" if c.exits.rejected else ""))
    lines += ["", "Direct estimates per class, then a simulate-and-compare search (need "
              f"shift {c.search.adjustment.need_shift:+.3f}, need sigma x "
              f"{c.search.adjustment.sigma_scale:.3f}, unsolvable work x "
              f"{c.search.adjustment.unsolvable_scale:.3f}); each fitted section says what it "
              "was fitted from."]
    return lines
