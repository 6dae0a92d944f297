"""Writing a calibration: the scenario file and its report (the files of the
``calibrate`` step, :mod:`sim.api.calibrating`).

- the scenario YAML (commented: what each fitted section was fitted from),
  written to a temporary file and renamed into place;
- a report folder with ``calibration.json`` (the figures as data),
  ``calibration.md`` and ``calibration.html`` (self-contained: its ECDF
  overlays of held-out against simulated runs, one per metric, and the exit
  mix, embedded as PNG), written to a temporary folder and renamed into place.
  An existing folder is replaced only when it holds an earlier calibration
  report (its ``calibration.json``) and nothing else of note.

It sits in ``api``, above the two parts it joins: it reads calibration's
result (:class:`sim.calibration.result.Calibration`) and writes through
``output`` (Markdown escaping, HTML, figures, atomic files). ``output`` cannot
import calibration (calibration imports sweeps, which writes through
``output``: a circle), and calibration renders no report.

Names from the traces (the folder, models, classes, exit labels, prices'
sources) are escaped for Markdown (:mod:`sim.output.safe_text`).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from sim.bad_input import InputError
from sim.calibration import accuracy
from sim.calibration.exits import CATEGORIES
from sim.calibration.result import Calibration
from sim.calibration.verdict import Metric
from sim.output.safe_text import md_code, md_text

REPORT_FILES = ("calibration.json", "calibration.md", "calibration.html")


def write_scenario(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (a temporary file, then a rename)."""
    from sim.output.files import write_atomic

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, text.encode("utf-8"))
    return target


def write_report(folder: str | os.PathLike, c: Calibration) -> list[Path]:
    """Write the report files into ``folder`` (atomically); their paths."""
    target = Path(folder)
    if target.exists():
        if not target.is_dir():
            raise InputError("the report path exists and is not a folder", source=str(target))
        extra = sorted(p.name for p in target.iterdir()
                       if p.name not in REPORT_FILES and not p.name.startswith("."))
        if extra and not (target / "calibration.json").exists():
            raise InputError(f"the report folder holds other files ({', '.join(extra[:3])}); "
                             f"choose another --report folder", source=str(target))
    from sim.traces.writer import atomic_folder

    with atomic_folder(target, force=True) as tmp:  # checked above: ours to replace
        summary = c.summary()
        (tmp / "calibration.json").write_text(json.dumps(summary, indent=2) + "\n",
                                              encoding="utf-8")
        markdown = report_markdown(c)
        (tmp / "calibration.md").write_text(markdown, encoding="utf-8")
        from sim.output.html import markdown_to_html

        html = markdown_to_html(markdown, figures(c), title=f"Calibration: {c.doc['name']}")
        (tmp / "calibration.html").write_text(html, encoding="utf-8")
    return [target / name for name in REPORT_FILES]


# ---------------------------------------------------------------- markdown
def _fmt(x: float, unit: str) -> str:
    if not np.isfinite(x):
        return "n/a"
    if unit == "USD":
        return f"${x:,.4f}"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.1f}".rstrip("0").rstrip(".")


def _pair(interval: tuple[float, float], unit: str) -> str:
    return f"[{_fmt(interval[0], unit)}, {_fmt(interval[1], unit)}]"


def _metric_row(m: Metric) -> str:
    if m.tested:
        verdict = "rejected" if m.rejected else "ok"
        p = f"{m.p_value:.3g} / {m.p_adjusted:.3g}" if m.p_value is not None else "n/a"
    else:
        verdict = "ok" if m.ks < m.critical or m.ks == 0 else "beyond (not tested)"
        p = "not in the verdict"
    return (f"| {m.label} | {m.ks:.3f} | [{m.ks_interval[0]:.3f}, {m.ks_interval[1]:.3f}] | "
            f"{m.critical:.3f} | {p} | {verdict} | {_fmt(m.real_median, m.unit)} "
            f"{_pair(m.real_median_interval, m.unit)} | {_fmt(m.sim_median, m.unit)} | "
            f"{_fmt(m.real_p95, m.unit)} {_pair(m.real_p95_interval, m.unit)} | "
            f"{_fmt(m.sim_p95, m.unit)} |")


