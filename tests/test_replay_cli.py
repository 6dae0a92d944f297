"""``python -m sim replay``: the results folder, its figures, compare, bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from recordings import conversation, recorded, tool, write_traces

from sim.bad_input import InputError
from sim.cli import main
from sim.drivers.replay.reading import read_trace_folder
from sim.task_record import RECORD_FIELDS

SCENARIO = """\
name: {name}
description: replay test
harness:
  model: claude-sonnet-4-5
  prices_date: 2026-01-01
  context_window: 1000000
  tool_failure_limit: 1000000
  detector: {{enabled: {detector}, repeat_threshold: 2}}
{budgets}
"""


def scenario(folder: Path, name: str, *, tokens: int | None = None, detector: bool = False
             ) -> Path:
    budgets = f"  budgets: {{tokens: {tokens}}}" if tokens else ""
    path = folder / f"{name}.yaml"
    path.write_text(SCENARIO.format(name=name, detector=str(detector).lower(), budgets=budgets))
    return path


def runs_set():
    """40 runs: lengths 2..11 steps, every fourth one looping on one call,
    resolved unless it loops or its index is a multiple of 3."""
    out = []
    for i in range(40):
        n = 2 + i % 10
        looping = i % 4 == 0
        steps = [[tool("search", q=1 if looping else k)] for k in range(n - 1)] + [[]]
        if i % 5 == 0:
            steps[0] = []  # a text turn
        out.append(recorded(f"run{i:02d}", conversation(steps, first=800 + 37 * i),
                            resolved=not looping and i % 3 != 0))
    return out


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> Path:
    return write_traces(tmp_path_factory.mktemp("traces") / "t", runs_set())


def replay(tmp: Path, traces: Path, scenario_path: Path, *extra: str, out: str = "out") -> Path:
    target = tmp / out
    assert main(["replay", str(traces), str(scenario_path), "--out", str(target), "--quiet",
                 *extra]) == 0
    return target


def test_the_trace_folder_reads_back_as_the_runs_written():
    """write_traces and read_trace_folder agree on every field the replay uses."""
    runs = runs_set()
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        assert read_trace_folder(write_traces(Path(tmp), runs)) == runs


def test_replay_writes_a_results_folder_with_one_row_per_recorded_run(tmp_path, traces):
    """results.parquet (the record columns, then the replay's), summary.json with
    a replay block, and a report that leads with what the candidate would have done."""
    out = replay(tmp_path, traces, scenario(tmp_path, "tight", tokens=5_000))
    rows = pd.read_parquet(out / "results.parquet")
    assert len(rows) == 40 and list(rows.columns[:len(RECORD_FIELDS)]) == list(RECORD_FIELDS)
    assert rows["task"].tolist() == list(range(40))
    assert rows["run_id"].tolist() == [f"run{i:02d}" for i in range(40)]
    for column in ("recorded_exit", "recorded_resolved", "stopped", "stopped_at", "diverged",
                   "diverged_at", "cost_lower_usd", "cost_upper_usd"):
        assert column in rows.columns
    summary = json.loads((out / "summary.json").read_text())
    (cell,) = summary["cells"]
    assert cell["tasks"] == 40 and cell["replay"]["recorded"]["runs"] == 40
    report = (out / "report.md").read_text()
    first_section = report.split("\n## ")[1]
    assert first_section.startswith("What the candidate would have done to 40 recorded runs")
    assert (out / "report.html").is_file()


def test_the_token_budget_figures_are_a_direct_count_over_the_traces(tmp_path, traces):
    """Runs stopped, resolved runs among them and dollars saved equal a count
    of the runs whose cumulative prompt crosses the budget."""
    budget = 9_000
    out = replay(tmp_path, traces, scenario(tmp_path, "tight", tokens=budget))
    block = json.loads((out / "summary.json").read_text())["cells"][0]["replay"]
    stopped, resolved, saved = 0, 0, 0.0
    for run in read_trace_folder(traces):
        total = 0
        for k, call in enumerate(run.calls):
            total += call.usage.prompt_tokens
            if total > budget:
                stopped += 1
                resolved += bool(run.resolved)
                saved += math.fsum(c.cost_usd for c in run.calls[k:])
                break
    assert stopped > 0
    assert block["stopped"]["runs"] == stopped
    assert block["stopped"]["resolved"] == resolved
    assert block["stopped"]["by_outcome"]["budget_exhausted:tokens"]["runs"] == stopped
    assert math.isclose(block["saved"]["cost_usd"], saved, rel_tol=1e-12)


def test_two_replays_compare_paired_with_a_verdict(tmp_path, traces):
    """A tight and a loose token budget over the same runs: compare pairs run i
    with run i and finds the regression (exit status 1)."""
    loose = replay(tmp_path, traces, scenario(tmp_path, "loose"), out="loose")
    tight = replay(tmp_path, traces, scenario(tmp_path, "tight", tokens=5_000), out="tight")
    report = tmp_path / "cmp"
    status = main(["compare", str(loose), str(tight), "--out", str(report), "--quiet",
                   "--resamples", "200"])
    result = json.loads((report / "comparison.json").read_text())
    assert result["paired"] and "same recorded runs" in result["pairing"]
    assert status == 1 and result["regression"]


def test_a_replay_and_a_simulation_do_not_pair(tmp_path, traces):
    """A replay's tasks are recorded runs, a simulation's are drawn: unpaired."""
    loose = replay(tmp_path, traces, scenario(tmp_path, "loose"), out="loose")
    report = tmp_path / "cmp"
    main(["compare", str(loose), "scenarios/bounded.yaml", "--out", str(report), "--quiet",
          "--resamples", "200", "--workers", "1"])
    result = json.loads((report / "comparison.json").read_text())
    assert not result["paired"] and "simulates" in result["pairing"]


def test_replay_results_are_identical_bytes_for_the_same_input(tmp_path, traces):
    """Same traces and scenario: byte-identical results.parquet, summary.json, report.md."""
    path = scenario(tmp_path, "tight", tokens=5_000, detector=True)
    a = replay(tmp_path, traces, path, out="a")
    b = replay(tmp_path, traces, path, out="b")
    for name in ("results.parquet", "summary.json", "report.md"):
        assert (a / name).read_bytes() == (b / name).read_bytes()


def test_the_detector_figures_count_firings_per_signal_and_their_share_on_resolved_runs(
        tmp_path, traces):
    """Looping runs fire the repetition signal; firings and runs per signal are
    reported with the share of those runs that were resolved; stop mode ends
    each nudged run there and reports the lower bound."""
    path = scenario(tmp_path, "det", detector=True)
    out = replay(tmp_path, traces, path)
    block = json.loads((out / "summary.json").read_text())["cells"][0]["replay"]
    rows = pd.read_parquet(out / "results.parquet")
    fired = rows[rows["firings"] > 0]
    signal = block["detector"]["signals"]["repetition"]
    assert block["detector"]["judgeable"] and signal["runs"] == len(fired) > 0
    assert signal["firings"] == int(rows["firings"].sum())
    assert signal["resolved_runs"] == int(fired["recorded_resolved"].sum())
    iv = block["interventions"]
    assert iv["runs"] == int(rows["diverged"].sum()) > 0
    assert iv["cost_usd"]["lower"] < iv["cost_usd"]["upper"]
    stop = replay(tmp_path, traces, path, "--after-intervention", "stop", out="stop")
    stop_rows = pd.read_parquet(stop / "results.parquet")
    assert stop_rows["outcome"].str.startswith("diverged:").sum() == iv["runs"]
    assert math.isclose(stop_rows["cost_usd"].sum(), iv["cost_usd"]["lower"])


def test_a_trace_folder_without_tool_calls_is_replayed_for_budgets(tmp_path, capsys):
    """Budgets still stop runs; the detector is reported as not judgeable, on
    stderr and in the summary."""
    folder = write_traces(tmp_path / "bare", runs_set(), with_tools=False)
    path = scenario(tmp_path, "tight", tokens=5_000, detector=True)
    out = tmp_path / "out"
    assert main(["replay", str(folder), str(path), "--out", str(out)]) == 0
    assert "detector cannot be judged" in capsys.readouterr().err
    block = json.loads((out / "summary.json").read_text())["cells"][0]["replay"]
    assert not block["detector"]["judgeable"] and "no tool calls" in block["detector"]["note"]
    assert block["stopped"]["runs"] > 0
    assert "no tool calls" in (out / "report.md").read_text()


def test_json_format_prints_the_summary(tmp_path, traces, capsys):
    """--format json: stdout is the summary and nothing else."""
    path = scenario(tmp_path, "tight", tokens=5_000)
    assert main(["replay", str(traces), str(path), "--out", str(tmp_path / "o"), "--quiet",
                 "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((tmp_path / "o" / "summary.json").read_text())


def test_a_sweep_over_harness_settings_gives_one_cell_per_setting(tmp_path, traces):
    """sweep: harness.budgets.tokens: [a, b] replays every run under each."""
    path = tmp_path / "swept.yaml"
    path.write_text("harness:\n  prices_date: 2026-01-01\n  detector: {enabled: false}\n"
                    "sweep:\n  harness.budgets.tokens: [5000, 20000]\n")
    out = replay(tmp_path, traces, path)
    cells = json.loads((out / "summary.json").read_text())["cells"]
    assert [c["name"] for c in cells] == ["tokens=5000", "tokens=20000"]
    assert cells[0]["replay"]["stopped"]["runs"] > cells[1]["replay"]["stopped"]["runs"]


# --------------------------------------------------------------- bad input
def _fails(capsys, argv: list[str], *words: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    for word in words:
        assert word in err


def test_a_scenario_with_only_a_world_section_is_refused(tmp_path, traces, capsys):
    """The candidate is the harness section; a world alone is named as the problem."""
    path = tmp_path / "world.yaml"
    path.write_text("world:\n  retry_success: 0.5\n")
    _fails(capsys, ["replay", str(traces), str(path), "--out", str(tmp_path / "o")],
           "world.yaml", "harness", "no harness section")


def test_a_sweep_over_the_world_is_refused(tmp_path, traces, capsys):
    path = tmp_path / "sw.yaml"
    path.write_text("harness: {}\nsweep:\n  world.retry_success: [0.5, 0.9]\n")
    _fails(capsys, ["replay", str(traces), str(path), "--out", str(tmp_path / "o")],
           "sweep.world.retry_success", "harness settings only")


def test_bad_trace_folders_are_named(tmp_path, capsys):
    """A missing folder, a missing table, a file that is not Parquet and a
    negative count: exit 2, the folder or file and what is wrong."""
    path = scenario(tmp_path, "s")
    _fails(capsys, ["replay", str(tmp_path / "nope"), str(path)], "no such directory")
    half = write_traces(tmp_path / "half", runs_set()[:2])
    (half / "calls.parquet").unlink()
    _fails(capsys, ["replay", str(half), str(path)], "missing calls.parquet")
    (half / "calls.parquet").write_text("not parquet")
    _fails(capsys, ["replay", str(half), str(path)], "not a readable Parquet file")
    folder = write_traces(tmp_path / "neg", runs_set()[:2])
    calls = pq.read_table(folder / "calls.parquet").to_pylist()
    calls[1]["output_tokens"] = -5
    pq.write_table(pa.Table.from_pylist(calls, pq.read_schema(folder / "calls.parquet")),
                   folder / "calls.parquet")
    _fails(capsys, ["replay", str(folder), str(path)], "output_tokens", "run00", "negative")


def test_calls_of_an_unlisted_run_or_out_of_order_and_repeated_runs_are_input_errors(tmp_path):
    folder = write_traces(tmp_path / "t", runs_set()[:2])
    runs = pq.read_table(folder / "runs.parquet").to_pylist()
    pq.write_table(pa.Table.from_pylist(runs[:1], pq.read_schema(folder / "runs.parquet")),
                   folder / "runs.parquet")
    with pytest.raises(InputError, match="unknown run"):
        read_trace_folder(folder)
    folder = write_traces(tmp_path / "u", runs_set()[:1])
    calls = pq.read_table(folder / "calls.parquet").to_pylist()
    calls[0]["call"] = 7
    pq.write_table(pa.Table.from_pylist(calls, pq.read_schema(folder / "calls.parquet")),
                   folder / "calls.parquet")
    with pytest.raises(InputError, match="not numbered"):
        read_trace_folder(folder)


BAD_VALUES = st.sampled_from([-1, -0.5, 1.5, float("nan"), float("inf"), "x", None, [1], {}])


@settings(max_examples=40, deadline=None)
@given(column=st.sampled_from(["call", "input_tokens", "cache_read_tokens", "output_tokens",
                               "reasoning_tokens", "cost_usd", "latency_s", "text_tokens",
                               "observation_tokens", "tool_calls"]),
       row=st.integers(0, 5), value=BAD_VALUES)
def test_a_bad_value_in_the_calls_table_is_an_input_error_or_replays(column, row, value):
    """Whatever one value of calls.parquet is replaced by (where Parquet can
    hold it), the one reader of recorded runs either reads the runs (a
    missing optional value; a run with a call of unknown usage left out) or
    raises an InputError naming calls.parquet: never another exception."""
    import tempfile

    from hypothesis import assume

    with tempfile.TemporaryDirectory() as tmp:
        folder = write_traces(Path(tmp) / "t", runs_set()[:2])
        calls = pq.read_table(folder / "calls.parquet").to_pylist()
        calls[row % len(calls)][column] = value
        try:
            table = pa.Table.from_pylist(calls)
        except (pa.ArrowException, TypeError, ValueError):
            assume(False)  # not a value a Parquet column holds
        pq.write_table(table, folder / "calls.parquet")
        try:
            read = read_trace_folder(folder)
        except InputError as error:
            assert "calls.parquet" in str(error)
        else:
            assert {r.run_id for r in read} <= {"run00", "run01"}


@pytest.mark.parametrize("workers", ["2", "3"])
def test_replay_with_workers_writes_the_bytes_of_one_worker(tmp_path, traces, workers):
    """--workers N replays the runs in chunks on N processes and puts them back
    in order: results.parquet holds the same table as one worker's and
    summary.json the same figures (the candidate stops some runs and diverges
    on others, so every kind of row is compared)."""
    candidate = scenario(tmp_path, "tight", tokens=5_000)
    one = replay(tmp_path, traces, candidate, "--workers", "1", out="one")
    many = replay(tmp_path, traces, candidate, "--workers", workers, out="many")
    first, second = (pq.read_table(d / "results.parquet") for d in (one, many))
    assert first.num_rows == 40 and first.equals(second)
    assert first.schema == second.schema
    rows = first.to_pandas()
    assert rows["stopped"].any() and not rows["stopped"].all()

    def figures(folder: Path) -> dict:
        summary = json.loads((folder / "summary.json").read_text())
        summary.pop("provenance", None)
        return summary["cells"]

    assert figures(one) == figures(many)


def test_a_trace_folder_is_read_again_when_its_files_change(tmp_path):
    """folder_tables keeps the folder it read (forked workers inherit it), but a
    folder rewritten in place is read again, never served stale; the runs it
    builds, whole or a slice at a time, are those read by row range."""
    from sim.drivers.replay.reading import folder_tables, forget, streamed_runs

    folder = write_traces(tmp_path / "t", runs_set()[:3])
    first = folder_tables(str(folder))
    assert folder_tables(str(folder)) is first and len(first) == 3
    write_traces(folder, runs_set()[:5])
    again = folder_tables(str(folder))
    assert len(again) == 5 and again.recorded(0, 5) == read_trace_folder(folder)
    ranged = streamed_runs(str(folder), 0, 5)
    forget()
    assert again.recorded(0, 5) == ranged
    assert again.recorded(1, 2) + again.recorded(2, 5) == ranged[1:]
    with pytest.raises(InputError):
        folder_tables(str(tmp_path / "missing"))
