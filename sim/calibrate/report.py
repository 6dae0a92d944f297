"""Writing a calibration: the scenario file and its report.

- the scenario YAML (commented: what each fitted section was fitted from),
  written to a temporary file and renamed into place;
- a report folder with ``calibration.json`` (the figures as data),
  ``calibration.md`` and ``calibration.html`` (self-contained: its ECDF
  overlays of held-out against simulated runs, one per metric, and the exit
  mix, embedded as PNG), written to a temporary folder and renamed into place.
  An existing folder is replaced only when it holds an earlier calibration
  report (its ``calibration.json``) and nothing else of note.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from sim.calibrate.exits import CATEGORIES
from sim.calibrate.measure import Metric
from sim.calibrate.pipeline import Calibration
from sim.errors import InputError

REPORT_FILES = ("calibration.json", "calibration.md", "calibration.html")


def write_scenario(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (a temporary file, then a rename)."""
    from sim.output.results import write_atomic

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
    verdict = "rejected" if m.rejected else "ok"
    return (f"| {m.label} | {m.ks:.3f} | [{m.ks_interval[0]:.3f}, {m.ks_interval[1]:.3f}] | "
            f"{m.critical:.3f} | {verdict} | {_fmt(m.real_median, m.unit)} "
            f"{_pair(m.real_median_interval, m.unit)} | {_fmt(m.sim_median, m.unit)} | "
            f"{_fmt(m.real_p95, m.unit)} {_pair(m.real_p95_interval, m.unit)} | "
            f"{_fmt(m.sim_p95, m.unit)} |")


def report_markdown(c: Calibration) -> str:
    """The report as Markdown (images named ``ecdf_<metric>.png`` and ``exits.png``)."""
    lines = [f"# Calibration: {c.doc['name']}", "", c.doc["description"], ""]
    dropped = ", ".join(f"{n} {why}" for why, n in c.dropped.items()) or "none"
    lines += [f"Traces `{c.folder}`: {c.fit.n} runs fitted, {c.held_out.n} held out "
              f"(share {c.options['holdout_fraction']}, seed {c.options['seed']}), runs "
              f"dropped: {dropped}. The fitted scenario was simulated afresh for {c.sim.n} "
              f"runs (root seed {c.options['seed'] + 2}, not the search's).", ""]
    lines += ["## Verdict", ""]
    if c.reasons:
        lines.append("**Fit rejected** (exit status 1): some distances reach their 5% "
                     "critical value:")
        lines.append("")
        lines += [f"- {why}" for why in c.reasons]
    else:
        lines.append("**Fit accepted** (exit status 0): every KS distance between held-out and "
                     "simulated runs, and the exit mix's total-variation distance, is under "
                     "its 5% critical value.")
    lines += ["", "## Held-out runs against simulated runs", "",
              "| metric | KS | 95% interval | 5% critical | | median held out [95%] | median "
              "simulated | p95 held out [95%] | p95 simulated |",
              "|---|---|---|---|---|---|---|---|---|"]
    lines += [_metric_row(m) for m in c.metrics]
    lines += ["", f"Exit mix: total-variation distance **{c.exits.tv:.3f}** (95% interval "
              f"[{c.exits.interval[0]:.3f}, {c.exits.interval[1]:.3f}]; 5% critical value "
              f"{c.exits.critical:.3f}: the distance between two samples of {c.exits.n_real} "
              f"and {c.exits.n_sim} runs of the pooled mix)"
              + (", **rejected**." if c.exits.rejected else "."), "",
              "| exit | held out | simulated |", "|---|---|---|"]
    for cat in CATEGORIES:
        a, b = c.exits.real.get(cat, 0.0), c.exits.sim.get(cat, 0.0)
        if a or b:
            lines.append(f"| {cat} | {a:.1%} | {b:.1%} |")
    labels = sorted({lab for lab in c.fit.runs["exit"]} | {lab for lab in c.held_out.runs["exit"]})
    lines += ["", "Exit labels of the traces: " + ", ".join(f"`{lab}`" for lab in labels if lab)
              + " (categories: `sim/calibrate/exits.py`).", ""]
    lines += ["## Classes and prices", "",
              "| class | fitted runs | model | input | output | cache read | cache write | "
              "prices from |", "|---|---|---|---|---|---|---|---|"]
    for k in c.estimates.classes:
        p = c.estimates.prices.get(k.model)
        if p is None:
            continue
        lines.append(f"| {k.name} | {k.runs} | {k.model} | {p.input:g} | {p.output:g} | "
                     f"{p.cache_read:g} | {p.cache_write:g} | {p.source} |")
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
    lines += ["![exit mix: held out against simulated](exits.png)", "", "## Method", "",
              "KS critical values: per run, the asymptotic two-sample value c(0.05) "
              "sqrt((n + m) / (n m)); per call, a permutation test that keeps runs whole "
              "(calls of one run are not independent). Intervals: percentile bootstrap over "
              "the held-out runs. Percentiles: the project's definition (an observed value at "
              "rank floor(q n)). See `sim/calibrate/` for what is estimated from what.", ""]
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
