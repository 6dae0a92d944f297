"""Default results folders: without ``--out`` each distinct run (command,
``--set``, ``--tasks``, ``--seed``) gets its own folder under the results root,
named so a user can read it, and says where it went; the same command again
writes its own folder again; a folder is never overwritten by a different
run without ``--force``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.cli import main
from sim.output.folder import MAX_READABLE_SUFFIX, run_folder_name

SMALL = """name: small
tasks: 20
seed: 3
harness:
  budgets: {steps: 20}
"""


@pytest.fixture
def small(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A 20-task scenario file in a fresh folder that is the current one;
    results go under ``tmp_path/reports``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SIM_OUT", str(tmp_path / "reports"))
    path = tmp_path / "small.yaml"
    path.write_text(SMALL, encoding="utf-8")
    return path


def sim(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main([*argv, "--quiet", "--workers", "1"])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_sweep_then_run_then_a_set_variant_each_get_their_own_folder(small, capsys):
    """``sweep``, ``run`` and ``run --set`` of one scenario: all exit 0,
    into reports/small, reports/small-run and
    reports/small-run-harness.budgets.steps=5, each named on stdout."""
    reports = small.parent / "reports"
    status, out, _ = sim(capsys, "sweep", str(small))
    assert status == 0 and f"results in {reports / 'small'}/" in out
    status, out, _ = sim(capsys, "run", str(small))
    assert status == 0 and f"results in {reports / 'small-run'}/" in out
    status, out, _ = sim(capsys, "run", str(small), "--set", "harness.budgets.steps=5")
    variant = reports / "small-run-harness.budgets.steps=5"
    assert status == 0 and f"results in {variant}/" in out
    assert sorted(p.name for p in reports.iterdir() if not p.name.startswith(".")) == [
        "small", "small-run", "small-run-harness.budgets.steps=5"]
    summary = json.loads((variant / "summary.json").read_text())
    assert summary["cells"][0]["steps"]["max"] <= 5


def test_tasks_and_seed_are_part_of_the_default_folder(small, capsys):
    """``--tasks 10 --seed 4`` is its own run: small-tasks=10,seed=4."""
    status, _, _ = sim(capsys, "sweep", str(small), "--tasks", "10", "--seed", "4")
    assert status == 0
    folder = small.parent / "reports" / "small-tasks=10,seed=4"
    assert json.loads((folder / "summary.json").read_text())["cells"][0]["tasks"] == 10


def test_the_same_command_again_rewrites_its_own_folder(small, capsys):
    """The same run twice: exit 0 both times, one folder."""
    assert sim(capsys, "run", str(small))[0] == 0
    assert sim(capsys, "run", str(small))[0] == 0
    assert (small.parent / "reports" / "small-run" / "summary.json").is_file()


def test_a_changed_scenario_never_overwrites_without_force(small, capsys):
    """The file changed (30 tasks): its default folder holds another run's
    results, so exit 2 naming --force; with --force, exit 0 and 30 tasks."""
    assert sim(capsys, "run", str(small))[0] == 0
    small.write_text(SMALL.replace("tasks: 20", "tasks: 30"), encoding="utf-8")
    status, _, err = sim(capsys, "run", str(small))
    assert status == 2 and "--force" in err and "small-run" in err
    summary = small.parent / "reports" / "small-run" / "summary.json"
    assert json.loads(summary.read_text())["cells"][0]["tasks"] == 20
    assert sim(capsys, "run", str(small), "--force")[0] == 0
    assert json.loads(summary.read_text())["cells"][0]["tasks"] == 30


def test_json_output_says_where_the_results_went_on_stderr(small, capsys):
    """``--format json`` keeps stdout for the JSON; stderr names the folder."""
    status = main(["run", str(small), "--format", "json", "--workers", "1"])
    captured = capsys.readouterr()
    assert status == 0
    json.loads(captured.out)
    assert f"results in {small.parent / 'reports' / 'small-run'}/" in captured.err


def test_folder_names_are_readable_when_short_and_a_hash_otherwise():
    """Short safe overrides are written out; long ones or ones with spaces
    or braces are ``set-`` and 8 hex digits, the same for the same
    overrides and different for different ones."""
    assert run_folder_name("bounded", "sweep") == "bounded"
    assert run_folder_name("bounded", "run") == "bounded-run"
    assert run_folder_name("bounded", "capacity", ["tasks=50"]) == "bounded-capacity-tasks=50"
    long = [f"harness.budgets.steps={'9' * MAX_READABLE_SUFFIX}"]
    sweep = ["sweep={harness.budgets.steps: [10, 20]}"]
    for overrides in (long, sweep):
        name = run_folder_name("bounded", "run", overrides)
        assert name.startswith("bounded-run-set-") and len(name) == len("bounded-run-set-") + 8
        assert name == run_folder_name("bounded", "run", list(overrides))
    assert run_folder_name("bounded", "run", long) != run_folder_name("bounded", "run", sweep)
