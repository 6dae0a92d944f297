"""One reader of recorded runs (sim.drivers.replay.reading) and one price path.

Replay, calibration and tune read a trace folder through the one checked
reader, so a bad row of ``calls.parquet`` is refused with one message (the
file, the column and the run) whichever command reads it; and the replay's
prices (read whole, or streamed a range of runs at a time) are those
:func:`~sim.drivers.replay.pricing.price_models` makes of the same runs'
records (tune's and the calibration ladder's), a run that records only its
total included.
"""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from recordings import PRICES, conversation, loose, recorded, tool, write_traces

from sim.cli import main
from sim.cost.recorded import FITTED, RECORDED
from sim.drivers.replay import price_models, replay_runs
from sim.drivers.replay.reading import (
    TraceTables,
    folder_index,
    open_folder,
    read_trace_folder,
    runs_of,
)
from sim.harness.messages import Usage
from sim.traces.model import CallRecord, RunRecord, ToolCallRecord


def _runs(n: int = 12) -> list[RunRecord]:
    return [recorded(f"run{i:02d}", conversation([[tool("search", q=k)] for k in range(2)]
                                                 + [[]], first=800 + 37 * i))
            for i in range(n)]


@pytest.fixture
def bad_folder(tmp_path):
    """12 good runs, then call 1 of run05 given -5 output tokens."""
    folder = write_traces(tmp_path / "bad", _runs())
    calls = pq.read_table(folder / "calls.parquet")
    rows = calls.to_pylist()
    index = next(i for i, r in enumerate(rows) if r["run_id"] == "run05" and r["call"] == 1)
    rows[index]["output_tokens"] = -5
    pq.write_table(pa.Table.from_pylist(rows, calls.schema), folder / "calls.parquet")
    return folder


