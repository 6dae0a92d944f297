"""The Python API (sim.api, re-exported by ``sim``): scenarios with dict
overrides in, pandas DataFrames out, lazily imported."""

from __future__ import annotations

import contextlib
import doctest
import io
import subprocess
import sys
import types
from pathlib import Path

import pandas as pd
import pytest

import sim
from sim import api
from sim.analysis import stats
from sim.bad_input import InputError
from sim.cli import main
from sim.task_record import RECORD_FIELDS

ROOT = Path(__file__).resolve().parent.parent
BOUNDED = str(ROOT / "scenarios" / "bounded.yaml")


def test_importing_sim_is_light_and_the_api_loads_on_first_use():
    """``import sim`` loads no pandas, numpy or matplotlib; the first use of
    an API name loads sim.api."""
    code = ("import sys, sim; light = not any(m in sys.modules for m in "
            "('pandas', 'numpy', 'matplotlib', 'sim.api')); "
            "from sim import simulate; print(light, 'sim.api' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.strip()
    assert out == "True True"


def test_the_package_exports_the_api_functions():
    """``from sim import load_scenario, simulate, sweep, compare`` gives the
    API functions; the modules behind them keep their own names."""
    from sim import compare, load_scenario, simulate, sweep
    from sim.sweeps.cells import cells_of

    assert (load_scenario, simulate, sweep, compare) == (
        api.load_scenario, api.simulate, api.sweep, api.compare)
    assert sim.sweep is api.sweep and sim.compare is api.compare
    assert isinstance(sys.modules["sim.sweeps.cells"], types.ModuleType)
    assert sys.modules["sim.sweeps.cells"].cells_of is cells_of
    assert {"load_scenario", "simulate", "sweep", "compare"} <= set(dir(sim))
    assert set(sim.__all__) >= {"load_scenario", "simulate", "sweep", "compare"}


def test_load_scenario_takes_overrides_as_a_dict_of_dotted_paths_or_strings():
    """Dict values are Python values (None removes a budget); strings are
    parsed as YAML, as on the command line; the original is left unchanged."""
    base = api.load_scenario(BOUNDED)
    changed = api.load_scenario(base, {"harness.budgets.tokens": None, "tasks": 10,
                                       "harness.detector.nudges": 0})
    assert changed.harness.budgets.tokens is None and changed.tasks == 10
    assert base.harness.budgets.tokens == 2_000_000 and base.harness.detector.nudges == 1
    same = api.load_scenario(BOUNDED, ["harness.budgets.tokens=null", "tasks=10",
                                       "harness.detector.nudges=0"])
    assert same == changed


@pytest.mark.parametrize(("overrides", "message"), [
    ({"harness.budgets.steps": -1}, "harness.budgets.steps"),
    ({"harness.nonsense": 1}, "nonsense"),
    ("tasks=5", "dict or a list"),
])
def test_bad_overrides_are_input_errors_naming_the_field(overrides, message):
    """Invalid values, unknown fields and a bare string raise InputError."""
    with pytest.raises(InputError, match=message):
        api.load_scenario(BOUNDED, overrides)


def test_a_missing_scenario_is_an_input_error():
    """A path that does not exist raises InputError naming it."""
    with pytest.raises(InputError, match=r"nowhere\.yaml"):
        api.simulate("nowhere.yaml")


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    """120 tasks of bounded.yaml, one worker."""
    return api.simulate(BOUNDED, tasks=120, workers=1)


def test_simulate_returns_one_row_per_task_with_the_record_columns(rows):
    """Rows are tasks 0..n-1 of the base cell, columns as TaskRecord's."""
    assert list(rows.columns) == list(RECORD_FIELDS)
    assert rows["task"].tolist() == list(range(120))
    assert set(rows["cell"]) == {"bounded"}


def test_simulate_gives_the_rows_the_command_line_writes(rows, tmp_path):
    """The API and ``python -m sim run`` run the same chunks: the same tasks
    give the same values in every column."""
    import contextlib
    import io

    from sim.cli import main

    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", BOUNDED, "--tasks", "120", "--quiet", "--out",
                     str(tmp_path / "cli")]) == 0
    written = api.read_results(tmp_path / "cli").rows
    for column in RECORD_FIELDS:
        assert written[column].tolist() == rows[column].tolist(), column


