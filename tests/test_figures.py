"""Figures (sim.output.figures) and the reports that embed them (sim.output.html): each
figure is one small function returning a Figure, drawn without pyplot or
global state; HTML reports are self-contained."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys

import matplotlib
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.figure import Figure

from sim.cli import main
from sim.output import figures
from sim.output.html import markdown_to_html, summary_frame

PNG = b"\x89PNG\r\n\x1a\n"


def summary(rows: list[tuple[str, float, float, float]]) -> pd.DataFrame:
    """A per-cell summary with the columns the frontier reads."""
    return pd.DataFrame(rows, columns=["cell", "succeeded", "cost_mean", "cost_p95"])


def all_figures() -> list[Figure]:
    rng = np.random.default_rng(0)
    outcomes = pd.DataFrame({"cell": "c", "outcome": ["succeeded", "needs_human:no_progress"],
                             "change_pp": [-6.0, 6.0], "ci_low_pp": [-7.0, 5.0],
                             "ci_high_pp": [-5.0, 7.0]})
    return [
        figures.outcome_bars({"a": {"succeeded": 0.9, "needs_human:no_progress": 0.1}}),
        figures.cost_ccdf({"a": rng.lognormal(0, 1, 500)}),
        figures.steps_histogram({"a": rng.integers(3, 40, 500)}),
        figures.share_changes(outcomes, threshold_pp=1.0),
        figures.frontier(summary([("x", 0.8, 1.0, 3.0), ("y", 0.9, 2.0, 5.0)]), ceiling=1.5),
    ]


def test_every_figure_function_returns_a_figure_that_renders_to_png():
    """Each function returns a matplotlib Figure with axes; png_bytes gives a PNG."""
    for fig in all_figures():
        assert isinstance(fig, Figure) and fig.axes
        assert figures.png_bytes(fig).startswith(PNG)


def test_figures_leave_no_global_state():
    """Drawing every figure changes no rcParams and registers no pyplot figure;
    importing sim.output.figures and drawing does not import pyplot at all."""
    before = dict(matplotlib.rcParams)
    all_figures()
    assert dict(matplotlib.rcParams) == before
    code = ("import sys, sim.output.figures as f; f.cost_ccdf({'a': [1.0, 2.0]}); "
            "print('matplotlib.pyplot' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"


def test_the_same_figure_gives_the_same_png_bytes():
    """Reports are reproducible: two draws of the same data give identical PNGs."""
    one = figures.png_bytes(figures.cost_ccdf({"a": [0.5, 1.0, 4.0]}))
    two = figures.png_bytes(figures.cost_ccdf({"a": [0.5, 1.0, 4.0]}))
    assert one == two


def test_a_figure_displays_itself_in_jupyter():
    """Figures carry _repr_png_, so a notebook cell ending in one shows it."""
    fig = figures.steps_histogram({"a": [3, 4, 5]})
    assert fig._repr_png_().startswith(PNG)


def test_ccdf_plots_the_share_of_tasks_costing_more_than_x():
    """Costs 0, 1, 2, 3, 4: at x = 1, 2, 3 the share above is 3/5, 2/5, 1/5; the
    zero cost is left off the log axis and the top cost has no task above it."""
    fig = figures.cost_ccdf({"a": [3.0, 0.0, 1.0, 4.0, 2.0]})
    line = fig.axes[0].lines[0]
    assert line.get_xdata().tolist() == [1.0, 2.0, 3.0]
    assert np.allclose(line.get_ydata(), [0.6, 0.4, 0.2])
    assert fig.axes[0].get_xscale() == fig.axes[0].get_yscale() == "log"


def test_a_long_ccdf_keeps_its_tail_whole_and_thins_its_body():
    """Past CCDF_POINTS tasks the line draws at most that many points: the
    most expensive CCDF_POINTS // 2 tasks all, at their exact shares, and the
    body at evenly spaced ranks, still starting from the cheapest task."""
    n = figures.CCDF_POINTS * 5
    costs = np.arange(1, n + 1, dtype=np.float64)
    line = figures.cost_ccdf({"a": costs}).axes[0].lines[0]
    x, y = line.get_xdata(), line.get_ydata()
    assert len(x) <= figures.CCDF_POINTS and x[0] == 1.0
    tail = figures.CCDF_POINTS // 2 - 1  # the top cost has no task above it: not drawn
    assert x[-tail:].tolist() == costs[-tail - 1:-1].tolist()
    assert np.allclose(y[-tail:], 1 - np.arange(n - tail, n) / n)
    assert np.all(np.diff(x) > 0) and np.all(np.diff(y) < 0)


def test_steps_histogram_is_in_shares_of_each_sides_tasks():
    """Each side's outline is in percent of its own tasks: its bins add up to
    100 whatever the side's size (3 tasks or 100)."""
    fig = figures.steps_histogram({"small": [3, 3, 5], "big": list(range(3, 103))})
    assert len(fig.axes[0].patches) == 2
    for patch in fig.axes[0].patches:
        outline = patch.get_path().vertices  # (left, h), (right, h) for each bin
        assert outline[1:-1:2, 1].sum() == pytest.approx(100)


