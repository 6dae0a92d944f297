"""Reports with figures: Markdown, and self-contained HTML (figures embedded as
base64 PNG, styles inline, nothing fetched), for sweeps and comparisons.

A sweep's folder gets ``report.html``: its ``report.md`` (written by
:mod:`sim.output.results`) with figures of outcome shares, the cost tail, steps and,
for several cells, the success-cost frontier. A comparison's folder gets
``report.md`` (figures as ``figures/*.png``), ``report.html`` and
``comparison.json`` (:meth:`sim.analysis.compare.Comparison.to_dict`). HTML is
rendered from the Markdown by :func:`markdown_to_html`, so both say the same.
Files are written atomically; the same input gives the same bytes.
"""

from __future__ import annotations

import base64
import html
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from sim.analysis import frames, stats
from sim.output import figures
from sim.output.results import records_frame, report_markdown, write_atomic, write_json

if TYPE_CHECKING:  # comparisons (and scipy) are imported by the functions that render them
    from sim.analysis.compare import Comparison

HTML_NAME = "report.html"
MARKDOWN_NAME = "report.md"
COMPARISON_NAME = "comparison.json"
FIGURES_DIR = "figures"

_STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1100px; padding: 0 1em; color: #1b1b1b; line-height: 1.45; }
h1, h2, h3 { line-height: 1.2; }
h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 1.8em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f3f1ea; }
td.r, th.r { text-align: right; font-variant-numeric: tabular-nums; }
code { background: #f4f4f4; padding: 0 0.2em; border-radius: 3px; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; }
pre code { background: none; padding: 0; }
figure { margin: 1em 0; }
figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #555; }
"""


# ------------------------------------------------------------ Markdown -> HTML

def _inline(text: str) -> str:
    """Inline Markdown (code spans, bold) of one line, HTML-escaped."""
    parts = text.split("`")
    out = []
    for i, part in enumerate(parts):
        if i % 2:  # inside a code span
            out.append(f"<code>{html.escape(part)}</code>")
        else:
            escaped = html.escape(part)
            out.append(re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped))
    return "".join(out)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table(lines: list[str]) -> str:
    head, align, body = _cells(lines[0]), _cells(lines[1]), [_cells(x) for x in lines[2:]]
    right = [a.endswith(":") for a in align]

    def row(cells: list[str], tag: str) -> str:
        attrs = [' class="r"' if r else "" for r in right]
        return "<tr>" + "".join(f"<{tag}{attrs[i]}>{_inline(c)}</{tag}>"
                                for i, c in enumerate(cells)) + "</tr>"

    return ("<table><thead>" + row(head, "th") + "</thead><tbody>"
            + "".join(row(r, "td") for r in body) + "</tbody></table>")


_IMAGE = re.compile(r"^!\[(?P<alt>[^\]]*)\]\((?P<src>[^)]+)\)$")


def markdown_to_html(markdown: str, images: Mapping[str, bytes], *, title: str) -> str:
    """A self-contained HTML page of ``markdown`` (the subset reports use:
    headings, paragraphs, pipe tables, fenced code, ``-`` lists, code spans,
    bold, and images alone on a line). An image's source is looked up in
    ``images`` ({source: PNG bytes}) and embedded as a base64 data URI; an
    unknown source is an error rather than a broken picture."""
    lines = markdown.splitlines()
    out: list[str] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            out.append("<p>" + " ".join(_inline(x) for x in paragraph) + "</p>")
            paragraph.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith("```"):
                j += 1
            out.append("<pre><code>" + html.escape("\n".join(lines[i + 1:j])) + "</code></pre>")
            i = j + 1
            continue
        if stripped.startswith("|"):
            flush()
            j = i
            while j < len(lines) and lines[j].strip().startswith("|"):
                j += 1
            out.append(_table(lines[i:j]))
            i = j
            continue
        if stripped.startswith("- "):
            flush()
            items = []
            while i < len(lines) and lines[i].strip().startswith("- "):
                items.append(f"<li>{_inline(lines[i].strip()[2:])}</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
            continue
        heading = re.match(r"^(#{1,6}) (.*)$", stripped)
        image = _IMAGE.match(stripped)
        if heading:
            flush()
            level = len(heading.group(1))
            out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif image:
            flush()
            src, alt = image.group("src"), image.group("alt")
            if src not in images:
                raise KeyError(f"no image data for {src!r}")
            data = base64.b64encode(images[src]).decode("ascii")
            out.append(f'<figure><img src="data:image/png;base64,{data}" '
                       f'alt="{html.escape(alt)}"><figcaption>{_inline(alt)}</figcaption>'
                       "</figure>")
        elif not stripped:
            flush()
        else:
            paragraph.append(stripped)
        i += 1
    flush()
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(out) + "\n</body>\n</html>\n")


# -------------------------------------------------------------- summaries

def summary_frame(cells: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per cell of a summary (summary.json's ``cells``): ``cell``, one
    column per sweep parameter (its dotted path), ``tasks``, ``succeeded`` and
    its 95% Wilson interval ``succeeded_low``/``succeeded_high``, one column
    per outcome label holding its share, ``{steps,input_tokens,output_tokens}
    _{mean,p50,p95,max}``, ``cost_{mean,p50,p95,max,total}`` (USD),
    ``cache_hit_share`` and the per-task means (``nudges_mean``, ...)."""
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
        rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- sweeps

def sweep_figures(summary: Mapping[str, Any], rows: pd.DataFrame, *,
                  ceiling: float | None = None) -> dict[str, Figure]:
    """The figures of a sweep's report: ``outcomes``, ``cost_ccdf``, ``steps``
    and, with more than one cell, ``frontier`` (``ceiling`` in USD)."""
    cells = summary["cells"]
    by_cell = {c["name"]: rows[rows["cell"] == c["name"]] for c in cells}
    out = {
        "outcomes": figures.outcome_bars({c["name"]: c["outcomes"] for c in cells}),
        "cost_ccdf": figures.cost_ccdf({k: v["cost_usd"] for k, v in by_cell.items()}),
        "steps": figures.steps_histogram({k: v["steps"] for k, v in by_cell.items()}),
    }
    if len(cells) > 1:
        out["frontier"] = figures.frontier(summary_frame(cells), ceiling=ceiling)
    return out


_SWEEP_CAPTIONS = {
    "outcomes": "Outcome shares per cell",
    "cost_ccdf": "Cost tail: share of tasks costing more than x (log-log)",
    "steps": "Model steps per task",
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


# ------------------------------------------------------------ comparisons

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
        rows.append(f"| `{r.outcome}` | {_pct(r.base_share)} ({r.base_count:,}) "
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
        rows.append(f"| {r.check} | {r.change:+.2f}{unit} | {interval} | {r.threshold:g}{unit} "
                    f"| {p} | {format_p(r.p_adjusted)} | {outcome} |")
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
    lines = [f"# Comparison: {result.base.label} vs {result.candidate.label}", "",
             f"**Verdict: {status}** (exit status {result.exit_status})"
             + ("." if result.regression else f": {result.verdict.split(': ', 1)[1]}."), ""]
    lines += [f"- {check_sentence(r)}" for r in flagged]
    if better:
        lines += ["", "Significant improvements:", ""]
        lines += [f"- {check_sentence(r)}" for r in better]
    lines += ["", f"- Base: {result.base.source}", f"- Candidate: {result.candidate.source}",
              f"- Pairing: {result.pairing_note}", "", "## Method", "", _method(result)]
    if "outcomes" in names:
        lines += ["", "## Figures", "", f"![Outcome shares, base and candidate]"
                  f"({FIGURES_DIR}/outcomes.png)"]
    if "share_changes" in names:
        lines += ["", f"![Change in outcome shares with intervals; dashed: the limit of "
                      f"{result.thresholds.max_share_drop_pp:g} pp]"
                      f"({FIGURES_DIR}/share_changes.png)"]
    for b, c in result.cell_pairs:
        tests = result.tests[result.tests["cell"] == b].iloc[0]
        title = b if b == c else f"{b} vs {c}"
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
                lines += ["", f"![{b}: {caption}]({FIGURES_DIR}/{name}.png)"]
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
    title = f"Comparison: {result.base.label} vs {result.candidate.label}"
    for name, data in ((MARKDOWN_NAME, markdown.encode("utf-8")),
                       (HTML_NAME, markdown_to_html(markdown, images, title=title)
                        .encode("utf-8"))):
        write_atomic(out / name, data)
        paths.append(out / name)
    write_json(out / COMPARISON_NAME, comparison_dict(result, provenance))
    paths.append(out / COMPARISON_NAME)
    return paths
