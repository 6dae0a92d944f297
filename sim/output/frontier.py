"""The success-cost frontier of a sweep: every cell as a numbered point, the
Pareto-efficient ones joined, and the best cell under a cost ceiling.
Shares are plotted as percent; costs in USD.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import Bbox
from numpy.typing import ArrayLike

from sim.output.canvas import WIDTH_IN, agg_figure, never_fails, plain_text


def pareto(cost: np.ndarray, success: np.ndarray) -> np.ndarray:
    """Indices of the cells no other cell beats (cheaper or equal and at least
    as successful, one strictly), sorted by cost."""
    order = np.lexsort((-success, cost))
    best = -np.inf
    keep = []
    for i in order:
        if success[i] > best:
            keep.append(i)
            best = success[i]
    return np.array(keep, dtype=np.int64)


MIN_SHARE_SPAN_PP = 5.0
"""The least span of a share axis (percentage points): cells a hair apart
stay level instead of being stretched into a cliff."""


def share_limits(shares_pct: ArrayLike, min_span: float = MIN_SHARE_SPAN_PP
                 ) -> tuple[float, float]:
    """Limits (percent) of an axis of shares: the data with a 10% margin,
    widened about its middle to at least ``min_span`` percentage points, kept
    inside [0, 100] where it fits."""
    values = np.asarray(shares_pct, dtype=np.float64)
    low, high = float(values.min()), float(values.max())
    margin = 0.1 * (high - low)
    low, high = low - margin, high + margin
    if high - low < min_span:
        middle = (low + high) / 2
        low, high = middle - min_span / 2, middle + min_span / 2
    if low < 0:
        low, high = 0.0, max(high - low, min(100.0, min_span))
    if high > 100:
        low, high = max(0.0, low - (high - 100)), 100.0
    return low, high


@never_fails
def frontier(summary: pd.DataFrame, *, ceiling: float | None = None,
             title: str = "Success against cost across cells") -> Figure:
    """Succeeded share against mean cost (left) and p95 cost (right), one point
    per cell of ``summary`` (columns ``cell``, ``succeeded``, ``cost_mean``,
    ``cost_p95``: the per-cell summary of :func:`sim.api.sweep`). Points are
    numbered, with a key of cell names below (up to 40 cells). The line joins
    the cells no other cell beats on both axes. With a ``ceiling`` (USD), a
    dotted line marks it and the most successful cell whose cost is under it is
    ringed in each panel. The share axis spans at least
    ``MIN_SHARE_SPAN_PP`` percentage points (:func:`share_limits`), so a
    spread of a few hundredths of a point looks flat, as it is; with the
    columns ``succeeded_low`` and ``succeeded_high`` (shares) each point
    carries its 95% interval."""
    success = 100 * summary["succeeded"].to_numpy(dtype=np.float64)
    has_ci = {"succeeded_low", "succeeded_high"} <= set(summary.columns)
    names = summary["cell"].astype(str).tolist()
    labelled = len(names) <= 40
    key = _key_lines(names) if labelled else []
    fig = agg_figure(figsize=(WIDTH_IN, 4.2 + 0.17 * len(key)))
    grid = fig.add_gridspec(2 if key else 1, 2, height_ratios=[4.2, 0.17 * len(key)]
                            if key else [1])
    axes = [fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])]
    numbered = []
    for ax, column, label in ((axes[0], "cost_mean", "mean cost per task (USD)"),
                              (axes[1], "cost_p95", "p95 cost per task (USD)")):
        cost = summary[column].to_numpy(dtype=np.float64)
        ax.scatter(cost, success, color="#1f5f99", zorder=3, s=24)
        if has_ci:
            low = 100 * summary["succeeded_low"].to_numpy(dtype=np.float64)
            high = 100 * summary["succeeded_high"].to_numpy(dtype=np.float64)
            ax.errorbar(cost, success, yerr=[success - low, high - success], fmt="none",
                        ecolor="#1f5f99", alpha=0.4, capsize=2, zorder=2)
        ax.set_ylim(*share_limits(np.concatenate([success, low, high]) if has_ci
                                  else success))
        front = pareto(cost, success)
        ax.plot(cost[front], success[front], color="#1f5f99", alpha=0.5, zorder=2)
        numbered.append((ax, cost))
        if ceiling is not None:
            ax.axvline(ceiling, color="#c8433a", linestyle=":", linewidth=1.2,
                       label=f"ceiling ${ceiling:,.2f}")
            under = np.flatnonzero(cost <= ceiling)
            if under.size:
                best = under[np.lexsort((cost[under], -success[under]))[0]]
                ax.scatter([cost[best]], [success[best]], s=180, facecolors="none",
                           edgecolors="#c8433a", linewidths=2, zorder=4,
                           label=f"best under ceiling: {best + 1 if labelled else names[best]}")
            ax.legend(fontsize=7, loc="best")
        ax.set_xlabel(label)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))  # tick labels of a close range fit
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("succeeded (%)")
    if key:
        text = fig.add_subplot(grid[1, :])
        text.axis("off")
        text.text(0, 1, "\n".join(key), va="top", ha="left", fontsize=7, family="monospace",
                  transform=text.transAxes)
    fig.suptitle(title)
    if labelled:
        with plain_text(fig):
            fig.draw_without_rendering()  # settle the layout and the axis limits first
        for ax, cost in numbered:
            _number_points(ax, cost, success)
    return fig


_LABEL_OFFSETS = ((4, 3, "left", "bottom"), (4, -3, "left", "top"),
                  (-4, 3, "right", "bottom"), (-4, -3, "right", "top"),
                  (0, 6, "center", "bottom"), (0, -6, "center", "top"),
                  (7, 0, "left", "center"), (-7, 0, "right", "center"))
"""Places tried for a point's number: offset (points), alignment."""


