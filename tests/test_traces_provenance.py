"""Provenance of every figure (issue 36): written in calls.parquet, counted in
import.json, flagged by ``traces summary``, and unknown usage carried through
calibrate, replay and tune without a crash or a silent zero.

Every folder here is written from hand-built :class:`RunRecord` objects with
the trace model's own writer; every expected count is worked out from them.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from sim.bad_input import InputError
from sim.cli import main
from sim.traces.import_report import ImportReport
from sim.traces.importer import import_traces
from sim.traces.model import (
    CALLS_FILE,
    DERIVED,
    ESTIMATED,
    EXACT,
    PROVENANCE_FIELDS,
    REPORT_FILE,
    RUNS_FILE,
    UNDETERMINED,
    UNKNOWN,
    CallRecord,
    RunRecord,
    ToolCallRecord,
    Usage,
    load_tables,
    read_traces,
)
from sim.traces.summary import summarize
from sim.traces.writer import TOTAL_IGNORED, TraceWriter, write_runs

NO_USAGE = dict.fromkeys(PROVENANCE_FIELDS, UNKNOWN)
IN_FORCE = """\
name: in_force
harness:
  model: claude-sonnet-4-5
  prices_date: 2026-01-01
  context_window: 1000000
  tool_failure_limit: 1000000
