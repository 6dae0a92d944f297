"""The Markdown report of a results folder (report.md): the answer first,
one section per cell, then the settings and the definitions. Names and
values from the scenario (its name, description, cell names, sweep values) are
escaped (:func:`sim.output.safe_text.md_text`): they show as written and
cannot add HTML, a link or a table cell.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from sim.analysis import stats
from sim.output.files import json_default, write_atomic
from sim.output.safe_text import md_code, md_text
from sim.output.terminal import capacity_rows, cell_counts, comparison_rows, format_table
from sim.task_record import FALSE_SUCCESS

SUMMARY_MEANS = ("retries", "nudges", "verifier_rejections", "compactions")
"""The per-task counters a cell's summary gives the mean of (``<name>_mean``)."""

_REPORT_NOTES = f"""\
Percentiles are observed values: p_q is the value at 0-based rank floor(q*n) (clamped to n-1)
of the sorted sample of n tasks, so p50 of an even-sized sample is the upper median and max is
p100. "input tokens" are prompt tokens (input + cache read + cache write). Costs are in USD and
times in seconds. Share intervals are 95% Wilson score intervals.

Outcome labels are `state:reason` (for example `needs_human:no_progress`,
`budget_exhausted:tokens`, `failed:context_overflow`), except `succeeded` (verified, or claimed
and truly done) and `{FALSE_SUCCESS}` (claimed, accepted and not truly done, which only a
simulation can see).
"""


def _outcome_rows(cell: Mapping[str, Any]) -> list[str]:
    """Markdown table of outcomes: tasks, share and its 95% Wilson interval."""
    n = cell["tasks"]
    rows = ["| outcome | tasks | share | 95% interval |", "|---|---:|---:|---:|"]
    for outcome, count in cell_counts(cell).items():
        low, high = stats.share_ci(count, n)
        rows.append(f"| {md_code(outcome)} | {count} | {100 * count / n:.1f}% "
                    f"| {100 * low:.1f}% to {100 * high:.1f}% |")
    return rows


def _metric_rows(cell: Mapping[str, Any]) -> list[str]:
    """Markdown table of distributions: p50, p95, max and mean."""
    rows = ["| per task | p50 | p95 | max | mean |", "|---|---:|---:|---:|---:|"]
    for key, label, fmt in (("steps", "steps", ","), ("input_tokens", "input tokens", ","),
                            ("output_tokens", "output tokens", ","),
                            ("wall_s", "wall time (s)", ",.1f"), ("cost", "cost (USD)", ",.2f")):
        if key not in cell:
            continue
        d = cell[key]
        values = [format(d[k], fmt) for k in ("p50", "p95", "max")]
        rows.append(f"| {label} | {' | '.join(values)} | {d['mean']:,.2f} |")
    return rows


def children_rows(section: Mapping[str, Any]) -> list[str]:
    """summary.json's ``children`` section of a cell
    (:func:`sim.analysis.fanout.rows_summary`) as Markdown: the parents' and
    the children's endings (count and share of each), then the children's
    totals and the session's (a parent and its descendants) cost p50, p95
    and max (USD) and tokens."""
    rows = ["| ending | parents | share | children | share |", "|---|---:|---:|---:|---:|"]
    parents, kids = section["parents"], section["children"]
    p_total, c_total = sum(parents.values()) or 1, sum(kids.values()) or 1
    for label in sorted(set(parents) | set(kids),
                        key=lambda k: (-parents.get(k, 0), -kids.get(k, 0), k)):
        p, c = parents.get(label, 0), kids.get(label, 0)
        rows.append(f"| {md_code(label)} | {p} | {100 * p / p_total:.1f}% | {c} | "
                    f"{100 * c / c_total:.1f}% |")
    cost, tokens = section["session_cost"], section["session_tokens"]
    rows += ["", f"Children started {section['spawned']:,} ({section['children_failed']:,} "
                 f"did not succeed; {section['descendants']:,} descendants in all), using "
                 f"{section['children_tokens']:,} tokens and "
                 f"${section['children_cost_usd']:,.2f}.",
             "", "| per session (parent and descendants) | p50 | p95 | max |",
             "|---|---:|---:|---:|",
             f"| cost (USD) | {cost['p50']:,.4f} | {cost['p95']:,.4f} | {cost['max']:,.4f} |",
             f"| tokens | {tokens['p50']:,} | {tokens['p95']:,} | {tokens['max']:,} |"]
    return rows


