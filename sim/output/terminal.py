"""Terminal tables: one cell's results shaped like seed 001's output, the
table comparing cells, a DES cell's capacity rows and Little's law in words.
Shares are in [0, 1]; tokens are counts, cost USD, times seconds. Names
(cells, outcomes) are printed with control characters as visible escapes
(:func:`~sim.output.safe_text.printable`); in the Markdown rows, escaped for
Markdown (:func:`~sim.output.safe_text.md_text`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.output.safe_text import md_text, printable

_OUTCOME_WIDTH = 26


def cell_counts(cell: Mapping[str, Any]) -> dict[str, int]:
    """Exact outcome counts of a cell, largest first then by name (from
    ``outcome_counts``, else rounded from shares)."""
    counts = cell.get("outcome_counts")
    if counts is None:
        counts = {k: round(v * cell["tasks"]) for k, v in cell["outcomes"].items()}
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def format_table(cell: Mapping[str, Any]) -> str:
    """The terminal table of one cell, shaped like seed 001's output (no
    trailing newline): outcomes with counts and percent shares, steps and
    prompt tokens (p50, p95, max), cost per task (mean, p95, max) and total
    spend in USD."""
    n = cell["tasks"]
    counts = [(printable(k, newlines=False), c) for k, c in cell_counts(cell).items()]
    width = max([_OUTCOME_WIDTH, *(len(k) + 2 for k, _ in counts)])
    steps, tokens, cost = cell["steps"], cell["input_tokens"], cell["cost"]
    lines = [f"== {printable(cell['name'], newlines=False)}, {n} tasks"]
    lines += [f"  {k:<{width}}{c:>6}  {100 * c / n:5.1f}%" for k, c in counts]
    lines += [
        f"  steps          p50 {steps['p50']:>4}  p95 {steps['p95']:>4}  max {steps['max']:>4}",
        f"  input tokens   p50 {tokens['p50']:>9,}  p95 {tokens['p95']:>9,}"
        f"  max {tokens['max']:>10,}",
        f"  cost per task  mean ${cost['mean']:.2f}  p95 ${cost['p95']:.2f}"
        f"  max ${cost['max']:.2f}",
        f"  total spend    ${cost['total']:,.{0 if cost['total'] >= 100 else 2}f}",
    ]
    if cell.get("cache_hit_share"):
        lines.append(f"  cache hits     {100 * cell['cache_hit_share']:.1f}% of prompt tokens")
    if "capacity" in cell:
        lines.append(f"  capacity       {littles_law_text(cell['capacity'].get('littles_law'))}")
    return "\n".join(lines)


def littles_law_text(law: Mapping[str, Any] | None) -> str:
    """Little's law over the steady window in one line (see
    :func:`sim.analysis.capacity.littles_law`)."""
    if not law:
        return "Little's law: no steady-state window (every task arrives at once)"
    verdict = {True: "holds", False: "FAILS", None: "not checked (no steady state)"}[
        law["holds"]]
    return (f"Little's law {verdict}: L {law['L']:.3f} vs lambda W {law['lambda_W']:.3f} "
            f"({law['rate_source']} rate {law['arrival_rate_per_s']:.4g}/s x W "
            f"{law['W_s']:,.1f} s), error {100 * law['error']:+.2f}% (tolerance "
            f"{100 * law['tolerance']:.2f}%) over {law['tasks']:,} arrivals")


def _holds(value: bool | None) -> str:
    return {True: "holds", False: "**fails**",
            None: "not checked: no steady state, the queue grows through the window, so "
                  "L and lambda W need not agree"}[value]


def comparison_rows(cells: list[Mapping[str, Any]]) -> list[str]:
    """Markdown table comparing cells: succeeded share, mean and p95 cost, and
    their change against the first cell."""
    base = cells[0]
    rows = ["| cell | succeeded | mean cost | vs first | p95 cost | vs first | cache hits |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for cell in cells:
        mean, p95 = cell["cost"]["mean"], cell["cost"]["p95"]
        rows.append(
            f"| {md_text(cell['name'])} | {100 * cell['outcomes'].get('succeeded', 0.0):.1f}% "
            f"| ${mean:,.2f} | {_change(mean, base['cost']['mean'])} "
            f"| ${p95:,.2f} | {_change(p95, base['cost']['p95'])} "
            f"| {100 * cell.get('cache_hit_share', 0.0):.1f}% |")
    return rows


def format_comparison(cells: list[Mapping[str, Any]]) -> str:
    """The terminal table comparing a sweep's cells (no trailing newline):
    succeeded share, mean and p95 cost per task (USD) and their change
    against the first cell."""
    names = [printable(c["name"], newlines=False) for c in cells]
    width = max(len("cell"), *map(len, names))
    base = cells[0]["cost"]
    lines = [f"== {len(cells)} cells compared (changes against the first)",
             f"  {'cell':<{width}}  succeeded  mean cost   change   p95 cost   change"]
    for cell, name in zip(cells, names, strict=True):
        mean, p95 = cell["cost"]["mean"], cell["cost"]["p95"]
        succeeded = 100 * cell["outcomes"].get("succeeded", 0.0)
        lines.append(f"  {name:<{width}}  {succeeded:8.1f}%"
                     f"  {'$' + format(mean, ',.2f'):>9}  {_change(mean, base['mean']):>7}"
                     f"  {'$' + format(p95, ',.2f'):>9}  {_change(p95, base['p95']):>7}")
    return "\n".join(lines)


def _change(value: float, base: float) -> str:
    return "n/a" if base == 0 else f"{100 * (value - base) / base:+.1f}%"


def storm_rows(storm: Mapping[str, Any] | None) -> list[str]:
    """Rows of :func:`capacity_rows` for the provider's side of a rate limit
    (:func:`sim.analysis.capacity.storm`); none without a rate limit."""
    if not storm:
        return []
    finish = storm["time_to_finish_s"]
    rows = [f"| requests at the provider: answered 429 | {storm['requests']:,}: "
            f"{storm['rejected']:,} ({100 * storm['share_429']:.1f}%) |",
            f"| provider requests/s: peak ({storm['bin_s']:g} s bins) / mean | "
            f"{storm['peak_requests_per_s']:,.1f} / {storm['mean_requests_per_s']:,.2f} |",
            f"| harness retries among them: requests per first try / peak retries/s | "
            f"{storm['retries']:,}: {storm['amplification']:.2f} / "
            f"{storm['peak_retries_per_s']:,.1f} |",
            f"| runs dead of exhausted retries (failed:retries_exhausted) | "
            f"{storm['runs_died']:,} ({100 * storm['share_died']:.1f}%) |",
            f"| prompt tokens sent in rejected requests (not billed) | "
            f"{storm['rejected_prompt_tokens']:,} |"]
    if finish:
        rows.append(f"| time to finish p50 / p95 (s) | {finish['p50']:,.1f} / "
                    f"{finish['p95']:,.1f} |")
    return rows


def capacity_rows(capacity: Mapping[str, Any]) -> list[str]:
    """Markdown table of a DES cell's capacity measurements (see sim.analysis.capacity)."""
    util = capacity["utilisation"]
    busy = capacity["mean_busy"]
    queue, model = capacity["queue_wait_s"], capacity["model_wait_s"]
    rows = ["| measure | value |", "|---|---:|",
            f"| horizon (s): first arrival to the last task's end | "
            f"{capacity['horizon_s']:,.1f} |",
            f"| tasks / horizon (tasks/s): below the arrival rate, since the horizon "
            f"includes the drain after the last arrival | {capacity['arrival_rate_per_s']:.5f} |",
            f"| L, time-average tasks in system over the horizon (drain included) | "
            f"{capacity['L']:.3f} |",
            f"| W, mean time in system (s) | {capacity['W_s']:,.1f} |"]
    law = capacity.get("littles_law")
    if law:
        low, high = law["window_quantiles"]
        rows += [f"| steady window (s): arrivals {100 * low:g}th to {100 * high:g}th "
                 f"percentile | {law['window_s'][0]:,.0f} to "
                 f"{law['window_s'][1]:,.0f} ({law['tasks']:,} arrivals) |",
                 f"| Little's law: L vs lambda W ({law['rate_source']} rate) | "
                 f"{law['L']:.3f} vs {law['lambda_W']:.3f}: error {100 * law['error']:+.2f}% "
                 f"(tolerance {100 * law['tolerance']:.2f}%, {_holds(law['holds'])}) |",
                 f"| sandbox queue: L_q vs lambda W_q (W_q {law['W_q_s']:,.1f} s) | "
                 f"{law['L_q']:.3f} vs {law['lambda_W_q']:.3f}: error "
                 f"{100 * law['queue_error']:+.2f}% (tolerance "
                 f"{100 * law['queue_tolerance']:.2f}%, {_holds(law['queue_holds'])}) |"]
    else:
        rows.append("| Little's law | no steady-state window (every task arrives at once) |")
    for pool in ("model_slots", "sandboxes"):
        label = pool.replace("_", " ")
        value = f"{100 * util[pool]:.1f}%" if util[pool] is not None else "unlimited"
        rows.append(f"| {label}: utilisation / mean busy | {value} / {busy[pool]:.2f} |")
    if queue:
        rows.append(f"| sandbox queueing p50 / p95 / max (s) | {queue['p50']:,.1f} / "
                    f"{queue['p95']:,.1f} / {queue['max']:,.1f} |")
        rows.append(f"| model-slot waiting per task p50 / p95 / max (s) | {model['p50']:,.1f} "
                    f"/ {model['p95']:,.1f} / {model['max']:,.1f} |")
    rows.append(f"| calls answered 429 by the rate limits | {capacity['rate_limited_calls']} |")
    rows += storm_rows(capacity.get("storm"))
    rows.append(f"| longest 5% of tasks: share of sandbox time | "
                f"{100 * capacity['tail_share_5pct']:.1f}% |")
    return rows