"""


def unknown_call(**fields) -> CallRecord:
    """A call whose source records no usage (0 in Usage, every figure unknown)."""
    return CallRecord(Usage(), provenance=dict(NO_USAGE), **fields)


def mixed_run() -> RunRecord:
    """Three calls: exact (10 in, 5 out, $0.1), no usage at all, and one with
    a derived input (3) and an estimated output (2); the source records run
    totals of 20 input and 9 output tokens."""
    return RunRecord("mixed", "tau2", "f.json", [
        CallRecord(Usage(input_tokens=10, output_tokens=5), cost_usd=0.1),
        unknown_call(),
        CallRecord(Usage(input_tokens=3, output_tokens=2), cost_usd=0.2,
                   provenance={"input_tokens": DERIVED, "output_tokens": ESTIMATED})],
        totals={"input_tokens": 20, "output_tokens": 9})


def exact_run(run_id: str = "exact", source: str = "tau2") -> RunRecord:
    """Two exact calls, 7+8 input and 1+2 output tokens, no cost recorded."""
    return RunRecord(run_id, source, "f.json", [
        CallRecord(Usage(input_tokens=7, output_tokens=1)),
        CallRecord(Usage(input_tokens=8, output_tokens=2))])


# ------------------------------------------------------------------ written

def test_unknown_counts_are_written_null_and_the_run_holds_its_recorded_total(tmp_path):
    """An unknown token count (or cost) is null in calls.parquet; the run row
    holds the source's total where some call is unknown (20 input, 9 output),
    the calls' sum elsewhere (0 cache); each call's provenance is as listed,
    exact where not listed, unknown for a null cost."""
    write_runs(tmp_path, [mixed_run()])
    runs, calls = read_traces(tmp_path)
    assert calls["input_tokens"].tolist()[0] == 10 and calls["input_tokens"].isna().tolist() == [
        False, True, False]
    assert calls["cost_usd"].isna().tolist() == [False, True, False]
    row = runs.iloc[0]
    assert (row["input_tokens"], row["output_tokens"], row["cache_read_tokens"]) == (20, 9, 0)
    listed = calls["provenance"].tolist()
    assert listed[0] == dict.fromkeys(PROVENANCE_FIELDS, EXACT)
    assert listed[1] == NO_USAGE
    assert listed[2] == {**dict.fromkeys(PROVENANCE_FIELDS, EXACT),
                         "input_tokens": DERIVED, "output_tokens": ESTIMATED}


def test_a_run_whose_calls_all_lack_usage_and_no_totals_is_kept_with_zero_totals(tmp_path):
    """Never dropped: two unknown calls, no totals: steps 2, every total 0."""
    write_runs(tmp_path, [RunRecord("none", "tau2", "f", [unknown_call(), unknown_call()])])
    runs, calls = read_traces(tmp_path)
    assert runs["steps"].tolist() == [2] and runs["input_tokens"].tolist() == [0]
    assert calls["output_tokens"].isna().all()


def test_a_recorded_total_that_cannot_be_used_is_a_counted_repair(tmp_path):
    """A total below the known sum (input 5 < 10), or for a column every
    call records (cache read 4 where both calls say 0), is not written: the
    calls' sum is, and the writer counts each as a repair of the run's field."""
    record = RunRecord("r", "tau2", "f", [
        CallRecord(Usage(input_tokens=10, output_tokens=1)),
        CallRecord(Usage(), provenance={"input_tokens": UNKNOWN, "output_tokens": UNKNOWN})],
        totals={"input_tokens": 5, "cache_read_tokens": 4, "output_tokens": 3})
    writer = TraceWriter(tmp_path)
    row = writer.add(record)
    writer.close()
    assert (row["input_tokens"], row["cache_read_tokens"], row["output_tokens"]) == (10, 0, 3)
    assert writer.repairs == {("runs.input_tokens", TOTAL_IGNORED): 1,
                              ("runs.cache_read_tokens", TOTAL_IGNORED): 1}
    assert load_tables(tmp_path)[0].column("output_tokens").to_pylist() == [3]


def test_a_folder_written_before_provenance_reads_exact_or_unknown_by_null(tmp_path):
    """calls.parquet without the column (as main wrote it): every count
    exact, a null cost unknown, a recorded cost exact."""
    write_runs(tmp_path, [RunRecord("old", "tau2", "f", [
        CallRecord(Usage(input_tokens=4), cost_usd=0.5), CallRecord(Usage(input_tokens=6))])])
    calls = pq.read_table(tmp_path / CALLS_FILE).drop_columns(["provenance"])
    pq.write_table(calls, tmp_path / CALLS_FILE)
    _, read = load_tables(tmp_path)
    costs = pc.struct_field(read.column("provenance"), "cost_usd").to_pylist()
    inputs = pc.struct_field(read.column("provenance"), "input_tokens").to_pylist()
    assert costs == [EXACT, UNKNOWN] and inputs == [EXACT, EXACT]


def _rewrite(path: Path, column: str, values: list, kind: pa.DataType) -> None:
    table = pq.read_table(path)
    index = table.schema.get_field_index(column)
    pq.write_table(table.set_column(index, table.schema.field(index),
                                    pa.array(values, kind)), path)


@pytest.mark.parametrize(("total", "message"), [
    (7, "nor at least the sum of their known counts"),  # 7 < 13 known
    (13, None)])  # at least the known sum: accepted
def test_a_run_total_below_its_known_calls_is_refused(tmp_path, total, message):
    """With an unknown call, the run's input total must be at least its
    calls' known 13 (10 + 3): 7 is an InputError naming runs.parquet and
    input_tokens; 13 reads."""
    write_runs(tmp_path, [mixed_run()])
    _rewrite(tmp_path / RUNS_FILE, "input_tokens", [total], pa.int64())
    if message is None:
        assert load_tables(tmp_path)[0].column("input_tokens").to_pylist() == [13]
        return
    with pytest.raises(InputError) as raised:
        load_tables(tmp_path)
    assert message in raised.value.message and raised.value.path == "input_tokens"


def test_a_run_total_above_its_calls_when_all_are_known_is_refused(tmp_path):
    """Every call known: the total must be the sum exactly (15, not 16)."""
    write_runs(tmp_path, [exact_run()])
    _rewrite(tmp_path / RUNS_FILE, "input_tokens", [16], pa.int64())
    with pytest.raises(InputError, match="not the sum of its calls"):
        load_tables(tmp_path)


@pytest.mark.parametrize(("values", "path", "words"), [
    ([None, 8], "input_tokens", "null token count whose provenance is not unknown"),
    ([7, 8], None, None)], ids=["null marked exact", "consistent"])
def test_provenance_disagreeing_with_the_values_is_refused(tmp_path, values, path, words):
    """A null count whose provenance says exact: an InputError naming the
    column, the run and the call."""
    write_runs(tmp_path, [exact_run()])
    _rewrite(tmp_path / CALLS_FILE, "input_tokens", values, pa.int64())
    _rewrite(tmp_path / RUNS_FILE, "input_tokens", [8 if path else 15], pa.int64())
    if path is None:
        load_tables(tmp_path)
        return
    with pytest.raises(InputError) as raised:
        load_tables(tmp_path)
    assert words in raised.value.message and raised.value.path == path
    assert "run 'exact' (call 0)" in raised.value.message


def test_an_unknown_provenance_value_is_refused_with_its_dotted_field(tmp_path):
    """``provenance.output_tokens`` = "guessed": an InputError naming the field."""
    write_runs(tmp_path, [exact_run()])
    table = pq.read_table(tmp_path / CALLS_FILE)
    rows = table.column("provenance").to_pylist()
    rows[1]["output_tokens"] = "guessed"
    index = table.schema.get_field_index("provenance")
    pq.write_table(table.set_column(index, table.schema.field(index),
                                    pa.array(rows, table.schema.field(index).type)),
                   tmp_path / CALLS_FILE)
    with pytest.raises(InputError) as raised:
        load_tables(tmp_path)
    assert raised.value.path == "provenance.output_tokens"
    assert "call 1" in raised.value.message


def test_sims_own_traced_runs_are_all_exact(tmp_path, capsys):
    """``run --traces``: every token figure of every call exact."""
    out = tmp_path / "run"
    assert main(["run", "scenarios/bounded.yaml", "--tasks", "5", "--out", str(out),
                 "--traces", "--quiet"]) == 0
    capsys.readouterr()
    _, calls = load_tables(out)
    assert calls.num_rows > 0
    for name in PROVENANCE_FIELDS[:-1]:
        assert set(pc.struct_field(calls.column("provenance"), name).to_pylist()) == {EXACT}


# ------------------------------------------------------------------ counted

def test_import_counts_provenance_and_conventions_per_source(tmp_path):
    """The writer counts, per source, every figure's provenance over the calls
    (tau2: 3 + 2 calls; cost unknown for 4 of them) and every convention note
    over the runs; import.json holds them, all four provenances listed."""
    mixed = mixed_run()
    mixed.conventions = {"input_tokens": "excludes cache"}
    other = exact_run()
    other.conventions = {"input_tokens": "excludes cache", "cache_read_tokens":
                         f"{UNDETERMINED}: no cache fields"}
    writer = TraceWriter(tmp_path)
    for record in (mixed, other, exact_run("sim-run", "sim")):
        writer.add(record)
    writer.close()
    report = ImportReport(sources=["x"], provenance=writer.provenance,
                          conventions=writer.conventions)
    written = report.to_dict()
    tau2 = written["provenance"]["tau2"]
    assert tau2["calls"] == 5
    assert tau2["by_field"]["input_tokens"] == {EXACT: 3, DERIVED: 1, ESTIMATED: 0, UNKNOWN: 1}
    assert tau2["by_field"]["output_tokens"] == {EXACT: 3, DERIVED: 0, ESTIMATED: 1, UNKNOWN: 1}
    assert tau2["by_field"]["cost_usd"] == {EXACT: 2, DERIVED: 0, ESTIMATED: 0, UNKNOWN: 3}
    assert written["provenance"]["sim"]["by_field"]["cost_usd"][UNKNOWN] == 2
    assert written["conventions"] == {"tau2": {
        "cache_read_tokens": {f"{UNDETERMINED}: no cache fields": 1},
        "input_tokens": {"excludes cache": 2}}}


def test_a_figure_estimated_or_unknown_for_over_1_percent_is_warned_first(tmp_path, capsys):
    """Importing the folder: tau2's input is unknown for 1 of 5 calls (20%),
    output estimated or unknown for 2 (40%), cost unknown for 3 (60%): one
    line, first on stderr and stdout, and in import.json's ``warnings``."""
    source = tmp_path / "folder"
    source.mkdir()
    write_runs(source, [mixed_run(), exact_run()])
    assert main(["traces", "import", str(source), "--out", str(tmp_path / "out"),
                 "--quiet"]) == 0
    captured = capsys.readouterr()
    line = ("warning: tau2: input tokens unknown for 20.0%, cache read tokens unknown for "
            "20.0%, cache write tokens unknown for 20.0%, output tokens estimated or unknown "
            "for 40.0%, cost unknown for 60.0% of 5 calls")
    assert captured.err.splitlines()[0] == line and captured.out.splitlines()[0] == line
    report = json.loads((tmp_path / "out" / REPORT_FILE).read_text())
    assert report["warnings"] == [line.removeprefix("warning: ")]
    assert report["provenance"]["tau2"]["by_field"]["output_tokens"][ESTIMATED] == 1


