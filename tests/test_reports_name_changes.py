"""Replay and tune reports say what changed (sim.scenario.diff): the dotted
field and both values, at the top of stdout, report.md and the JSON."""

from __future__ import annotations

import json

from test_calibrate_cli import a_run, write_folder
from test_tune_headline import folder as headline_folder

from sim.cli import main


def test_replay_names_each_budget_it_changes_from_the_recorded_harness(tmp_path, capsys):
    """Runs recorded under step_limit=200, replayed with steps=30 and a token
    budget the recording does not state: stdout, report.md and summary.json
    name ``harness.budgets.steps: 200 -> 30`` and the token budget as not
    recorded."""
    traces = write_folder(tmp_path / "t", [a_run(i, 4) for i in range(3)])
    out = tmp_path / "r"
    assert main(["replay", traces, "replay", "--out", str(out), "--quiet",
                 "--set", "harness.budgets.steps=30",
                 "--set", "harness.budgets.tokens=50000"]) == 0
    printed = capsys.readouterr().out
    line = ("Changed from the recorded harness: harness.budgets.steps: 200 -> 30; "
            "harness.budgets.tokens: not recorded -> 50,000 (the runs state "
            "harness.budgets.steps)")
    assert line in printed
    assert line in (out / "report.md").read_text()
    block = json.loads((out / "summary.json").read_text())["cells"][0]["replay"]
    assert block["changes"] == {"known": ["harness.budgets.steps"], "changes": [
        {"path": "harness.budgets.steps", "recorded": "200", "replayed": "30"},
        {"path": "harness.budgets.tokens", "recorded": "not recorded",
         "replayed": "50,000"}]}


def test_replay_of_the_recorded_limits_says_nothing_changed(tmp_path, capsys):
    traces = write_folder(tmp_path / "t", [a_run(i, 4) for i in range(3)])
    assert main(["replay", traces, "replay", "--out", str(tmp_path / "r"), "--quiet",
                 "--set", "harness.budgets.steps=200"]) == 0
    assert ("Changed from the recorded harness: nothing in harness.budgets.steps"
            in capsys.readouterr().out)


def test_tune_names_the_recommended_change_from_the_harness_in_force(tmp_path, capsys):
    """600 successes of 3 calls and 30 failures of 50 (no limit recorded):
    tune sets steps=3; the line after the headline, recommended.yaml's header
    and tune.json name ``harness.budgets.steps: null -> 3``."""
    traces = headline_folder(tmp_path, 600, 30)
    out = tmp_path / "o"
    assert main(["tune", str(traces), "--knobs", "steps", "--out", str(out), "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "Changes from the harness in force: harness.budgets.steps: null -> 3"
    assert "# Changes from the harness in force: harness.budgets.steps: null -> 3" in (
        out / "recommended.yaml").read_text()
    assert "harness.budgets.steps: null -> 3" in (out / "report.md").read_text()
    changes = json.loads((out / "tune.json").read_text())["recommendation"]["changes"]
    assert changes == [{"path": "harness.budgets.steps", "in_force": "null",
                        "recommended": "3"}]


def test_sweep_names_each_cells_settings_against_the_scenarios_base(tmp_path, capsys):
    """A sweep of harness.budgets.tokens over 50,000 and 100,000 from a base
    of 2,000,000: under each cell's table, stdout names the field and both
    values."""
    scenario = tmp_path / "swept.yaml"
    scenario.write_text(
        "name: swept\ntasks: 20\nharness:\n  prices: seed001\n  max_output_tokens: 600\n"
        "  context_window: 200000\n  budgets:\n    tokens: 2000000\n"
        "sweep:\n  harness.budgets.tokens: [50000, 100000]\n")
    assert main(["sweep", str(scenario), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "changed from the base: harness.budgets.tokens: 2,000,000 -> 50,000" in printed
    assert "changed from the base: harness.budgets.tokens: 2,000,000 -> 100,000" in printed
    assert printed.index("== tokens=50000") < printed.index("2,000,000 -> 50,000") < (
        printed.index("== tokens=100000"))


def test_sweep_writes_each_cells_changes_into_summary_json_and_the_report(tmp_path):
    """The same sweep: summary.json gives each cell its ``changes``
    (path, base and value as read), report.md names them under each cell's
    heading; a single run has no ``changes`` at all."""
    scenario = tmp_path / "swept.yaml"
    scenario.write_text(
        "name: swept\ntasks: 10\nharness:\n  prices: seed001\n  max_output_tokens: 600\n"
        "  context_window: 200000\n  budgets:\n    tokens: 2000000\n"
        "sweep:\n  harness.budgets.tokens: [50000, 100000]\n")
    assert main(["sweep", str(scenario), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    cells = json.loads((tmp_path / "o" / "summary.json").read_text())["cells"]
    assert [c["changes"] for c in cells] == [
        [{"path": "harness.budgets.tokens", "base": "2,000,000", "value": "50,000"}],
        [{"path": "harness.budgets.tokens", "base": "2,000,000", "value": "100,000"}]]
    report = (tmp_path / "o" / "report.md").read_text()
    assert "Changed from the base: `harness.budgets.tokens`: 2,000,000 -> 50,000" in report
    assert report.index("## tokens=50000") < report.index("-> 50,000") < report.index(
        "## tokens=100000")
    assert main(["run", str(scenario), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    single = json.loads((tmp_path / "r" / "summary.json").read_text())["cells"]
    assert "changes" not in single[0]
