"""A sweep's report with figures: self-contained HTML (figures embedded as
base64 PNG, styles inline, nothing fetched), and the per-cell summary frame.

A sweep's folder gets ``report.html``: its ``report.md`` (written by
:mod:`sim.output.results`) with figures of outcome shares, the cost tail, steps and,
for several cells, the success-cost frontier. (A comparison's report is
:mod:`sim.output.comparison_report`'s.) HTML is rendered from the Markdown by
:func:`sim.output.markdown_html.markdown_to_html`, so both say the same.
Files are written atomically; the same input gives the same bytes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from sim.analysis import frames, stats
from sim.output import figures
from sim.output.comparison_report import FIGURES_DIR, HTML_NAME
from sim.output.markdown_html import markdown_to_html
from sim.output.results import records_frame, report_markdown, write_atomic

__all__ = ["markdown_to_html", "summary_frame", "sweep_figures", "sweep_html",
           "write_sweep_html"]


# -------------------------------------------------------------- summaries

def summary_frame(cells: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per cell of a summary (summary.json's ``cells``): ``cell``, one
    column per sweep parameter (its dotted path), ``tasks``, ``succeeded`` and
    its 95% Wilson interval ``succeeded_low``/``succeeded_high``, one column
    per outcome label holding its share, ``{steps,input_tokens,output_tokens}
    _{mean,p50,p95,max}``, ``cost_{mean,p50,p95,max,total}`` (USD),
    ``cache_hit_share`` and the per-task means (``nudges_mean``, ...); a DES
    cell with a rate limit adds its retry-storm measurements
    (``capacity.storm``, :func:`sim.analysis.capacity.storm`) as ``storm_<key>``
    columns, a nested one as ``storm_<key>_<stat>`` (``storm_share_429``,
    ``storm_runs_died``, ``storm_time_to_finish_s_p95``, ...; missing, NaN, in a
    cell without)."""
    rows = []
    outcomes = sorted({o for c in cells for o in c["outcomes"]},
                      key=lambda o: (o != "succeeded", o))
    for cell in cells:
        n = cell["tasks"]
        counts = cell.get("outcome_counts") or {
            k: round(v * n) for k, v in cell["outcomes"].items()}
        low, high = stats.share_ci(counts.get("succeeded", 0), n)
        row: dict[str, Any] = {"cell": cell["name"], **cell.get("params", {}), "tasks": n,
                               "succeeded": cell["outcomes"].get("succeeded", 0.0),
                               "succeeded_low": low, "succeeded_high": high}
        row.update({o: cell["outcomes"].get(o, 0.0) for o in outcomes if o != "succeeded"})
        for key in ("steps", "input_tokens", "output_tokens"):
            row.update({f"{key}_{s}": cell[key][s] for s in ("mean", "p50", "p95", "max")})
        row.update({f"cost_{s}": cell["cost"][s] for s in ("mean", "p50", "p95", "max",
                                                           "total")})
        row["cache_hit_share"] = cell.get("cache_hit_share", 0.0)
        row.update({k: v for k, v in cell.items() if k.endswith("_mean")})
        for key, value in cell.get("capacity", {}).get("storm", {}).items():
            if isinstance(value, Mapping):
                row.update({f"storm_{key}_{stat}": x for stat, x in value.items()})
            else:
                row[f"storm_{key}"] = value
        rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- sweeps

def sweep_figures(summary: Mapping[str, Any], rows: pd.DataFrame, *,
                  ceiling: float | None = None) -> dict[str, Figure]:
    """The figures of a sweep's report: ``outcomes``, ``cost_ccdf``, ``steps``,
    with subagents (the rows' ``children`` column) ``children`` (the
    subagents each run started) and, with more than one cell, ``frontier``
    (``ceiling`` in USD)."""
    cells = summary["cells"]
    by_cell = {c["name"]: rows[rows["cell"] == c["name"]] for c in cells}
    out = {
        "outcomes": figures.outcome_bars({c["name"]: c["outcomes"] for c in cells}),
        "cost_ccdf": figures.cost_ccdf({k: v["cost_usd"] for k, v in by_cell.items()}),
        "steps": figures.steps_histogram({k: v["steps"] for k, v in by_cell.items()}),
    }
    if "children" in rows:  # a harness with subagents
        out["children"] = figures.steps_histogram(
            {k: v["children"] for k, v in by_cell.items()}, title="Subagents per run",
            xlabel="subagents started")
    if len(cells) > 1:
        out["frontier"] = figures.frontier(summary_frame(cells), ceiling=ceiling)
    return out


_SWEEP_CAPTIONS = {
    "outcomes": "Outcome shares per cell",
    "cost_ccdf": "Cost tail: share of tasks costing more than x (log-log)",
    "steps": "Model steps per task",
    "children": "Subagents (child runs) each run started",
    "frontier": "Succeeded share against mean and p95 cost; the line joins the cells no "
                "other cell beats",
}


def sweep_html(summary: Mapping[str, Any], rows: pd.DataFrame, *, title: str,
               ceiling: float | None = None) -> str:
    """The HTML report of a sweep: the Markdown report of :mod:`sim.output.results`
    with a Figures section after the results, before the settings."""
    figs = sweep_figures(summary, rows, ceiling=ceiling)
    images = {f"{FIGURES_DIR}/{name}.png": figures.png_bytes(fig) for name, fig in figs.items()}
    section = "## Figures\n\n" + "\n\n".join(
        f"![{_SWEEP_CAPTIONS[name]}]({FIGURES_DIR}/{name}.png)" for name in figs)
    if ceiling is not None and "frontier" in figs:
        best = figures.best_under_ceiling(summary_frame(summary["cells"]), ceiling)
        section += (f"\n\nBest cells with mean cost under ${ceiling:,.2f}: " + (", ".join(
            f"`{r.cell}` ({100 * r.succeeded:.1f}% succeeded, ${r.cost_mean:,.2f})"
            for r in frames.rows(best.head(3))) or "none") + ".")
    markdown = report_markdown(summary, title)
    head, sep, rest = markdown.partition("\n## Settings\n")  # the figures before the settings
    markdown = f"{head.rstrip()}\n\n{section}\n\n{sep.lstrip()}{rest}" if sep else (
        f"{markdown.rstrip()}\n\n{section}\n")
    return markdown_to_html(markdown, images, title=title)


def write_sweep_html(out_dir: str | os.PathLike, summary: Mapping[str, Any],
                     records_by_cell: Mapping[str, list] | pd.DataFrame, *, title: str,
                     ceiling: float | None = None) -> Path:
    """Write ``report.html`` of a sweep into ``out_dir``; return its path.
    ``records_by_cell`` is the records by cell, or a frame of their rows
    (with at least the columns cell, cost_usd and steps)."""
    if isinstance(records_by_cell, pd.DataFrame):
        rows = records_by_cell
    else:
        rows = pd.concat([records_frame(list(records)) for records in records_by_cell.values()],
                         ignore_index=True)
    path = Path(out_dir) / HTML_NAME
    write_atomic(path, sweep_html(summary, rows, title=title, ceiling=ceiling).encode("utf-8"))
    return path