def _cell_section(cell: Mapping[str, Any]) -> str:
    """The report section of one cell: terminal table, params, tables, means."""
    params = json.dumps(cell.get("params", {}), sort_keys=True, default=json_default)
    means = ", ".join(f"{k.removesuffix('_mean').replace('_', ' ')} {cell[k]:.2f}"
                      for k in (f"{m}_mean" for m in SUMMARY_MEANS) if k in cell)
    changes = cell.get("changes")
    changed = (["Changed from the base: " + ("; ".join(
        f"{md_code(c['path'])}: {md_text(c['base'])} -> {md_text(c['value'])}" for c in changes)
        if changes else "nothing")] if changes is not None else [])
    parts = [
        f"## {md_text(cell['name'])}",
        *changed,
        f"Parameters: {md_code(params)}",
        f"```text\n{format_table({**cell, 'name': md_text(cell['name'])})}\n```",
        "\n".join(_outcome_rows(cell)),
        "\n".join(_metric_rows(cell)),
        f"Total spend ${cell['cost']['total']:,.2f}; cache hit share "
        f"{100 * cell.get('cache_hit_share', 0.0):.1f}%; means per task: {means}.",
    ]
    if "capacity" in cell:
        parts += ["### Capacity", "\n".join(capacity_rows(cell["capacity"]))]
    if "children" in cell:
        parts += ["### Subagents", "\n".join(children_rows(cell["children"]))]
    return "\n\n".join(parts)


def report_markdown(summary: Mapping[str, Any], title: str, lead: str = "") -> str:
    """The Markdown report of every cell in ``summary`` (the summary.json
    dict), the answer first: ``lead`` (Markdown: a verdict or headline), the
    sizing answer of a sized cell, the table comparing the cells (more than
    one), then one section per cell; after them the settings (the
    description, and the resolved settings and overrides from the provenance,
    so they follow ``--set``, with a single cell's own parameters applied:
    the capacity it really ran with) and the definitions."""
    from sim.output.describe import provenance_lines

    cells = summary["cells"]
    parts = [f"# {md_text(title)}"]
    if lead.strip():
        parts.append(lead.strip())
    parts += [sizing_markdown(c["sizing"], md_text(c["name"]) if len(cells) > 1 else "")
              for c in cells if c.get("sizing")]
    if len(cells) > 1:
        parts += ["## Cells compared", "\n".join(comparison_rows(cells))]
    parts += storm_markdown(cells)
    parts += assumed_markdown(summary)
    parts += [_cell_section(c) for c in cells]
    about = ["\n".join(map(md_text, summary["description"].strip().splitlines()))
             ] if summary.get("description") else []
    params = cells[0].get("params") if len(cells) == 1 else None
    settings = "\n".join(provenance_lines(summary.get("provenance"), params))
    parts += ["## Settings", *about, *([settings] if settings else []),
              f"{len(cells)} cell(s).", "## Definitions", _REPORT_NOTES.strip()]
    return "\n\n".join(parts) + "\n"


ASSUMED = "world.visible_budget"
"""The world section no trace can fit yet: reported as assumed when set."""


def assumed_markdown(summary: Mapping[str, Any]) -> list[str]:
    """When the scenario sets or sweeps ``world.visible_budget`` (how the
    model answers a budget it is shown): the line saying it is assumed, not
    fitted, naming the fields, and a table of each cell's share of
    successes, of runs ended by a finalize call's answer, of runs a human
    did not extend (``needs_human:limit``) and its mean cost per run (USD);
    nothing otherwise."""
    scenario = (summary.get("provenance") or {}).get("scenario") or {}
    given = (scenario.get("world") or {}).get("visible_budget") or {}
    names = sorted({f"{ASSUMED}.{k}" for k in given}
                   | {k for k in scenario.get("sweep") or {} if k.startswith(ASSUMED + ".")})
    if not names:
        return []
    rows = ["| cell | succeeded | finalized | needs_human:limit | mean cost (USD) |",
            "|---|---:|---:|---:|---:|"]
    for cell in summary["cells"]:
        shares = cell.get("outcomes", {})
        rows.append(f"| {md_text(cell['name'])} | {100 * shares.get('succeeded', 0.0):.1f}% "
                    f"| {100 * cell.get('finalized_share', 0.0):.1f}% "
                    f"| {100 * shares.get('needs_human:limit', 0.0):.1f}% "
                    f"| {cell['cost']['mean']:,.2f} |")
    return ["## Limits the model sees",
            f"Assumed, not fitted: {ASSUMED}.* ({', '.join(map(md_code, names))}). No trace "
            "records how a model answers a budget it is shown yet, so these values are "
            "assumptions, not measurements: read the cells as a sweep over them.",
            "\n".join(rows)]