def _pct(x: float) -> str:
    return "n/a" if not np.isfinite(x) else f"{100 * x:.1f}%"


def _pct_interval(i: tuple[float, float]) -> str:
    if not (np.isfinite(i[0]) and np.isfinite(i[1])):
        return ""
    return f" [{100 * i[0]:.1f}, {100 * i[1]:.1f}]"


def _structure_lines(c: Calibration) -> list[str]:
    s = c.structure
    lines = ["## Structure", ""]
    if s.forced:
        return [*lines, f"{s.reason} (no choice made).", ""]
    lines += [f"Chosen: **{md_text(s.chosen.name)}** ({md_code(s.chosen.flags())}). Why: "
              f"{md_text(s.reason)}.", "",
              "| structure | held-out loss per fold | mean | standard error |",
              "|---|---|---|---|"]
    for name, values in s.losses.items():
        mark = " (chosen)" if name == s.chosen.name else ""
        lines.append(f"| {md_text(name)}{mark} | {', '.join(f'{v:.3f}' for v in values)} | "
                     f"{s.mean(name):.3f} | {s.se(name):.3f} |")
    lines += ["", "Loss: the search's (per-run KS distances, exit-mix distance, resolved-share "
              "gap) of each fold's held-out runs against the world fitted on the other folds. "
              "The lowest mean wins; a simpler structure wins when it is within one standard "
              "error of the paired per-fold differences. `--classes` or `--by model` forces "
              "a structure.", ""]
    return lines


def _fold_lines(c: Calibration) -> list[str]:
    folds = c.judgement.folds
    # a measure a fold could not take (no cost recorded in its held-out runs) is "-" there
    keys = [k for k in ("steps", "prompt", "output", "cost") if any(k in f.ks for f in folds)]
    head = " | ".join(f"{k} KS (95th pct)" for k in keys)
    lines = ["## Folds", "",
             "Each fold's held-out runs against the world fitted on the other folds: the "
             "distance, the 95th percentile of the distance a perfect model class fitted on "
             "the other folds would show (`*`: beyond it), and the test's p-value in "
             "brackets (combined over folds for the verdict).", "",
             f"| fold | held out | simulated | {head} | exit mix TV (95th pct) | loss |",
             "|---" * (len(keys) + 5) + "|"]
    for f in folds:
        cells = " | ".join(f"{f.ks[k]:.3f} ({f.critical[k]:.3f}){'' if f.within(k) else ' *'} "
                           f"[{f.p.get(k, float('nan')):.3g}]" if k in f.ks else "-"
                           for k in keys)
        lines.append(f"| {f.fold + 1} | {f.n_real} | {f.n_sim} | {cells} | {f.tv:.3f} "
                     f"({f.tv_critical:.3f}) [{f.tv_p:.3g}] | "
                     f"{c.folds[f.fold].loss:.3f} |")
    within = {k: (sum(f.within(k) for f in folds if k in f.ks), sum(k in f.ks for f in folds))
              for k in keys}
    lines += ["", "Within the 95th percentile: " + ", ".join(
        f"{k} {n} of {m} folds" for k, (n, m) in within.items()) + ".", ""]
    return lines