def _error(capsys, *args: str) -> str:
    assert main(list(args)) == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_a_bad_call_row_is_refused_with_one_message_by_replay_calibrate_and_tune(
        bad_folder, tmp_path, capsys):
    """replay, calibrate and tune each exit 2 on the folder with the same
    message: calls.parquet, the column output_tokens, run run05, the value -5
    (the streamed check refuses the folder and the whole read says why)."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump({"name": "s", "harness": {"budgets": {}}}))
    replayed = _error(capsys, "replay", str(bad_folder), str(scenario),
                      "--out", str(tmp_path / "r"), "--quiet")
    calibrated = _error(capsys, "calibrate", str(bad_folder), "--out", str(tmp_path / "c.yaml"))
    tuned = _error(capsys, "tune", str(bad_folder), "--out", str(tmp_path / "t"))
    assert replayed == calibrated == tuned
    assert "calls.parquet" in replayed and "output_tokens" in replayed
    assert "run05" in replayed and "-5" in replayed
    assert folder_index(str(bad_folder)) is None


def test_an_unknown_purpose_is_refused_by_summary_as_by_replay_and_tune(tmp_path, capsys):
    """Call 1 of run05 given the purpose 'nonsense': ``traces summary`` exits 2
    with the message replay and tune give (the one check,
    :func:`sim.traces.reading.check_purposes`): the file, the run, the call,
    the value and the allowed ones."""
    folder = write_traces(tmp_path / "purpose", _runs())
    calls = pq.read_table(folder / "calls.parquet")
    rows = calls.to_pylist()
    index = next(i for i, r in enumerate(rows) if r["run_id"] == "run05" and r["call"] == 1)
    rows[index]["purpose"] = "nonsense"
    pq.write_table(pa.Table.from_pylist(rows, calls.schema), folder / "calls.parquet")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump({"name": "s", "harness": {"budgets": {}}}))
    summarised = _error(capsys, "traces", "summary", str(folder))
    replayed = _error(capsys, "replay", str(folder), str(scenario),
                      "--out", str(tmp_path / "r"), "--quiet")
    tuned = _error(capsys, "tune", str(folder), "--out", str(tmp_path / "t"))
    calibrated = _error(capsys, "calibrate", str(folder), "--out", str(tmp_path / "c.yaml"),
                        "--workers", "1", "--quiet")
    assert summarised == replayed == tuned == calibrated
    assert "calls.parquet" in summarised and "run05" in summarised
    assert "'nonsense'" in summarised and "step, compaction, verifier, finalize" in summarised


def test_calibration_reader_refuses_an_unknown_purpose_before_any_fit(tmp_path):
    """Calibrate's reader (:func:`sim.calibration.data.load`, which every fold
    job reads through) refuses the folder itself, so no fold is fitted before
    the refusal (it fitted all ten folds, about 8 s, and refused after)."""
    from sim.bad_input import InputError
    from sim.calibration.data import load

    folder = write_traces(tmp_path / "purpose", _runs())
    calls = pq.read_table(folder / "calls.parquet")
    rows = calls.to_pylist()
    rows[3]["purpose"] = "nonsense"
    pq.write_table(pa.Table.from_pylist(rows, calls.schema), folder / "calls.parquet")
    with pytest.raises(InputError, match="purpose is 'nonsense'"):
        load(folder)


def test_the_streamed_and_whole_reads_give_the_same_records(tmp_path):
    """A folder in its runs' order opens streamed; its runs read by row range
    (any split) are the records of the whole read."""
    folder = write_traces(tmp_path / "t", _runs())
    opened = open_folder(str(folder))
    assert not isinstance(opened, TraceTables) and len(opened) == 12
    whole = read_trace_folder(folder)
    assert runs_of(str(folder), 0, 5, True) + runs_of(str(folder), 5, 12, True) == whole
    assert runs_of(str(folder), 3, 9, False) == whole[3:9]
    assert TraceTables.load(folder).only(["run07", "run02"]).recorded(0, 2) == [
        whole[2], whole[7]]


def _total_only_folder(tmp_path):
    """Model my-own (no catalogue price: the scenario's PRICES, $2 in and $8
    out per million): run ``total`` records $0.0112 over two calls of 1,000
    input and 100 output tokens that record no cost, twice their price at
    PRICES (2 * 2 * (1000*2 + 100*8) / 1e6 = 0.0112: the fitted scale is 2);
    run ``free`` records $0 for a call of 2,000 and 200 tokens (untrusted),
    so it is priced at the fitted prices: 2 * (2000*2 + 200*8) / 1e6 = 0.0112."""
    def call(inp: int, out: int, cost: float | None, finish: str) -> CallRecord:
        return CallRecord(Usage(input_tokens=inp, output_tokens=out), cost_usd=cost,
                          finish_reason=finish, latency_s=1.0, text_tokens=out)

    runs = [RunRecord("total", "sim", "", [call(1000, 100, None, "tool_calls"),
                                           call(1000, 100, None, "stop")],
                      task_id="t1", model="my-own", exit="done", resolved=True,
                      cost_usd=0.0112),
            RunRecord("free", "sim", "", [call(2000, 200, 0.0, "stop")], task_id="t2",
                      model="my-own", exit="done", resolved=True, cost_usd=0.0)]
    return write_traces(tmp_path / "total", runs)


def test_replay_prices_a_run_recording_only_its_total_as_tune_does(tmp_path):
    """The replay's pricing of the folder, streamed or read whole, counts the
    run that records only its total, as price_models (tune, the calibration
    ladder) does: the free run is priced at the fitted prices, $0.0112, by
    all three (one price builder: price_models over the folder's runs)."""
    folder = _total_only_folder(tmp_path)
    template = loose(prices=PRICES)
    streamed = open_folder(str(folder))
    assert not isinstance(streamed, TraceTables)
    runs = read_trace_folder(folder)
    replayed = streamed.pricing(template, lambda model: None)
    assert replayed == price_models(runs, template, lambda model: None)
    assert replayed == TraceTables.load(folder).pricing(template, lambda model: None)
    assert replayed.fill["my-own"].basis == FITTED
    assert replayed.fill["my-own"].scale == pytest.approx(2.0, rel=1e-12)
    done = {r.chosen.run.run_id: r.chosen for r in replay_runs(runs, template,
                                                               pricing=replayed)}
    assert done["free"].recorded_calls_usd == pytest.approx(0.0112, rel=1e-12)
    assert done["free"].basis == FITTED
    assert done["total"].recorded_calls_usd == pytest.approx(0.0112, rel=1e-12)
    assert done["total"].basis == RECORDED


def test_a_call_record_read_back_is_the_one_the_writer_was_given(tmp_path):
    """One call record from importer to replay: CallRecords (a step of
    unknown text size and purpose, a compaction, a tool call of unknown error
    flag, one of a subagent) written by the trace model's writer read back,
    streamed and whole, as equal CallRecords (the reader leaves only
    ``started_s``, ``provenance`` and a tool call's ``id`` at their defaults,
    as given here), nulls kept as nulls; the unknown purpose is a step."""
    search = ToolCallRecord("search", arguments='{"q":"x"}', result_tokens=12,
                            result_sha256="h", error=None, duration_s=0.25)
    failed = ToolCallRecord("edit", arguments='{"f":"a"}', result_tokens=3, error=True)
    calls = [CallRecord(Usage(input_tokens=900, output_tokens=30, cache_read_tokens=100),
                        model="m1", cost_usd=0.002, finish_reason="tool_calls", latency_s=1.5,
                        tool_calls=[search, failed]),
             CallRecord(Usage(input_tokens=400, output_tokens=50), purpose="compaction",
                        text_tokens=50, text_sha256="t"),
             CallRecord(Usage(input_tokens=1_000, output_tokens=20, thinking_tokens=7),
                        agent="a1", observation_tokens=5, observation_sha256="o",
                        text_tokens=20, finish_reason="stop")]
    folder = write_traces(tmp_path / "one", [RunRecord("r", "sim", "", calls, task_id="t",
                                                       model="m0")])
    streamed = runs_of(str(folder), 0, 1, True)[0]
    assert streamed.calls == calls == read_trace_folder(folder)[0].calls
    assert [c.is_step for c in streamed.calls] == [True, False, True]
    assert streamed.calls[0].tool_calls[0].error is None
    assert streamed.calls[0].text_tokens is None and streamed.calls[0].purpose is None


def test_a_run_record_read_back_is_the_one_the_writer_was_given(tmp_path):
    """One run record from importer to replay: a RunRecord (recorded cost,
    verdict unknown, the fields the reader leaves at their defaults left so)
    written by the trace model's writer reads back, streamed and whole, as an
    equal RunRecord, calls in order; its recorded cost is its own, and a run
    recording none has its calls' sum (0.002 + 0.003)."""
    from sim.traces.writer import write_runs

    calls = [CallRecord(Usage(input_tokens=900, output_tokens=30), model="m1", cost_usd=0.002,
                        finish_reason="tool_calls", latency_s=1.5,
                        tool_calls=[ToolCallRecord("search", arguments='{"q":"x"}')]),
             CallRecord(Usage(input_tokens=1_000, output_tokens=20), model="m1",
                        cost_usd=0.003, finish_reason="stop")]
    runs = [RunRecord("a", "sim", "", calls, task_id="t1", model="m1", cost_usd=0.01,
                      exit="done", resolved=None),
            RunRecord("b", "sim", "", [replace(c) for c in calls], task_id="t2", model="m1",
                      exit="error", resolved=False)]
    folder = tmp_path / "runs"
    folder.mkdir()
    write_runs(folder, [replace(r, calls=[replace(c) for c in r.calls]) for r in runs])
    assert runs_of(str(folder), 0, 2, True) == runs == read_trace_folder(folder)
    assert [r.recorded_cost_usd for r in runs] == [0.01, 0.005]
