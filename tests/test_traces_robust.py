"""Trace import and reading never crash, hang or blow up memory (issue 25,
items 6-8): JSON nested 1,000 deep, numbers of thousands of digits, huge
timestamps, symlink loops, oversized files, and int64 wrap-around in a trace
folder. Each is a counted skip or exit 2 with a message naming the file,
never a traceback; what an import writes, the reader accepts."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sim.cli
from sim.bad_input import InputError
from sim.traces import import_traces, read_traces
from sim.traces import sources as trace_sources
from sim.traces.model import MAX_COUNT

GOOD = {"id": "good", "task_id": "1", "termination_reason": "user_stop",
        "messages": [{"role": "assistant", "content": "Hi"},
                     {"role": "user", "content": "hello"},
                     {"role": "assistant", "content": "ok",
                      "usage": {"prompt_tokens": 50, "completion_tokens": 5}}]}


def tau2(*sims: dict) -> str:
    return json.dumps({"info": {"max_steps": 10}, "simulations": list(sims)})


def cli(argv: list[str], capsys) -> tuple[int, str]:
    status = sim.cli.main(argv)
    return status, capsys.readouterr().err


@pytest.fixture
def good(tmp_path) -> Path:
    path = tmp_path / "good.json"
    path.write_text(tau2(GOOD))
    return path


def only_skip(report) -> tuple[str, str]:
    [skip] = report.skips
    return skip.reason, skip.detail


def test_json_nested_a_thousand_deep_is_a_counted_skip(tmp_path, good):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    report = import_traces([deep, good], tmp_path / "out")
    assert report.runs == 1 and only_skip(report)[0] == "nested too deep"


def test_tool_arguments_nested_deep_inside_a_run_skip_that_run_only(tmp_path):
    """Arguments as a JSON string nested 100,000 deep: the run is skipped
    (nested too deep), the file's other run kept."""
    bad = json.loads(json.dumps(GOOD))
    bad["id"] = "deep"
    bad["messages"][2]["tool_calls"] = [{"id": "c", "name": "t",
                                         "arguments": "[" * 100_000 + "]" * 100_000}]
    path = tmp_path / "doc.json"
    path.write_text(tau2(bad, GOOD))
    report = import_traces([path], tmp_path / "out")
    assert report.runs == 1 and only_skip(report)[0] == "nested too deep"


def test_a_number_of_five_thousand_digits_is_an_invalid_count_not_a_traceback(tmp_path, good):
    """Past Python's 4,300 digits an integer cannot be read as one; it is read
    as a float (infinite), so its run is refused as an invalid token count."""
    bad = tmp_path / "huge.json"
    bad.write_text(tau2(GOOD).replace('"prompt_tokens": 50', '"prompt_tokens": ' + "9" * 5000))
    report = import_traces([bad, good], tmp_path / "out")
    assert report.runs == 1 and only_skip(report)[0] == "invalid token count"


def test_huge_integers_that_parse_are_refused_or_nulled(tmp_path):
    """Usage of 10**300 is an invalid token count (run skipped); a cost of
    10**300 and a duration of 2**64 are nulled and counted; the run kept."""
    counted = json.loads(json.dumps(GOOD))
    counted["id"] = "counted"
    counted["messages"][2]["usage"]["prompt_tokens"] = 10**300
    nulled = json.loads(json.dumps(GOOD))
    nulled["agent_cost"], nulled["duration"] = 10**300, 2**64
    path = tmp_path / "doc.json"
    path.write_text(tau2(counted, nulled))
    report = import_traces([path], tmp_path / "out")
    assert report.runs == 1 and only_skip(report)[0] == "invalid token count"
    repairs = report.repairs_by_field()
    assert repairs["runs.cost_usd"] == {"out of range (too large): set to null": 1}
    assert repairs["runs.duration_s"] == {"out of range (too large): set to null": 1}


def test_an_otel_span_with_a_time_beyond_int64_does_not_crash(tmp_path, good):
    span = {"traceId": "t", "spanId": "s", "name": "chat", "startTimeUnixNano": str(10**30),
            "endTimeUnixNano": "1700000000000000000",
            "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                           {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "10"}},
                           {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "2"}}]}
    path = tmp_path / "spans.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}))
    import_traces([path, good], tmp_path / "out")
    runs, _ = read_traces(tmp_path / "out")
    assert len(runs) == 2