def _number_runs(numbers: list[int]) -> str:
    """``[1, 2, 3, 5]`` as ``1-3,5``."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ",".join(map(str, r)) for r in runs)


def _number_points(ax, x: np.ndarray, y: np.ndarray, near_px: float = 6.0) -> None:
    """Number the points (1, 2, ... in order) so that no two labels overlap:
    points within ``near_px`` pixels of each other share one label
    (``4-6``); each label takes the first place around its point that
    overlaps no placed label, no other point and stays inside the axes (the
    least crowded place if none is free). Call once the limits are final."""
    renderer = ax.figure.canvas.get_renderer()
    xy = ax.transData.transform(np.column_stack([x, y]))
    groups: list[list[int]] = []
    for i, p in enumerate(xy):
        for group in groups:
            if np.hypot(*(xy[group[0]] - p)) <= near_px:
                group.append(i)
                break
        else:
            groups.append([i])
    frame = ax.get_window_extent(renderer)
    taken = [Bbox.from_bounds(px - 4, py - 4, 8, 8) for px, py in xy]  # the markers
    for group in groups:
        text = _number_runs([i + 1 for i in group])
        best = None
        for dx, dy, ha, va in _LABEL_OFFSETS:
            label = ax.annotate(text, (x[group[0]], y[group[0]]), xytext=(dx, dy),
                                textcoords="offset points", fontsize=7, ha=ha, va=va)
            label.set_in_layout(False)
            box = label.get_window_extent(renderer)
            crowd = sum(_overlap(box, other) for k, other in enumerate(taken)
                        if not (k < len(xy) and k in group))
            crowd += box.width * box.height - _overlap(box, frame)
            if best is None or crowd < best[0]:
                if best is not None:
                    best[1].remove()
                best = (crowd, label, box)
            else:
                label.remove()
            if crowd == 0:
                break
        assert best is not None  # _LABEL_OFFSETS is not empty
        taken.append(best[2])


def _overlap(a: Bbox, b: Bbox) -> float:
    """Area (square pixels) two boxes share."""
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w * h if w > 0 and h > 0 else 0.0


def _key_lines(names: list[str], width: int = 110) -> list[str]:
    """``1 name   2 name ...`` wrapped into lines of at most ``width`` characters."""
    entries = [f"{i} {name}" for i, name in enumerate(names, 1)]
    column = max(len(e) for e in entries) + 3
    per_line = max(1, width // column)
    return ["".join(e.ljust(column) for e in entries[i:i + per_line]).rstrip()
            for i in range(0, len(entries), per_line)]


def best_under_ceiling(summary: pd.DataFrame, ceiling: float, column: str = "cost_mean"
                       ) -> pd.DataFrame:
    """The cells of ``summary`` whose ``column`` cost is at most ``ceiling``
    USD, most successful first (ties: cheaper first)."""
    under = summary[summary[column] <= ceiling]
    return under.sort_values(["succeeded", column], ascending=[False, True])
