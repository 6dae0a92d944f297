"""A comparison says what changed: the settings that differ between base and
candidate (dotted paths, old -> new) head stdout, report.md and report.html,
JUnit, the CI step summary and comparison.json (issue 37, item 5)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from sim.cli import main
from sim.scenario.diff import setting_changes


def test_setting_changes_lists_each_differing_leaf_by_dotted_path() -> None:
    """Nested fields and list elements are named by path; labels are not settings;
    1 and 1.0 are the same number; a field only one side holds is unset on the other."""
    base = {"name": "a", "description": "x", "seed": 7,
            "harness": {"budgets": {"tokens": 200_000, "steps": 40}},
            "world": {"classes": [{"cache": {"read_share": 0.5}}, {"weight": 1}]}}
    candidate = {"name": "b", "description": "y", "seed": 7.0,
                 "harness": {"budgets": {"tokens": 150_000, "steps": 40, "money": 3.0}},
                 "world": {"classes": [{"cache": {"read_share": 0.9}}, {"weight": 1}]}}
    changes = [str(c) for c in setting_changes(base, candidate)]
    assert changes == ["harness.budgets.tokens: 200,000 -> 150,000",
                       "world.classes.0.cache.read_share: 0.5 -> 0.9",
                       "harness.budgets.money: unset -> 3.0"]


def test_setting_changes_of_equal_documents_is_empty_and_booleans_are_not_numbers() -> None:
    """The same document gives no change; ``true`` against ``1`` is a change."""
    doc = {"harness": {"detector": {"enabled": True, "nudges": 1}}}
    assert setting_changes(doc, doc) == ()
    other = {"harness": {"detector": {"enabled": 1, "nudges": 1}}}
    assert [str(c) for c in setting_changes(doc, other)] == [
        "harness.detector.enabled: true -> 1"]


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, str]:
    """``compare bounded bounded --candidate-set harness.detector.nudges=2`` with
    every output asked for."""
    folder = tmp_path_factory.mktemp("changes")
    out = folder / "report"
    status = main(["compare", "bounded", "bounded", "--candidate-set",
                   "harness.detector.nudges=2", "--tasks", "120", "--workers", "1", "--quiet",
                   "--out", str(out), "--junit", str(folder / "junit.xml"),
                   "--summary-md", str(folder / "summary.md")])
    return folder, status, ""  # the third item: unused


def test_compare_names_the_changed_setting_with_both_values_in_every_output(
        compared: tuple[Path, int, str], capsys: pytest.CaptureFixture[str]) -> None:
    """report.md's title, report.html, JUnit's suite name and properties, the
    step summary's heading and comparison.json all carry ``harness.detector.nudges: 1 -> 2``."""
    folder, status, _ = compared
    assert status in (0, 1, 3)
    expected = "harness.detector.nudges: 1 -> 2"
    report = (folder / "report" / "report.md").read_text(encoding="utf-8")
    assert report.splitlines()[0] == f"# Comparison: bounded: {expected}"
    assert "- `harness.detector.nudges`: 1 -> 2" in report
    assert expected in (folder / "report" / "report.html").read_text(encoding="utf-8") \
        .replace("&gt;", ">")
    root = ET.parse(folder / "junit.xml").getroot()
    assert expected in root.get("name", "")
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["changed harness.detector.nudges"] == "1 -> 2"
    summary = (folder / "summary.md").read_text(encoding="utf-8")
    assert summary.splitlines()[0].endswith(f": bounded: {expected}")
    data = json.loads((folder / "report" / "comparison.json").read_text(encoding="utf-8"))
    assert data["changes"] == [{"path": "harness.detector.nudges", "base": "1",
                                "candidate": "2"}]


def test_compare_stdout_opens_with_the_verdict_and_the_change(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """stdout's first line is the verdict with what changed; a ``changed:`` line
    per setting follows, before the sides' sources."""
    status = main(["compare", "bounded", "bounded", "--candidate-set",
                   "harness.budgets.steps=30", "--tasks", "60", "--workers", "1", "--quiet",
                   "--out", str(tmp_path / "r")])
    lines = capsys.readouterr().out.splitlines()
    word = {0: "no regression", 1: "REGRESSION", 3: "INCONCLUSIVE"}[status]
    assert lines[0] == (f"{word} (exit status {status}): bounded: "
                        "harness.budgets.steps: 50 -> 30")
    assert lines[1] == "changed:   harness.budgets.steps: 50 -> 30"
    assert lines[2].startswith("base:")


def test_compare_of_two_results_folders_reads_the_recorded_scenarios(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two results folders: the settings come from each summary.json's
    provenance, so a folder run with ``--set`` is told apart by that field."""
    for name, steps in (("a", "40"), ("b", "35")):
        assert main(["run", "bounded", "--tasks", "40", "--workers", "1", "--quiet",
                     "--set", f"harness.budgets.steps={steps}",
                     "--out", str(tmp_path / name)]) == 0
    capsys.readouterr()
    main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--workers", "1", "--quiet",
          "--format", "json", "--out", str(tmp_path / "c")])
    data = json.loads(capsys.readouterr().out)
    assert data["changes"] == [{"path": "harness.budgets.steps", "base": "40",
                                "candidate": "35"}]
