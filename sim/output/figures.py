"""Figures of results: one small function per figure, each returning a
:class:`matplotlib.figure.Figure`.

Figures are built on the Agg canvas directly, never through ``pyplot``: no
global figure registry, no backend switch, no rcParams changed, so they are
safe in notebooks, tests and worker processes alike. Every text is plain
text (a ``$`` is a dollar sign, never mathtext), and a figure that cannot be
drawn is a figure saying why: drawing never raises. In Jupyter a returned
Figure displays itself; :func:`png_bytes` gives the PNG for reports (the same
figure gives the same bytes). Shares are in [0, 1] (plotted as percent),
costs in USD.

>>> fig = cost_ccdf({"base": [0.5, 1.0, 4.0]})
>>> png_bytes(fig)[:8]
b'\\x89PNG\\r\\n\\x1a\\n'
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
from numpy.typing import ArrayLike

from sim.output.canvas import DPI, WIDTH_IN, never_fails, new_figure, png_bytes
from sim.output.frontier import (
    MIN_SHARE_SPAN_PP,
    best_under_ceiling,
    frontier,
    pareto,
    share_limits,
)
from sim.task_record import FALSE_SUCCESS

__all__ = [
    "CCDF_POINTS", "DPI", "MIN_SHARE_SPAN_PP", "WIDTH_IN", "pareto", "best_under_ceiling",
    "cost_ccdf", "frontier", "new_figure", "outcome_bars", "outcome_colors", "png_bytes",
    "share_changes", "share_limits", "steps_histogram"]

# colour families by terminal state; shades tell reasons apart
_FAMILIES = {
    "succeeded": ["#4e9a3a"],
    FALSE_SUCCESS: ["#8e5ba6"],
    "needs_human": ["#e8983a", "#f2c078", "#c8741a"],
    "budget_exhausted": ["#c8433a", "#e27c6f", "#9c2a22", "#f0a59b", "#6e1c16"],
    "failed": ["#555555", "#888888", "#2f2f2f", "#b0b0b0"],
    "cancelled": ["#4a78a8", "#86a9cf", "#2c527a"],
}
_OTHER = ["#17becf", "#bcbd22", "#7f7f7f", "#e377c2"]
_DASHES = ["-", "--", "-.", ":"]  # overlapping outlines stay visible
_LINES = ["#1f5f99", "#d4622a", "#3a8a3a", "#8e5ba6", "#b8860b", "#17becf", "#555555",
          "#e377c2"]


def outcome_colors(outcomes: list[str]) -> dict[str, str]:
    """A fixed colour per outcome: green for succeeded, purple for
    false_success, orange for needs_human, red for budget_exhausted, grey for
    failed, blue for cancelled; reasons within a state get shades in name order."""
    colors: dict[str, str] = {}
    used: dict[str, int] = {}
    for outcome in sorted(outcomes):
        family = outcome.split(":", 1)[0]
        shades = _FAMILIES.get(family, _OTHER)
        colors[outcome] = shades[used.get(family, 0) % len(shades)]
        used[family] = used.get(family, 0) + 1
    return colors


def _outcome_order(shares: Mapping[str, Mapping[str, float]]) -> list[str]:
    totals: dict[str, float] = {}
    for bar in shares.values():
        for outcome, share in bar.items():
            totals[outcome] = totals.get(outcome, 0.0) + share
    return sorted(totals, key=lambda o: (o != "succeeded", o == FALSE_SUCCESS, -totals[o], o))


@never_fails
def outcome_bars(shares: Mapping[str, Mapping[str, float]], *,
                 title: str = "Outcome shares") -> Figure:
    """Stacked horizontal bars, one per entry of ``shares`` ({bar label:
    {outcome: share}}), top to bottom in the given order; segments of at
    least 3% carry their percentage."""
    order = _outcome_order(shares)
    colors = outcome_colors(order)
    labels = list(shares)
    fig, (ax,) = new_figure(1.4 + 0.42 * len(labels) + 0.25 * ((len(order) + 2) // 3))
    y = np.arange(len(labels))[::-1]
    left = np.zeros(len(labels))
    for outcome in order:
        values = np.array([100 * shares[label].get(outcome, 0.0) for label in labels])
        ax.barh(y, values, left=left, color=colors[outcome], label=outcome, height=0.7,
                edgecolor="white", linewidth=0.5)
        for yi, x0, v in zip(y, left, values, strict=True):
            if v >= 3:
                ax.text(x0 + v / 2, yi, f"{v:.1f}%", ha="center", va="center", fontsize=8,
                        color="white" if outcome != "needs_human:no_progress" else "black")
        left += values
    ax.set_yticks(y, labels)
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of tasks (%)")
    ax.set_title(title)
    fig.legend(loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    return fig


CCDF_POINTS = 20_000
"""The most points a cost CCDF line draws: past it, the ``CCDF_POINTS // 2``
most expensive tasks are all drawn (the tail the plot is for) and as many of
the rest evenly sampled, which at this figure size looks the same and keeps a
million-task report small."""


@never_fails
def cost_ccdf(costs: Mapping[str, ArrayLike], *,
              title: str = "Cost tail: share of tasks costing more than x") -> Figure:
    """The complementary CDF of per-task cost on log-log axes, one line per
    entry of ``costs`` ({label: costs in USD}): at x, the share of tasks that
    cost more than x. Zero costs are left out (log axis); the lowest plotted
    share is 1/n, the most expensive task (lines of more than
    :data:`CCDF_POINTS` tasks are thinned in their body). With nothing to draw (every task
    cost $0, or a single task) the panel says so instead."""
    fig, (ax,) = new_figure(4.0)
    plotted = 0
    for i, (label, values) in enumerate(costs.items()):
        x = np.sort(np.asarray(values, dtype=np.float64))
        n = x.size
        if n == 0:
            continue
        survival = 1.0 - np.arange(1, n + 1) / n  # share of tasks costing more than x[i]
        if n > CCDF_POINTS:  # more steps than pixels: the tail whole, the body evenly thinned
            half = CCDF_POINTS // 2
            at = np.concatenate([np.linspace(0, n - half - 1, half).astype(np.int64),
                                 np.arange(n - half, n)])
            x, survival = x[at], survival[at]
        keep = (x > 0) & (survival > 0)
        plotted += int(keep.sum())
        ax.step(x[keep], survival[keep], where="post", color=_LINES[i % len(_LINES)],
                linestyle=_DASHES[i % len(_DASHES)],
                label=f"{label} (n={n:,})", linewidth=1.4)
    ax.set_xlabel("cost per task x (USD)")
    ax.set_ylabel("share of tasks costing more than x")
    ax.set_title(title)
    if not plotted:  # every task cost $0, or one task per label: nothing to draw on log axes
        ax.text(0.5, 0.5, "no tail to draw: every task cost $0, or too few tasks",
                ha="center", va="center", transform=ax.transAxes, fontsize=9, color="#555555")
        ax.set_xticks([])
        ax.set_yticks([])
        return fig
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"${x:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{100 * y:g}%"))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


@never_fails
def steps_histogram(steps: Mapping[str, ArrayLike], *,
                    title: str = "Model steps per task", xlabel: str = "model steps") -> Figure:
    """Histograms of steps per task as outlines, one per entry of ``steps``
    ({label: steps}), in shares of each label's tasks so sides of different
    sizes compare; one bin per step count up to 60 distinct values, wider
    beyond. Any count per task draws the same way (``xlabel`` names it: the
    subagents a run started, for one)."""
    fig, (ax,) = new_figure(3.6)
    arrays = {k: np.asarray(v, dtype=np.int64) for k, v in steps.items()}
    top = max((int(a.max()) for a in arrays.values() if a.size), default=1)
    width = max(1, int(np.ceil((top + 1) / 60)))
    bins = np.arange(0, top + width + 1, width) - 0.5
    for i, (label, values) in enumerate(arrays.items()):
        if values.size == 0:
            continue
        ax.hist(values, bins=bins, weights=np.full(values.size, 100 / values.size),
                histtype="step", linewidth=1.4, color=_LINES[i % len(_LINES)],
                linestyle=_DASHES[i % len(_DASHES)],
                label=f"{label} (n={values.size:,})")
    ax.set_xlabel(xlabel + (f" (bins of {width})" if width > 1 else ""))
    ax.set_ylabel("share of tasks (%)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return fig


@never_fails
def share_changes(outcomes: pd.DataFrame, *, threshold_pp: float | None = None,
                  title: str = "Change in outcome shares (candidate - base)") -> Figure:
    """Changes of outcome shares with their intervals, one row per (cell,
    outcome) of a comparison's ``outcomes`` table (columns ``cell``,
    ``outcome``, ``change_pp``, ``ci_low_pp``, ``ci_high_pp``); dashed lines
    at +-``threshold_pp``."""
    cells = outcomes["cell"].unique()
    labels = [row.outcome if len(cells) == 1 else f"{row.cell}: {row.outcome}"
              for row in outcomes.itertuples()]
    fig, (ax,) = new_figure(1.2 + 0.35 * len(labels))
    y = np.arange(len(labels))[::-1]
    colors = outcome_colors(sorted(set(outcomes["outcome"])))
    change = outcomes["change_pp"].to_numpy()
    errors = np.vstack([change - outcomes["ci_low_pp"].to_numpy(),
                        outcomes["ci_high_pp"].to_numpy() - change])
    for yi, c, lo, hi, outcome in zip(y, change, errors[0], errors[1], outcomes["outcome"],
                                      strict=True):
        ax.errorbar(c, yi, xerr=[[lo], [hi]], fmt="o", color=colors[outcome], capsize=3)
    ax.axvline(0, color="black", linewidth=0.8)
    if threshold_pp is not None:
        for x in (-threshold_pp, threshold_pp):
            ax.axvline(x, color="grey", linestyle="--", linewidth=0.8)
    ax.set_yticks(y, labels)
    ax.set_xlabel("change in share (percentage points)")
    ax.set_title(title)
    ax.grid(True, axis="x", alpha=0.3)
    return fig