def storm_markdown(cells: Sequence[Mapping[str, Any]]) -> list[str]:
    """The "Retry storm" section of a sweep over a concurrency cap with a rate
    limit (:func:`sim.analysis.capacity.storm_knee`): per setting of the
    other swept values, the 429 share, dead runs and p95 time to finish at
    each cap, and the largest cap that keeps the storm away, or that none of
    the swept caps does; empty for any other sweep."""
    from sim.analysis.capacity import STORM_CAPS, STORM_FREE_SHARE, storm_knee  # simpy: lazily

    swept = sorted({k for c in cells for k in c.get("params", {})})
    parts = []
    for cap in (k for k in swept if k.rsplit(".", 1)[-1] in STORM_CAPS):
        rows = storm_knee(cells, cap)
        if not rows:
            continue
        lines = [f"Cap swept: `{cap}` (unlimited: no cap). A cap keeps the storm away when "
                 f"fewer than {100 * STORM_FREE_SHARE:g}% of the requests are answered 429 "
                 f"and no run dies of exhausted retries (failed:retries_exhausted); the "
                 f"answer is the largest such cap swept (the knee), and the cap at which "
                 f"the storm starts.", "",
                 "| other settings | cap: 429 share, runs dead, p95 time to finish | "
                 "largest cap without a storm | storm from |",
                 "|---|---|---|---|"]
        for row in rows:
            settings = json.dumps(row["settings"], sort_keys=True, default=json_default)
            points = "; ".join(
                f"{_pool(c)}: {100 * share:.1f}%, {died}, "
                f"{'n/a' if p95 is None else f'{p95:,.0f} s'}"
                for c, share, died, p95 in zip(row["caps"], row["share_429"], row["runs_died"],
                                               row["p95_finish_s"], strict=True))
            knee = _pool(row["knee"]) if row["ok"] else "none of the swept caps"
            start = "none swept" if row["storm_from"] is None else _pool(row["storm_from"])
            lines.append(f"| `{settings}` | {points} | {knee} | {start} |")
        parts += ["## Retry storm", "\n".join(lines)]
    return parts


def sizing_markdown(sizing: Mapping[str, Any], cell: str = "") -> str:
    """The capacity sizing answer (``capacity --target-p95-wait``) as a
    report section: the sized pools first, then the probes that found them
    (worst tenant's p95 waits, seconds)."""
    name = f" ({cell})" if cell else ""
    target = sizing["target_p95_wait_s"]
    lines = [f"## Sizing{name}",
             f"**{sizing['sandboxes']} sandboxes and {sizing['model_slots']} model slots** "
             f"are the fewest that keep the p95 wait at or under {target:g} s, over all tasks "
             f"and for every tenant ({sizing['runs']} simulations). The cell below ran with "
             "them.", "",
             "| sandboxes | model slots | p95 sandbox wait (s) | p95 model wait (s) |",
             "|---:|---:|---:|---:|"]
    for probe in sizing.get("probes", []):
        worst = {key: max([probe[key], *(t[key] for t in probe.get("tenants", {}).values())])
                 for key in ("sandbox_wait_p95_s", "model_wait_p95_s")}
        lines.append(f"| {_pool(probe['sandboxes'])} | {_pool(probe['model_slots'])} "
                     f"| {worst['sandbox_wait_p95_s']:,.1f} | {worst['model_wait_p95_s']:,.1f} |")
    return "\n".join(lines)


def _pool(value: Any) -> str:
    return "unlimited" if value is None else f"{value:,}"


def write_report(path: str | os.PathLike, summary: Mapping[str, Any], title: str,
                 lead: str = "") -> None:
    """Write the Markdown report of ``summary`` to ``path``, atomically."""
    write_atomic(path, report_markdown(summary, title, lead).encode("utf-8"))
