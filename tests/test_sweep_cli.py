"""``python -m sim sweep`` and ``run`` end to end: determinism, the grid, the
results folder and machine-readable output.

DESIGN.md: same scenario + same seed = identical results, byte for byte,
whatever the worker count; a sweep's cells are named by their axis values and
share task i (common random numbers); the results folder holds
``results.parquet`` (one row per task per cell), ``summary.json`` and
``report.md``. The commands run at once (one module fixture), on a 2 x 2 grid
of 200 tasks per cell.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import sim.cli
from sim.task_record import RECORD_FIELDS

TASKS = 200
GRID = f"""\
name: grid
description: a 2 x 2 sweep for the CLI tests
tasks: {TASKS}
seed: 5
harness:
  prices: seed001
  max_output_tokens: 600
  budgets: {{steps: 50}}
  verifier: {{name: oracle}}
sweep:
  harness.budgets.tokens: [500000, 2000000]
  harness.detector.nudges: [0, 1]
"""
CELLS = {
    "tokens=500000,nudges=0": {"harness.budgets.tokens": 500000, "harness.detector.nudges": 0},
    "tokens=500000,nudges=1": {"harness.budgets.tokens": 500000, "harness.detector.nudges": 1},
    "tokens=2000000,nudges=0": {"harness.budgets.tokens": 2000000, "harness.detector.nudges": 0},
    "tokens=2000000,nudges=1": {"harness.budgets.tokens": 2000000, "harness.detector.nudges": 1},
}
FILES = ("results.parquet", "summary.json", "report.md")
# name: (command, options, in a real interpreter?); every run writes to its own
# folder. Three go through ``sim.cli.main`` in this process (the same code,
# without another interpreter's two to three CPU seconds of imports).
COMMANDS = {
    "workers1": ("sweep", ["--workers", "1", "--format", "json"], True),  # progress on stderr
    "workers1_again": ("sweep", ["--workers", "1", "--quiet"], False),
    "workers2": ("sweep", ["--workers", "2", "--quiet"], True),
    "other_seed": ("sweep", ["--workers", "1", "--quiet", "--seed", "6"], False),
    "run": ("run", ["--workers", "1"], False),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    """Every command of COMMANDS on grid.yaml, the interpreters started at
    once: ``{name: (completed process, results folder)}``."""
    base = tmp_path_factory.mktemp("sweep")
    scenario = base / "grid.yaml"
    scenario.write_text(GRID, encoding="utf-8")
    started, done = {}, {}
    for name, (command, options, interpreter) in COMMANDS.items():
        argv = [command, str(scenario), "--out", str(base / name), *options]
        if interpreter:
            started[name] = subprocess.Popen([sys.executable, "-m", "sim", *argv], cwd=base,
                                             text=True, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE)
    for name, (command, options, interpreter) in COMMANDS.items():
        if not interpreter:
            argv = [command, str(scenario), "--out", str(base / name), *options]
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                status = sim.cli.main(argv)
            done[name] = subprocess.CompletedProcess(argv, status, out.getvalue(), err.getvalue())
    for name, process in started.items():
        stdout, stderr = process.communicate(timeout=600)
        done[name] = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    for name, process in done.items():
        assert process.returncode == 0, (name, process.stderr)
    return {name: (done[name], base / name) for name in COMMANDS}


def folder(runs, name: str) -> Path:
    return runs[name][1]


def summary(runs, name: str) -> dict:
    return json.loads((folder(runs, name) / "summary.json").read_text(encoding="utf-8"))


def rows(runs, name: str) -> pd.DataFrame:
    return pd.read_parquet(folder(runs, name) / "results.parquet")


# ------------------------------------------------------------- determinism
@pytest.mark.parametrize("file", FILES)
def test_same_seed_gives_identical_bytes_for_any_worker_count(runs, file):
    """The same command and seed give byte-identical files with one worker,
    again with one worker, and with two workers."""
    first = (folder(runs, "workers1") / file).read_bytes()
    assert (folder(runs, "workers1_again") / file).read_bytes() == first
    assert (folder(runs, "workers2") / file).read_bytes() == first


def test_different_seed_gives_different_results(runs):
    """Another seed draws other tasks: other needs, other bytes."""
    base, other = rows(runs, "workers1"), rows(runs, "other_seed")
    assert (folder(runs, "other_seed") / "results.parquet").read_bytes() != (
        folder(runs, "workers1") / "results.parquet").read_bytes()
    assert summary(runs, "other_seed") != summary(runs, "workers1")
    assert (base["ground_truth"] != other["ground_truth"]).mean() > 0.5


# --------------------------------------------------------------- the grid
def test_grid_of_two_by_two_axes_gives_four_named_cells_with_params(runs):
    """Cells are named ``last.part=value`` in grid order, with the full dotted
    paths and values in ``params``; the axis settings really apply."""
    cells = summary(runs, "workers1")["cells"]
    assert [c["name"] for c in cells] == list(CELLS)
    for cell in cells:
        assert cell["params"] == CELLS[cell["name"]]
        assert cell["tasks"] == TASKS
        assert cell["input_tokens"]["max"] <= cell["params"]["harness.budgets.tokens"]
        if cell["params"]["harness.detector.nudges"] == 0:
            assert cell["nudges_mean"] == 0


def test_task_i_is_the_same_task_in_every_cell(runs):
    """Common random numbers: task i needs the same work in every cell."""
    frame = rows(runs, "workers1")
    needs = frame.pivot(index="task", columns="cell", values="ground_truth")
    assert (needs.nunique(axis=1) == 1).all()


# -------------------------------------------------------- the results folder
def test_results_folder_holds_parquet_summary_and_report(runs):
    """The folder holds results.parquet (one row per task per cell, columns
    as RECORD_FIELDS, tasks in order), summary.json and report.md (every
    cell)."""
    out = folder(runs, "workers1")
    assert {p.name for p in out.iterdir()} >= set(FILES)
    frame = rows(runs, "workers1")
    assert list(frame.columns) == list(RECORD_FIELDS)
    assert len(frame) == TASKS * len(CELLS)
    assert list(frame["cell"].unique()) == list(CELLS)
    for _, cell_rows in frame.groupby("cell", sort=False):
        assert cell_rows["task"].tolist() == list(range(TASKS))
    report = (out / "report.md").read_text(encoding="utf-8")
    assert all(name in report for name in CELLS)


def test_summary_json_follows_the_design_contract(runs):
    """Each cell has name, params, tasks, outcome shares summing to 1, and
    p50/p95/max/mean of steps and input tokens, cost with mean/p50/p95/max/
    total; the figures agree with the Parquet rows."""
    frame = rows(runs, "workers1")
    for cell in summary(runs, "workers1")["cells"]:
        assert {"name", "params", "tasks", "outcomes", "steps", "input_tokens",
                "cost"} <= set(cell)
        assert {"p50", "p95", "max", "mean"} <= set(cell["steps"])
        assert {"p50", "p95", "max", "mean"} <= set(cell["input_tokens"])
        assert {"mean", "p50", "p95", "max", "total"} <= set(cell["cost"])
        mine = frame[frame["cell"] == cell["name"]]
        shares = mine["outcome"].value_counts(normalize=True).to_dict()
        assert cell["outcomes"].keys() == shares.keys()
        assert all(math.isclose(cell["outcomes"][k], v) for k, v in shares.items())
        assert math.isclose(sum(cell["outcomes"].values()), 1.0)
        assert cell["steps"]["max"] == mine["steps"].max()
        assert math.isclose(cell["steps"]["mean"], mine["steps"].mean())
        assert math.isclose(cell["cost"]["total"], mine["cost_usd"].sum())


def test_format_json_prints_only_the_summary_on_stdout(runs):
    """--format json: stdout is one JSON document equal to summary.json;
    progress goes to stderr."""
    process, out = runs["workers1"]
    assert json.loads(process.stdout) == json.loads((out / "summary.json").read_text())
    assert "task" in process.stderr  # the progress bar
    assert "error" not in process.stderr


def test_run_on_a_scenario_with_a_sweep_runs_one_cell(runs):
    """``run`` ignores the sweep (saying so on stderr) and runs the base cell,
    named after the scenario, with empty params; the table goes to stdout."""
    process, out = runs["run"]
    (cell,) = summary(runs, "run")["cells"]
    assert cell["name"] == "grid" and cell["params"] == {} and cell["tasks"] == TASKS
    assert len(rows(runs, "run")) == TASKS
    assert "ignoring the sweep" in process.stderr
    assert process.stdout.startswith(f"== grid, {TASKS} tasks")
    assert str(out) in process.stdout
