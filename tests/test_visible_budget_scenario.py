"""scenarios/visible_budget.yaml: a visible 15-step budget, on_limit (stop,
finalize, ask) x the assumed wrap-up probability (0, 0.3, 0.7); it loads,
runs, writes the same bytes with 1 and 2 workers, and its report says the
model's answer to the budget is assumed, not fitted, with the share of
successes, of finalized runs and the cost per run of each cell."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from sim.cli import main
from sim.output.markdown import assumed_markdown
from sim.scenario.model import load_scenario
from sim.sweeps.cells import build_cell, cells_of

PATH = Path("scenarios/visible_budget.yaml")
FILES = ("results.parquet", "summary.json", "report.md")


def test_the_scenario_loads_with_its_sweep() -> None:
    """Nine cells: on_limit stop, finalize, ask x wrap_up 0, 0.3, 0.7, each
    showing the budget, with a 15-step budget and the assumed world block."""
    runs = cells_of(load_scenario(str(PATH), []))
    assert len(runs) == 9
    cells = [build_cell(run) for run in runs]
    assert [c.params.visibility.on_limit for c in cells] == ["stop"] * 3 + ["finalize"] * 3 \
        + ["ask"] * 3
    assert all(c.params.visibility.show_budget and c.params.budgets.steps == 15 for c in cells)
    assert [c.world.visible.wrap_up for c in cells] == [0.0, 0.3, 0.7] * 3


def test_the_same_bytes_with_one_and_two_workers_and_the_report_says_assumed(
        tmp_path: Path) -> None:
    """Identical results.parquet, summary.json and report.md with --workers
    1 and 2; the report's "Limits the model sees" section says "Assumed, not
    fitted: world.visible_budget.*" and has one row per cell; only finalize
    cells end as finalized, only ask cells as needs_human:limit."""
    outs = []
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}"
        assert main(["sweep", str(PATH), "--tasks", "40", "--workers", workers, "--quiet",
                     "--out", str(out)]) == 0
        outs.append({name: (out / name).read_bytes() for name in FILES})
    assert outs[0] == outs[1]
    report = outs[0]["report.md"].decode()
    section = report[report.index("## Limits the model sees"):].split("\n## ")[0]
    assert "Assumed, not fitted: world.visible_budget.*" in section
    rows = [line for line in section.splitlines() if line.startswith("| on_limit=")]
    assert len(rows) == 9
    summary = json.loads(outs[0]["summary.json"])
    for cell in summary["cells"]:
        finalize, ask = "on_limit=finalize" in cell["name"], "on_limit=ask" in cell["name"]
        assert (cell.get("finalized_share", 0.0) > 0) == finalize, cell["name"]
        assert ("needs_human:limit" in cell["outcomes"]) <= ask, cell["name"]


def test_a_report_without_the_block_says_nothing_of_it() -> None:
    """The assumed section appears only when world.visible_budget is set or swept."""
    summary = {"cells": [], "provenance": {"scenario": {"world": {}, "sweep": {}}}}
    assert assumed_markdown(summary) == []


def test_the_des_engine_gives_every_task_the_same_ending_as_the_direct_engine(
        tmp_path: Path) -> None:
    """With unlimited capacity (the scenario sets none) the DES engine runs
    the same harness, finalize calls and parked asks included: each task's
    state, reason, steps, tokens and cost are those of the direct engine."""
    frames = []
    for engine in ("direct", "des"):
        out = tmp_path / engine
        assert main(["sweep", str(PATH), "--tasks", "20", "--workers", "1", "--quiet",
                     "--set", f"engine={engine}", "--out", str(out)]) == 0
        frames.append(pd.read_parquet(out / "results.parquet"))
    cols = ["cell", "task", "state", "reason", "steps", "input_tokens", "output_tokens",
            "cost_usd"]
    pd.testing.assert_frame_equal(frames[0][cols], frames[1][cols])
    assert {"finalized", "limit"} <= set(frames[0]["reason"])


def test_traces_of_finalized_runs_are_read_back(tmp_path: Path) -> None:
    """Simulated traces (--traces) of the finalize cell record the finalize
    call as a call of purpose finalize, and the replay reads them back."""
    out = tmp_path / "runs"
    assert main(["run", str(PATH), "--tasks", "20", "--quiet", "--traces",
                 "--set", "harness.visibility.on_limit=finalize",
                 "--set", "world.visible_budget.wrap_up=0.0", "--out", str(out)]) == 0
    calls = pd.read_parquet(out / "calls.parquet")
    results = pd.read_parquet(out / "results.parquet")
    finalize_calls = int((calls["purpose"] == "finalize").sum())
    assert finalize_calls >= int((results["reason"] == "finalized").sum()) > 0
    candidate = tmp_path / "candidate.yaml"
    candidate.write_text(PATH.read_text().split("\nsweep:")[0])
    assert main(["replay", str(out), str(candidate), "--quiet",
                 "--out", str(tmp_path / "replay")]) == 0
