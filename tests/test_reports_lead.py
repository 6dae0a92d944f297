"""Reports lead with the answer: the verdict or headline table first, the
settings after, and settings that say what actually ran (a replay's
recorded runs and models, the capacity a sized cell used); a sweep's cells
compared on stdout and first in its report, named by field."""

from __future__ import annotations

import copy
import json

import pytest

import sim.cli
from sim.output.describe import provenance_lines, with_params
from sim.output.results import report_markdown


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A 2 x 2 sweep (detector on/off, two step budgets) of 40 tasks: its
    folder and its stdout."""
    root = tmp_path_factory.mktemp("lead")
    scenario = root / "grid.yaml"
    scenario.write_text("name: grid\ntasks: 40\nsweep:\n  harness.detector.enabled: [true, false]\n"
                        "  harness.budgets.steps: [20, 40]\n", encoding="utf-8")
    out = root / "out"
    import contextlib
    import io

    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert sim.cli.main(["sweep", str(scenario), "--quiet", "--workers", "1",
                             "--out", str(out)]) == 0
    return out, stdout.getvalue()


def test_sweep_cells_are_named_by_their_field(swept):
    """A generic last part is shown with its parent: ``detector.enabled=false``."""
    out, _ = swept
    names = [c["name"] for c in json.loads((out / "summary.json").read_text())["cells"]]
    assert names == ["detector.enabled=true,steps=20", "detector.enabled=true,steps=40",
                     "detector.enabled=false,steps=20", "detector.enabled=false,steps=40"]


def test_sweep_stdout_ends_with_the_cells_compared(swept):
    """After the per-cell tables, stdout compares the cells: one row each."""
    _, stdout = swept
    table = stdout.split("== 4 cells compared")[1]
    assert all(f"\n  {name}" in table for name in ("detector.enabled=true,steps=20",
                                                    "detector.enabled=false,steps=40"))
    assert table.index("succeeded") < table.index("detector.enabled")


def test_sweep_report_puts_the_cells_compared_first_and_settings_after(swept):
    """report.md: the title, then the cells compared, every cell, and only then
    the settings and the definitions; report.html in the same order."""
    out, _ = swept
    report = (out / "report.md").read_text(encoding="utf-8")
    headings = [line for line in report.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Cells compared"
    assert headings[-2:] == ["## Settings", "## Definitions"]
    assert report.index("**Settings**") > report.index("## detector.enabled=false,steps=40")
    html = (out / "report.html").read_text(encoding="utf-8")
    assert html.index("Cells compared") < html.index("Figures") < html.index("Definitions")


def test_a_sized_cell_reports_the_sizing_first_and_the_capacity_it_ran_with(swept):
    """A capacity cell with a sizing result: the report opens with the sized
    pools, and its settings state the capacity the cell ran with (its params),
    not the scenario's."""
    out, _ = swept
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    cell = copy.deepcopy(summary["cells"][0])
    cell["params"] = {"des.capacity.sandboxes": 70, "des.capacity.model_slots": 49}
    cell["sizing"] = {"target_p95_wait_s": 30.0, "sandboxes": 70, "model_slots": 49, "runs": 9,
                      "probes": [{"sandboxes": 96, "model_slots": 64, "sandbox_wait_p95_s": 0.0,
                                  "model_wait_p95_s": 0.0, "tenants": {}}]}
    provenance = copy.deepcopy(summary["provenance"])
    provenance["scenario"]["engine"] = "des"
    provenance["scenario"]["des"]["capacity"] = {"sandboxes": 96, "model_slots": 64}
    report = report_markdown({"cells": [cell], "provenance": provenance}, "Capacity: x")
    headings = [line for line in report.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Sizing"
    assert "**70 sandboxes and 49 model slots**" in report
    settings = report.split("## Settings")[1]
    assert "70 sandboxes, 49 model slots" in settings and "96 sandboxes" not in settings


def test_with_params_sets_dotted_fields_of_a_copy():
    """A cell's dotted parameters set on a copy; the original is untouched."""
    scenario = {"harness": {"budgets": {"steps": 10}}, "tasks": 5}
    changed = with_params(scenario, {"harness.budgets.steps": 30, "tasks": 7})
    assert changed == {"harness": {"budgets": {"steps": 30}}, "tasks": 7}
    assert scenario["harness"]["budgets"]["steps"] == 10
    assert provenance_lines(None) == []


def test_replay_settings_say_the_recorded_runs_and_models(tmp_path):
    """A replay's report: the answer first; its settings name the recorded
    runs and their models, not the scenario's tasks per cell and model."""
    traces = tmp_path / "traces"
    assert sim.cli.main(["run", "bounded", "--tasks", "6", "--traces", "--quiet",
                         "--workers", "1", "--out", str(traces)]) == 0
    out = tmp_path / "replayed"
    assert sim.cli.main(["replay", str(traces), "replay", "--quiet", "--out", str(out)]) == 0
    report = (out / "report.md").read_text(encoding="utf-8")
    headings = [line for line in report.splitlines() if line.startswith("## ")]
    assert headings[0].startswith("## What the candidate would have done to 6 recorded runs")
    settings = report.split("## Settings")[1]
    assert "6 recorded runs of 1 model (`claude-sonnet-4-20250514`)" in settings
    assert "tasks per cell" not in settings