def _ladder_lines(c: Calibration) -> list[str]:
    if not c.ladder:
        return []
    lines = ["## Budgets: forecast against replay", "",
             "For each budget, on the held-out runs of every fold: the world fitted on the "
             "other folds, simulated with and without the budget on the same random streams "
             "(forecast), against the held-out runs replayed through the harness with and "
             "without it (replay). Stopped: share of runs the budget stops; successes lost: "
             "runs that succeeded and are stopped, as a share of the runs; dollars saved: "
             "share of the cost without the budget. 95% intervals in brackets (Wilson; "
             "bootstrap over runs for dollars).", "",
             "| budget | value | stopped: forecast | replay | successes lost: forecast | "
             "replay | dollars saved: forecast | replay |", "|---|---|---|---|---|---|---|---|"]
    for r in c.ladder:
        b = r.budget
        value = (f"${b.value:,.4f}" if b.kind == "money_usd" else f"{b.value:,.0f}")
        cells = []
        for fig in ("stopped", "lost", "saved"):
            cells.append(f"{_pct(r.forecast[fig])}{_pct_interval(r.forecast_interval[fig])}")
            cells.append(f"{_pct(r.replay[fig])}{_pct_interval(r.replay_interval[fig])}")
        lines.append(f"| {b.label} | {value} | " + " | ".join(cells) + " |")
    gaps = {fig: [abs(r.gap(fig)) for r in c.ladder if np.isfinite(r.gap(fig))]
            for fig in ("stopped", "lost", "saved")}
    lines += ["", "Mean absolute gap, forecast minus replay: " + ", ".join(
        f"{name} {100 * float(np.mean(v)):.1f} points" for name, v in
        (("stopped", gaps["stopped"]), ("successes lost", gaps["lost"]),
         ("dollars saved", gaps["saved"])) if v) + ".", ""]
    return lines


def _accuracy_lines(c: Calibration) -> list[str]:
    """The forecast's errors on the user's own runs beside the sampling floor
    (:mod:`sim.calibration.accuracy`)."""
    table = accuracy.rows(c)
    if not table:
        return []
    return ["## Accuracy against the sampling floor", "",
            "Per question, the forecast's mean error on held-out runs (per fold and budget: "
            "|forecast - replay|; per fold: the KS distance of the held-out runs to the "
            "fold world's simulation) beside the sampling floor: the same error when the "
            "other folds' runs themselves are the forecast (their replay under the budget, "
            "their per-run values), what a perfect model fitted on them would miss by. "
            "Ratio about 1: as good as these sample sizes allow. Benchmarks of other "
            "agents: the README's Calibration section (`python -m benchmarks.accuracy`).", "",
            *accuracy.markdown({md_text(Path(c.folder).name or c.folder): table}), ""]


def _fanout_lines(c: Calibration) -> list[str]:
    """The recorded against the fitted spawn rate per step bin (traces whose
    calls record subagents: :func:`sim.calibration.fanout.step_table`)."""
    bins = [] if c.fanout is None else c.fanout.by_step
    if not bins:
        return []
    from sim.calibration.fanout import BOOTSTRAP, MIN_BIN_CALLS

    lines = ["## Spawn rate by step bin", "",
             "Per bin of the parents' steps (bins with fewer than "
             f"{MIN_BIN_CALLS} productive parent calls merged into the next), the spawn "
             "calls per productive call the traces record, with its 95% interval "
             f"(percentile bootstrap over parent runs, {BOOTSTRAP} resamples), beside the "
             "fitted world's rate (one rate for every bin unless a chi-square test rejects "
             "equal rates at 1%). Shown, not in the verdict: the verdict's tests compare "
             "per-run quantities with the fold worlds' simulated runs, whose records hold "
             "their children but not the step of each spawn; out of sample, the accuracy "
             "table's spawn-rate row judges these rates on held-out folds.", "",
             "| steps | productive calls | spawns | recorded [95%] | fitted | |",
             "|---|---|---|---|---|---|"]
    for b in bins:
        steps = f"{b.first}+" if b.last is None else (
            f"{b.first}" if b.last == b.first else f"{b.first}-{b.last}")
        lo, hi = b.interval
        interval = f"[{lo:.4f}, {hi:.4f}]" if math.isfinite(lo) else "[n/a]"
        lines.append(f"| {steps} | {b.calls:,} | {b.spawns:,} | {b.rate:.4f} {interval} "
                     f"| {b.fitted:.4f} | {'' if b.inside else 'outside'} |")
    return [*lines, ""]