def test_simulate_is_reproducible_whatever_the_worker_count(rows):
    """Same scenario and seed: identical rows with 1 or 2 workers; another
    seed gives other tasks."""
    assert api.simulate(BOUNDED, tasks=120, workers=2).equals(rows)
    other = api.simulate(BOUNDED, tasks=120, seed=99, workers=1)
    assert not other["ground_truth"].equals(rows["ground_truth"])


def test_sweep_returns_rows_of_every_cell_and_a_summary_per_cell():
    """A grid given as an override: rows of both cells; the summary has the
    axis as a column and statistics by sim.analysis.stats' definitions."""
    rows, summary = api.sweep(BOUNDED, {"sweep": {"harness.detector.nudges": [0, 1]}},
                              tasks=80, workers=1)
    assert summary["cell"].tolist() == ["nudges=0", "nudges=1"]
    assert summary["harness.detector.nudges"].tolist() == [0, 1]
    assert len(rows) == 160 and set(rows["cell"]) == {"nudges=0", "nudges=1"}
    for cell in summary.itertuples():
        costs = rows.loc[rows["cell"] == cell.cell, "cost_usd"]
        outcomes = rows.loc[rows["cell"] == cell.cell, "outcome"]
        assert cell.cost_p95 == stats.percentile(costs.to_numpy(), 0.95)
        assert cell.succeeded == (outcomes == "succeeded").mean()
    again = api.summarize(rows)
    pd.testing.assert_frame_equal(again, summary.drop(columns="harness.detector.nudges"))


def test_read_results_gives_the_rows_the_cli_wrote(tmp_path, rows):
    """A results folder written by ``python -m sim run`` reads back as the
    same rows the API simulates."""
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", BOUNDED, "--tasks", "120", "--quiet", "--workers", "1",
                     "--out", str(tmp_path)]) == 0
    folder_rows, summary = api.read_results(tmp_path)
    pd.testing.assert_frame_equal(folder_rows, rows, check_dtype=False)
    assert summary["tasks"].tolist() == [120]


def test_compare_takes_rows_scenarios_and_folders(tmp_path, rows):
    """DataFrames compare directly (the same 120 rows twice: no change, but
    too few tasks to show a 1 pp drop ruled out, so inconclusive with the
    tasks that would decide it); a Scenario with a one-side override pairs
    with its base (same seed); a scenario against a folder runs as many tasks
    as the folder holds."""
    same = api.compare(rows, rows, resamples=200)
    assert same.paired and not same.regression and same.outcome == "inconclusive"
    assert same.verdict.startswith("inconclusive") and same.tasks_to_decide > 120
    base = api.load_scenario(BOUNDED, {"tasks": 60})
    result = api.compare(base, base, candidate_overrides={"harness.detector.nudges": 0},
                         resamples=200, workers=1)
    assert result.paired and result.base.label != result.candidate.label
    assert set(result.outcomes.columns) >= {"outcome", "base_share", "candidate_share",
                                            "change_pp", "ci_low_pp", "ci_high_pp", "p_value"}
    with contextlib.redirect_stdout(io.StringIO()):
        main(["run", BOUNDED, "--tasks", "50", "--quiet", "--workers", "1",
              "--out", str(tmp_path)])
    mixed = api.compare(tmp_path, BOUNDED, resamples=200, workers=1)
    assert mixed.outcomes["candidate_tasks"].iloc[0] == 50 and mixed.paired


def test_compare_refuses_settings_that_apply_to_no_scenario(rows):
    """tasks, seed or overrides with two sets of rows is bad input."""
    with pytest.raises(InputError, match="neither side"):
        api.compare(rows, rows, tasks=10)


@pytest.mark.parametrize("module", ["sim.api", "sim.api.scenarios", "sim.api.simulating",
                                    "sim.api.comparing", "sim.analysis.significance",
                                    "sim.output.figures"])
def test_docstring_examples_run(module, monkeypatch):
    """The examples in the API's docstrings run as written (from the repo root)."""
    monkeypatch.chdir(ROOT)
    result = doctest.testmod(sys.modules[module] if module in sys.modules
                             else __import__(module, fromlist=["_"]),
                             optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
