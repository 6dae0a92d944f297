"""The drill-down: the runs a recommendation stops, with their recorded
outcome, cost and where in the run it stops, in ``stopped_runs.csv`` and
the report; exactly the runs ``sim replay`` of ``recommended.yaml`` stops."""

from __future__ import annotations

import pandas as pd
import pytest
from test_tune_headline import folder

from sim.cli import main


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """600 successes of 3 calls and 30 failures of 50 (call k's prompt
    1,000 * (k + 1) tokens): tune recommends steps=3, which stops the 30."""
    tmp = tmp_path_factory.mktemp("drill")
    traces = folder(tmp, 600, 30)
    out = tmp / "tuned"
    assert main(["tune", str(traces), "--knobs", "steps", "--out", str(out), "--quiet"]) == 0
    return traces, out, tmp


def test_stopped_runs_lists_each_stopped_run_with_where_it_stops(tuned):
    """30 rows, runs r600..r629: recorded exit 'error', failed in force,
    budget_exhausted:steps now, stopped at call 3 of 50 after 1,000 + 2,000
    + 3,000 prompt tokens, no success lost, each cheaper than in force."""
    _, out, _ = tuned
    frame = pd.read_csv(out / "stopped_runs.csv")
    assert sorted(frame["run_id"]) == sorted(f"r{i}" for i in range(600, 630))
    assert set(frame["exit"]) == {"error"} and not frame["resolved"].any()
    assert set(frame["outcome"]) == {"budget_exhausted:steps"}
    assert not frame["lost_success"].any()
    assert set(frame["stopped_at_call"]) == {3} and set(frame["calls_recorded"]) == {50}
    assert set(frame["prompt_tokens_at_stop"]) == {6000}
    assert (frame["saved_usd"] > 0).all()
    assert frame["saved_usd"].to_numpy() == pytest.approx(
        (frame["cost_in_force_usd"] - frame["cost_usd"]).to_numpy())
    report = (out / "report.md").read_text()
    assert "The recommendation stops 30 recorded runs (0 of them successes in force)" in report
    assert "| 3 of 50 | 6,000 |" in report


def test_the_drill_down_is_exactly_what_a_replay_of_the_recommendation_stops(tuned):
    """'sim replay TRACES recommended.yaml' stops the same run ids, at the
    same call."""
    traces, out, tmp = tuned
    assert main(["replay", str(traces), str(out / "recommended.yaml"), "--out",
                 str(tmp / "replayed"), "--quiet"]) == 0
    rows = pd.read_parquet(tmp / "replayed" / "results.parquet")
    stopped = rows[rows["stopped"]].set_index("run_id")["stopped_at"].astype(int).to_dict()
    frame = pd.read_csv(out / "stopped_runs.csv")
    assert dict(zip(frame["run_id"], frame["stopped_at_call"], strict=True)) == stopped


def test_keeping_the_harness_in_force_stops_nothing(tmp_path):
    """When the harness in force is kept, stopped_runs.csv has its header and no row."""
    traces = folder(tmp_path, 20, 0)
    out = tmp_path / "o"
    assert main(["tune", str(traces), "--knobs", "steps", "--out", str(out), "--quiet"]) == 0
    frame = pd.read_csv(out / "stopped_runs.csv")
    assert frame.empty and "stopped_at_call" in frame.columns
