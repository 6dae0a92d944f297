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

import contextlib
import functools
import io
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ParamSpec

import numpy as np
import pandas as pd
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter
from matplotlib.transforms import Bbox
from numpy.typing import ArrayLike

from sim.task_record import FALSE_SUCCESS

P = ParamSpec("P")

WIDTH_IN = 8.0
DPI = 100

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


def _agg_figure(figsize: tuple[float, float]) -> Figure:
    """A Figure (``figsize`` in inches) on its own Agg canvas, which Jupyter displays
    as a PNG without pyplot."""
    fig = Figure(figsize=figsize, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    fig._repr_png_ = lambda: png_bytes(fig)  # type: ignore[attr-defined]  # IPython's hook
    return fig


def new_figure(height_in: float, ncols: int = 1) -> tuple[Figure, list]:
    """A Figure on its own Agg canvas with ``ncols`` axes side by side."""
    fig = _agg_figure(figsize=(WIDTH_IN, height_in))
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


def png_bytes(fig: Figure, dpi: int = DPI) -> bytes:
    """The figure as PNG bytes, without the software-version metadata (so the
    same figure gives the same bytes across matplotlib versions' metadata).

    Every text is drawn as plain text: a ``$`` in a scenario name, cell name
    or sweep value is a dollar sign, never the start of mathtext (which fails
    on ``a $x^$``). A figure that cannot be drawn all the same gives a figure
    saying so, with the error: a report never costs the results."""
    try:
        return _png(fig, dpi)
    except Exception as error:
        return _png(_failed_figure(error), dpi)


def _png(fig: Figure, dpi: int) -> bytes:
    buffer = io.BytesIO()
    with _plain_text(fig):
        fig.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()


_PLAIN: dict[Any, Any] = {"text.parse_math": False, "text.usetex": False}


@contextlib.contextmanager
def _plain_text(fig: Figure) -> Iterator[None]:
    """Every text of ``fig``, and those made while it draws (tick labels),
    as plain text while the block runs (rcParams restored after it)."""
    for text in fig.findobj(Text):
        text.set_parse_math(False)
        text.set_usetex(False)
    with rc_context(_PLAIN):
        yield


def _never_fails(build: Callable[P, Figure]) -> Callable[P, Figure]:
    """``build``, returning a figure that says why when it cannot draw one."""
    @functools.wraps(build)
    def safe(*args: P.args, **kwargs: P.kwargs) -> Figure:
        try:
            with rc_context(_PLAIN):
                return build(*args, **kwargs)
        except Exception as error:
            return _failed_figure(error)
    return safe


def _failed_figure(error: Exception) -> Figure:
    """A small figure saying that a figure could not be drawn, and why."""
    fig = _agg_figure(figsize=(WIDTH_IN, 1.2))
    reason = f"{type(error).__name__}: {error}".splitlines()[0][:150]
    fig.text(0.5, 0.5, f"this figure could not be drawn ({reason})", ha="center",
             va="center", wrap=True, parse_math=False)
    return fig


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


@_never_fails
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


@_never_fails
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


@_never_fails
def steps_histogram(steps: Mapping[str, ArrayLike], *,
                    title: str = "Model steps per task") -> Figure:
    """Histograms of steps per task as outlines, one per entry of ``steps``
    ({label: steps}), in shares of each label's tasks so sides of different
    sizes compare; one bin per step count up to 60 distinct values, wider beyond."""
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
    ax.set_xlabel("model steps" + (f" (bins of {width})" if width > 1 else ""))
    ax.set_ylabel("share of tasks (%)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return fig


@_never_fails
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


def _pareto(cost: np.ndarray, success: np.ndarray) -> np.ndarray:
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


@_never_fails
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
    fig = _agg_figure(figsize=(WIDTH_IN, 4.2 + 0.17 * len(key)))
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
        front = _pareto(cost, success)
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
        with _plain_text(fig):
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