def _intro_lines(c: Calibration) -> list[str]:
    """The traces, the folds, the sample and the search's own sampling error."""
    dropped = ", ".join(f"{n} {why}" for why, n in c.dropped.items()) or "none"
    repaired = "".join(f"; {n} {why}" for why, n in c.fit.repaired.items())
    k = c.options["folds"]
    lines = [f"Traces {md_code(c.folder)}: {c.fit.n} runs (runs dropped: {dropped}"
             f"{repaired}), dealt into {k} "
             f"folds of {', '.join(str(f.held_out) for f in c.folds)} runs (stratified by "
             f"model and exit, seed {c.options['seed']}). Each fold's runs were held out "
             f"while a world was fitted on the others, and that world simulated for "
             f"{', '.join(str(f.sim_runs) for f in c.folds)} runs. The scenario written is "
             f"fitted on all {c.fit.n} runs (simulated afresh for {c.sim.n} runs).", ""]
    error = c.search.error or {}
    if c.sampled_runs < c.fit.n:
        lines += [f"The scenario's direct estimates read all {c.fit.n} runs; its search and "
                  f"clusters (if any), and the whole cross-validation (the folds, each "
                  f"fold's fit, simulation and held-out comparison), used a stratified "
                  f"sample of {c.sampled_runs} runs (at most {c.options.get('sample')} per "
                  f"model; held out per fold: "
                  f"{', '.join(str(len(f.held_ids)) for f in c.folds)}), so the time to a "
                  f"verdict does not grow with the traces.", ""]
    power = c.power()
    shown = ", ".join(f"{k} {v:.3f}" for k, v in power["detectable_ks"].items()
                      if math.isfinite(v))
    if shown:
        lines += [f"Power at these sizes ({power['held_out']} held-out runs): the verdict "
                  f"rejects a world whose runs differ from the real ones by a KS distance of "
                  f"{shown} (in one metric, the others right) with probability "
                  f"{power['probability']:.0%} (an approximation: folds' effective sizes "
                  f"from their critical values, Stouffer, Bonferroni over "
                  f"{power['tests']} tests).", ""]
    shifted = ", ".join(f"{k} {v:.0%}" for k, v in power["at_shift"].items()
                        if math.isfinite(v))
    if shifted:
        lines += [f"Power against a {power['shift']:.0%} shift (every run's metric "
                  f"{1 + power['shift']:.1f} times the fitted world's, the rest right), at "
                  f"these sizes, from the verdict's own null replicates: {shifted}.", ""]
    if error:
        lines += [f"Search: loss {c.search.loss:.4f} against {c.search.sampled} runs "
                  f"(before the search {c.search.start_loss:.4f}); its own sampling error "
                  f"(bootstrap standard error) {error['total']:.4f}: {error['runs']:.4f} from "
                  f"the runs sampled (0 when every run is searched against), "
                  f"{error['simulation']:.4f} from its simulated runs.", ""]
    if c.search.fatol is not None:
        lines += [f"The search stopped when its losses were within the loss's noise floor "
                  f"{c.search.fatol:.4f} (its standard deviation under sampling alone) and its "
                  f"points within {c.search.xatol:.3f} (log units), after "
                  f"{c.search.evaluations} simulations of {c.search.simulated} runs"
                  + (" from the folds' optima" if c.search.start is not None else "")
                  + "; the folds' searches took "
                  + ", ".join(str(f.search.evaluations) for f in c.folds) + ".", ""]
    return lines


