"""Children in a sweep's results: with subagents, results.parquet carries each
parent's children, their endings, tokens and cost and the session's totals,
summary.json and report.md a children table and report.html a figure of the
subagents per run; without subagents the columns, the section and the figure
are absent."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
from matplotlib.patches import Polygon

from sim.analysis.fanout import rows_summary
from sim.cli import main
from sim.harness.state import new_state
from sim.output.html import sweep_figures
from sim.output.results import records_frame
from sim.task_record import CHILDREN_FIELDS, RECORD_FIELDS, make_record

FANOUT = "scenarios/fanout.yaml"


def test_a_record_carries_its_children_and_the_session_totals() -> None:
    """make_record copies the children counters of the state and adds the
    parent's own usage to its descendants' for the session totals."""
    s = new_state(0, "m", "t")
    s.input_tokens, s.output_tokens, s.money_usd = 1000, 200, 0.5
    s.children, s.children_failed, s.descendants = 3, 1, 4
    s.children_tokens, s.children_cost_usd = 5000, 1.25
    s.children_outcomes = {"succeeded": 2, "failed:model_error": 1}
    r = make_record("c", 0, s, ground_truth=1, truly_done=False)
    assert (r.children, r.children_failed, r.descendants) == (3, 1, 4)
    assert (r.children_tokens, r.session_tokens) == (5000, 6200)
    assert r.session_cost_usd == 1.75
    assert json.loads(r.children_outcomes) == {"failed:model_error": 1, "succeeded": 2}
    frame = records_frame([r])
    assert list(frame.columns) == list(RECORD_FIELDS)  # without subagents: no children columns
    assert list(records_frame([r], children=True).columns) == [*RECORD_FIELDS, *CHILDREN_FIELDS]


def test_rows_summary_counts_endings_and_totals_from_rows() -> None:
    """Three parents (two succeeded, one out of session budget) with 2, 0 and
    3 children: the children's endings added over the JSON column, totals
    summed, the session cost's max the largest parent's."""
    section = rows_summary(
        ["succeeded", "budget_exhausted:session", "succeeded"],
        {"children": [2, 0, 3], "children_failed": [1, 0, 1], "descendants": [2, 0, 3],
         "children_tokens": [100, 0, 300], "children_cost_usd": [0.25, 0.0, 0.5],
         "session_tokens": [150, 40, 400], "session_cost_usd": [0.5, 0.125, 1.0],
         "children_outcomes": ['{"needs_human:no_progress":1,"succeeded":1}', "",
                               '{"succeeded":2,"budget_exhausted:session":1}']})
    assert section["parents"] == {"succeeded": 2, "budget_exhausted:session": 1}
    assert section["children"] == {"succeeded": 3, "budget_exhausted:session": 1,
                                   "needs_human:no_progress": 1}
    assert (section["spawned"], section["children_failed"], section["descendants"]) == (5, 2, 5)
    assert (section["children_tokens"], section["children_cost_usd"]) == (400, 0.75)
    assert section["session_cost"]["max"] == 1.0 and section["session_cost"]["total"] == 1.625
    assert section["session_tokens"]["p50"] == 150


def _sweep(tmp_path: Path, scenario: str, *args: str) -> Path:
    out = tmp_path / Path(scenario).stem
    assert main(["sweep", scenario, "--out", str(out), "--workers", "1", *args]) == 0
    return out


def test_a_fanout_sweep_writes_children_columns_summary_and_report(tmp_path: Path) -> None:
    """fanout.yaml, one cell, 15 tasks: every row has the children columns;
    a session's totals are the parent's own plus its children's; the
    summary's children section counts what the rows hold; the report shows
    the table."""
    out = _sweep(tmp_path, FANOUT, "--tasks", "15", "--set",
                 "sweep={}")
    rows = pq.read_table(out / "results.parquet").to_pandas()
    assert list(rows.columns) == [*RECORD_FIELDS, *CHILDREN_FIELDS]
    assert len(rows) == 15 and rows["children"].sum() > 0
    pd.testing.assert_series_equal(rows["session_cost_usd"],
                                   rows["cost_usd"] + rows["children_cost_usd"],
                                   check_names=False)
    own = (rows["input_tokens"] + rows["cache_read_tokens"] + rows["cache_write_tokens"]
           + rows["output_tokens"] + rows["thinking_tokens"])
    assert (rows["session_tokens"] == own + rows["children_tokens"]).all()
    ended = [sum(json.loads(t).values()) if t else 0 for t in rows["children_outcomes"]]
    assert ended == rows["children"].tolist()  # every child counted once, by its ending
    cell = json.loads((out / "summary.json").read_text())["cells"][0]
    assert cell["children"]["spawned"] == int(rows["children"].sum())
    assert sum(cell["children"]["children"].values()) == int(rows["children"].sum())
    assert cell["children"]["parents"] == cell["outcome_counts"]
    assert cell["children"]["session_cost"]["max"] == rows["session_cost_usd"].max()
    report = (out / "report.md").read_text()
    assert "### Subagents" in report and "per session (parent and descendants)" in report
    assert "Subagents (child runs) each run started" in (out / "report.html").read_text()


def test_a_sweep_without_subagents_has_no_children_columns(tmp_path: Path) -> None:
    """bounded.yaml: the columns are RECORD_FIELDS only, no children section,
    no Subagents section in the report."""
    out = _sweep(tmp_path, "scenarios/bounded.yaml", "--tasks", "20")
    assert pq.read_schema(out / "results.parquet").names == list(RECORD_FIELDS)
    cell = json.loads((out / "summary.json").read_text())["cells"][0]
    assert "children" not in cell
    assert "### Subagents" not in (out / "report.md").read_text()
    assert "Subagents (child runs)" not in (out / "report.html").read_text()


def test_the_report_figures_show_subagents_per_run_only_with_subagents() -> None:
    """Rows with a children column (0, 2, 2, 5 subagents): a "children"
    figure, in shares of the cell's 4 runs per count (25% none, 50% two,
    25% five); rows without the column: no such figure."""
    rows = pd.DataFrame({"cell": ["a"] * 4, "cost_usd": [0.1, 0.2, 0.3, 0.4],
                         "steps": [3, 4, 5, 6], "children": [0, 2, 2, 5]})
    summary = {"cells": [{"name": "a", "outcomes": {"succeeded": 1.0}}]}
    ax = sweep_figures(summary, rows)["children"].axes[0]
    assert (ax.get_title(), ax.get_xlabel()) == ("Subagents per run", "subagents started")
    legend = ax.get_legend()
    assert legend is not None and [t.get_text() for t in legend.get_texts()] == ["a (n=4)"]
    patch = ax.patches[0]
    assert isinstance(patch, Polygon)
    outline = patch.get_xy()  # a step outline: each bin's top edge is two vertices
    assert outline[1:-1:2, 1].tolist() == [25.0, 0.0, 50.0, 0.0, 0.0, 25.0]
    assert "children" not in sweep_figures(summary, rows.drop(columns="children"))