def test_symlink_loops_are_walked_once_and_a_looping_link_is_counted(tmp_path, good, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    os.replace(good, folder / "good.json")
    (folder / "again").symlink_to(folder, target_is_directory=True)  # a folder loop
    (folder / "self.json").symlink_to(folder / "self.json")  # ELOOP
    report = import_traces([folder], tmp_path / "out")
    assert report.runs == 1
    reason, detail = only_skip(report)
    assert reason == "unreadable file" and "symbolic links" in detail
    status, err = cli(["traces", "import", str(folder / "self.json"), "--out",
                       str(tmp_path / "o2")], capsys)
    assert status == 2 and "symbolic link that cannot be followed" in err
    assert "Traceback" not in err


def test_a_fifo_named_as_a_source_is_exit_2_without_blocking(tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    status, err = cli(["traces", "import", str(fifo), "--out", str(tmp_path / "out")], capsys)
    assert status == 2 and "not a regular file" in err


def test_a_file_larger_than_the_bound_is_skipped_without_reading_it_whole(tmp_path, good,
                                                                          monkeypatch):
    """Plain and gzip (a bomb: 64 KiB of zeros behind a few hundred bytes)."""
    monkeypatch.setattr(trace_sources, "MAX_FILE_BYTES", 10_000)
    plain = tmp_path / "big.json"
    plain.write_text(tau2(*[GOOD] * 200))
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b"[" + b" " * 65_536 + b"]"))
    report = import_traces([plain, bomb, good], tmp_path / "out")
    assert report.runs == 1
    assert sorted(s.reason for s in report.skips) == ["file too large"] * 2


def write_folder(folder: Path, tokens: list[int]) -> Path:
    """A trace folder of one run whose calls have these input tokens, with
    the run's sum as int64 arithmetic gives it (wrapping around)."""
    import numpy as np
    from traces_helpers import run

    from sim.traces.writer import write_runs

    folder.mkdir()
    write_runs(folder, [run("r", [1] * len(tokens))])
    calls = pq.read_table(folder / "calls.parquet")
    calls = calls.set_column(calls.schema.get_field_index("input_tokens"), "input_tokens",
                             pa.array(tokens, pa.int64()))
    pq.write_table(calls, folder / "calls.parquet")
    runs = pq.read_table(folder / "runs.parquet")
    total = int(np.array(tokens, dtype=np.int64).sum())  # wraps around
    runs = runs.set_column(runs.schema.get_field_index("input_tokens"), "input_tokens",
                           pa.array([total], pa.int64()))
    pq.write_table(runs, folder / "runs.parquet")
    return folder


def test_int64_wrap_around_is_refused_by_the_reader(tmp_path, capsys):
    """Four calls of 2**62 tokens sum to 0 in int64: refused, naming the
    column; summary and replay exit 2."""
    folder = write_folder(tmp_path / "t", [2**62] * 4)
    with pytest.raises(InputError) as caught:
        read_traces(folder)
    assert caught.value.path == "input_tokens" and "calls.parquet" in str(caught.value)
    status, err = cli(["traces", "summary", str(folder)], capsys)
    assert status == 2 and "input_tokens" in err and "Traceback" not in err


def test_totals_past_the_bound_are_refused_even_when_each_count_is_possible(tmp_path):
    """256 calls of 2**53 tokens each (each a possible count): their total,
    2**61, is past the folder bound of 2**60 (and the run's sum past 2**53)."""
    folder = write_folder(tmp_path / "t", [MAX_COUNT] * 2**8)
    with pytest.raises(InputError) as caught:
        read_traces(folder)
    assert caught.value.path == "input_tokens"


def test_a_run_whose_token_sums_pass_the_bound_is_skipped_by_the_writer(tmp_path):
    """Two calls of 2**53 tokens: each count is possible, their run sum is
    not (above 2**53): the run is skipped, counted, the folder readable."""
    big = json.loads(json.dumps(GOOD))
    big["id"] = "big"
    big["messages"].append({"role": "assistant", "content": "again",
                            "usage": {"prompt_tokens": MAX_COUNT, "completion_tokens": 1}})
    big["messages"][2]["usage"]["prompt_tokens"] = MAX_COUNT
    path = tmp_path / "doc.json"
    path.write_text(tau2(big, GOOD))
    report = import_traces([path], tmp_path / "out")
    assert report.runs == 1 and only_skip(report)[0] == "invalid token count"
    read_traces(tmp_path / "out")


def test_the_writer_refuses_a_run_that_would_take_a_folder_total_past_the_bound(tmp_path):
    """200 runs of 2**53 input tokens each (each run possible): the runs that
    would take the folder's total past 2**60 are skipped, counted, and the
    folder written is accepted by the reader."""
    sims = []
    for i in range(200):
        one = json.loads(json.dumps(GOOD))
        one["id"] = f"r{i}"
        one["messages"][2]["usage"]["prompt_tokens"] = MAX_COUNT
        sims.append(one)
    path = tmp_path / "doc.json"
    path.write_text(tau2(*sims))
    report = import_traces([path], tmp_path / "out")
    assert report.runs == 2**60 // MAX_COUNT == 128
    assert {s.reason for s in report.skips} == {"invalid token count"}
    runs, _ = read_traces(tmp_path / "out")
    assert int(runs["input_tokens"].sum()) == 2**60