def test_a_folder_streamed_in_slices_keeps_unknown_usage_as_a_whole_read(tmp_path, monkeypatch):
    """Streamed a call at a time or read whole: the same bytes, the run's
    recorded total kept, the same provenance counts."""
    from sim.traces import streaming

    source = tmp_path / "folder"
    source.mkdir()
    write_runs(source, [mixed_run(), exact_run()])
    monkeypatch.setattr(streaming, "BATCH_CALLS", 1)
    streamed = import_traces([source], tmp_path / "streamed")
    monkeypatch.setattr(streaming, "stream_folder", lambda *args: None)
    whole = import_traces([source], tmp_path / "whole")
    assert streamed.to_dict() == whole.to_dict()
    for name in (RUNS_FILE, CALLS_FILE):
        assert ((tmp_path / "streamed" / name).read_bytes()
                == (tmp_path / "whole" / name).read_bytes())
    assert load_tables(tmp_path / "whole")[0].column("input_tokens").to_pylist() == [20, 15]


# ------------------------------------------------------------- summary flags

def flagged_folder(folder: Path) -> Path:
    """Runs with what ``traces summary`` flags, counted by hand:

    - ``short``: one call of 400 text tokens and a 20-character argument
      (5 tokens) recording 50 output tokens (< 405 / 4): output too small;
    - ``free``: cost $0 on the run and on its one call, 100 tokens used;
    - ``mixed``: one call of unknown usage (and its convention undetermined,
      in import.json).
    """
    folder.mkdir()
    short = RunRecord("short", "tau2", "f", [CallRecord(
        Usage(input_tokens=900, output_tokens=50), text_tokens=400, cost_usd=0.01,
        tool_calls=[ToolCallRecord("t", arguments='{"q":"0123456789ab"}')])], cost_usd=0.01)
    free = RunRecord("free", "tau2", "f", [CallRecord(
        Usage(input_tokens=90, output_tokens=10), cost_usd=0.0)], cost_usd=0.0)
    write_runs(folder, [short, free, mixed_run()])
    report = ImportReport(sources=["f"], conventions={"tau2": {"cache_read_tokens": {
        f"{UNDETERMINED}: no cache fields": 1}}})
    (folder / REPORT_FILE).write_text(json.dumps(report.to_dict()))
    return folder