def test_outcome_bars_stack_to_one_hundred_percent_with_fixed_colours():
    """Each bar's segments add up to its shares in percent; succeeded is green,
    needs_human orange, and colours do not depend on the order given."""
    fig = figures.outcome_bars({"a": {"succeeded": 0.7, "needs_human:no_progress": 0.2,
                                      "budget_exhausted:tokens": 0.1},
                                "b": {"succeeded": 0.5, "budget_exhausted:tokens": 0.5}})
    widths: dict[float, float] = {}
    for patch in fig.axes[0].patches:
        y = round(patch.get_y() + patch.get_height() / 2, 6)
        widths[y] = widths.get(y, 0.0) + patch.get_width()
    assert sorted(widths.values()) == pytest.approx([100, 100])
    colors = figures.outcome_colors(["needs_human:no_progress", "succeeded"])
    assert colors == figures.outcome_colors(["succeeded", "needs_human:no_progress"])
    assert colors["succeeded"] == "#4e9a3a" and colors["needs_human:no_progress"] == "#e8983a"


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), min_size=1, max_size=25))
@settings(max_examples=100, deadline=None)
def test_frontier_line_joins_exactly_the_cells_no_other_cell_beats(points):
    """No frontier cell is beaten (cheaper or equal and at least as successful,
    one strictly) by another cell; every other cell is beaten by a frontier cell."""
    cost = np.array([p[0] for p in points], dtype=float)
    success = np.array([p[1] for p in points], dtype=float)
    front = set(figures.pareto(cost, success).tolist())

    def beats(i: int, j: int) -> bool:
        return (cost[i] <= cost[j] and success[i] >= success[j]
                and (cost[i] < cost[j] or success[i] > success[j]))

    for j in range(len(points)):
        beaten = any(beats(i, j) for i in range(len(points)))
        if j in front:
            assert not beaten
        elif not any(cost[i] == cost[j] and success[i] == success[j] for i in front):
            assert any(beats(i, j) for i in front)


def test_frontier_rings_the_most_successful_cell_under_the_ceiling():
    """With a $1.50 ceiling the ringed cell (number 2, "mid") is the most
    successful one whose mean (left) or p95 (right) cost is under it;
    best_under_ceiling lists them."""
    s = summary([("cheap", 0.80, 0.5, 1.0), ("mid", 0.88, 1.2, 1.4), ("dear", 0.95, 3.0, 6.0)])
    fig = figures.frontier(s, ceiling=1.5)
    left, right, key = fig.axes
    assert "best under ceiling: 2" in [t.get_text() for t in left.get_legend().get_texts()]
    assert "best under ceiling: 2" in [t.get_text() for t in right.get_legend().get_texts()]
    assert "2 mid" in key.texts[0].get_text()  # points are numbered, names in the key
    assert figures.best_under_ceiling(s, 1.5)["cell"].tolist() == ["mid", "cheap"]
    assert figures.best_under_ceiling(s, 0.1).empty


