"""A comparison's report: figures, Markdown (figures as ``figures/*.png``),
self-contained HTML and ``comparison.json``
(:meth:`sim.analysis.compare.Comparison.to_dict`), written atomically.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from sim.analysis import frames
from sim.output import figures
from sim.output.markdown_html import markdown_to_html
from sim.output.results import write_atomic, write_json
from sim.output.safe_text import md_code, md_text

if TYPE_CHECKING:  # comparisons (and scipy) are imported by the functions that render them
    from sim.analysis.compare import Comparison

HTML_NAME = "report.html"
MARKDOWN_NAME = "report.md"
COMPARISON_NAME = "comparison.json"
FIGURES_DIR = "figures"


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "cell"


def comparison_figures(result: Comparison) -> dict[str, Figure]:
    """The figures of a comparison: ``outcomes`` (base and candidate bars per
    cell), ``share_changes`` (changes with intervals) and, per cell,
    ``<cell>_cost_ccdf`` and ``<cell>_steps`` with both sides."""
    shares = {}
    for b, _c in result.cell_pairs:
        table = result.outcomes[result.outcomes["cell"] == b]
        prefix = "" if len(result.cell_pairs) == 1 else f"{b}: "
        shares[f"{prefix}base ({result.base.label})"] = dict(
            zip(table["outcome"], table["base_share"], strict=True))
        shares[f"{prefix}candidate ({result.candidate.label})"] = dict(
            zip(table["outcome"], table["candidate_share"], strict=True))
    out = {"outcomes": figures.outcome_bars(shares),
           "share_changes": figures.share_changes(
               result.outcomes, threshold_pp=result.thresholds.max_share_drop_pp)}
    for b, c in result.cell_pairs:
        b_rows, c_rows = result.base.cell_rows(b), result.candidate.cell_rows(c)
        sides = {f"base ({result.base.label})": b_rows,
                 f"candidate ({result.candidate.label})": c_rows}
        slug = _slug(b)
        out[f"{slug}_cost_ccdf"] = figures.cost_ccdf(
            {k: v["cost_usd"] for k, v in sides.items()},
            title=f"{b}: share of tasks costing more than x")
        out[f"{slug}_steps"] = figures.steps_histogram(
            {k: v["steps"] for k, v in sides.items()}, title=f"{b}: model steps per task")
    return out


def _pct(share: float) -> str:
    return f"{100 * share:.1f}%"


def _num(value: float, metric: str) -> str:
    if metric == "cost_usd":
        return f"${value:,.2f}" if abs(value) >= 0.01 or value == 0 else f"${value:,.4f}"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _signed(value: float, metric: str) -> str:
    text = _num(abs(value), metric)
    return ("+" if value > 0 else "-" if value < 0 else "") + text


def _outcome_rows(result: Comparison, cell: str) -> list[str]:
    from sim.analysis.compare import format_p

    level = round(100 * (1 - result.thresholds.alpha))
    rows = [f"| outcome | base | candidate | change | {level}% interval | p | test |",
            "|---|---:|---:|---:|---:|---:|---|"]
    for r in frames.rows(result.outcomes[result.outcomes["cell"] == cell]):
        rows.append(f"| {md_code(r.outcome)} | {_pct(r.base_share)} ({r.base_count:,}) "
                    f"| {_pct(r.candidate_share)} ({r.candidate_count:,}) "
                    f"| {r.change_pp:+.2f} pp | {r.ci_low_pp:+.2f} to {r.ci_high_pp:+.2f} pp "
                    f"| {format_p(r.p_value)} | {r.test} |")
    return rows


def _metric_rows(result: Comparison, cell: str) -> list[str]:
    from sim.analysis.compare import METRICS, format_p

    level = round(100 * (1 - result.thresholds.alpha))
    labels = dict(METRICS)
    rows = [f"| per task | stat | base | candidate | change | change % | {level}% interval of "
            "change | p |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    floor = 2 / (result.thresholds.resamples + 1)  # the smallest bootstrap p-value
    for r in frames.rows(result.metrics[result.metrics["cell"] == cell]):
        interval = ("n/a (max)" if r.stat == "max" else
                    f"{_signed(r.ci_low, r.metric)} to {_signed(r.ci_high, r.metric)}")
        p = f"≤{floor:.2g}" if r.p_value <= floor * (1 + 1e-9) else format_p(r.p_value)
        rows.append(f"| {labels[r.metric]} | {r.stat} | {_num(r.base, r.metric)} "
                    f"| {_num(r.candidate, r.metric)} | {_signed(r.change, r.metric)} "
                    f"| {r.change_pct:+.1f}% | {interval} | {p} |")
    return rows


def _check_rows(result: Comparison, cell: str) -> list[str]:
    from sim.analysis.compare import format_p

    level = round(100 * (1 - result.thresholds.alpha))
    rows = [f"| check | change | {level}% interval | limit | p | Holm-adjusted p | result |",
            "|---|---:|---:|---:|---:|---:|---|"]
    floor = 2 / (result.thresholds.resamples + 1)  # the smallest bootstrap p-value
    for r in frames.rows(result.checks[result.checks["cell"] == cell]):
        p = (f"≤{floor:.2g}" if r.test == "bootstrap" and r.p_value <= floor * (1 + 1e-9)
             else format_p(r.p_value))
        unit = " pp" if r.unit == "pp" else "%"
        need = "" if pd.isna(r.tasks_to_decide) else f"; about {int(r.tasks_to_decide):,} tasks"
        outcome = ("**regression**" if r.regression
                   else ("within the limit" + (", an improvement" if r.improvement else ""))
                   if r.within else f"inconclusive{need}")
        interval = (f"{r.ci_low:+.2f} to {r.ci_high:+.2f}{unit}"
                    if np.isfinite(r.ci_low) and np.isfinite(r.ci_high) else "n/a")
        rows.append(f"| {md_text(r.check)} | {r.change:+.2f}{unit} | {interval} "
                    f"| {r.threshold:g}{unit} | {p} | {format_p(r.p_adjusted)} | {outcome} |")
    return rows


def _method(result: Comparison) -> str:
    from sim.analysis.compare import POWER

    t = result.thresholds
    level = round(100 * (1 - t.alpha))
    if result.paired:
        shares = (f"Tasks pair up by (cell, task index). Share changes carry Newcombe's "
                  f"{level}% hybrid score interval for paired proportions (method 10, from "
                  "the Wilson intervals of each share and the correlation of the pairs); one "
                  "outcome is tested with McNemar's exact test (a binomial test of the "
                  "discordant pairs, the tasks whose outcome changed, against 1/2). The whole "
                  "outcome distribution is tested with the Stuart-Maxwell test of marginal "
                  "homogeneity: the sides are paired, so the chi-square test of a 2 x K table, "
                  "which assumes independent samples, would ignore that most tasks end the "
                  "same way on both sides and be far too conservative.")
        boot = "resampling tasks in pairs"
    else:
        shares = (f"The sides are independent samples (**unpaired**). Share changes carry "
                  f"Newcombe's {level}% hybrid score interval for independent proportions; "
                  "one outcome is tested with Fisher's exact test; the whole outcome "
                  "distribution with the chi-square test of homogeneity of the 2 x K table.")
        boot = "resampling each side on its own"
    return (f"{shares} Steps, tokens and cost: {level}% percentile-bootstrap intervals of the "
            f"change in mean, p50 and p95 ({t.resamples:,} resamples, {boot}, fixed seed); "
            "the max has no interval. Percentiles are observed values at rank floor(q n). "
            f"Verdict: a regression is a fall of the succeeded share or a rise of any failure "
            f"outcome's share by more than {t.max_share_drop_pp:g} percentage point"
            f"{'' if t.max_share_drop_pp == 1 else 's'}, or a "
            f"rise of mean or p95 cost by more than {t.max_cost_rise_pct:g}%, with a p-value "
            f"below {t.alpha:g} after Holm's adjustment over all "
            f"{len(result.checks)} checks of this comparison. No regression needs evidence: "
            f"every check's {level}% interval inside its limit on the bad side (a one-sided "
            f"equivalence test at {t.alpha / 2:g} each; all must pass). Otherwise the "
            f"comparison is inconclusive (exit status 3), and each undecided check gets the "
            f"tasks per cell that would decide it with {round(100 * POWER)}% power if its "
            f"change is as measured (interval half-widths shrinking as 1/sqrt(n)).")


def comparison_markdown(result: Comparison, figure_names: list[str] | None = None) -> str:
    """The Markdown report of a comparison; ``figure_names`` (see
    :func:`comparison_figures`) are linked as ``figures/<name>.png``."""
    from sim.analysis.compare import check_sentence, format_p

    names = figure_names or []
    status = {"regression": "REGRESSION", "no regression": "no regression",
              "inconclusive": "inconclusive"}[result.outcome]
    flagged = frames.records(result.checks[result.checks["status"] != "within"])
    better = frames.records(result.checks[result.checks["improvement"]])
    lines = [f"# Comparison: {md_text(result.title)}", "",
             f"**Verdict: {status}** (exit status {result.exit_status})"
             + ("." if result.regression else f": {md_text(result.verdict.split(': ', 1)[1])}."),
             ""]
    if result.changes:
        lines += ["**Changed** (base -> candidate):", ""]
        lines += [f"- {md_code(path)}: {md_text(old)} -> {md_text(new)}"
                  for path, old, new in result.changes]
        lines.append("")
    lines += [f"- {md_text(check_sentence(r))}" for r in flagged]
    if better:
        lines += ["", "Significant improvements:", ""]
        lines += [f"- {md_text(check_sentence(r))}" for r in better]
    lines += ["", f"- Base: {md_text(result.base.source)}",
              f"- Candidate: {md_text(result.candidate.source)}",
              f"- Pairing: {md_text(result.pairing_note)}", "", "## Method", "", _method(result)]
    if "outcomes" in names:
        lines += ["", "## Figures", "", f"![Outcome shares, base and candidate]"
                  f"({FIGURES_DIR}/outcomes.png)"]
    if "share_changes" in names:
        lines += ["", f"![Change in outcome shares with intervals; dashed: the limit of "
                      f"{result.thresholds.max_share_drop_pp:g} pp]"
                      f"({FIGURES_DIR}/share_changes.png)"]
    for b, c in result.cell_pairs:
        tests = result.tests[result.tests["cell"] == b].iloc[0]
        title = md_text(b if b == c else f"{b} vs {c}")
        lines += ["", f"## Cell {title}", "", "### Outcomes", "",
                  *_outcome_rows(result, b), "",
                  f"Whole outcome distribution: {tests['test']}, statistic "
                  f"{tests['statistic']:.2f}, df {tests['df']}, p = {format_p(tests['p_value'])}.",
                  "", "### Steps, tokens and cost", "", *_metric_rows(result, b), "",
                  "### Checks", "", *_check_rows(result, b)]
        slug = _slug(b)
        for name, caption in ((f"{slug}_cost_ccdf", "Cost tail (log-log)"),
                              (f"{slug}_steps", "Model steps per task")):
            if name in names:
                lines += ["", f"![{md_text(b)}: {caption}]({FIGURES_DIR}/{name}.png)"]
    return "\n".join(lines) + "\n"


def comparison_dict(result: Comparison, provenance: Mapping[str, Any] | None = None
                    ) -> dict[str, Any]:
    """What comparison.json holds: :meth:`Comparison.to_dict` and the provenance."""
    data = result.to_dict()
    if provenance is not None:
        data["provenance"] = dict(provenance)
    return data


def write_comparison(out_dir: str | os.PathLike, result: Comparison,
                     provenance: Mapping[str, Any] | None = None) -> list[Path]:
    """Write ``figures/*.png``, ``report.md``, ``report.html`` and
    ``comparison.json`` (with ``provenance``, :mod:`sim.output.provenance`)
    into ``out_dir`` (created if needed); return the paths."""
    out = Path(out_dir)
    (out / FIGURES_DIR).mkdir(parents=True, exist_ok=True)
    figs = comparison_figures(result)
    images = {f"{FIGURES_DIR}/{name}.png": figures.png_bytes(fig) for name, fig in figs.items()}
    paths = []
    for source, data in images.items():
        write_atomic(out / source, data)
        paths.append(out / source)
    markdown = comparison_markdown(result, list(figs))
    title = f"Comparison: {result.title}"
    for name, data in ((MARKDOWN_NAME, markdown.encode("utf-8")),
                       (HTML_NAME, markdown_to_html(markdown, images, title=title)
                        .encode("utf-8"))):
        write_atomic(out / name, data)
        paths.append(out / name)
    write_json(out / COMPARISON_NAME, comparison_dict(result, provenance))
    paths.append(out / COMPARISON_NAME)
    return paths