def test_summary_flags_what_looks_wrong_with_counts_and_a_fix(tmp_path):
    """One entry per problem, with calls and runs: output too small (1 call,
    1 run), $0 cost with tokens (1 call, 1 run), undetermined cache
    convention (1 run), unknown usage (1 call, 1 run); every entry a fix."""
    summary = summarize(flagged_folder(tmp_path / "t"))
    found = {f["flag"]: (f["calls"], f["runs"]) for f in summary["flags"]}
    assert found == {"output_too_small": (1, 1), "zero_cost": (1, 1),
                     "cache_convention_undetermined": (None, 1), "unknown_usage": (1, 1)}
    assert all(f["fix"] for f in summary["flags"])
    assert summary["calls_with_unknown_usage"] == 1


def test_summary_leaves_unknown_calls_out_of_per_call_figures(tmp_path):
    """Output per call over the 4 known outputs (50, 10, 5, 2: p50 the upper
    median 10), the prompt over the 4 known prompts (900 + 90 + 10 + 3), the
    cost comparison over runs without unknown calls (mixed not priced)."""
    summary = summarize(flagged_folder(tmp_path / "t"))
    assert summary["output_per_call"]["p50"] == 10
    assert summary["cache"]["prompt_tokens"] == 1003
    assert summary["cost"]["runs_with_unknown_usage"] == 0  # mixed records no run cost
    assert summary["warnings"][0].startswith("tau2: input tokens unknown for 20.0%")