def test_frontier_keeps_a_tiny_spread_of_shares_level():
    """Cells 0.05 pp apart (89.95% and 90.00%) do not fill the share axis: it
    spans at least 5 percentage points in both panels, so the points look
    level, not like a cliff; wide spreads keep their own range inside
    [0, 100]."""
    s = summary([("a", 0.8995, 1.0, 2.0), ("b", 0.9000, 1.1, 2.1)])
    for ax in figures.frontier(s).axes[:2]:
        low, high = ax.get_ylim()
        assert high - low >= figures.MIN_SHARE_SPAN_PP - 1e-9
        assert low < 89.95 and high > 90.0
    assert figures.share_limits([10.0, 90.0]) == pytest.approx((2.0, 98.0))
    assert figures.share_limits([0.0, 0.01])[0] == 0.0
    assert figures.share_limits([99.99, 100.0])[1] == 100.0


def test_share_changes_draws_one_interval_per_outcome():
    """One error bar per (cell, outcome) row."""
    table = pd.DataFrame({"cell": ["a", "a", "b"], "outcome": ["succeeded", "x", "succeeded"],
                          "change_pp": [1.0, -1.0, 0.5], "ci_low_pp": [0.5, -2, 0.0],
                          "ci_high_pp": [1.5, 0.0, 1.0]})
    fig = figures.share_changes(table)
    assert len(fig.axes[0].containers) == 3
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [
        "a: succeeded", "a: x", "b: succeeded"]


# -------------------------------------------------------------- HTML

def test_markdown_to_html_renders_the_report_subset_and_embeds_images():
    """Headings, paragraphs, aligned tables, code, lists, bold and images as
    data URIs; text is escaped; an image without data is an error."""
    md = ("# Title\n\nSome **bold** and `x<y`.\n\n| a | b |\n|---|---:|\n| 1 | 2 |\n\n"
          "- one\n- two\n\n```text\n<raw> & more\n```\n\n![A figure](figures/f.png)\n")
    page = markdown_to_html(md, {"figures/f.png": PNG + b"data"}, title="T & co")
    assert "<h1>Title</h1>" in page and "<strong>bold</strong>" in page
    assert "<code>x&lt;y</code>" in page and "&lt;raw&gt; &amp; more" in page
    assert '<td class="r">2</td>' in page and "<li>two</li>" in page
    assert 'src="data:image/png;base64,iVBORw0KGgpkYXRh"' in page
    assert "<title>T &amp; co</title>" in page
    with pytest.raises(KeyError):
        markdown_to_html("![x](missing.png)", {}, title="t")


GRID = """\
name: frontier_grid
tasks: 40
seed: 1
harness:
  prices: seed001
  budgets: {tokens: 2000000, steps: 50}
  verifier: {name: oracle}
sweep:
  harness.budgets.tokens: [300000, 2000000]
"""


def test_sweep_writes_a_self_contained_html_report_with_the_frontier(tmp_path):
    """``sweep`` writes report.html next to report.md: the four figures
    (outcomes, cost tail, steps, frontier) embedded, the best cells under
    --cost-ceiling named, and nothing fetched from elsewhere."""
    scenario = tmp_path / "grid.yaml"
    scenario.write_text(GRID)
    out = tmp_path / "out"
    with contextlib.redirect_stdout(io.StringIO()) as stdout:
        status = main(["sweep", str(scenario), "--quiet", "--workers", "1", "--out", str(out),
                       "--cost-ceiling", "5"])
    assert status == 0 and "report.html" in stdout.getvalue()
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.count('src="data:image/png;base64,') == 4
    assert "Best cells with mean cost under $5.00" in page
    assert "tokens=300000" in page and "https://" not in page