def report_markdown(c: Calibration) -> str:
    """The report as Markdown (images named ``ecdf_<metric>.png`` and ``exits.png``)."""
    about = "\n".join(map(md_text, str(c.doc["description"]).splitlines()))
    lines = [f"# Calibration: {md_text(c.doc['name'])}", "", about, "", *_intro_lines(c)]
    lines += ["## Verdict", ""]
    if c.reasons:
        lines.append("**Fit rejected** (exit status 1): the folds' tests, combined per metric "
                     "and adjusted over the metrics and the exit mix, reject")
        lines.append("")
        lines += [f"- {why}" for why in c.reasons]
    else:
        lines.append("**Fit accepted** (exit status 0): no per-run metric and not the exit "
                     "mix differs, over the folds, beyond what a perfect model class fitted on "
                     "the other folds shows, at a 5% family-wise level (folds combined by "
                     "Stouffer, adjusted over the metrics and the exit mix by the null "
                     "replicates' smallest combined p-value).")
    lines += ["", *_structure_lines(c)]
    lines += ["## Held-out runs against simulated runs (all folds)", "",
              "All held-out runs against all fold simulations. Shown, not tested: the folds' "
              "worlds together are close to a fit of all runs, so these distances are nearly "
              "in-sample (critical: the two-sample 5% value, for scale). p / adjusted: the "
              "metric's fold p-values combined (Stouffer; see Folds) and adjusted over the "
              "tests (family-wise).", "",
              "| metric | KS | 95% interval | critical | p / adjusted | | median held out [95%] "
              "| median simulated | p95 held out [95%] | p95 simulated |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [_metric_row(m) for m in c.metrics]
    e = c.exits
    p = "" if e.p_value is None else (f"; folds combined p {e.p_value:.3g}, adjusted "
                                      f"{e.p_adjusted:.3g}")
    lines += ["", f"Exit mix: total-variation distance **{e.tv:.3f}** (95% interval "
              f"[{e.interval[0]:.3f}, {e.interval[1]:.3f}]; critical value {e.critical:.3f}"
              f"{p})" + (", **rejected**." if e.rejected else "."), "",
              "| exit | held out | simulated |", "|---|---|---|"]
    for cat in CATEGORIES:
        a, b = e.real.get(cat, 0.0), e.sim.get(cat, 0.0)
        if a or b:
            lines.append(f"| {cat} | {a:.1%} | {b:.1%} |")
    labels = sorted({lab for lab in c.fit.runs["exit"]})
    lines += ["", "Exit labels of the traces: " + ", ".join(md_code(lab) for lab in labels if lab)
              + " (categories: `sim/calibration/exits.py`).", ""]
    lines += _fold_lines(c)
    lines += _ladder_lines(c)
    lines += _accuracy_lines(c)
    lines += _fanout_lines(c)
    lines += ["## Classes and prices (the final fit)", "",
              "| class | fitted runs | model | input | output | cache read | cache write | "
              "prices from |", "|---|---|---|---|---|---|---|---|"]
    for cls in c.estimates.classes:
        pr = c.estimates.prices.get(cls.model)
        if pr is None:
            continue
        lines.append(f"| {md_text(cls.name)} | {cls.runs} | {md_text(cls.model)} | {pr.input:g} "
                     f"| {pr.output:g} | {pr.cache_read:g} | {pr.cache_write:g} "
                     f"| {md_text(pr.source)} |")
    s = c.search
    lines += ["", "Prices in USD per million tokens.", "", "## Search", "",
              f"Simulate-and-compare over the need's location and spread and an unsolvable "
              f"task's extra work, {s.evaluations} simulations on common random numbers: loss "
              f"(sum of per-run KS distances, exit-mix distance and resolved-share gap on the "
              f"fitted runs) {s.start_loss:.3f} from the direct estimates, {s.loss:.3f} after "
              f"(need x {np.exp(s.adjustment.need_shift):.3f}, its log-sd x "
              f"{s.adjustment.sigma_scale:.3f}, unsolvable work x "
              f"{s.adjustment.unsolvable_scale:.3f}).", "", "## Figures", ""]
    for m in c.metrics:
        lines += [f"![{m.label}: held out (n={m.n_real}) against simulated (n={m.n_sim}), KS "
                  f"{m.ks:.3f}](ecdf_{m.key}.png)", ""]
    fv = ", ".join(f"{k} {v:.3g}" for k, v in c.judgement.fit_variance.items())
    beta = ", ".join(f"{k} {v:.2f}" for k, v in c.judgement.fit_response.items())
    lines += ["![exit mix: held out against simulated](exits.png)", "", "## Method", "",
              "One verdict: in each fold, the per-run KS distances (steps, prompt tokens, "
              "output tokens, cost) and the exit mix's total-variation distance of its "
              "held-out runs against the world fitted on the other folds; each metric's fold "
              "p-values combined by Stouffer's method (the sum divided by its standard "
              "deviation under the folds' dependence: each fold's world holds the other "
              "folds' runs and follows them by its response, the slope of the fold "
              "worlds' CDFs on their training runs', here " + beta + "); one family-wise "
              "adjustment at 5% over "
              "the metrics and the exit mix. Critical values and p-values by parametric "
              "bootstrap: per fold, null replicates (samples of the held-out size drawn "
              "from the fold's own world, compared with its simulation as the held-out "
              "runs are), widened by the fit's own error (its variance v_fit per unit of "
              "a CDF's variance: the runs' sampling variance times the response, plus "
              "what the fold worlds, a jackknife of the fit, spread beyond it counted once, "
              "capped at a perfect model's 1/n + 1/search runs; here " + fv + "); "
              "the family-wise adjustment is the share of replicates whose smallest "
              "combined p-value is at most the test's (single-step min-P). Output "
              "tokens per call are shown with a 5% run-level permutation value, not tested. "
              "Intervals: percentile bootstrap over the held-out runs. Percentiles: the "
              "project's definition (an observed value at rank floor(q n)). See "
              "`sim/calibration/verdict.py`, `ladder.py` and `structure.py`.", ""]
    return "\n".join(lines)


# ----------------------------------------------------------------- figures
def figures(c: Calibration) -> dict[str, bytes]:
    """PNG bytes by image name: an ECDF overlay per metric and the exit mix."""
    from sim.output.figures import new_figure, png_bytes

    real, sim = c.real, c.sim
    out = {}
    for m in c.metrics:
        a = np.asarray(real.call_output if m.key == "call_output" else getattr(real, m.key),
                       dtype=float)
        b = np.asarray(sim.call_output if m.key == "call_output" else getattr(sim, m.key),
                       dtype=float)
        a, b = np.sort(a[np.isfinite(a)]), np.sort(b[np.isfinite(b)])
        fig, (ax,) = new_figure(3.2)
        for x, label, color in ((a, f"held out (n={a.size})", "#1f5f99"),
                                (b, f"simulated (n={b.size})", "#d4622a")):
            ax.step(x, np.arange(1, x.size + 1) / x.size, where="post", label=label,
                    color=color, linewidth=1.4)
        if m.key != "steps" and min(a[0], b[0]) > 0:
            ax.set_xscale("log")
        elif m.key != "steps":  # zeros (an unpriced model): 0 one decade below the smallest
            positive = np.concatenate([a[a > 0], b[b > 0]])
            ax.set_xscale("symlog", linthresh=float(positive.min()) if positive.size else 1.0)
        ax.set_ylim(0, 1.01)
        ax.set_xlabel(f"{m.label} ({m.unit})")
        ax.set_ylabel("share of runs" if m.key != "call_output" else "share of calls")
        ax.set_title(f"{m.label}: KS {m.ks:.3f}, 5% critical {m.critical:.3f}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
        out[f"ecdf_{m.key}.png"] = png_bytes(fig)
    cats = [k for k in CATEGORIES if c.exits.real.get(k, 0) or c.exits.sim.get(k, 0)]
    fig, (ax,) = new_figure(2.8)
    x = np.arange(len(cats))
    ax.bar(x - 0.2, [c.exits.real.get(k, 0) * 100 for k in cats], 0.4, label="held out",
           color="#1f5f99")
    ax.bar(x + 0.2, [c.exits.sim.get(k, 0) * 100 for k in cats], 0.4, label="simulated",
           color="#d4622a")
    ax.set_xticks(x, cats)
    ax.set_ylabel("% of runs")
    ax.set_title(f"exit mix: total variation {c.exits.tv:.3f}", fontsize=10)
    ax.legend(fontsize=8)
    out["exits.png"] = png_bytes(fig)
    return out