def test_summary_prints_warnings_first_and_flags_in_json_and_text(tmp_path, capsys):
    """Text: the warning line first, each flag as ``check:`` then ``fix:``;
    --format json: the same flags."""
    folder = flagged_folder(tmp_path / "t")
    assert main(["traces", "summary", str(folder)]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].startswith("warning: tau2: input tokens unknown for 20.0%")
    checks = [line for line in text if line.startswith("check: ")]
    assert len(checks) == 4 and "(1 calls, 1 runs)" in checks[0]
    assert main(["traces", "summary", str(folder), "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["flags"]) == 4


# -------------------------------------------------------------- downstream

def usable_run(i: int, steps: int) -> RunRecord:
    """A run of tool calls whose results grow the prompt, then an answer
    (prompts above 28k tokens: tune's overshoot check builds a window of the
    largest prompt, which must hold the default prefix and output)."""
    calls = []
    for n in range(steps):
        last = n == steps - 1
        tools = [] if last else [ToolCallRecord("lookup", f"c{i}_{n}", f'{{"q":{n}}}', 150,
                                                None, False, 0.1)]
        calls.append(CallRecord(Usage(input_tokens=30_000 + 170 * n, output_tokens=20),
                                model="claude-sonnet-4-5", finish_reason="stop" if last
                                else "tool_calls", started_s=2.0 * n, latency_s=1.0,
                                text_tokens=20, tool_calls=tools, observation_tokens=0))
    return RunRecord(f"run{i}", "tau2", "f.json", calls, task_id=f"t{i}",
                     model="claude-sonnet-4-5", exit="agent_stop", resolved=True,
                     step_limit=200)


@pytest.fixture
def unknown_folder(tmp_path) -> Path:
    """30 usable runs (3 to 7 steps), a run whose 3 calls lack usage with run
    totals (SWE-agent-like), and a run with 1 of its 4 calls unknown."""
    runs = [usable_run(i, 3 + i % 5) for i in range(30)]
    totals_only = usable_run(30, 3)
    totals_only.calls = [replace(c, usage=Usage(), provenance=dict(NO_USAGE))
                         for c in totals_only.calls]
    totals_only.totals = {"input_tokens": 9000, "output_tokens": 60}
    partial = usable_run(31, 4)
    partial.calls[2] = replace(partial.calls[2], usage=Usage(), provenance=dict(NO_USAGE))
    folder = tmp_path / "traces"
    folder.mkdir()
    write_runs(folder, [*runs, totals_only, partial])
    return folder


def test_unknown_usage_is_counted_not_zeroed_by_summary_calibrate_replay_and_tune(
        tmp_path, unknown_folder, capsys):
    """Through the CLI: summary counts 4 calls of unknown usage in 2 runs;
    calibrate drops those 2 runs and says so (4 calls); replay refuses them
    by reason and replays the other 30; tune likewise (exit 0, 1 or 3)."""
    assert main(["traces", "summary", str(unknown_folder), "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["calls_with_unknown_usage"] == 4
    assert {f["flag"]: f["runs"] for f in summary["flags"]}["unknown_usage"] == 2

    from sim.calibration.data import load

    traces = load(unknown_folder)
    assert traces.n == 30
    assert traces.dropped == {"calls of unknown token usage (4 calls)": 2}
    status = main(["calibrate", str(unknown_folder), "--out", str(tmp_path / "fit.yaml"),
                   "--classes", "1", "--quiet", "--evaluations", "4", "--search-runs", "100"])
    assert status in (0, 1)
    capsys.readouterr()
    assert "2 calls of unknown token usage (4 calls)" in (
        tmp_path / "fit_calibration" / "calibration.md").read_text()

    replayed = tmp_path / "replayed"
    assert main(["replay", str(unknown_folder), "scenarios/bounded.yaml", "--out",
                 str(replayed), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert ("warning: 2 runs not replayed: 1 per-call usage absent (run totals only), "
            "1 usage unknown for some calls") in err
    assert len(pq.read_table(replayed / "results.parquet")) == 30

    in_force = tmp_path / "in_force.yaml"
    in_force.write_text(IN_FORCE)
    status = main(["tune", str(unknown_folder), "--scenario", str(in_force), "--knobs",
                   "steps", "--out", str(tmp_path / "tuned"), "--quiet", "--forecast-runs",
                   "100"])
    assert status in (0, 1, 3)
    assert "2 runs not replayed: 1 per-call usage absent (run totals only)" in (
        capsys.readouterr().out)


def test_replay_of_a_folder_whose_every_run_lacks_usage_is_exit_2_with_the_reason(
        tmp_path, capsys):
    """Nothing left to replay: exit 2, the reason counted, no traceback."""
    record = usable_run(0, 2)
    record.calls = [replace(c, usage=Usage(), provenance=dict(NO_USAGE)) for c in record.calls]
    record.totals = {"input_tokens": 10}
    folder = tmp_path / "t"
    folder.mkdir()
    write_runs(folder, [record])
    assert main(["replay", str(folder), "scenarios/bounded.yaml", "--out",
                 str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "1 run not replayed: 1 per-call usage absent (run totals only)" in err
    assert "Traceback" not in err


def test_a_provenance_column_written_by_another_tool_with_nullable_fields_reads(tmp_path):
    """A struct of plain nullable strings (what a dataframe library writes
    back) is read as the model's type; a struct of numbers (cast to "0") is
    an InputError naming the dotted field and the allowed values."""
    write_runs(tmp_path, [exact_run()])
    table = pq.read_table(tmp_path / CALLS_FILE)
    index = table.schema.get_field_index("provenance")
    loose = pa.struct([pa.field(name, pa.string()) for name in PROVENANCE_FIELDS])
    values = table.column("provenance").to_pylist()
    pq.write_table(table.set_column(index, "provenance", pa.array(values, loose)),
                   tmp_path / CALLS_FILE)
    assert load_tables(tmp_path)[1].column("provenance").to_pylist() == values
    numbers = pa.struct([pa.field(name, pa.int8()) for name in PROVENANCE_FIELDS])
    pq.write_table(table.set_column(index, "provenance", pa.array(
        [dict.fromkeys(PROVENANCE_FIELDS, 0)] * 2, numbers)), tmp_path / CALLS_FILE)
    with pytest.raises(InputError) as raised:
        load_tables(tmp_path)
    assert raised.value.path == "provenance.input_tokens"
    assert "not one of exact, derived, estimated, unknown" in raised.value.message


def test_a_folder_of_two_sources_is_counted_per_source_as_columns(tmp_path):
    """Imported as Arrow columns (add_tables), a folder holding tau2's mixed
    run (3 calls, 1 unknown) and a sim run (2 exact calls): each source's
    calls counted apart."""
    source = tmp_path / "folder"
    source.mkdir()
    write_runs(source, [mixed_run(), exact_run("s", "sim")])
    report = import_traces([source], tmp_path / "out").to_dict()["provenance"]
    assert report["tau2"]["calls"] == 3 and report["sim"]["calls"] == 2
    assert report["tau2"]["by_field"]["input_tokens"][UNKNOWN] == 1
    assert report["sim"]["by_field"]["input_tokens"] == {EXACT: 2, DERIVED: 0, ESTIMATED: 0,
                                                         UNKNOWN: 0}