def test_summary_frame_has_one_row_per_cell_with_shares_and_costs():
    """summary_frame flattens summary.json's cells: params, shares, costs."""
    cell = {"name": "c", "params": {"harness.budgets.tokens": 5}, "tasks": 10,
            "outcomes": {"succeeded": 0.9, "failed:x": 0.1},
            "outcome_counts": {"succeeded": 9, "failed:x": 1},
            "steps": {"mean": 1.0, "p50": 1, "p95": 2, "max": 3},
            "input_tokens": {"mean": 1.0, "p50": 1, "p95": 2, "max": 3},
            "output_tokens": {"mean": 1.0, "p50": 1, "p95": 2, "max": 3},
            "cost": {"mean": 1.0, "p50": 0.5, "p95": 2.0, "max": 3.0, "total": 10.0},
            "nudges_mean": 0.5}
    frame = summary_frame([cell])
    row = frame.iloc[0]
    assert row["cell"] == "c" and row["harness.budgets.tokens"] == 5
    assert row["succeeded"] == 0.9 and row["failed:x"] == 0.1
    assert row["succeeded_low"] < 0.9 < row["succeeded_high"]
    assert row["cost_p95"] == 2.0 and row["nudges_mean"] == 0.5


def _number_labels(ax) -> list:
    return [t for t in ax.texts if t.get_text()[:1].isdigit()]


def test_frontier_labels_never_overlap_and_coincident_points_share_one():
    """Cells at the same spot (here 4, 5 and 6, as high token budgets give)
    get one label, ``4-6``; no two number labels of a panel overlap, and
    every cell's number appears once."""
    s = summary([("a", 0.45, 0.55, 0.7), ("b", 0.77, 0.85, 1.6), ("c", 0.866, 0.99, 3.1),
                 ("d", 0.899, 1.06, 3.3), ("e", 0.899, 1.06, 3.3), ("f", 0.899, 1.06, 3.3),
                 ("g", 0.898, 1.065, 3.31)])
    fig = figures.frontier(s)
    figures.png_bytes(fig)  # a full draw, as in a report
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes[:2]:
        labels = _number_labels(ax)
        texts = [t.get_text() for t in labels]
        assert "4-6" in texts or "4-7" in texts
        numbers = [n for t in texts for part in t.split(",")
                   for n in (range(int(part.split("-")[0]), int(part.split("-")[1]) + 1)
                             if "-" in part else [int(part)])]
        assert sorted(numbers) == list(range(1, 8))
        boxes = [t.get_window_extent(renderer) for t in labels]
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                assert not a.overlaps(b), (texts, a, b)


@given(st.lists(st.tuples(st.floats(0.5, 0.52), st.floats(0.89, 0.9)), min_size=2, max_size=10))
@settings(max_examples=10, deadline=None)
def test_frontier_labels_of_crowded_cells_do_not_overlap(points):
    """However crowded the cells, no two number labels of a panel overlap."""
    s = summary([(f"c{i}", y, x, x) for i, (x, y) in enumerate(points)])
    fig = figures.frontier(s)
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    for ax in fig.axes[:2]:
        boxes = [t.get_window_extent(renderer) for t in _number_labels(ax)]
        assert not [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:] if a.overlaps(b)]


def test_frontier_cost_tick_labels_do_not_overlap_on_a_close_range():
    """Costs within 3% of each other (p95 $0.509 to $0.526) still give cost
    tick labels that do not overlap."""
    s = summary([("a", 0.59, 0.1137, 0.5095), ("b", 0.665, 0.1172, 0.5258),
                 ("c", 0.703, 0.1203, 0.5258), ("d", 0.707, 0.1204, 0.5261)])
    fig = figures.frontier(s)
    figures.png_bytes(fig)
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes[:2]:
        boxes = [t.get_window_extent(renderer) for t in ax.get_xticklabels()
                 if t.get_text() and t.get_visible()]
        assert len(boxes) >= 2
        assert not [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:] if a.overlaps(b)]


def test_a_figure_the_font_or_layout_cannot_fit_draws_without_a_warning():
    """A name with a NUL or a character DejaVu Sans lacks, and 1,000 bars that
    collapse the layout, made matplotlib warn on stderr while the PNG was
    still drawn; the PNG is drawn and nothing is printed."""
    import warnings

    names = {"bo\x00x": {"succeeded": 1.0}, "\u4e2d\u6587\U0001F600": {"succeeded": 1.0}}
    many = {f"cell {i}": {"succeeded": 0.5, "needs_human:no_progress": 0.5}
            for i in range(1_000)}
    for shares in (names, many):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert figures.png_bytes(figures.outcome_bars(shares)).startswith(PNG)
