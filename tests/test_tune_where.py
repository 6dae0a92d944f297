"""``--where``: tune a slice of a trace folder (any ``runs.parquet`` column,
typed comparisons, all conditions hold); bad conditions are exit 2 naming
``--where``."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import pandas as pd
import pytest
from test_tune_headline import _run

from sim.bad_input import InputError
from sim.cli import main
from sim.traces.writer import write_runs
from sim.tuning.where import parse_where, run_mask, slice_folder

RUNS = pd.DataFrame({
    "model": ["a", "a", "b", None, "b"],
    "steps": [3, 10, 3, 7, 50],
    "resolved": [True, False, True, None, False],
    "started_at": pd.to_datetime(["2025-01-01", "2025-02-01", "2025-03-01", "2025-04-01",
                                  "2025-05-01"], utc=True),
})


@pytest.mark.parametrize(("where", "expected"), [
    (["model=a"], [True, True, False, False, False]),
    (["model!=a"], [False, False, True, True, True]),  # a missing model is != a
    (["steps>=7"], [False, True, False, True, True]),
    (["steps<7", "model=b"], [False, False, True, False, False]),
    (["resolved=true"], [True, False, True, False, False]),
    (["resolved=no"], [False, True, False, False, True]),
    (["started>=2025-03-01"], [False, False, True, True, True]),
    (["started<2025-02-01T00:00:01Z"], [True, True, False, False, False]),
])
def test_conditions_select_runs_by_the_columns_type(where, expected):
    """Numbers compare as numbers, booleans by word, times as UTC times
    ('started' is started_at), text exactly; a missing value matches only !=."""
    assert run_mask(RUNS, parse_where(where)).tolist() == expected


@pytest.mark.parametrize(("where", "problem"), [
    (["model"], "is not COLUMN=VALUE"), (["model="], "is not COLUMN=VALUE"),
    (["modle=a"], "no column 'modle'"), (["steps>many"], "is not a number"),
    (["resolved=maybe"], "is not true or false"), (["started>=soon"], "not a date"),
])
def test_bad_conditions_are_input_errors_naming_where(where, problem):
    with pytest.raises(InputError, match=problem) as error:
        run_mask(RUNS, parse_where(where))
    assert "--where" in str(error.value)


def _two_models(tmp_path):
    """30 runs of model a (20 resolved of 3 calls, 10 failed of 50), then 12
    of model b (all resolved, 6 calls), b's started a year later."""
    runs = ([_run(i, 3, True) for i in range(20)] + [_run(20 + i, 50, False) for i in range(10)]
            + [_run(30 + i, 6, True) for i in range(12)])
    for r in runs[30:]:
        r.model = "b"
        r.started_at = datetime(2026, 1, 1, tzinfo=UTC)
        r.calls = [replace(c, model="b") for c in r.calls]
    folder = tmp_path / "traces"
    folder.mkdir()
    write_runs(folder, runs)
    return folder


def test_slice_folder_keeps_the_selected_runs_and_their_calls(tmp_path):
    """The slice holds exactly the selected runs and every call of theirs."""
    from sim.traces.reading import load_tables

    _, selected, total = slice_folder(_two_models(tmp_path), parse_where(["model=b"]),
                                      tmp_path / "slice")
    runs, calls = load_tables(tmp_path / "slice")
    assert (selected, total, runs.num_rows, calls.num_rows) == (12, 42, 12, 72)


def test_tune_where_tunes_only_the_slice_and_says_so(tmp_path, capsys):
    """tune --where model=gpt-4o --where 'started<2025-06-01' tunes model
    a's 30 runs (20 successes): the output names the slice, tune.json holds
    it; a condition no run meets is exit 2."""
    traces = _two_models(tmp_path)
    out = tmp_path / "out"
    status = main(["tune", str(traces), "--knobs", "steps", "--where", "model=gpt-4o",
                   "--where", "started<2025-06-01", "--out", str(out), "--quiet"])
    printed = capsys.readouterr().out
    assert status in (0, 3)
    assert "30 recorded runs where model=gpt-4o started_at<2025-06-01 (of 42)" in printed
    summary = json.loads((out / "tune.json").read_text())
    assert summary["runs"] == 30 and summary["runs_in_folder"] == 42
    assert summary["where"] == ["model=gpt-4o", "started_at<2025-06-01"]
    base = next(r for r in summary["frontier"] if r["phase"] == "in force")
    assert base["base_successes"] == 20
    assert main(["tune", str(traces), "--where", "model=c", "--out", str(tmp_path / "o2"),
                 "--quiet"]) == 2
    assert "no run matches --where model=c (of 42 runs)" in capsys.readouterr().err
